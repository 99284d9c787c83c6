"""Face check-in built on reid's public API.

``python -m apps.face_checkin --model M --people DIR --out DIR SOURCE [SOURCE ...]`` enrols
``DIR/<person>/<photos>`` into a gallery, then answers 1:N ("who is this, or nobody
known?") or, with ``--claim NAME``, 1:1 ("is this NAME?") for every incoming face at the
model's calibrated threshold, logging each decision.  ``python -m apps.face_checkin.calibrate``
chooses that threshold on one half of a people folder and measures it on the other.
See README.md.
"""

from typing import Any

from apps.face_checkin.config import CheckinConfig

# The check-in's names are imported when first asked for: importing the package (as
# ``python -m apps.face_checkin --help`` does) loads no engine.
_CHECKIN = ("CheckinDesk", "Decision", "enrol_people", "source_faces")

__all__ = ["CheckinConfig", *_CHECKIN]


def __getattr__(name: str) -> Any:
    if name in _CHECKIN:
        from apps.face_checkin import checkin

        return getattr(checkin, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
