"""Enrolment into real galleries with a real (untrained) encoder."""

from __future__ import annotations

import shutil
import tracemalloc
from pathlib import Path

import cv2
import numpy as np
import pytest
from pipeline_helpers import build_encoder, walker_crops, write_rgb

from reid.data.io import read_image
from reid.detect import build_detector
from reid.errors import ConfigError, DataError, GalleryError
from reid.gallery import Gallery, open_gallery
from reid.models import Encoder
from reid.pipeline import EnrolConfig, EnrolEntry, camera_of, enrol, plan_enrolment
from reid.pipeline.enrol import EMBED_BYTES
from reid.pipeline.synthetic import street_frames


def test_plan_identity_folders_files_and_globs(tmp_path: Path) -> None:
    crops = walker_crops(tmp_path / "people")
    entries = plan_enrolment([tmp_path / "people"])
    assert [(e.identity, e.path.name) for e in entries][:2] == [("blue", "0.png"), ("blue", "1.png")]
    assert {e.identity for e in entries} == {"red", "blue"} and len(entries) == 6
    named = plan_enrolment([tmp_path / "people"], identity="someone")
    assert {e.identity for e in named} == {"someone"}
    by_glob = plan_enrolment([str(tmp_path / "people" / "*" / "0.png")])
    assert sorted(e.identity for e in by_glob) == ["blue", "red"]
    single = plan_enrolment([crops["red"][0], crops["red"][0]])
    assert len(single) == 1 and single[0].identity == "red"


def test_plan_rejects_bad_layouts(tmp_path: Path) -> None:
    crops = walker_crops(tmp_path / "people")
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(crops["red"][0], loose / "x.png")
    with pytest.raises(DataError, match="expected ROOT/<identity>/<image>"):
        plan_enrolment([loose])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="no images"):
        plan_enrolment([empty])
    with pytest.raises(DataError, match="holds no images"):
        plan_enrolment([empty], identity="x")
    with pytest.raises(DataError, match="no such file"):
        plan_enrolment([tmp_path / "absent"])
    with pytest.raises(ConfigError):
        plan_enrolment([])
    with pytest.raises(ConfigError, match="^identity ' ' has no visible character"):
        plan_enrolment([loose], identity=" ")


def test_camera_token_of_market_names() -> None:
    assert camera_of(Path("0002_c3s1_000551_01.jpg")) == "c3"
    assert camera_of(Path("-1_c6s2_000001_00.jpg")) == "c6"
    assert camera_of(Path("photo.jpg")) is None


def test_enrol_counts_duplicates_and_unreadable(tmp_path: Path, encoder: Encoder) -> None:
    walker_crops(tmp_path / "people")
    (tmp_path / "people" / "red" / "broken.png").write_bytes(b"garbage")
    (tmp_path / "people" / "red" / "empty.jpg").write_bytes(b"")
    shutil.copy(tmp_path / "people" / "red" / "0.png", tmp_path / "people" / "red" / "copy.png")
    entries = plan_enrolment([tmp_path / "people"])
    seen: list[int] = []
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        report = enrol(gallery, encoder, entries, EnrolConfig(batch_size=4), on_progress=seen.append)
        assert (report.images, report.added, report.duplicates, report.unreadable) == (9, 6, 1, 2)
        assert dict(report.per_identity) == {"red": 3, "blue": 3}
        assert sum(seen) == 9
        again = enrol(gallery, encoder, entries)
        assert again.added == 0 and again.duplicates == 7
        item = gallery.items("red")[0]
        assert item.image_hash and len(item.image_hash) == 64 and item.box is not None
    payload = report.to_dict()
    assert payload["added"] == 6 and any(s["reason"].startswith("not a readable image") for s in payload["skipped"])


def test_a_photo_saved_again_losslessly_is_a_duplicate_and_never_another_person(tmp_path: Path, encoder: Encoder) -> None:
    crops = walker_crops(tmp_path / "people")
    pixels = cv2.imread(str(crops["red"][0]), cv2.IMREAD_COLOR)
    # The same pixels in other files: other bytes, so other SHA-256s.
    resaved = tmp_path / "resaved"
    for name in ("red", "mallory"):
        (resaved / name).mkdir(parents=True)
        assert cv2.imwrite(str(resaved / name / "0.png"), pixels, [cv2.IMWRITE_PNG_COMPRESSION, 9])
    assert (resaved / "red" / "0.png").read_bytes() != crops["red"][0].read_bytes()
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        assert enrol(gallery, encoder, plan_enrolment([tmp_path / "people"])).added == 6
        report = enrol(gallery, encoder, plan_enrolment([resaved]))
        assert (report.added, report.duplicates, report.other_identity) == (0, 1, 1)
        assert dict(report.skipped)[str(resaved / "mallory" / "0.png")] == "the same image is enrolled as 'red'"
        assert {s.identity for s in gallery.identities()} == {"red", "blue"}
        assert gallery.search(encoder.embed([cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)]), k=1)[0][0].identity == "red"
        assert gallery.check(queries=5).same_image_other_identity == 0


def test_enrol_takes_images_given_as_bytes(tmp_path: Path, encoder: Encoder) -> None:
    crops = walker_crops(tmp_path / "people")
    good = crops["red"][0].read_bytes()
    entries = [
        EnrolEntry(Path("upload.png"), "red", data=good),
        EnrolEntry(Path("again.png"), "red", data=good),
        EnrolEntry(Path("broken.png"), "red", data=b"garbage"),
        EnrolEntry(Path("empty.png"), "red", data=b""),
    ]
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        report = enrol(gallery, encoder, entries)
        assert (report.added, report.duplicates, report.unreadable) == (1, 1, 2)
        assert [i.source for i in gallery.items("red")] == ["upload.png"]
    assert dict(report.skipped)["empty.png"] == "empty file"


def test_a_batch_of_large_photos_holds_one_decoded_photo_at_a_time(tmp_path: Path, encoder: Encoder) -> None:
    # 16 grey photos of 3000 x 3000 (27 MB each decoded as RGB; 432 MB all together), a few
    # kilobytes each as PNG, enrolled in one batch and one commit.
    count, side = 16, 3000
    entries = []
    for n in range(count):
        image = np.full((side, side), 40 + 10 * n, np.uint8)
        image[n * 100 : n * 100 + 50] = 255
        entries.append(EnrolEntry(Path(f"big-{n}.png"), "tall", data=cv2.imencode(".png", image)[1].tobytes()))
    decoded = side * side * 3
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        tracemalloc.start()
        try:
            report = enrol(gallery, encoder, entries, EnrolConfig(batch_size=count))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert report.added == count and len(gallery) == count
    # Held before embedding: EMBED_BYTES of photos, and the one photo that passes it.
    assert peak < EMBED_BYTES + 2 * decoded + (16 << 20), f"peak {peak / 2**20:.0f} MiB"
    assert peak < count * decoded / 2


def test_enrolled_crops_are_found_again(tmp_path: Path, encoder: Encoder) -> None:
    crops = walker_crops(tmp_path / "people")
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        enrol(gallery, encoder, plan_enrolment([tmp_path / "people"]))
        probe = encoder.embed([read_image(crops["blue"][1])])
        best = gallery.search(probe, k=2)[0]
        assert best[0].identity == "blue" and best[0].distance < 1e-3


def test_enrol_with_person_detection(tmp_path: Path, encoder: Encoder) -> None:
    frames = list(street_frames(2, seed=4))
    for n, (frame, _) in enumerate(frames):
        write_rgb(tmp_path / "scenes" / f"{n}.png", frame)
    write_rgb(tmp_path / "scenes" / "blank.png", np.full((300, 200, 3), 200, np.uint8))
    entries = plan_enrolment([tmp_path / "scenes"], identity="walker")
    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery:
        report = enrol(gallery, encoder, entries, detector=build_detector("hog", "person"))
        assert report.added == 2 and report.no_detection == 1
        boxes = [item.box for item in gallery.items("walker")]
        assert all(box is not None and box[2] < 300 for box in boxes)


def test_enrol_with_face_detection_on_real_faces(tmp_path: Path, orl_faces: Path) -> None:
    faces = build_encoder(tmp_path / "face-model", kind="face")
    entries = plan_enrolment([str(orl_faces / "s1" / "*.pgm"), str(orl_faces / "s2" / "*.pgm")])
    assert {e.identity for e in entries} == {"s1", "s2"} and len(entries) == 20
    with Gallery.open_or_create(tmp_path / "g", faces.card) as gallery:
        report = enrol(gallery, faces, entries, detector=build_detector("haar", "face"))
        assert report.added + report.no_detection == 20 and report.added >= 12
        assert all(item.box[2] < 92 for item in gallery.items())


def test_model_mismatch_stops_enrolment(tmp_path: Path, encoder: Encoder) -> None:
    walker_crops(tmp_path / "people")
    other = build_encoder(tmp_path / "other", name="other")
    Gallery.open_or_create(tmp_path / "g", other.card).close()
    with pytest.raises(GalleryError, match="'other'.*'t'"):
        Gallery.open_or_create(tmp_path / "g", encoder.card)


def test_interrupted_enrolment_keeps_finished_batches(tmp_path: Path, encoder: Encoder) -> None:
    walker_crops(tmp_path / "people", frames=4)
    entries = plan_enrolment([tmp_path / "people"])

    calls: list[int] = []

    def stop_after_two_batches(done: int) -> None:
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with Gallery.open_or_create(tmp_path / "g", encoder.card) as gallery, pytest.raises(KeyboardInterrupt):
        enrol(gallery, encoder, entries, EnrolConfig(batch_size=3), on_progress=stop_after_two_batches)
    with open_gallery(tmp_path / "g") as reopened:
        assert len(reopened) == 6


def test_plan_reads_a_data_set_as_every_command_names_it(tmp_path: Path) -> None:
    image = np.full((64, 32, 3), 90, np.uint8)
    market = tmp_path / "market"
    for name in ("0001_c1s1_000001_00.jpg", "0001_c2s1_000002_00.jpg", "0002_c3s1_000003_00.jpg",
                 "0000_c1s1_000004_00.jpg", "-1_c2s1_000005_00.jpg"):
        write_rgb(market / "bounding_box_test" / name, image)
    write_rgb(market / "query" / "0001_c1s1_000009_00.jpg", image)
    write_rgb(market / "bounding_box_train" / "0005_c1s1_000010_00.jpg", image)
    (market / "bounding_box_test" / "notes.txt").write_text("camera notes")
    for spec in (f"market1501:{market}", f"Market1501:{market}"):
        plan = plan_enrolment([spec])
        # The gallery split, each image under its identity number; distractor and junk are nobody's.
        assert sorted((e.path.name, e.identity, e.camera) for e in plan) == [
            ("0001_c1s1_000001_00.jpg", "0001", "c1"),
            ("0001_c2s1_000002_00.jpg", "0001", "c2"),
            ("0002_c3s1_000003_00.jpg", "0002", "c3"),
        ]
        # Distractors and junk are nobody to enrol; a file of another kind in the gallery's folder is named.
        assert [(Path(p).name, reason) for p, reason in plan.skipped] == [("notes.txt", "not an image file (.txt)")]
    # A folder set gives its identity folders: its gallery/ when it is split.
    for root in (tmp_path / "flat", tmp_path / "split" / "gallery"):
        write_rgb(root / "ann" / "1.png", image)
        write_rgb(root / "bob" / "1.png", image)
    write_rgb(tmp_path / "split" / "query" / "ann" / "2.png", image)
    write_rgb(tmp_path / "split" / "train" / "cy" / "1.png", image)
    for spec in (f"folder:{tmp_path / 'flat'}", f"folder:{tmp_path / 'split'}"):
        assert sorted(e.identity for e in plan_enrolment([spec])) == ["ann", "bob"]
    with pytest.raises(DataError, match=f"^{tmp_path / 'missing'}: dataset folder not found"):
        plan_enrolment([f"market1501:{tmp_path / 'missing'}"])
    with pytest.raises(ConfigError, match="^identity ann: a data set .* names its own identities"):
        plan_enrolment([f"market1501:{market}"], identity="ann")
    # A path that exists is a path, whatever its name says.
    odd = tmp_path / "folder:x"
    write_rgb(odd / "cy" / "1.png", image)
    assert [e.identity for e in plan_enrolment([str(odd)])] == ["cy"]
