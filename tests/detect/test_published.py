"""Published detectors by name: where their files are found, which one is the person
default, the note when only a stand-in is here, and the real files on the street video."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reid.detect import (
    DEFAULT_DETECTORS,
    DETECTORS,
    OmzDetector,
    PersonDetector,
    YoloDetector,
    build_detector,
    confident_detections,
    default_detector,
    fallback_note,
)
from reid.detect.published import model_file
from reid.detect.yolo import ByteTrackConfig, YoloxConfig
from reid.errors import ConfigError, ModelError
from reid.evaluation.boxes import read_mot_boxes, score_boxes
from reid.models.registry import SSDLITE_PERSON, add
from tests.conftest import SHARED_DATA, WHERE
from tests.detect.conftest import PUBLISHED_FILES, published_file, video_frames

# The artefact each shared file enters the cache as: the shared YOLOX-Nano is a re-export
# of the published weights, not the release file, so it is a user's own export.
ARTEFACTS = {
    "bytetrack-nano": "bytetrack_nano.mot17",
    "yolox-nano": "yolox_nano.coco-export",
    "pedestrian-detection-adas-0002": "pedestrian-detection-adas-0002",
}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty registry cache of this test's own."""
    root = tmp_path / "cache"
    root.mkdir()
    monkeypatch.setenv("REID_CACHE_DIR", str(root))
    return root


def place(name: str) -> None:
    """Detector ``name``'s shared file(s) brought into the cache by the registry's own
    check (``reid models add``): an IR as the folder of its .xml and .bin."""
    source = published_file(name)
    add(ARTEFACTS[name], source.parent if source.suffix == ".xml" else source)


def test_only_verified_cached_files_are_run(cache: Path) -> None:
    with pytest.raises(ModelError, match=r"^model yolox_nano.coco is not in the cache; run `reid models fetch yolox_nano.coco` \(offline: `reid models add yolox_nano.coco FILE` with a copy of its file\), then --detector yolox-nano$"):
        build_detector("yolox-nano", "person")
    # ByteTrack publishes no ONNX file: the user brings an export.
    with pytest.raises(ModelError, match=r"^model bytetrack_nano.mot17 is not in the cache; run `reid models add bytetrack_nano.mot17 FILE`, then --detector bytetrack-nano$"):
        build_detector("bytetrack-nano")
    # Files of the right names that fail the published size and hash are not the model.
    folder = cache / "person-detection-retail-0013"
    folder.mkdir()
    (folder / "person-detection-retail-0013.bin").write_bytes(b"w")
    (folder / "person-detection-retail-0013.xml").write_text("<net/>")
    assert not DETECTORS["person-detection-retail-0013"].present()
    assert default_detector("person") == "hog"
    with pytest.raises(ModelError, match=r"^model person-detection-retail-0013 is not in the cache"):
        model_file(("person-detection-retail-0013",), ".xml")


def test_a_file_can_be_named_with_the_detector(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"yolox-s: needs its file, as yolox-s:FILE.onnx"):
        build_detector("yolox-s:", "person")
    with pytest.raises(ModelError, match="missing.onnx: YOLO ONNX file not found"):
        build_detector(f"yolox-tiny:{tmp_path / 'missing.onnx'}", "person")
    with pytest.raises(ConfigError, match="^detector 'hog:x': not a detector"):
        build_detector("hog:x", "person")
    onnx = published_file("yolox-nano")
    detector = build_detector(f"yolox-nano:{onnx}", "person")
    assert isinstance(detector, YoloDetector) and detector.config == YoloxConfig() and detector.size == (416, 416)
    # Settings of the entry's own type are used, with every default of its publisher's kept.
    held = build_detector(f"yolox-nano:{onnx}", "person", [YoloxConfig(threads=1, min_score=0.7)])
    assert held.config.min_score == 0.7 and held.pixels == "bgr" and held.layout == "yolox-raw"
    assert held.session.get_session_options().intra_op_num_threads == 1


def test_the_person_default_is_the_best_detector_present(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_DETECTORS["person"] == (
        "bytetrack-nano", "yolox-nano", "pedestrian-detection-adas-0002", "person-detection-retail-0013", "pedestrian",
    )
    assert default_detector("person") == "hog"
    note = fallback_note("person")
    assert note is not None and "\n" not in note
    assert note.startswith("note: person boxes come from hog, a stand-in") and "`reid models fetch yolox_nano.coco`" in note
    place("pedestrian-detection-adas-0002")
    assert default_detector("person") == "pedestrian-detection-adas-0002" and fallback_note("person") is None
    assert isinstance(build_detector(None, "person"), OmzDetector)
    place("yolox-nano")
    assert default_detector("person") == "yolox-nano"
    place("bytetrack-nano")
    assert default_detector("person") == "bytetrack-nano"
    detector = build_detector(None, "person")
    assert isinstance(detector, YoloDetector) and detector.config == ByteTrackConfig()
    assert default_detector("face") == "haar" and fallback_note("face") is None


def test_the_ssdlite_stand_in_runs_with_the_note_when_no_published_one_is_here(ssdlite_cached: Path) -> None:
    assert default_detector("person") == "pedestrian"
    note = fallback_note("person")
    assert note is not None and note.startswith("note: person boxes come from pedestrian, a stand-in")
    assert "run `reid models fetch yolox_nano.coco` (offline: `reid models add yolox_nano.coco FILE`" in note
    assert note.endswith(", then --detector yolox-nano")


def test_without_any_model_hog_runs(cache: Path) -> None:
    assert isinstance(build_detector(None, "person"), PersonDetector)
    assert not any(DETECTORS[name].present() for name in DEFAULT_DETECTORS["person"] if name != "pedestrian")
    assert not DETECTORS["pedestrian"].present() and DETECTORS["pedestrian"].model == SSDLITE_PERSON


# Ten frames spread over the street video.
SCORED = tuple(range(5, 795, 80))


@pytest.mark.parametrize("name", sorted(PUBLISHED_FILES))
def test_real_weights_find_the_people_of_the_street(name: str, pedestrian_video: Path) -> None:
    """Confident boxes on ten frames of PETS09-S2L1 against its ground truth (IoU 0.5).
    On all 795 frames the four measure 84-95% precision and 78-95% recall
    (docs/detectors.md); the floors sit below, so that only a regression fails."""
    path = published_file(name)
    truth_file = SHARED_DATA / "video" / "pets09-s2l1" / "gt.txt"
    if not truth_file.is_file():
        pytest.skip(f"real data data/video/pets09-s2l1/gt.txt not present {WHERE}")
    truth = read_mot_boxes(truth_file, min_confidence=1)
    detector = build_detector(f"{name}:{path}", "person")
    found = {
        i: np.array([d.box for d in confident_detections(detector, frame)], float).reshape(-1, 4)
        for i, frame in zip(SCORED, video_frames(pedestrian_video, SCORED))
    }
    score = score_boxes(truth, found, SCORED)
    assert score.truths >= 50
    assert score.precision >= 0.75 and score.recall >= 0.7, (score.precision, score.recall)
