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

