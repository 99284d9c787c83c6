"""Help never lies about a default: every default an option's help states, in every command
of ``reid`` and of both apps, is the default of the config field or function parameter that
applies when the option is left out."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
import typer.main

import apps.camera_search.cli as camera_search
import apps.face_checkin.calibrate as face_calibrate
import apps.face_checkin.cli as face_checkin
from apps.camera_search.search import SearchConfig
from apps.face_checkin.checkin import CheckinConfig
from reid.cli import app
from reid.cli.defaults import default_of, shown
from reid.detect import PersonDetectorConfig
from reid.engine import TrainConfig
from reid.engine.demo import demo_config
from reid.gallery import Gallery, IndexSpec
from reid.models.export import export_model
from reid.options import option_spec
from reid.pipeline import (
    CalibrateConfig, EnrolConfig, QueryConfig, calibrate_model, evaluate_encoder, open_source, verify_pairs,
)  # fmt: skip
from reid.pipeline.subject import photo_rule
from reid.serve.config import ServeConfig
from reid.track import TrackerConfig

# Where each command's defaults live: config dataclasses, functions (their parameters), or
# a mapping for an option named otherwise than its key (--index sets IndexSpec.kind).
INDEX = (IndexSpec, {"index": IndexSpec.kind})
SOURCES: dict[str, tuple[Any, ...]] = {
    "reid eval": (evaluate_encoder, photo_rule),
    "reid verify": (verify_pairs, photo_rule),
    "reid calibrate": (calibrate_model, {"far": default_of(calibrate_model, "target_far")}, photo_rule),
    "reid enroll": (EnrolConfig, *INDEX),
    "reid query": (QueryConfig, TrackerConfig, open_source),
    "reid export": (export_model,),
    "reid track": (TrackerConfig,),
    "reid gallery info": (Gallery.check,),
    "reid gallery reindex": INDEX,
    "reid gallery import": INDEX,
    "reid gallery calibrate": (Gallery.calibrate,),
    "reid serve": (ServeConfig,),
    "reid serve keys create": (ServeConfig,),
    "reid serve keys list": (ServeConfig,),
    "reid serve keys revoke": (ServeConfig,),
    "camera_search": (SearchConfig, PersonDetectorConfig, TrackerConfig),
    "face_checkin": (CheckinConfig,),
    "face_checkin.calibrate": (CheckinConfig, CalibrateConfig),
}

# Defaults that help describes rather than states as a value (what applies is worked out
# when the command runs), each with the words its help uses, so that a changed text is
# looked at again.
DESCRIBED: dict[tuple[str, str], str] = {
    **{(c, o): "its card, else 256x128" for c in ("reid eval", "reid verify") for o in ("input_size",)},
    **{(c, o): "its card, else ImageNet's" for c in ("reid eval", "reid verify") for o in ("mean", "std")},
    **{(c, "rgb"): "its card, else RGB" for c in ("reid eval", "reid verify")},
    ("reid verify", "threshold"): "the model card's calibrated one.",
    **{(c, "root"): "the pair file's folder" for c in ("reid verify", "reid calibrate")},
    **{(c, "detector"): "pedestrian, else hog; haar for faces" for c in ("reid enroll", "reid query", "reid eval", "reid gallery calibrate")},
    **{(c, "detector"): "for --detect face) or yunet" for c in ("reid verify", "reid calibrate")},
    ("reid gallery calibrate", "frames"): "every frame.",
    ("reid track", "link"): "with --video",
    ("reid track", "fps"): "the frameRate of a MOTChallenge seqinfo.ini beside the file or the folder above",
    ("reid query", "fps"): "what the video or camera reports",
    ("reid query", "model"): "the model the gallery records, where it is here",
    **{(c, "train_size"): "64 per list" for c in ("reid enroll", "reid gallery reindex")},
    **{(c, "pq_m"): "dimension / 8" for c in ("reid enroll", "reid gallery reindex")},
    **{(c, "nlist"): "about sqrt(items)" for c in ("reid enroll", "reid gallery reindex", "reid gallery import")},
    **{(c, "nprobe"): "nlist / 32" for c in ("reid enroll", "reid gallery reindex", "reid gallery import")},
    ("reid gallery import", "index"): "the exported gallery's",
    **{(c, "shard_size"): "one" for c in ("reid enroll", "reid gallery reindex")},
    ("reid query", "high_score"): "the detector's confident score for those that also give weaker boxes",
    ("reid query", "threshold"): "the gallery's own calibration (reid gallery calibrate",
    ("reid query", "min_height"): "one pass",
    ("reid export", "out"): "MODEL/NAME.onnx or MODEL/NAME.torchscript.pt",
    ("reid import", "last_stride"): "torchreid 2",
    ("reid track", "high_score"): "every detection may",
    **{(c, "start_score"): "any confident one" for c in ("reid track", "reid query")},
    ("reid serve", "cors_origin"): "none",
    **{(c, "keys_file"): "ROOT/.serve-keys.json" for c in ("reid serve keys create", "reid serve keys list", "reid serve keys revoke")},
    ("camera_search", "threshold"): "the model card's, else the gallery's",
    ("camera_search", "person_detector"): "reid's person default",
    **{(c, "max_frames"): "every frame" for c in ("camera_search", "face_checkin")},
    ("face_checkin", "gallery"): "OUT/gallery",
    ("face_checkin", "claim"): "1:N",
    ("face_checkin", "threshold"): "the model card's calibrated one",
    **{(c, "face_detector"): "haar; yunet for aligned chips" for c in ("face_checkin", "face_checkin.calibrate")},
}
STATED = re.compile(r"[Dd]efault:?\s+([^);,]+)")


def commands() -> list[tuple[str, Any]]:
    found = []

    def walk(command: Any, path: str) -> None:
        found.append((path, command))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, f"{path} {name}")

    for root, name in ((app, "reid"), (camera_search.app, "camera_search"), (face_checkin.app, "face_checkin"),
                       (face_calibrate.app, "face_checkin.calibrate")):  # fmt: skip
        walk(typer.main.get_command(root), name)
    return found


def source_default(where: str, name: str) -> Any:
    """The default of ``name`` in the sources of command ``where``; KeyError when none has it."""
    for source in SOURCES.get(where, ()):
        if isinstance(source, dict):
            if name in source:
                return source[name]
        elif isinstance(source, type):
            if name in getattr(source, "__dataclass_fields__", {}):
                field = source.__dataclass_fields__[name]
                return field.default if field.default is not dataclasses.MISSING else field.default_factory()
        else:
            try:
                return default_of(source, name)
            except KeyError:
                continue
    raise KeyError(name)


def spellings(value: Any) -> set[str]:
    texts = {shown(value), str(value)}
    if isinstance(value, float):
        texts.add(f"{value:g}")
    return texts


ALL = [(where, param) for where, command in commands() for param in command.params]


@pytest.mark.parametrize("where,param", ALL, ids=[f"{w}:{p.name}" for w, p in ALL])
def test_the_default_help_states_is_the_one_that_applies(where: str, param: Any) -> None:
    stated = STATED.search(param.help or "")
    if where.split()[-1] in ("train", "demo"):
        # Built from the fields: the recipe's value as it is typed, or the field's words for unset.
        recipe = TrainConfig() if where.endswith("train") else demo_config(verify=False)
        if param.name not in TrainConfig.__dataclass_fields__:
            assert stated is None, param.help
            return
        field = TrainConfig.__dataclass_fields__[param.name]
        value = getattr(recipe, param.name)
        spec = option_spec(field)
        assert stated is not None and spec is not None, param.help
        full = param.help[stated.start(1):].removesuffix(")")
        derived = field.default is None and value == getattr(TrainConfig(), param.name)
        expected = spec.default_text if (value in (None, "") or derived) and spec.default_text else shown(value, spec.form)
        assert full == expected, (param.name, full, expected)
        return
    if stated is None:
        assert (where, param.name) not in DESCRIBED, "stale entry"
        return
    text = stated.group(1).strip()
    if (where, param.name) in DESCRIBED:
        assert text == DESCRIBED[(where, param.name)].split(",")[0].split(")")[0].strip() or param.help.count(
            DESCRIBED[(where, param.name)]
        ), (text, param.help)
        return
    if param.default is not None and not isinstance(param.default, bool):
        # An option with its own default: what help says is that default.
        assert text in spellings(param.default), (param.name, text, param.default)
        return
    value = source_default(where, param.name)
    assert text in spellings(value), (where, param.name, text, value)


def test_described_defaults_all_belong_to_an_option() -> None:
    options = {(where, param.name) for where, param in ALL}
    assert set(DESCRIBED) <= options, set(DESCRIBED) - options


def test_the_track_high_score_help_states_the_detectors_own_scores() -> None:
    from reid.detect.pedestrian import PedestrianConfig
    from reid.detect.ssdlite import SSDLiteConfig
    from reid.detect.yolo import ByteTrackConfig, YoloConfig

    param = next(p for where, p in ALL if where == "reid query" and p.name == "high_score")
    for name, config in (
        ("pedestrian", PedestrianConfig), ("ssdlite", SSDLiteConfig), ("yolo:FILE.onnx", YoloConfig),
        ("bytetrack-nano", ByteTrackConfig),
    ):
        assert f"{name} {config.min_score:g}" in param.help


ROOTS = {"reid": app, "camera_search": camera_search.app, "face_checkin": face_checkin.app,
         "face_checkin.calibrate": face_calibrate.app}  # fmt: skip


@pytest.mark.parametrize("where", [where for where, _ in commands()])
def test_every_help_states_defaults_one_way_and_no_python_type(where: str) -> None:
    from typer.testing import CliRunner

    root, *path = where.split()
    shown_help = CliRunner().invoke(ROOTS[root], [*path, "--help"], env={"COLUMNS": "200"}, terminal_width=200).output
    assert "[default" not in shown_help and "[required]" not in shown_help, shown_help
    # "(default: X)", never "(default X)"; "(default for ...)" says when a choice applies.
    assert not re.search(r"\(default (?!for )", shown_help), shown_help
    assert not re.search(r"<(list|tuple|dict)\[", shown_help), shown_help


@pytest.mark.parametrize("root", ["camera_search", "face_checkin", "face_checkin.calibrate"])
def test_the_apps_answer_dash_h_as_their_help(root: str) -> None:
    from typer.testing import CliRunner

    runner = CliRunner()
    short = runner.invoke(ROOTS[root], ["-h"], env={"COLUMNS": "80"}, terminal_width=80)
    assert short.exit_code == 0 and "-h, --help" in short.output, short.output
    assert short.output == runner.invoke(ROOTS[root], ["--help"], env={"COLUMNS": "80"}, terminal_width=80).output
