"""``reid track``: link the boxes of a MOTChallenge detection file into tracks, from the boxes
alone or with the appearance of each box cut from the video."""

from __future__ import annotations

from pathlib import Path

import typer

from reid.cli.common import handle_errors, print_table
from reid.cli.defaults import given, with_default
from reid.errors import ConfigError
from reid.models import load_encoder
from reid.paths import check_output_file
from reid.track import TrackerConfig
from reid.track.appearance import VideoAppearance
from reid.track.mot import track_detection_file
from reid.track.tracker import REFERENCE_FPS


@handle_errors
def track_command(
    detections: Path = typer.Option(
        ..., "--detections", "-d", help="MOTChallenge detection file: frame,id,x,y,w,h,score,... (frames from 1)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Write the tracks here, in MOTChallenge format."),
    fps: float | None = typer.Option(
        None,
        "--fps",
        help=f"Frame rate of the detections (default: {REFERENCE_FPS:g}, the rate ByteTrack's settings assume).",
    ),
    lost_seconds: float | None = typer.Option(
        None,
        "--lost-seconds",
        help=with_default("Seconds a track may go unseen before it ends.", f"{TrackerConfig.lost_seconds:g}"),
    ),
    high_score: float | None = typer.Option(
        None,
        "--track-high-score",
        help="Detection score from which a detection may start a track; weaker ones only continue tracks "
        "(default: every detection may). ByteTrack's, for scores that are probabilities: 0.6.",
    ),
    start_score: float | None = typer.Option(
        None,
        "--track-start-score",
        help="Least score of a detection no track took to start a new track (default: any confident one). "
        "ByteTrack's: 0.7.",
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
        help="Join tracklets that follow one another closely and look alike, after tracking "
        "(default: with --video).",
    ),
) -> None:
    """Track the people of a detection file (any detector's, e.g. a benchmark's public detections)."""
    check_output_file(out, "--out")
    if (video is None) != (model is None):
        raise ConfigError("--video and --model go together: the model embeds the boxes cut from the video")
    if link and video is None:
        raise ConfigError("--link joins tracklets that look alike: it needs --video and --model")
    config = TrackerConfig(**given(high_score=high_score, start_score=start_score, lost_seconds=lost_seconds))
    appearance = None if video is None or model is None else VideoAppearance(video, load_encoder(model))
    result = track_detection_file(detections, out, config, fps, appearance, link)
    print_table(
        f"tracked {detections}",
        ["item", "value"],
        [
            ["detections", str(result.detections)],
            ["frames", str(result.frames)],
            ["boxes written", str(result.boxes)],
            ["tracks", str(result.tracks)],
            ["boxes embedded", str(result.embedded)],
            ["out", str(out)],
        ],
    )


def register(app: typer.Typer) -> None:
    app.command("track")(track_command)
