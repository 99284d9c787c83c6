"""Watches: tracked queries of allowed video sources against a gallery, their state and
their events as Server-Sent Events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from reid.serve import schemas
from reid.serve.deps import Admin, AnyKey, Context, Ctx, Principal
from reid.serve.http_errors import ERRORS, RETRY_AFTER, ApiError
from reid.serve.watches import Watch
from reid.text import whole_number

# How often an event stream looks for new events, and how long it stays silent at most.
SSE_POLL, SSE_KEEPALIVE = 0.2, 15.0
# Event streams one key holds open at once (a live watch's stream never ends by itself:
# without a bound, one read key holds every connection the process keeps).
STREAMS_PER_KEY = 4

router = APIRouter(prefix="/v1/watches", tags=["watches"], responses=ERRORS)


class EventStream(StreamingResponse):
    """A streaming answer that calls ``release`` once it is over, however it ends (the
    client hung up, the stream ended, the send failed)."""

    def __init__(self, content: Any, release: Callable[[], None], **options: Any) -> None:
        super().__init__(content, **options)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


def watch_for(ctx: Context, who: Principal, watch_id: str) -> Watch:
    """The watch ``watch_id`` when ``who`` may read its gallery: 404 when there is none
    (or none this key may know of), 403 for a key without the read scope."""
    watch = ctx.service.watches.get(watch_id)
    if watch is None or not who.reads(watch.gallery, watch.gallery_uid):
        raise ApiError(404, f"no watch {watch_id[:40]!r}")
    if who.key is not None and not who.key.allows("read"):
        raise ApiError(403, "this key lacks the 'read' scope")
    return watch


@router.post("", response_model=schemas.WatchOut, status_code=201)
async def start_watch(body: schemas.WatchCreate, ctx: Ctx, _: Admin) -> dict[str, Any]:
    """Start a tracked query of an allowed video source against a gallery (admin)."""
    return (await ctx.run(ctx.service.start_watch, body.gallery, body.source, body.max_frames)).summary()  # type: ignore[no-any-return]


@router.get("", response_model=schemas.WatchList)
async def list_watches(ctx: Ctx, who: AnyKey) -> dict[str, Any]:
    """The watches of this process: all for the admin, its gallery's for a read key."""
    if who.admin:
        return {"watches": [w.summary() for w in ctx.service.watches.list()]}
    if who.key is None or not who.key.allows("read"):
        raise ApiError(403, "this key lacks the 'read' scope")
    mine = ctx.service.watches.list(who.key.gallery)
    return {"watches": [w.summary() for w in mine if who.reads(w.gallery, w.gallery_uid)]}


@router.get("/{watch_id}", response_model=schemas.WatchOut)
async def watch_state(watch_id: str, ctx: Ctx, who: AnyKey) -> dict[str, Any]:
    """A watch's state: running, paused, done, stopped or failed, frames, frame rate, dropped frames."""
    return watch_for(ctx, who, watch_id).summary()


@router.get(
    "/{watch_id}/events", response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events."}},
)  # fmt: skip
async def watch_events(watch_id: str, request: Request, ctx: Ctx, who: AnyKey) -> StreamingResponse:
    """The watch's events as Server-Sent Events (ended, decided, done); resumes after Last-Event-ID."""
    watch = watch_for(ctx, who, watch_id)
    last = request.headers.get("last-event-id", "0").strip() or "0"
    after = whole_number(last, 0, 2**63 - 1)
    if after is None:
        raise ApiError(422, "Last-Event-ID: expected the id of an event, a whole number")
    streams, holder = ctx.streams, who.key_id
    if sum(streams.values()) >= ctx.config.max_event_streams or streams.get(holder, 0) >= STREAMS_PER_KEY:
        raise ApiError(
            503, f"too many event streams open (at most {STREAMS_PER_KEY} a key, {ctx.config.max_event_streams} in all); "
            "close one or retry later", "busy", {"Retry-After": RETRY_AFTER},
        )  # fmt: skip
    streams[holder] = streams.get(holder, 0) + 1

    def release() -> None:
        streams[holder] -= 1
        if not streams[holder]:
            del streams[holder]

    async def stream() -> Any:
        seq, quiet = after, 0.0
        while True:
            events = watch.since(seq)
            for event in events:
                seq = event["seq"]
                yield f"id: {seq}\nevent: {event['event']}\ndata: {json.dumps(event['data'])}\n\n"
            if watch.over and not watch.since(seq):
                return
            if not events:
                quiet += SSE_POLL
                if quiet >= SSE_KEEPALIVE:
                    quiet = 0.0
                    yield ": keep-alive\n\n"
            await asyncio.sleep(SSE_POLL)

    return EventStream(stream(), release, media_type="text/event-stream", headers={"Cache-Control": "no-store"})


@router.post("/{watch_id}/pause", response_model=schemas.WatchOut)
async def pause_watch(watch_id: str, ctx: Ctx, who: Admin) -> dict[str, Any]:
    """Pause a watch (admin): it stops taking frames until resumed."""
    watch = watch_for(ctx, who, watch_id)
    ctx.service.watches.pause(watch, True)
    return watch.summary()


@router.post("/{watch_id}/resume", response_model=schemas.WatchOut)
async def resume_watch(watch_id: str, ctx: Ctx, who: Admin) -> dict[str, Any]:
    """Resume a paused watch (admin)."""
    watch = watch_for(ctx, who, watch_id)
    ctx.service.watches.pause(watch, False)
    return watch.summary()


@router.delete("/{watch_id}", response_model=schemas.WatchOut)
async def stop_watch(watch_id: str, ctx: Ctx, who: Admin) -> dict[str, Any]:
    """Stop a watch (admin); its events stay readable."""
    watch = watch_for(ctx, who, watch_id)
    ctx.service.watches.stop(watch)
    return watch.summary()
