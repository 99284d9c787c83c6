"""The web page: plain HTML, CSS and JavaScript shipped in the package (works offline)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

STATIC = Path(__file__).resolve().parents[1] / "static"
# The page loads nothing from elsewhere; the browser is told to hold it to that.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' blob:; style-src 'self'; script-src 'self'",
    "X-Content-Type-Options": "nosniff",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def page() -> FileResponse:
    """The web page."""
    return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)


@router.get("/favicon.ico")
async def favicon() -> FileResponse:
    """The page's icon, where browsers look for it first."""
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")
