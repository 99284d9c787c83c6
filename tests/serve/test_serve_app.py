"""The application as a whole: its OpenAPI schema is the reference one (every path, method,
parameter, body and answer model), and it is built of one router per resource."""

from __future__ import annotations

import json
from pathlib import Path

from serve_helpers import Served

from reid.serve.http_errors import HANDLED, answer_error
from reid.serve.routes import ROUTERS

REFERENCE = Path(__file__).with_name("openapi_reference.json")


def operations(schema: dict) -> dict[tuple[str, str], dict]:  # type: ignore[type-arg]
    return {(path, method): op for path, methods in schema["paths"].items() for method, op in methods.items()}


def test_the_openapi_schema_is_the_reference(served: Served) -> None:
    """Routes moved into routers keep their paths, methods, parameters, request bodies,
    answers and component models: a client generated from the reference still works."""
    reference = json.loads(REFERENCE.read_text())
    schema = served.client.get("/openapi.json").json()
    assert sorted(operations(schema)) == sorted(operations(reference))
    for where, op in operations(reference).items():
        now = operations(schema)[where]
        for part in ("parameters", "requestBody", "responses", "security", "tags", "operationId"):
            assert now.get(part) == op.get(part), (where, part)
    assert schema["components"] == reference["components"]
    assert schema == reference


def test_each_resource_has_its_router_and_errors_have_one_handler(served: Served) -> None:
    prefixes = {router.prefix for router in ROUTERS}
    assert {"/v1/galleries", "/v1/galleries/{gallery}", "/v1/keys", "/v1/watches"} <= prefixes
    handlers = served.client.app.exception_handlers  # type: ignore[attr-defined]
    assert {handlers[kind] for kind in HANDLED} == {answer_error}
    assert {h for h in handlers.values() if "websocket" not in h.__name__} == {answer_error}
    # The handler answers an unknown route as every error is answered: JSON, one line.
    missing = served.client.get("/v1/nothing-here", headers=served.admin())
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
