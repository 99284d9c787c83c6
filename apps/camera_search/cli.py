"""``python -m apps.camera_search``: find the same people across camera videos.

The options are the fields of :class:`~apps.camera_search.config.SearchConfig`, of reid's
tracker settings and of the HOG detector's (:func:`reid.cli.with_config_options`): their
defaults, help and ranges are stated there once.  The engine (PyTorch, OpenCV, FAISS) is
imported when the command runs, so help answers at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from reid import ReidError, printable
from reid.cli import (
    OneLineCommand, config_overrides, distance, handle_errors, in_range, make_progress, percent, print_table,
    with_config_options,
)  # fmt: skip
from reid.detect import PersonDetectorConfig
from reid.track import TrackerConfig

from apps.camera_search.config import SearchConfig

if TYPE_CHECKING:
    from apps.camera_search.search import SearchResult

# Markup is off: file names and labels are printed as they are, never interpreted.
console = Console(markup=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
DEMO_MODEL = Path("models/demo")
DEMO_FRAMES = 60
# The demo's drawn figures are small for HOG's window; a finer stride finds more of them.
DEMO_WIN_STRIDE = 4
# The tracker's and the HOG detector's settings the search takes from the command line.
TRACKER_KEYS = ("iou", "lost_seconds", "appearance", "min_boxes")
DETECTOR_KEYS = ("scale", "win_stride")
DETECTOR_HELPS = {
    "win_stride": "HOG window stride in pixels: smaller finds more "
    f"(default: {PersonDetectorConfig.win_stride}; {DEMO_WIN_STRIDE} with --demo)."
}


def _print_tables(result: SearchResult) -> None:
    rows = []
    for run in result.cameras:
        fps = run.frames / run.wall_seconds if run.wall_seconds > 0 else 0.0
        rows.append([run.name, run.source, run.frames, run.detections, len(run.tracks), f"{fps:.1f}"])
    print_table("cameras", ["camera", "source", "frames", "detections", "tracks", "frames/s"], rows)
    seen: dict[str, list[str]] = {}
    for event in result.events:
        if event.identity is not None:
            seen.setdefault(event.identity, []).append(f"cam{event.camera}#{event.track}")
    print_table(
        f"identities (threshold {distance(result.threshold)})",
        ["identity", "cameras", "tracks"],
        [[identity, ", ".join(sorted({t.split("#")[0] for t in tracks})), " ".join(tracks)] for identity, tracks in seen.items()],
    )
    unknown = sum(e.identity is None for e in result.events)
    if unknown:
        console.print(f"{unknown} searched tracks matched nobody within the threshold", highlight=False)


@app.command(cls=OneLineCommand)
@handle_errors
@with_config_options(
    SearchConfig,
    more=[(TrackerConfig, TRACKER_KEYS, None), (PersonDetectorConfig, DETECTOR_KEYS, DETECTOR_HELPS)],
    checked_first=True,
)
def main(
    videos: list[str] = typer.Argument(None, help="One video per camera (camera 0 first); or a camera index."),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Person model: a folder, a name under models/, an .onnx file, or a published Re-ID model by name (`reid models list`)."
    ),
    video_format: str = typer.Option("avi", "--video-format", help="Annotated videos as avi (MJPG) or mp4 (mp4v)."),
    demo: bool = typer.Option(False, "--demo", help="Generate two camera videos of synthetic people and search them."),
    demo_frames: int = typer.Option(
        DEMO_FRAMES, "--demo-frames", callback=in_range("demo_frames"), help="Frames per generated demo video."
    ),
    **options: Any,
) -> None:
    """Detect and track people in each camera, embed every track, and name the tracks of the
    other cameras after the reference camera's tracks (or after the people of --gallery)."""
    from reid.detect import fallback_note
    from reid.models import load_encoder, stand_in_model
    from reid.pipeline import open_source

    from apps.camera_search.demo import demo_threshold, score_demo, write_demo_videos
    from apps.camera_search.outputs import VIDEO_FORMATS, write_outputs
    from apps.camera_search.search import run_search

    suffix = f".{video_format.lower().lstrip('.')}"
    if suffix not in VIDEO_FORMATS:
        raise ReidError(f"--video-format {video_format!r}: choose avi or mp4")
    if options.get("gallery") is not None and options.get("reference_camera") is not None:
        raise ReidError("give --gallery (match every camera against it) or --reference-camera, not both")
    search = config_overrides(SearchConfig, options)
    out: Path = search["out"]
    scene = None
    if demo:
        if videos:
            raise ReidError("--demo generates its own videos; give no VIDEO arguments with it")
        scene = write_demo_videos(out / "demo", frames=demo_frames)
        videos = [str(v) for v in scene.videos]
        console.print(f"wrote demo videos {', '.join(printable(v) for v in videos)}")
        if model is None:
            if DEMO_MODEL.is_dir():
                model = str(DEMO_MODEL)
            else:
                model = str(stand_in_model(out / "demo" / "model", "person", name="untrained-stand-in"))
                console.print(
                    f"no --model and no {printable(DEMO_MODEL)} (made by 'reid demo'): using an untrained stand-in "
                    "encoder, so names are rough guesses"
                )
        # The drawn figures of --demo are HOG's to find (SSDLite sees none of them).
        search.setdefault("person_detector", "hog")
    if model is None:
        raise ReidError("give --model (a person model folder, e.g. models/demo from 'reid demo')")
    if not videos:
        raise ReidError("give one video per camera (or --demo)")
    for video in videos:
        open_source(video)  # a missing video is named before the model is loaded or a count is checked
    encoder = load_encoder(model)
    if scene is not None and search.get("threshold") is None and encoder.threshold is None:
        choice = demo_threshold(encoder, scene)
        pairs = choice.num_genuine + choice.num_impostor
        search["threshold"] = choice.threshold
        search["threshold_source"] = (
            f"best accuracy on {pairs} cross-camera pairs of held-out synthetic people (accuracy {percent(choice.accuracy)})"
        )
    hog = {"win_stride": DEMO_WIN_STRIDE} if demo else {}
    config = SearchConfig(
        videos=list(videos),
        detector=PersonDetectorConfig(**(hog | config_overrides(PersonDetectorConfig, options))),
        tracker=TrackerConfig(**config_overrides(TrackerConfig, options)),
        **search,
    )
    # The note on the detector follows the checks of every input: it is no answer to a wrong one.
    note = fallback_note("person") if config.person_detector is None else None
    if note is not None:
        console.print(note)
    with make_progress() as progress:
        tasks = {i: progress.add_task(f"cam{i}", total=None) for i in range(len(config.videos))}
        result = run_search(
            encoder, config, lambda cam, done, total: progress.update(tasks[cam], completed=done, total=total)
        )
    files = write_outputs(result, config, model, suffix)
    _print_tables(result)
    if scene is not None:
        score = score_demo(result, scene)
        console.print(
            f"demo truth: of {score.searched} tracks searched, {score.correct} named after the same person, "
            f"{score.wrong} after another, {score.unknown} left unknown"
        )
    console.print(f"wrote {printable(files.events_jsonl)}, {printable(files.events_sqlite)}, {printable(files.report)}")
    console.print(f"wrote {', '.join(printable(v) for v in files.videos)}")
    if result.interrupted:
        err_console.print("interrupted: outputs cover the frames read so far")
        raise typer.Exit(130)
