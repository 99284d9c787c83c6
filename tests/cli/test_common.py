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


def test_a_library_error_naming_a_key_is_printed_with_the_option_that_sets_it() -> None:
    import typer

    from reid.cli.common import error_line, option_flags
    from reid.errors import ConfigError, ConfigValueError
    from reid.pipeline import QueryConfig
    from reid.track import TrackerConfig

    def command(
        high_score: float | None = typer.Option(None, "--track-high-score"),
        min_height: int | None = typer.Option(None, help="no spelling given"),
        detect: str = typer.Option("auto", "--detect/--no-detect"),
    ) -> None:
        """A command whose options set config keys."""

    flags = option_flags(command)
    assert flags == {"high_score": "--track-high-score", "min_height": "--min-height", "detect": "--detect"}
    for make, line in (
        (lambda: TrackerConfig(high_score=float("nan")), "--track-high-score: input should be a finite number (got nan)"),
        (lambda: QueryConfig(detector="hog", min_height=60), "--min-height works with the ssdlite detector, not hog"),
    ):
        try:
            make()
        except ConfigValueError as exc:
            assert error_line(exc, flags) == line
            assert error_line(exc, {}) == str(exc) and str(exc).startswith(exc.key)
        else:
            raise AssertionError("no error")
    # An error that names no single key is printed as it is.
    assert error_line(ConfigError("give --threshold or --far, not both"), flags) == "give --threshold or --far, not both"
