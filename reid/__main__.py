"""``python -m reid``: the ``reid`` command, also as ``torchrun ... -m reid train``."""

from reid.cli import app

if __name__ == "__main__":
    app(prog_name="reid")
