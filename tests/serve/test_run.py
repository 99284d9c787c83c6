"""``reid serve``'s own log lines: uvicorn's start lines print hosts and paths printable, and
a flood of failures is a line per kind, without tracebacks."""

from __future__ import annotations

import io
import logging
import logging.config

import pytest

pytest.importorskip("uvicorn", reason="the serve extra is not installed")

from reid.serve.run import log_config  # noqa: E402


@pytest.fixture
def uvicorn_log(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """uvicorn's loggers configured as ``reid serve`` configures them, writing here."""
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    config = log_config()
    config["formatters"]["default"]["use_colors"] = False
    logging.config.dictConfig(config)
    yield stream
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "reid.serve", "asyncio"):
        for handler in list(logging.getLogger(name).handlers):
            logging.getLogger(name).removeHandler(handler)


@pytest.mark.parametrize(
    "host,shown",
    [
        ("evil\x1b[2J\x1b[31mhost", "evil\\x1b[2J\\x1b[31mhost"),
        ("a\nINFO:     Uvicorn running on http://0.0.0.0:80", "a\\nINFO:     Uvicorn running on http://0.0.0.0:80"),
    ],
)
def test_the_start_line_prints_the_host_printable(uvicorn_log: io.StringIO, host: str, shown: str) -> None:
    # uvicorn's own start line, as uvicorn.server logs it once the socket is bound.
    logging.getLogger("uvicorn.error").info("Uvicorn running on %s://%s:%d (Press CTRL+C to quit)", "http", host, 8000)
    lines = uvicorn_log.getvalue().splitlines()
    assert lines == [f"INFO:     Uvicorn running on http://{shown}:8000 (Press CTRL+C to quit)"]


@pytest.mark.parametrize("path", ["galleries/\x07bell", "root\r/forged\x1b]0;title\x07"])
def test_a_line_with_a_path_baked_in_is_printable(uvicorn_log: io.StringIO, path: str) -> None:
    logging.getLogger("uvicorn.error").error(f"cannot load {path}")
    text = uvicorn_log.getvalue()
    assert text.count("\n") == 1  # only the line's own end
    assert text.rstrip("\n").isprintable(), text
    assert "\\x07" in text


def test_a_flood_of_failures_is_a_line_per_kind_without_tracebacks(uvicorn_log: io.StringIO) -> None:
    for _ in range(1000):
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            # What asyncio logs for each accept that fails, and uvicorn for each failed request.
            logging.getLogger("asyncio").error("socket.accept() out of system resource", exc_info=True)
            logging.getLogger("uvicorn.error").error("Exception in ASGI application", exc_info=True)
        logging.getLogger("reid.serve").info("GET /v1/health 200 0.1ms key=-")
    text = uvicorn_log.getvalue()
    assert "Traceback" not in text and text.count("Too many open files") == 2
    assert text.count("socket.accept() out of system resource") == 1 and text.count("Exception in ASGI application") == 1


def test_the_start_banner_names_the_page_docs_models_and_galleries(served) -> None:  # type: ignore[no-untyped-def]
    from reid.serve.run import start_banner

    lines = start_banner(served.service)
    assert lines[0] == "page:      http://127.0.0.1:8000/"
    assert lines[1].startswith("API docs:  http://127.0.0.1:8000/docs")
    assert any(line.startswith("model:     m = stand-in (person, 64-d") for line in lines)
    galleries = [line for line in lines if line.startswith("gallery:")]
    assert galleries == [
        "gallery:   other (m; 0 people, 0 photos; detect auto)",
        "gallery:   staff (m; 0 people, 0 photos; detect auto)",
    ]
    assert f"root:      {served.service.config.root}" in lines
    # The keys line names the file, so a user knows what to keep and where to look.
    assert lines[-1] == f"keys:      the admin key, and gallery keys from {served.root / '.serve-keys.json'}"
    # A root made as the server started is said to be new: a mistyped --root shows at once.
    assert f"root:      {served.service.config.root} (made now: no folder was there)" in start_banner(served.service, True)


def test_reid_serve_prints_the_start_banner_before_it_answers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.serve.serve_helpers import Server, build_model

    model = build_model(tmp_path / "model")
    assert not (tmp_path / "root").exists()
    server = Server(tmp_path / "root", model, tmp_path / "server.log")
    log = server.stop()
    assert f"root:      {tmp_path / 'root'} (made now: no folder was there)" in log, log[-2000:]
    assert f"page:      {server.url}/" in log and f"API docs:  {server.url}/docs" in log, log[-2000:]
    assert "model:     m = " in log and "Traceback" not in log
