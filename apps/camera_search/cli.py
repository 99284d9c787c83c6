"""``python -m apps.camera_search``: find the same people across camera videos."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from reid import THRESHOLD_HELP, ReidError, printable
from reid.data import quiet_opencv
from reid.detect import PersonDetectorConfig, detector_names, fallback_note
from reid.models import load_encoder, stand_in_model
from reid.track import TrackerConfig
from reid.cli import OneLineCommand, error_line, in_range, make_progress, option_flags, print_table

from apps.camera_search.demo import demo_threshold, score_demo, write_demo_videos
from apps.camera_search.outputs import VIDEO_FORMATS, write_outputs
from apps.camera_search.search import SearchConfig, SearchResult, run_search

# Markup is off: file names and labels are printed as they are, never interpreted.
console = Console(markup=False, highlight=False)
err_console = Console(stderr=True, markup=False, highlight=False)
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
DEMO_MODEL = Path("models/demo")
# The demo's drawn figures are small for HOG's window; a finer stride finds more of them.
DEMO_WIN_STRIDE = 4


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
        f"identities (threshold {result.threshold:.4f})",
        ["identity", "cameras", "tracks"],
        [[identity, ", ".join(sorted({t.split("#")[0] for t in tracks})), " ".join(tracks)] for identity, tracks in seen.items()],
    )
    unknown = sum(e.identity is None for e in result.events)
    if unknown:
        console.print(f"{unknown} searched tracks matched nobody within the threshold", highlight=False)


@app.command(cls=OneLineCommand)
def main(
    videos: list[str] = typer.Argument(None, help="One video per camera (camera 0 first); or a camera index."),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Person model: a folder, a name under models/, an .onnx file, or a published Re-ID model by name (`reid models list`)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for events, videos and the report."),
    gallery: Path | None = typer.Option(
        None, "--gallery", "-g", help="Match every track against this existing gallery instead of a reference camera."
    ),
    reference_camera: int | None = typer.Option(
        None, "--reference-camera", callback=in_range("reference_camera", SearchConfig),
        help=f"Camera whose tracks are enrolled as the known people (default {SearchConfig.reference_camera}).",
    ),
    threshold: float | None = typer.Option(None, "--threshold", help=f"{THRESHOLD_HELP} Default: the model card's."),
    every: int = typer.Option(SearchConfig.every, "--every", callback=in_range("every", SearchConfig), help="Keep one frame in N."),
    max_frames: int | None = typer.Option(None, "--max-frames", callback=in_range("max_frames", SearchConfig), help="Stop each camera after N kept frames."),
    top_k: int = typer.Option(SearchConfig.top_k, "--top-k", callback=in_range("top_k", SearchConfig), help="Identities fetched per track."),
    detector: str | None = typer.Option(
        None, "--detector", help=f"Person detector: {', '.join(detector_names('person'))} (default: reid's person default; hog with --demo)."
    ),
    detect_scale: float = typer.Option(
        PersonDetectorConfig.scale, "--detect-scale", callback=in_range("detect_scale"),
        help="HOG: scale frames by this before detection (< 1: faster, misses small people).",
    ),
    win_stride: int | None = typer.Option(
        None, "--win-stride", callback=in_range("win_stride"),
        help=f"HOG window stride in pixels (default {PersonDetectorConfig.win_stride}; {DEMO_WIN_STRIDE} in --demo): "
        "smaller finds more.",
    ),
    embed_every: int = typer.Option(
        SearchConfig.embed_every, "--embed-every", callback=in_range("embed_every", SearchConfig),
        help="Embed a track's crop in one of N of its frames (1: every crop, before linking, so tracks link by "
        "appearance too; above 1: tracks link on boxes alone).",
    ),
    iou: float = typer.Option(TrackerConfig.iou, "--iou", callback=in_range("iou"), help="Least box overlap that continues a track."),
    lost_seconds: float = typer.Option(
        TrackerConfig.lost_seconds, "--lost-seconds", callback=in_range("lost_seconds"), help="Seconds a track may go unseen before it ends."
    ),
    appearance: float | None = typer.Option(
        None, "--appearance", help="Also require this embedding distance or less to continue a track (off by default)."
    ),
    min_boxes: int = typer.Option(
        TrackerConfig.min_boxes, "--min-boxes", callback=in_range("min_boxes"), help="Drop tracks with fewer boxes (detector noise)."
    ),
    one_per_frame: bool = typer.Option(
        SearchConfig.one_per_frame, "--one-per-frame/--no-one-per-frame",
        help="Never name two tracks of one camera that share a frame the same identity (a person is in one place "
        "at a time); --no-one-per-frame names each track alone.",
    ),
    video_format: str = typer.Option("avi", "--video-format", help="Annotated videos as avi (MJPG) or mp4 (mp4v)."),
    demo: bool = typer.Option(False, "--demo", help="Generate two camera videos of synthetic people and search them."),
    demo_frames: int = typer.Option(60, "--demo-frames", callback=in_range("demo_frames"), help="Frames per generated demo video."),
) -> None:
    """Detect and track people in each camera, embed every track, and name the tracks of the
    other cameras after the reference camera's tracks (or after the people of --gallery)."""
    quiet_opencv()
    try:
        suffix = f".{video_format.lower().lstrip('.')}"
        if suffix not in VIDEO_FORMATS:
            raise ReidError(f"--video-format {video_format!r}: choose avi or mp4")
        if gallery is not None and reference_camera is not None:
            raise ReidError("give --gallery (match every camera against it) or --reference-camera, not both")
        note = fallback_note("person") if detector is None and not demo else None
        if note is not None:
            console.print(note, highlight=False, markup=False)
        scene = None
        threshold_source = None
        if demo:
            if videos:
                raise ReidError("--demo generates its own videos; give no VIDEO arguments with it")
            scene = write_demo_videos(out / "demo", frames=demo_frames)
            videos = [str(v) for v in scene.videos]
            console.print(f"wrote demo videos {', '.join(printable(v) for v in videos)}", highlight=False)
            if model is None:
                if DEMO_MODEL.is_dir():
                    model = str(DEMO_MODEL)
                else:
                    model = str(stand_in_model(out / "demo" / "model", "person", name="untrained-stand-in"))
                    console.print(
                        f"no --model and no {printable(DEMO_MODEL)} (made by 'reid demo'): using an untrained stand-in "
                        "encoder, so names are rough guesses",
                        highlight=False,
                    )
        if model is None:
            raise ReidError("give --model (a person model folder, e.g. models/demo from 'reid demo')")
        if not videos:
            raise ReidError("give one video per camera (or --demo)")
        encoder = load_encoder(model)
        if scene is not None and threshold is None and encoder.threshold is None:
            choice = demo_threshold(encoder, scene)
            threshold = choice.threshold
            pairs = choice.num_genuine + choice.num_impostor
            threshold_source = (
                f"best accuracy on {pairs} cross-camera pairs of held-out synthetic people "
                f"(accuracy {choice.accuracy:.3f})"
            )
        config = SearchConfig(
            videos=list(videos),
            out=out,
            gallery=gallery,
            reference_camera=reference_camera or 0,
            threshold=threshold,
            threshold_source=threshold_source,
            every=every,
            max_frames=max_frames,
            top_k=top_k,
            embed_every=embed_every,
            detector=PersonDetectorConfig(
                scale=detect_scale, win_stride=win_stride or (DEMO_WIN_STRIDE if demo else PersonDetectorConfig.win_stride)
            ),
            # The drawn figures of --demo are HOG's to find (SSDLite sees none of them).
            person_detector=detector or ("hog" if demo else None),
            tracker=TrackerConfig(iou=iou, lost_seconds=lost_seconds, appearance=appearance, min_boxes=min_boxes),
            one_per_frame=one_per_frame,
        )
        with make_progress() as progress:
            tasks = {i: progress.add_task(f"cam{i}", total=None) for i in range(len(config.videos))}
            result = run_search(
                encoder, config, lambda cam, done, total: progress.update(tasks[cam], completed=done, total=total)
            )
        files = write_outputs(result, config, model, suffix)
    except (ReidError, OSError) as exc:  # an OS error names its file in one line too
        line = error_line(exc, option_flags(main)) if isinstance(exc, ReidError) else str(exc)
        err_console.print(Text.assemble(("error:", "bold red"), " ", printable(line)), soft_wrap=True)
        raise typer.Exit(1) from None
    _print_tables(result)
    if scene is not None:
        score = score_demo(result, scene)
        console.print(
            f"demo truth: of {score.searched} tracks searched, {score.correct} named after the same person, "
            f"{score.wrong} after another, {score.unknown} left unknown",
            highlight=False,
        )
    console.print(f"wrote {printable(files.events_jsonl)}, {printable(files.events_sqlite)}, {printable(files.report)}", highlight=False)
    console.print(f"wrote {', '.join(printable(v) for v in files.videos)}", highlight=False)
    if result.interrupted:
        err_console.print("interrupted: outputs cover the frames read so far")
        raise typer.Exit(130)
