"""The service's routes, one router per resource (FastAPI's APIRouter): the page, health,
galleries, identities and their items, images (enrol, search, verify, embed), watches
and keys.  Each route is a thin layer: its key is checked by a dependency
(:mod:`reid.serve.deps`), it reads the request, runs one service method on the worker pool
and returns its answer; every error is answered by :func:`reid.serve.http_errors.answer_error`."""

from reid.serve.routes import galleries, health, identities, images, keys, page, watches

ROUTERS = (page.router, health.router, galleries.router, identities.router, images.router, watches.router, keys.router)

__all__ = ["ROUTERS"]
