"""Liveness, readiness (the models served) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reid.serve import schemas
from reid.serve.deps import Ctx

router = APIRouter(tags=["health"])


@router.get("/v1/health", response_model=schemas.Health)
async def health() -> dict[str, Any]:
    """Alive."""
    return {"status": "ok"}


@router.get("/v1/ready", response_model=schemas.Ready)
async def ready(ctx: Ctx) -> dict[str, Any]:
    """Models and detectors are loaded (they are before the port opens)."""
    return {
        "ready": True,
        "models": [
            {"name": name, "model_name": e.card.name, "fingerprint": e.card.fingerprint, "kind": e.card.kind,
             "dim": e.dim, "threshold": e.card.threshold}
            for name, e in ctx.service.models.items()
        ],
    }  # fmt: skip


@router.get("/metrics", response_class=Response)
async def prometheus(ctx: Ctx) -> Response:
    """Prometheus metrics of this process: requests, latency per route, queue depth, watches."""
    ctx.metrics.watches(ctx.service.watches.list())
    return Response(generate_latest(ctx.metrics.registry), media_type=CONTENT_TYPE_LATEST)
