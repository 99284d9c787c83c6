"""The SSDLite person detector: its text graph derived from the real frozen graph, and the
detector on real frames of the PETS2009 street video and on an empty synthetic street."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from reid.detect import SSDLiteConfig, SSDLiteDetector, build_detector, confident_detections
from reid.detect.ssd import SSDAnchors, graph_info, read_graph_nodes, ssd_text_graph
from reid.detect.textgraph import parse_text
from reid.errors import ConfigError, ModelError
from reid.gallery import Gallery, ItemMeta
from reid.models import load_encoder, stand_in_model
from reid.models.registry import SSDLITE_PERSON
from reid.pipeline import QueryConfig, QueryRun, open_source
from reid.pipeline.synthetic import street_frames
from tests.detect.conftest import video_frames

FRAMES = (0, 300, 600)


def test_graph_says_one_class_six_maps_and_its_box_coder(ssdlite_graph: Path) -> None:
    info = graph_info(read_graph_nodes(ssdlite_graph), str(ssdlite_graph))
    assert info.layers == 6 and info.num_classes == 1
    assert info.anchors_per_location == (3, 6, 6, 6, 6, 6)
    assert info.box_scales == (10.0, 10.0, 5.0, 5.0) and info.nms_iou == pytest.approx(0.6)


def test_anchor_sizes_follow_the_ssd_anchor_generator() -> None:
    anchors = SSDAnchors()
    widths, heights = anchors.sizes(0, 6)
    assert np.allclose(widths, [30, 60 * math.sqrt(2), 60 * math.sqrt(0.5)])
    assert np.allclose(heights, [30, 60 / math.sqrt(2), 60 / math.sqrt(0.5)])
    widths, heights = anchors.sizes(1, 6)  # scale 0.2 + 0.75 / 5 = 0.35, next 0.5
    assert len(widths) == 6 and widths[0] == pytest.approx(105) and widths[-1] == pytest.approx(300 * math.sqrt(0.35 * 0.5))
    assert anchors.sizes(5, 6)[0][-1] == pytest.approx(300 * math.sqrt(0.95))


def test_text_graph_replaces_the_tensorflow_head(ssdlite_graph: Path) -> None:
    nodes = parse_text(ssd_text_graph(ssdlite_graph)).all("node")
    ops = {node.text("name"): node.text("op") for node in nodes}  # type: ignore[union-attr]
    assert ops["detection_out"] == "DetectionOutput" and ops["image_tensor"] == "Placeholder"
    assert sum(op == "PriorBox" for op in ops.values()) == 6
    assert not any(name.startswith(("Postprocessor/", "Preprocessor/", "MultipleGridAnchorGenerator/")) for name in ops)
    assert not any(op in ("Identity", "Const") for name, op in ops.items() if not name.endswith(("axis_flatten", "shape")))


def test_anchor_settings_that_disagree_with_the_graph_are_refused(ssdlite_graph: Path) -> None:
    with pytest.raises(ModelError, match=r"\[3, 6, 6, 6, 6, 6\] anchors per location.*\[3, 4, 4, 4, 4, 4\]"):
        ssd_text_graph(ssdlite_graph, SSDAnchors(aspect_ratios=(1.0, 2.0, 0.5)))


def inside(box: tuple[int, int, int, int], shape: tuple[int, ...]) -> bool:
    x, y, w, h = box
    return x >= 0 and y >= 0 and w > 0 and h > 0 and x + w <= shape[1] and y + h <= shape[0]


def test_people_found_on_the_real_street(ssdlite_graph: Path, pedestrian_video: Path) -> None:
    frames = video_frames(pedestrian_video, FRAMES)
    fast = SSDLiteDetector(graph=ssdlite_graph)
    small = SSDLiteDetector(SSDLiteConfig(min_height=60), graph=ssdlite_graph)
    hog = build_detector("hog", "person")
    counts = {"fast": 0, "small": 0, "hog": 0}
    for frame in frames:
        for name, detector in (("fast", fast), ("small", small), ("hog", hog)):
            found = confident_detections(detector, frame)
            counts[name] += len(found)
            assert all(inside(d.box, frame.shape) and d.kind == "person" for d in found)
            assert found == sorted(found, key=lambda d: -d.score)
        # Pedestrians of this street are taller than wide.
        assert all(d.box[3] > d.box[2] for d in confident_detections(small, frame))
    # The ground truth holds 5.85 people a frame; HOG finds about half.
    assert counts["fast"] >= len(frames)
    assert counts["small"] >= 4 * len(frames) and counts["small"] > counts["hog"]


def test_upscaled_input_for_small_people(ssdlite_graph: Path) -> None:
    assert SSDLiteDetector(graph=ssdlite_graph).input_size(576, 768) == (300, 300)
    # A 60 px person spans the 30 px smallest anchor at half size.
    assert SSDLiteDetector(SSDLiteConfig(min_height=60), graph=ssdlite_graph).input_size(576, 768) == (384, 288)
    # Never above the frame's own pixels, and no second pass that is not larger than the first.
    assert SSDLiteDetector(SSDLiteConfig(min_height=15), graph=ssdlite_graph).input_size(576, 768) == (768, 576)
    assert SSDLiteDetector(SSDLiteConfig(min_height=1000), graph=ssdlite_graph).input_size(576, 768) == (300, 300)
    with pytest.raises(ConfigError, match="min_height"):
        SSDLiteConfig(min_height=2)


@pytest.mark.parametrize("min_height", [8, 60])
def test_nobody_on_an_empty_street(ssdlite_graph: Path, min_height: int) -> None:
    detector = SSDLiteDetector(SSDLiteConfig(min_height=min_height), graph=ssdlite_graph)
    for frame, truth in street_frames(3, walkers=(), seed=3):
        assert truth == {} and confident_detections(detector, frame) == []
    for value in (0, 255):  # a covered or blinded camera
        assert confident_detections(detector, np.full((576, 768, 3), value, np.uint8)) == []
    assert detector.detect(np.zeros((0, 0, 3), np.uint8)) == detector.detect(np.zeros((0, 5, 3), np.uint8)) == []


def test_missing_model_names_the_fetch_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REID_CACHE_DIR", str(tmp_path / "empty-cache"))
    with pytest.raises(ModelError) as caught:
        build_detector("ssdlite", "person")
    assert f"`reid models fetch {SSDLITE_PERSON}`" in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).endswith(", then --detector pedestrian")


def test_a_file_that_is_no_graph_names_the_file(tmp_path: Path) -> None:
    junk = tmp_path / "graph.pb"
    junk.write_bytes(b"\x00\x01 not a graph")
    with pytest.raises(ModelError, match="graph.pb"):
        SSDLiteDetector(graph=junk)


def test_boxes_come_down_to_the_floor_and_photos_keep_the_confident_ones(
    ssdlite_graph: Path, pedestrian_video: Path
) -> None:
    detector = SSDLiteDetector(SSDLiteConfig(min_score=0.5, weak_score=0.2), graph=ssdlite_graph)
    assert detector.confident_score == 0.5
    confident = weak = 0
    for frame in video_frames(pedestrian_video, FRAMES):
        everything, strong = detector.detect(frame), confident_detections(detector, frame)
        assert all(d.score >= 0.5 for d in strong)
        assert strong == [d for d in everything if d.score >= 0.5], "the same boxes, in the same order"
        assert all(0.2 <= d.score for d in everything)
        assert [d.score for d in everything] == sorted((d.score for d in everything), reverse=True)
        confident += len(strong)
        weak += sum(d.score < 0.5 for d in everything)
    assert confident > 0 and weak > 0
    no_weak = SSDLiteDetector(SSDLiteConfig(weak_score=None), graph=ssdlite_graph)
    frame = video_frames(pedestrian_video, FRAMES[:1])[0]
    assert no_weak.detect(frame) == confident_detections(no_weak, frame)


@pytest.mark.parametrize("scores", [(0.5, 1.0), (0.5, -0.1), (1.0, None)])
def test_scores_must_be_probabilities(scores: tuple[float, float | None]) -> None:
    with pytest.raises(ConfigError, match="ssdlite (weak_score|min_score) must be in"):
        SSDLiteConfig(min_score=scores[0], weak_score=scores[1])


def test_a_confident_score_under_the_weak_one_leaves_no_weak_tier(ssdlite_graph: Path, pedestrian_video: Path) -> None:
    detector = SSDLiteDetector(SSDLiteConfig(min_score=0.05, weak_score=0.1), graph=ssdlite_graph)
    default = SSDLiteDetector(graph=ssdlite_graph)
    for frame in video_frames(pedestrian_video, FRAMES):
        found = detector.detect(frame)
        assert confident_detections(detector, frame) == found and all(d.score >= 0.05 for d in found)
        assert len(found) >= len(confident_detections(default, frame))


def test_query_on_the_real_street_finds_small_people_and_tracks_them(
    tmp_path: Path, ssdlite_cached: Path, pedestrian_video: Path
) -> None:
    encoder = load_encoder(stand_in_model(tmp_path / "model", embedding_dim=32, input_size=(64, 32), threshold=1.0))
    with Gallery.create(tmp_path / "gallery", encoder.card) as gallery:
        gallery.add(np.eye(32, dtype=np.float32)[:4], [ItemMeta(f"id{n}") for n in range(4)])
    config = QueryConfig(detector="ssdlite", min_height=60)
    with Gallery.open(tmp_path / "gallery") as gallery:
        run = QueryRun(gallery, encoder, open_source(pedestrian_video, max_frames=20), config)
        results = list(run)
    assert isinstance(run.detector, SSDLiteDetector) and run.detector.config.min_height == 60
    confident = SSDLiteConfig().min_score
    assert run.tracker is not None and run.tracker.config.high_score == confident
    assert all(d.track is not None for r in results for d in r.detections)
    assert any(d.detection_score < confident for r in results for d in r.detections), "weak boxes continue tracks"
    # The ground truth holds 5.85 people a frame.
    assert run.stats.detections >= 3 * run.stats.frames


def test_min_height_is_for_ssdlite_only() -> None:
    for detector, named in ((None, "the default detector"), ("hog", "hog")):
        with pytest.raises(ConfigError, match=f"^min_height works with the ssdlite detector, not {named}"):
            QueryConfig(detector=detector, min_height=60)
