"""``reid serve``: the HTTP service over galleries (FastAPI + uvicorn, the ``serve`` extra).

:func:`create_app` builds the application from a loaded :class:`Service` (models and
detectors loaded first); :class:`ServeConfig` and :func:`load_serve_config` say what is
served; :class:`KeyStore` and :class:`AdminKey` hold the keys.  docs/serve.md has the routes.
The settings and keys need no web packages, so ``reid serve keys`` works without them.
"""

from typing import TYPE_CHECKING

from reid.lazy import lazy_names

if TYPE_CHECKING:
    from reid.serve.config import GallerySettings, ServeConfig, load_serve_config
    from reid.serve.keys import SCOPES, AdminKey, ApiKey, KeyStore
    from reid.serve.pool import WorkerPool
    from reid.serve.service import Service, Upload, crop_rules
    # FastAPI is imported only by what needs it (the serve extra may be absent).
    from reid.serve.app import create_app

__getattr__, __dir__ = lazy_names(__name__, __file__)

__all__ = [
    "SCOPES",
    "AdminKey",
    "ApiKey",
    "GallerySettings",
    "KeyStore",
    "ServeConfig",
    "Service",
    "Upload",
    "WorkerPool",
    "create_app",
    "crop_rules",
    "load_serve_config",
]

