"""``reid track``: link the boxes of a MOTChallenge detection file into tracks, from the boxes
alone or with the appearance of each box cut from the video; with ``--gt``, score the tracks
(or, with ``--mot``, a tracker's file as it is) against MOTChallenge ground truth."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from reid.cli.common import err_console, handle_errors, print_table
from reid.cli.defaults import config_overrides, given, with_config_options
from reid.errors import ConfigError, DataError
from reid.paths import check_output_file
from reid.text import printable
from reid.track.config import REFERENCE_FPS, TrackerConfig

if TYPE_CHECKING:
    from reid.evaluation.mot import MotScore


# The tracker's options are TrackerConfig's fields that carry them (reid.options).
@handle_errors
@with_config_options(TrackerConfig)
def track_command(
    detections: Path | None = typer.Option(
        None, "--detections", "-d", help="MOTChallenge detection file: frame,id,x,y,w,h,score,... (frames from 1)."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the tracks here, in MOTChallenge format."),
    gt: Path | None = typer.Option(
        None,
        "--gt",
        help="MOTChallenge ground truth (gt.txt): score the tracks against it and print HOTA, MOTA, IDF1 "
        "(MOTChallenge's rules: rows of flag 0 not scored, a match at IoU 0.5).",
    ),
    mot: Path | None = typer.Option(
        None,
        "--mot",
        help="Score this MOTChallenge file of tracks as it is (a tracker's output, e.g. reid query --mot's) "
        "against --gt, instead of tracking --detections.",
    ),
    max_frames: int | None = typer.Option(
        None,
        "--max-frames",
        help="Score frames 1..N only: those a run stopped after N frames covered (reid query --max-frames N).",
    ),
    fps: float | None = typer.Option(
        None,
        "--fps",
        help="Frame rate of the detections (default: the frameRate of a MOTChallenge seqinfo.ini beside the "
        f"file or the folder above, else --video's container rate, else {REFERENCE_FPS:g}).",
    ),
    video: Path | None = typer.Option(
        None,
        "--video",
        help="The video the detections are of (MOT frame f is its decoded frame f-1): each box is cut from it "
        "and embedded with --model, so tracks are linked on appearance as well as boxes.",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Re-ID model (folder path or bare name under models/) that embeds the boxes of --video.",
    ),
    link: bool | None = typer.Option(
        None,
        "--link/--no-link",
        help="Join tracklets that continue one another after tracking: by motion, and with --video by "
        "appearance too (default: join).",
    ),
    **options: Any,
) -> None:
    """Track the people of a detection file (any detector's, e.g. a benchmark's public detections),
    or score a file of tracks against ground truth (--mot FILE --gt gt.txt)."""
    from reid.evaluation.mot import score_mot_files

    if mot is not None:
        given_for_tracking = {"--detections": detections, "--out": out, "--video": video, "--model": model}
        tracking = [flag for flag, value in given_for_tracking.items() if value is not None]
        if config_overrides(TrackerConfig, options) or link is not None:
            tracking.append("a tracker option")
        if tracking:
            raise ConfigError(f"--mot scores a file of tracks as it is; {tracking[0]} is for tracking --detections")
        if gt is None:
            raise ConfigError("--mot scores a file of tracks: give its ground truth with --gt gt.txt")
        print_score(score_mot_files(gt, mot, max_frames), mot, gt)
        return
    # Only tracking loads the tracker, and a video's reader and encoder: scoring a file loads none.
    from reid.models import load_encoder
    from reid.pipeline.sources import open_source
    from reid.track.appearance import VideoAppearance
    from reid.track.mot import track_detection_file

    if detections is None or out is None:
        raise ConfigError(
            "tracking needs --detections FILE and --out FILE (to score a file of tracks: --mot FILE --gt gt.txt)"
        )
    if max_frames is not None and gt is None:
        raise ConfigError("--max-frames limits the scoring frames: it goes with --gt")
    if gt is not None and not gt.is_file():
        # Before tracking, so that a mistyped ground truth costs no wait.
        raise DataError(f"{gt}: --gt: no such file")
    check_output_file(out, "--out")
    if (video is None) != (model is None):
        raise ConfigError("--video and --model go together: the model embeds the boxes cut from the video")
    config = TrackerConfig(**config_overrides(TrackerConfig, options))
    if config.appearance is not None and video is None:
        raise ConfigError("--appearance gates tracks on the boxes' embeddings: give --video and --model to embed them")
    # The inputs first: a wrong path is named before a published model is downloaded.
    if not detections.is_file():
        raise DataError(f"{detections}: no such detection file")
    video_fps = None if video is None else open_source(video).fps
    appearance = None if video is None or model is None else VideoAppearance(video, load_encoder(model))
    result = track_detection_file(detections, out, config, fps, appearance, **given(link=link), video_fps=video_fps)
    print_table(
        f"tracked {detections}",
        ["item", "value"],
        [
            ["detections", str(result.detections)],
            ["frames", str(result.frames)],
            ["boxes written", str(result.boxes)],
            ["tracks", str(result.tracks)],
            ["boxes embedded", str(result.embedded)],
            ["frame rate", printable(result.rate.describe())],
            ["out", str(out)],
        ],
    )
    if result.rate.source == "default":
        err_console.print(
            f"note: the detections' frame rate is unknown (no --fps, no seqinfo.ini beside {printable(detections)}); "
            f"the tracker's times in seconds were taken at {result.rate.fps:g} fps",
            soft_wrap=True,
        )
    if result.detections == 0:
        err_console.print(
            f"note: {printable(detections)} holds no detections, so {printable(out)} holds no tracks", soft_wrap=True
        )
    elif result.tracks == 0:
        err_console.print(
            f"note: no track reached the {config.min_boxes} boxes a track needs to be reported; "
            "a box starts a track only at a confident score (--track-start-score)",
            soft_wrap=True,
        )
    if gt is not None:
        print_score(score_mot_files(gt, out, max_frames), out, gt)


def print_score(score: MotScore, tracks: Path, gt: Path) -> None:
    """The figures of ``score`` under their MOTChallenge names, percentages to two decimals."""
    named = score.named().items()
    rows = [[name, f"{value:.2f}%" if isinstance(value, float) else str(value)] for name, value in named]
    print_table(f"{tracks} scored against {gt}", ["metric", "value"], rows)
    if 0 < score.last_frame < score.truth_last_frame:
        err_console.print(
            f"note: the tracks end at frame {score.last_frame}, the ground truth at {score.truth_last_frame}: "
            "its later boxes count as missed (--max-frames N scores a run's first N frames only)",
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    app.command("track")(track_command)
