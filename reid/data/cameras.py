"""The one reader of camera ids in file names, for every dataset reader and for enrolment.

A camera token is ``c3``, ``cam3`` or ``camera3`` (any case), at the start of the name or
after ``_``, ``-`` or ``.``, and followed by a delimiter, the end of the name, or a
Market-1501 sequence number (``c3s1``).  So ``0002_c1s1_000451_03.jpg`` (Market-1501),
``0005_c2_f0046985.jpg`` (DukeMTMC-reID), ``cam12-a.png`` and ``img.camera2.jpg`` all
carry a camera, and ``cactus.jpg`` does not.
"""

from __future__ import annotations

import re
from pathlib import Path

CAMERA_TOKEN = re.compile(r"(?:^|[_\-.])(?:c|cam|camera)(\d+)(?=s\d|[_\-.]|$)", re.IGNORECASE)


def camera_from_name(name: str | Path) -> int | None:
    """The camera number (as written, usually 1-based) in a file name, or None."""
    match = CAMERA_TOKEN.search(Path(name).stem)
    return int(match.group(1)) if match else None
