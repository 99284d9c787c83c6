from __future__ import annotations

import json
import os
from pathlib import Path

from reid.cli.common import write_json


def test_json_output_is_not_written_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    for name in ("out.json", "deeper/report.json"):
        target = tmp_path / name
        target.parent.mkdir(exist_ok=True)
        target.symlink_to(victim)
        write_json(target, {"rank1": 0.5})
        assert not target.is_symlink() and json.loads(target.read_text()) == {"rank1": 0.5}
    assert victim.read_text() == "keep"
    # A leftover or a link at the hidden temporary's name is not followed either.
    target = tmp_path / "again.json"
    (tmp_path / f".again.json.tmp-{os.getpid()}").symlink_to(victim)
    write_json(target, [1, 2])
    assert victim.read_text() == "keep" and json.loads(target.read_text()) == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.json", "deeper", "out.json", "victim.txt"]
