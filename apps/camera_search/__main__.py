"""``python -m apps.camera_search --model M --out DIR VIDEO [VIDEO ...]``."""

from apps.camera_search.cli import app

app(prog_name="python -m apps.camera_search")
