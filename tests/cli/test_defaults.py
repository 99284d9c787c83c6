"""Options default to None and the library's defaults fill them; help shows those."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field
from typer.testing import CliRunner

from reid.cli import app
from reid.cli.defaults import default_of, given, with_default
from reid.evaluation import rerank_distances
from reid.pipeline import evaluate_encoder

runner = CliRunner()


def test_only_the_options_given_are_passed() -> None:
    assert given(a=None, b=0, c=False, d="") == {"b": 0, "c": False, "d": ""}


def test_default_of_reads_the_signature() -> None:
    def f(x: int, y: int = 3) -> int:
        return x + y

    assert default_of(f, "y") == 3
    assert with_default("Images.", "64") == "Images. (default: 64)"


def test_eval_help_shows_the_library_defaults() -> None:
    result = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    # Help wraps between words: the text is compared with its line breaks as spaces.
    shown = " ".join(result.output.split())
    assert f"(default: {default_of(evaluate_encoder, 'batch_size')})" in shown
    k1, k2, lam = (default_of(rerank_distances, key) for key in ("k1", "k2", "lambda_value"))
    assert f"k1={k1}, k2={k2}, lambda={lam}" in shown



def _all_commands() -> list[tuple[str, object]]:
    """Every command of ``reid`` and of both apps, with the path that runs it."""
    import typer.main

    import apps.camera_search.cli as camera_search
    import apps.face_checkin.cli as face_checkin

    found = []

    def walk(command: object, path: str) -> None:
        found.append((path, command))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, f"{path} {name}")

    for root, name in ((app, "reid"), (camera_search.app, "camera_search"), (face_checkin.app, "face_checkin")):
        walk(typer.main.get_command(root), name)
    return found


def _app_configs() -> dict[str, type]:
    """Each app's config, whose fields declare the ranges of the app's own options."""
    from apps.camera_search.search import SearchConfig
    from apps.face_checkin.checkin import CheckinConfig

    return {"camera_search": SearchConfig, "face_checkin": CheckinConfig}


def _numeric(param: object) -> bool:
    return getattr(param, "bare_type", lambda: None)() in ("int", "float")


def _option_defaults(command: str) -> dict[str, object]:
    """The default each option of ``reid COMMAND`` has on the command line."""
    import typer.main

    click_command = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {p.name: p.default for p in click_command.params if p.name is not None}


def test_enroll_query_verify_and_calibrate_state_no_library_defaults() -> None:
    restated = {
        "enroll": ("batch_size", "no_face"),
        "query": ("top_k", "every", "detect", "score", "batch_size", "detect_scale", "no_face"),
        "verify": ("folds", "batch_size"),
        "calibrate": ("far", "batch_size"),
        "export": ("fmt", "tolerance"),
    }
    for command, names in restated.items():
        defaults = _option_defaults(command)
        assert {name: defaults[name] for name in names} == dict.fromkeys(names), command


def test_query_and_enroll_help_show_the_config_defaults() -> None:
    from reid.pipeline import EnrolConfig, QueryConfig

    query = runner.invoke(app, ["query", "--help"], env={"COLUMNS": "400"})
    assert query.exit_code == 0, query.output
    for value in (QueryConfig.top_k, QueryConfig.batch_size, QueryConfig.score, QueryConfig.detect):
        assert f"(default: {value})" in " ".join(query.output.split())
    enroll = runner.invoke(app, ["enroll", "--help"], env={"COLUMNS": "400"})
    assert f"(default: {EnrolConfig.batch_size})" in " ".join(enroll.output.split())


def test_given_refuses_numbers_out_of_range_naming_the_parameter() -> None:
    import math

    import pytest

    from reid.errors import ConfigValueError

    assert given(batch_size=1, top_k=10_000, threads=4, every=1) == {"batch_size": 1, "top_k": 10_000, "threads": 4, "every": 1}
    assert given(high_score=1.0, lost_seconds=0.0, folds=2, far=1e-3) == {"high_score": 1.0, "lost_seconds": 0.0, "folds": 2, "far": 1e-3}
    for name, value, message in (
        ("batch_size", 0, "batch_size 0: must be between 1 and 4,096"),
        ("top_k", 10**9, "top_k 1000000000: must be between 1 and 10,000"),
        ("threads", 0, "threads 0: must be between 1 and 4,096"),
        ("every", -1, "every -1: must be at least 1"),
        ("folds", 1, "folds 1: must be between 2 and 1,000"),
        ("max_items", 1, "max_items 1: must be at least 2"),
        ("max_frames", 0, "max_frames 0: must be at least 1"),
        ("max_frames", 10**13, "max_frames 10000000000000: must be at most 1,000,000,000,000"),
        ("high_score", 0.0, "high_score 0.0: must be in (0, 1]"),
        ("start_score", 1.5, "start_score 1.5: must be in (0, 1]"),
        ("lost_seconds", -1.0, "lost_seconds -1.0: must be in [0, 86400]"),
        ("fps", math.inf, "fps inf: must be a finite number"),
        ("far", math.inf, "far is a false-accept rate, a fraction in (0, 1) such as 1e-3; got inf"),
        ("threshold", 3.0, "threshold is a distance between unit embeddings, in (0, 2]; got 3.0"),
        ("tolerance", math.nan, "tolerance nan: must be a finite number"),
    ):
        with pytest.raises(ConfigValueError) as caught:
            given(**{name: value})
        assert str(caught.value) == message
        assert caught.value.key == name


def test_every_numeric_option_of_every_command_has_one_range() -> None:
    from reid.cli.defaults import option_range
    from reid.engine import TrainConfig

    trained = {f for f in TrainConfig.__dataclass_fields__}
    missing = [
        (where, param.name)
        for where, command in _all_commands()
        for param in command.params
        if _numeric(param) and option_range(param.name, _app_configs().get(where)) is None
        and not (where.split()[-1] in ("train", "demo") and param.name in trained)
    ]
    assert missing == []


def test_a_range_is_stated_once_in_the_field_or_in_the_table() -> None:
    """RANGES holds only options no option config declares a range for; configs sharing a
    key declare one range; an option that is a field takes its field's range."""
    import dataclasses

    from reid.cli.defaults import DECIDED, OPTION_CONFIGS, RANGES, declared_range, option_range

    declared: dict[str, set] = {}
    for config in OPTION_CONFIGS:
        for field in dataclasses.fields(config):
            if (bounds := declared_range(config, field.name)) is not None:
                declared.setdefault(field.name, set()).add(bounds)
    assert not set(RANGES) & set(declared), "a range in RANGES that a config field declares"
    assert not set(RANGES) & set(DECIDED)
    assert {key for key, ranges in declared.items() if len(ranges) > 1} == set()
    for key in ("batch_size", "top_k", "embed_every", "min_boxes", "high_score", "iou", "lost_seconds", "port", "threads"):
        assert key in declared and option_range(key) in declared[key], key


def test_a_range_is_read_from_the_fields_type() -> None:
    import math
    from typing import Annotated

    from pydantic import Field

    from reid.cli.defaults import Range, type_range

    assert type_range(Annotated[int, Field(ge=1, le=4096)] | None) == Range(1, 4096)
    assert type_range(Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]) == Range(0.0, 1.0, low_open=True)
    assert type_range(Annotated[float, Field(ge=0, lt=1)]).problem(1.0) == "must be in [0, 1)"
    assert type_range(Annotated[int, Field(ge=2)]) == Range(2, math.inf)
    assert type_range(Annotated[float, Field(allow_inf_nan=False)]) is None
    assert type_range(int) is None
    assert type_range(Annotated[int, Field(ge=0, lt=1024)]) == Range(0, 1023)


def test_an_option_with_its_own_default_is_checked_against_the_table_when_parsed() -> None:
    """The apps' options have defaults of their own, so they are checked as typer parses them."""
    for where, command in _all_commands():
        for param in command.params:
            if _numeric(param) and param.default is not None:
                assert param.callback is not None, (where, param.name)


def _one_line(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def test_a_value_that_is_no_number_is_one_line_naming_the_option_in_every_command() -> None:
    """Each numeric option of each command and app, given a word: typer's refusal, as one line."""
    import apps.camera_search.cli as camera_search
    import apps.face_checkin.cli as face_checkin

    roots = {"reid": app, "camera_search": camera_search.app, "face_checkin": face_checkin.app}
    checked = 0
    for where, command in _all_commands():
        root, *path = where.split()
        for param in command.params:
            if not (_numeric(param) and param.opts and param.opts[0].startswith("-")):
                continue
            for word in ("many", "1e999x"):
                result = runner.invoke(roots[root], [*path, param.opts[0], word])
                lines = _one_line(result.output)
                assert result.exit_code == 2 and len(lines) == 1, (where, param.opts, result.output)
                assert lines[0].startswith("error: invalid value for ") and param.opts[0] in lines[0], lines
                checked += 1
    assert checked > 100


def test_options_out_of_range_are_one_line_in_the_apps(tmp_path) -> None:
    """An option built from a config field is checked against that field's range before the
    command runs (exit 1, as reid's commands); one with a default of its own as typer parses
    it (exit 2)."""
    import apps.camera_search.cli as camera_search
    import apps.face_checkin.cli as face_checkin
    from apps.face_checkin import calibrate

    out = str(tmp_path / "out")
    for target, args, code, message in (
        (camera_search.app, ["--out", out, "--every", "0"], 1, "--every 0: must be at least 1"),
        (camera_search.app, ["--out", out, "--iou", "0"], 1, "--iou 0.0: must be in (0, 1]"),
        (camera_search.app, ["--out", out, "--lost-seconds", "-1"], 1, "--lost-seconds -1.0: must be in [0, 86400]"),
        (camera_search.app, ["--out", out, "--detect-scale", "inf"], 1, "--detect-scale inf: must be a finite number"),
        (camera_search.app, ["--out", out, "--detect-scale", "5"], 1, "--detect-scale 5.0: must be in (0, 4]"),
        (camera_search.app, ["--out", out, "--win-stride", "0"], 1, "--win-stride 0: must be between 1 and 256"),
        (face_checkin.app, ["--out", out, "--top-k", "0"], 1, "--top-k 0: must be between 1 and 10,000"),
        (face_checkin.app, ["--out", out, "--max-frames", "-5"], 1, "--max-frames -5: must be at least 1"),
        (face_checkin.app, ["--out", out, "--every", "0"], 1, "--every 0: must be at least 1"),
        (face_checkin.app, ["--out", out, "--top-k", "10001"], 1, "--top-k 10001: must be between 1 and 10,000"),
        (camera_search.app, ["--out", out, "--top-k", "0"], 1, "--top-k 0: must be between 1 and 10,000"),
        (camera_search.app, ["--out", out, "--embed-every", "0"], 1, "--embed-every 0: must be at least 1"),
        (camera_search.app, ["--out", out, "--min-boxes", "0"], 1, "--min-boxes 0: must be at least 1"),
        (camera_search.app, ["--out", out, "--reference-camera", "1024"], 1, "--reference-camera 1024: must be between 0 and 1,023"),
        (camera_search.app, ["--out", out, "--reference-camera", "-1"], 1, "--reference-camera -1: must be between 0 and 1,023"),
        (camera_search.app, ["--out", out, "--demo-frames", "1"], 2, "'--demo-frames': 1: must be between 2"),
        (calibrate.app, ["-m", "m", "--people", out, "--out", out, "--far", "1.5"], 1, "--far is a false-accept rate"),
        (calibrate.app, ["-m", "m", "--people", out, "--out", out, "--max-impostors", "0"], 2, "'--max-impostors': 0: must be"),
    ):
        result = runner.invoke(target, args)
        assert result.exit_code == code and message in result.output, (args, result.output)
        assert len(_one_line(result.output)) == 1, result.output
    assert not (tmp_path / "out").exists()


def test_folds_max_items_and_tracker_numbers_out_of_range_are_one_line(tmp_path) -> None:
    detections = tmp_path / "det.txt"
    detections.write_text("1,-1,0,0,10,20,0.9\n")
    for args, message in (
        (["verify", "--pairs", str(tmp_path / "p.csv"), "-m", "m", "--folds", "1"], "--folds 1: must be between 2 and 1,000"),
        (["verify", "--pairs", str(tmp_path / "p.csv"), "-m", "m", "--folds", "100000"], "--folds 100000: must be between 2"),
        (["gallery", "calibrate", str(tmp_path), "--max-items", "1"], "--max-items 1: must be at least 2"),
        (["gallery", "calibrate", str(tmp_path), "--max-items", "0"], "--max-items 0: must be at least 2"),
        (["track", "-d", str(detections), "-o", str(tmp_path / "t.txt"), "--track-high-score", "0"], "--track-high-score 0.0: must be in (0, 1]"),
        (["track", "-d", str(detections), "-o", str(tmp_path / "t.txt"), "--track-start-score", "1.5"], "--track-start-score 1.5: must be in (0, 1]"),
        (["track", "-d", str(detections), "-o", str(tmp_path / "t.txt"), "--lost-seconds", "-1"], "--lost-seconds -1.0: must be in [0, 86400]"),
        (["track", "-d", str(detections), "-o", str(tmp_path / "t.txt"), "--fps", "0"], "--fps 0.0: must be in (0, 1000]"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1 and message in result.output, (args, result.output)
        assert len(_one_line(result.output)) == 1, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["det.txt"]


def _option_names(where: list[str]) -> set[str]:
    import typer.main

    command = typer.main.get_command(app)
    for name in where:
        command = command.commands[name]  # type: ignore[attr-defined]
    return {p.name for p in command.params}


def test_the_options_of_track_are_the_tracker_config_fields_that_carry_them(tmp_path) -> None:
    from reid.options import option_fields
    from reid.track import TrackerConfig

    keys = {f.name for f in option_fields(TrackerConfig)}
    assert {"high_score", "start_score", "lost_seconds"} <= keys
    assert keys <= _option_names(["track"])
    detections, out = tmp_path / "det.txt", tmp_path / "tracks.txt"
    detections.write_text("".join(f"{f},-1,{10 + 4 * f},50,40,100,0.9,-1,-1,-1\n" for f in range(1, 9)))
    # A track unseen for 0 s ends at its first gap; the spelling --track-high-score is kept.
    result = CliRunner().invoke(
        app, ["track", "-d", str(detections), "-o", str(out), "--track-high-score", "0.95", "--lost-seconds", "0"]
    )
    assert result.exit_code == 0, result.output
    assert out.read_text() == ""  # no detection reaches 0.95, so none starts a track


def test_a_command_takes_the_options_of_several_configs_and_each_gets_its_own() -> None:
    import dataclasses
    import inspect

    import pytest

    from reid.cli.defaults import config_overrides, with_config_options
    from reid.options import option

    @dataclasses.dataclass
    class First:
        size: str = option("64x32", help="A size.", form="size")

    @dataclasses.dataclass
    class Second:
        count: int = option(3, help="A count.")
        other: int = option(1, help="Not taken.")

    def command(name: str = "x", **options: object) -> tuple[dict, dict]:
        return config_overrides(First, options), config_overrides(Second, options)

    decorated = with_config_options(First, more=[(Second, ["count"], {"count": "Counted otherwise."})])(command)
    parameters = inspect.signature(decorated).parameters
    assert list(parameters) == ["name", "size", "count"]
    assert parameters["count"].default.help == "Counted otherwise."
    assert decorated(size="20x30", count=None) == ({"size": (20, 30)}, {})
    assert decorated(size=None, count=5) == ({}, {"count": 5})
    with pytest.raises(ValueError, match="count"):
        with_config_options(Second, more=[(Second, ["count"], None)])(command)


def test_a_config_with_inputs_gives_required_options_and_its_own_ranges() -> None:
    """A field without a default is a required option (or, where None will do, one whose
    help states no default); a number given is checked against the range of the config
    whose field built its option, though no reid config declares that key."""
    import dataclasses
    import inspect

    import pytest

    from reid.cli.defaults import check_given, with_config_options
    from reid.errors import ConfigValueError
    from reid.options import option

    @dataclasses.dataclass
    class AppConfig:
        out: Path = option(help="Where to write.")
        people: Path | None = option(help="Whom to enrol.")
        cameras: Annotated[int, Field(ge=1, le=8)] = option(2, help="Cameras.")

    def command(**options: object) -> dict:
        return options

    decorated = with_config_options(AppConfig, checked_first=True)(command)
    parameters = inspect.signature(decorated).parameters
    assert parameters["out"].default.default is ... and parameters["out"].default.help == "Where to write."
    assert parameters["people"].default.default is None and parameters["people"].default.help == "Whom to enrol."
    assert parameters["cameras"].default.default is None and parameters["cameras"].default.help == "Cameras. (default: 2)"
    check_given(decorated, {"cameras": 8, "out": Path("o")})
    with pytest.raises(ConfigValueError) as caught:
        check_given(decorated, {"cameras": 9})
    assert str(caught.value) == "cameras 9: must be between 1 and 8"
    # Without checked_first the config checks its own values when it is built (reid train's).
    def unchecked(**options: object) -> dict:
        return options

    check_given(with_config_options(AppConfig)(unchecked), {"cameras": 9})
