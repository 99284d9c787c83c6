"""The service cuts uploaded photos by the photo commands' rule: a photo in which the person
detector finds nobody is skipped, taken whole or refused (naming it) by the gallery's
``no_face`` setting, with the outcome ``reid enroll`` and ``reid verify`` give the same file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2

import numpy as np
import pytest
from PIL import Image
from serve_helpers import Served, files, serve_root
from typer.testing import CliRunner

from reid.cli.app import app
from reid.draw import label_layout, make_label
from reid.errors import ConfigError
from reid.models import Encoder
from reid.pipeline.synthetic import street_frames
from reid.serve import Service, crop_rules, load_serve_config

runner = CliRunner()
CROP = ["--detect", "person", "--detector", "hog"]


def wall(path: Path, seed: int) -> Path:
    """A photo of a grey wall: noise, nobody in it."""
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(90, 140, (192, 96, 3), dtype=np.uint8)).save(path)
    return path


def served_with(tmp_path: Path, model_folder: Path, encoder: Encoder, no_face: str) -> Served:
    settings = {"detect": "person", "detector": "hog", "no_face": no_face}
    service, client = serve_root(tmp_path / "root", model_folder, encoder, galleries={"g": settings})
    out = Served(tmp_path / "root", service, client, {})
    out.create("g")
    return out


def cli(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize("no_face", ["skip", "whole", "error"])
def test_enrol_of_a_photo_of_nobody_is_what_reid_enroll_does(
    tmp_path: Path, model_folder: Path, encoder: Encoder, no_face: str
) -> None:
    photo = wall(tmp_path / "wall.png", 1)
    served = served_with(tmp_path, model_folder, encoder, no_face)
    answer = served.client.post("/v1/galleries/g/identities/p/images", files=files([photo]), headers=served.admin())
    report = tmp_path / "enrol.json"
    code, out = cli("enroll", photo, "--id", "p", "--gallery", tmp_path / "cli", "--model", model_folder, *CROP,
                    "--no-face", no_face, "--json", report)  # fmt: skip
    if no_face == "error":
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["message"] == "wall.png: no person found"
        assert code == 1 and f"{photo}: no person found" in out
        assert served.client.get("/v1/galleries/g", headers=served.admin()).json()["items"] == 0
        return
    assert answer.status_code == 200, answer.text
    body = answer.json()
    # The command fails when nothing at all was enrolled; the service answers per file.
    assert code == (0 if no_face == "whole" else 1), out
    cli_report = json.loads(report.read_text())
    assert body["added"] == cli_report["added"] == (1 if no_face == "whole" else 0)
    if no_face == "skip":
        assert body["files"] == [{"name": "wall.png", "outcome": "skipped", "reason": "no person found", "note": None}]
        assert [s["reason"] for s in cli_report["skipped"]] == ["no person found"]
    else:
        assert body["files"] == [{"name": "wall.png", "outcome": "added", "reason": None, "note": None}]


@pytest.mark.parametrize("no_face", ["skip", "whole", "error"])
def test_search_and_embed_of_a_photo_of_nobody_follow_no_face(
    tmp_path: Path, model_folder: Path, encoder: Encoder, no_face: str
) -> None:
    photo = wall(tmp_path / "wall.png", 2)
    served = served_with(tmp_path, model_folder, encoder, no_face)
    for route in ("search", "embed"):
        answer = served.client.post(f"/v1/galleries/g/{route}", files=files([photo], "image"), headers=served.admin())
        if no_face == "error":
            assert answer.status_code == 422 and answer.json()["error"]["message"] == "wall.png: no person found"
            continue
        assert answer.status_code == 200, answer.text
        body = answer.json()
        if no_face == "skip":
            assert body["subjects"] == [] and body["note"] == "no person found"
        else:
            assert [s["box"] for s in body["subjects"]] == [[0, 0, 96, 192]]
            assert body["note"] == "no person found; taken whole"


@pytest.mark.parametrize("no_face", ["skip", "whole", "error"])
def test_verify_of_a_photo_of_nobody_is_what_reid_verify_does(
    tmp_path: Path, model_folder: Path, encoder: Encoder, no_face: str
) -> None:
    first, second = wall(tmp_path / "a.png", 3), wall(tmp_path / "wall.png", 4)
    served = served_with(tmp_path, model_folder, encoder, no_face)
    upload = [*files([first], "image"), *files([second], "other")]
    answer = served.client.post("/v1/galleries/g/verify", files=upload, headers=served.admin())
    code, out = cli("verify", first, second, "-m", model_folder, *CROP, "--no-face", no_face)
    if no_face == "whole":
        assert answer.status_code == 200 and 0 <= answer.json()["distance"] <= 2, answer.text
        assert code == 0, out
    else:
        # Two photos are compared or nothing is: skip refuses as error does.
        assert answer.status_code == 422 and answer.json()["error"]["message"] == "a.png: no person found"
        assert code == 1 and f"{first}: no person found" in out


def test_gallery_info_says_how_photos_are_cut(tmp_path: Path, model_folder: Path, encoder: Encoder) -> None:
    served = served_with(tmp_path, model_folder, encoder, "whole")
    info = served.client.get("/v1/galleries/g", headers=served.admin()).json()
    assert (info["detect"], info["detector"], info["no_face"]) == ("person", "hog", "whole")


def test_a_detector_of_the_other_kind_stops_the_server_before_it_serves(model_folder: Path, encoder: Encoder) -> None:
    config = load_serve_config(None, models={"m": str(model_folder)}, defaults={"detector": "haar"})
    with pytest.raises(ConfigError, match="^defaults with model m: ") as caught:
        crop_rules(config, {"m": encoder})
    assert "haar" in str(caught.value) and "\n" not in str(caught.value)


def test_a_group_photo_enrols_its_largest_person_and_says_how_many_were_found(
    tmp_path: Path, model_folder: Path, encoder: Encoder, pedestrian_video: Path
) -> None:
    capture = cv2.VideoCapture(str(pedestrian_video))
    ok, frame = capture.read()
    capture.release()
    assert ok
    photo = tmp_path / "plaza.png"
    cv2.imwrite(str(photo), frame)
    served = served_with(tmp_path, model_folder, encoder, "skip")
    found = served.client.post("/v1/galleries/g/search", files=files([photo], "image"), headers=served.admin()).json()
    people = len(found["subjects"])
    assert people >= 2, found
    answer = served.client.post("/v1/galleries/g/identities/p/images", files=files([photo]), headers=served.admin())
    assert answer.status_code == 200, answer.text
    (outcome,) = answer.json()["files"]
    assert outcome["outcome"] == "added" and outcome["note"].startswith(f"{people} persons found; used the one at box [")
    largest = max(found["subjects"], key=lambda s: s["box"][2] * s["box"][3])["box"]
    assert outcome["note"].endswith(f"{largest}")


def test_a_root_that_is_a_file_is_one_line(tmp_path: Path, model_folder: Path, encoder: Encoder) -> None:
    root = tmp_path / "galleries"
    root.write_text("not a folder")
    config = load_serve_config(None, root=str(root), models={"m": str(model_folder)}, no_auth=True)
    with pytest.raises(ConfigError, match="the root of the galleries must be a folder"):
        Service.load(config)
    assert root.read_text() == "not a folder"


def test_a_thread_keeps_a_bounded_number_of_gallery_handles_open(served: Served) -> None:
    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_files()
    names = [f"g{n:02d}" for n in range(40)]
    for name in names:
        served.service.create_gallery(name)
    for _ in range(2):
        for name in names:
            assert served.service.info(name)["name"] == name
    # A handle holds the database open (and its write-ahead log while writing): the 8 kept
    # of the 40 galleries this thread used, not 40.
    assert open_files() - before <= 8 + 4
    served.service.delete_gallery(names[-1])
    assert served.service.info(names[0])["items"] == 0


def test_search_answers_carry_each_subjects_label_laid_out_as_the_video_does(
    tmp_path: Path, model_folder: Path, encoder: Encoder
) -> None:
    """The page draws labels where the answer says: inside the photo, apart, as reid.draw
    lays out the annotated video's; the whole-photo subject's label goes inside its box."""
    frame, _ = next(street_frames(1, seed=5))
    street = tmp_path / "street.png"
    Image.fromarray(frame).save(street)
    served = served_with(tmp_path, model_folder, encoder, "whole")
    for photo in (street, wall(tmp_path / "wall.png", 5)):
        body = served.client.post("/v1/galleries/g/search", files=files([photo], "image"), headers=served.admin()).json()
        height, width = np.asarray(Image.open(photo)).shape[:2]
        subjects = body["subjects"]
        assert len(subjects) == (2 if photo == street else 1), "each walker, or the wall taken whole"
        assert all(s["label"] is not None for s in subjects)
        expected = label_layout(
            [make_label(s["box"], n + 1, s["identity"], s["distance"]) for n, s in enumerate(subjects)], (height, width)
        )
        assert [s["label"] for s in subjects] == expected
        rects = [s["label"]["rect"] for s in subjects]
        assert all(x >= 0 and y >= 0 and x + w <= width and y + h <= height for x, y, w, h in rects)
        assert all(s["label"]["text"].startswith(f"#{n + 1} ") for n, s in enumerate(subjects))
