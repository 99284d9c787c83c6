"""Options default to None and the library's defaults fill them; help shows those."""

from __future__ import annotations

from typer.testing import CliRunner

from reid.cli import app
from reid.cli.defaults import default_of, given, with_default
from reid.evaluation import evaluate_encoder, rerank_distances

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
