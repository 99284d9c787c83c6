"""Options default to None and the library's defaults fill them; help shows those."""

from __future__ import annotations

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
    assert f"(default: {default_of(evaluate_encoder, 'batch_size')})" in result.output
    k1, k2, lam = (default_of(rerank_distances, key) for key in ("k1", "k2", "lambda_value"))
    assert f"k1={k1}, k2={k2}, lambda={lam}" in result.output



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
        assert f"(default: {value})" in query.output
    enroll = runner.invoke(app, ["enroll", "--help"], env={"COLUMNS": "400"})
    assert f"(default: {EnrolConfig.batch_size})" in enroll.output


def test_given_refuses_counts_out_of_range_and_numbers_that_are_not_finite() -> None:
    import math

    import pytest

    from reid.errors import ConfigError

    assert given(batch_size=1, top_k=10_000, threads=4, every=1) == {"batch_size": 1, "top_k": 10_000, "threads": 4, "every": 1}
    for name, value, message in (
        ("batch_size", 0, "--batch-size 0: must be between 1 and 4,096"),
        ("top_k", 10**9, "--top-k 1000000000: must be between 1 and 10,000"),
        ("threads", 0, "--threads 0: must be between 1"),
        ("every", -1, "--every -1: must be between 1"),
        ("far", math.inf, "--far inf: must be a finite number"),
        ("tolerance", math.nan, "--tolerance nan: must be a finite number"),
    ):
        with pytest.raises(ConfigError, match=message):
            given(**{name: value})


def test_commands_refuse_options_out_of_range_in_one_line(tmp_path) -> None:
    for args, message in (
        (["query", str(tmp_path), "-m", "m", "-g", "g", "--top-k", str(10**9)], "--top-k 1000000000: must be between"),
        (["enroll", str(tmp_path), "-m", "m", "-g", "g", "--batch-size", "0"], "--batch-size 0: must be between"),
        (["serve", "--threads", "0"], "--threads 0: must be between"),
        (["eval", "-m", "m", "--data", str(tmp_path), "--batch-size", "0"], "--batch-size 0: must be between"),
        (["eval", "-m", "m", "--data", str(tmp_path), "--input-size", "100000x100000"], "between 8 and 4096 pixels"),
        (["verify", "a.jpg", "b.jpg", "-m", "m", "--mean", "nan,0,0"], "--mean 'nan,0,0': every value must be between 0 and 1"),
        (["train", "--data", str(tmp_path), "--size", "100000x100000", "--out", str(tmp_path / "o")], "--size '100000x100000'"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code != 0 and message in result.output, (args, result.output)
        assert len([line for line in result.output.splitlines() if line.strip()]) == 1, result.output
    assert list(tmp_path.iterdir()) == []
