"""Schema-driven fuzzing of every route from /openapi.json (schemathesis): whatever the
request, no answer is a 5xx, and every error is the JSON error body.  A bounded number of
examples per route by default; many more under ``-m slow``.

The schema is the application's own: it depends on no model, so it is read at import from
an application over an empty root; each generated request goes to a fully served root."""

from __future__ import annotations

from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from serve_helpers import ADMIN, Served

from reid.serve import AdminKey, KeyStore, Service, create_app, load_serve_config

QUICK, THOROUGH = 4, 200
# Request parts the test client takes.
SENT = ("method", "url", "headers", "params", "json", "data", "files", "content")


def _schema() -> schemathesis.BaseSchema:
    with TemporaryDirectory() as folder:
        config = load_serve_config(None, root=folder)
        app = create_app(Service(config, {}, {}, KeyStore(Path(folder) / "keys.json"), AdminKey(ADMIN, "tests")))
        return schemathesis.openapi.from_dict(app.openapi())


schema = _schema()


def _part(value: object) -> object:
    """A multipart part as the test client takes it: generated numbers become their text."""
    if isinstance(value, tuple):
        return tuple(_part(v) for v in value)
    return value if isinstance(value, (bytes, str)) or value is None else str(value).encode()


def _check(case: schemathesis.Case, served: Served) -> None:
    kwargs = case.as_transport_kwargs(base_url="http://testserver", headers=served.admin())
    kwargs = {k: v for k, v in kwargs.items() if k in SENT and v is not None}
    if "files" in kwargs:
        parts = kwargs["files"].items() if isinstance(kwargs["files"], dict) else kwargs["files"]
        kwargs["files"] = [(name, _part(value)) for name, value in parts]
    response = served.client.request(**kwargs)
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}


@schema.parametrize()
@settings(max_examples=QUICK, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_route_fails_on_generated_requests(case: schemathesis.Case, served: Served) -> None:
    _check(case, served)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=THOROUGH, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_route_fails_on_many_generated_requests(case: schemathesis.Case, served: Served) -> None:
    _check(case, served)
