"""``reid track``: link the boxes of a MOTChallenge detection file into tracks, from the boxes
alone or with the appearance of each box cut from the video."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from reid.cli.common import err_console, handle_errors, print_table
from reid.cli.defaults import config_overrides, given, with_config_options
from reid.errors import ConfigError, DataError
from reid.models import load_encoder
from reid.paths import check_output_file
from reid.pipeline.sources import open_source
from reid.text import printable
from reid.track import TrackerConfig
from reid.track.appearance import VideoAppearance
from reid.track.mot import track_detection_file
from reid.track.tracker import REFERENCE_FPS


# The tracker's options are TrackerConfig's fields that carry them (reid.options).
@handle_errors
@with_config_options(TrackerConfig)
def track_command(
    detections: Path = typer.Option(
        ..., "--detections", "-d", help="MOTChallenge detection file: frame,id,x,y,w,h,score,... (frames from 1)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Write the tracks here, in MOTChallenge format."),
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
    """Track the people of a detection file (any detector's, e.g. a benchmark's public detections)."""
    check_output_file(out, "--out")
    if (video is None) != (model is None):
        raise ConfigError("--video and --model go together: the model embeds the boxes cut from the video")
    config = TrackerConfig(**config_overrides(TrackerConfig, options))
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


def register(app: typer.Typer) -> None:
    app.command("track")(track_command)
