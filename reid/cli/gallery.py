"""``reid enroll``, ``reid query`` and ``reid gallery info|list|remove|export|import|reindex``."""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from reid.cli.common import (
    CommandTyper,
    console,
    detector_option,
    err_console,
    handle_errors,
    live_display,
    make_progress,
    percent,
    print_skipped,
    print_table,
    printable,
    write_json,
)
from reid.cli.defaults import config_overrides, given, with_config_options, with_default
from reid.errors import ConfigError, DataError
from reid.evaluation.names import count, distance, frame_rate, timestamp
from reid.decision import check_far
from reid.detect.configs import NAMED_CONFIGS
from reid.detect.names import DEFAULT_DETECTORS
from reid.gallery.calibration import (
    DEFAULT_FAR,
    MAX_ITEMS,
    MIN_ADMITTED,
    GalleryCalibration,
    identities_needed,
    round_rate_up,
    sampled_pairs,
    smallest_far,
)
from reid.gallery.records import RECALL_QUERIES
from reid.gallery.spec import INDEX_KINDS, IndexSpec
from reid.paths import check_output_file
from reid.pipeline.configs import EVERY_FRAME, EnrolConfig, QueryConfig
from reid.track.config import TrackerConfig

if TYPE_CHECKING:
    from reid.pipeline import EnrolReport, FrameResult, QueryStats

MODEL_HELP = "Model folder (a path such as ./m or a/m), a bare name under models/, or a published Re-ID model by name (`reid models list`)."
GALLERY_HELP = "Gallery folder (a path such as ./g or a/g), or a bare name under galleries/."

# The sections of the help of enroll and query, each option by its key; the rest under "Options".
INDEX, SOURCE, DETECTION, NAMING, TRACKING, OUTPUT = "Index", "Source", "Detection", "Identification", "Tracking", "Output"
ENROL_PANELS: dict[str, tuple[str, ...]] = {DETECTION: ("detect", "detector", "no_face"), INDEX: ()}
QUERY_PANELS: dict[str, tuple[str, ...]] = {
    SOURCE: (),
    DETECTION: ("detect", "detector", "detect_scale", "min_height", "no_face"),
    NAMING: ("top_k", "threshold", "far", "score", "batch_size", "embed_every", "one_per_frame"),
    TRACKING: ("track", "high_score", "start_score", "lost_seconds", "iou", "min_boxes", "appearance"),
    OUTPUT: ("trail",),
}

# The index of a new gallery (reid enroll) or of a reindexed one (reid gallery reindex).
NLIST_OPTION = typer.Option(
    None, "--nlist", help="IVF / IVF-PQ lists (default: about sqrt(items)).", rich_help_panel=INDEX
)
NPROBE_OPTION = typer.Option(
    None, "--nprobe", help="IVF / IVF-PQ lists searched per query (default: nlist / 32).", rich_help_panel=INDEX
)
EF_SEARCH_OPTION = typer.Option(
    None, "--ef-search", help=f"HNSW search beam width (default: {IndexSpec.ef_search}).", rich_help_panel=INDEX
)
TRAIN_SIZE_OPTION = typer.Option(
    None,
    "--train-size",
    help="IVF / IVF-PQ: items the quantizers train on, sampled when there are more "
    "(default: 64 per list; IVF-PQ at least 65,536).",
    rich_help_panel=INDEX,
)
PQ_M_OPTION = typer.Option(
    None,
    "--pq-m",
    help="IVF-PQ sub-quantizers: bytes per item at 8 bits (default: dimension / 8).",
    rich_help_panel=INDEX,
)
PQ_BITS_OPTION = typer.Option(
    None, "--pq-bits", help=f"IVF-PQ bits per sub-quantizer (default: {IndexSpec.pq_bits}; GPUs need 8).", rich_help_panel=INDEX
)
REFINE_OPTION = typer.Option(
    None,
    "--refine",
    help="IVF-PQ: re-rank this many times the asked-for neighbours with the stored embeddings "
    f"(default: {IndexSpec.refine}; 0: codes only).",
    rich_help_panel=INDEX,
)
SHARD_SIZE_OPTION = typer.Option(
    None,
    "--shard-size",
    help="Items per index file; full shards are sealed and searched together (default: one).",
    rich_help_panel=INDEX,
)


def index_kind_option(required: bool) -> typer.models.OptionInfo:
    usage = "|".join(INDEX_KINDS)
    if required:
        return typer.Option(..., "--index", help=usage, rich_help_panel=INDEX)
    return typer.Option(None, "--index", help=f"Index of a new gallery: {usage} (default: {IndexSpec.kind}).", rich_help_panel=INDEX)


def spec_from_flags(index: str, **flags: int | None) -> IndexSpec:
    """The index flags as an IndexSpec; flags left unset keep the defaults."""
    return IndexSpec(kind=index, **{name: value for name, value in flags.items() if value is not None})


def optional_spec_from_flags(index: str | None, **flags: int | None) -> IndexSpec | None:
    """As :func:`spec_from_flags`, or None when no flag was given (other flags need ``--index``)."""
    if index is None:
        given = [name for name, value in flags.items() if value is not None]
        if given:
            raise ConfigError(f"--{given[0].replace('_', '-')} needs --index")
        return None
    return spec_from_flags(index, **flags)


# What a tracker counts as confident when --track-high-score is not given: the detector's
# confident_score (reid.pipeline.stream.tracker_for); None, for HOG and Haar, every detection.
TRACK_HIGH_SCORE_HELP = (
    "Detector score from which a detection may start a track; weaker ones only continue tracks (default: the "
    "detector's confident score for those that also give weaker boxes: "
    + ", ".join(f"{name} {config.min_score:g}" for name, config in NAMED_CONFIGS.items() if hasattr(config, "weak_score"))
    + "; with any other every detection may)."
)


def print_fallback_note(detector: str | None, kind: str | None) -> None:
    """When no ``--detector`` was given and ``kind``'s default detector cannot run here, say
    in one line on stderr which one runs instead and how to add the default."""
    from reid.detect import fallback_note

    note = fallback_note(kind) if detector is None and kind in DEFAULT_DETECTORS else None
    if note:
        err_console.print(note, soft_wrap=True)


# The enrolment's options are EnrolConfig's fields that carry them (reid.options).
@handle_errors
@with_config_options(EnrolConfig, panels=ENROL_PANELS)
def enroll(
    paths: list[str] = typer.Argument(
        ...,
        help="Images, folders of ROOT/<identity>/<image>, globs, or a labelled data set as other commands read it "
        "(market1501:PATH and the like: its gallery images, each under its identity number).",
    ),
    model: str = typer.Option(..., "--model", "-m", help=MODEL_HELP),
    gallery: str = typer.Option(..., "--gallery", "-g", help=GALLERY_HELP),
    identity: str | None = typer.Option(None, "--id", help="Enrol every image as this identity."),
    index: str | None = index_kind_option(required=False),
    train_size: int | None = TRAIN_SIZE_OPTION,
    pq_m: int | None = PQ_M_OPTION,
    pq_bits: int | None = PQ_BITS_OPTION,
    refine: int | None = REFINE_OPTION,
    nlist: int | None = NLIST_OPTION,
    nprobe: int | None = NPROBE_OPTION,
    shard_size: int | None = SHARD_SIZE_OPTION,
    json_out: Path | None = typer.Option(None, "--json", help="Also write the report as JSON here."),
    **options: Any,
) -> None:
    """Enrol images of known people into a gallery (created when new).

    Index flags describe a new gallery's index; for an existing gallery they must match it.
    """
    from reid.models import load_encoder
    from reid.pipeline import enrol_into, plan_enrolment

    spec = optional_spec_from_flags(
        index,
        train_size=train_size,
        pq_m=pq_m,
        pq_bits=pq_bits,
        refine=refine,
        nlist=nlist,
        nprobe=nprobe,
        shard_size=shard_size,
    )
    if json_out:
        check_output_file(json_out, "--json")
    config = EnrolConfig(**config_overrides(EnrolConfig, options))
    entries = plan_enrolment(paths, identity)
    print_fallback_note(config.detector, config.detect)
    encoder = load_encoder(model)
    with make_progress() as progress:
        task = progress.add_task("embedding to enrol", total=len(entries))
        report = enrol_into(gallery, encoder, entries, spec, config, on_progress=lambda n: progress.advance(task, n))
    if json_out:
        write_json(json_out, report.to_dict())
    problems = [(p, r) for p, r in report.skipped if not r.startswith("duplicate")]
    print_skipped(problems)
    print_skipped(report.several_subjects, "several found in")
    if report.per_identity:
        print_table("enrolled", ["identity", "added"], sorted(report.per_identity.items()))
    print_table(f"gallery {report.gallery}", ["", "count"], enrol_rows(report))
    failed = report.unreadable + report.no_detection
    if report.added == 0 and failed and not report.duplicates:
        path, reason = problems[0]
        raise DataError(f"{path}: {reason}; nothing enrolled ({failed} of {report.images} images unusable)")


def enrol_rows(report: EnrolReport) -> list[tuple[str, str]]:
    """The enrolment summary: the files given, then each part of them (not images; of the
    images, added or skipped and why), every count a part of the one above it; then the gallery."""
    return [
        ("files given", count(report.images + report.not_images)),
        ("  not images, skipped", count(report.not_images)),
        ("  images", count(report.images)),
        ("    added", count(report.added)),
        ("    duplicates, skipped", count(report.duplicates)),
        ("    of another identity, refused", count(report.other_identity)),
        ("    unreadable, skipped", count(report.unreadable)),
        ("    no detection, skipped", count(report.no_detection)),
        ("photos with several found (one enrolled)", count(len(report.several_subjects))),
        ("gallery items", count(report.gallery_items)),
        ("gallery identities", count(report.gallery_identities)),
        ("seconds", f"{report.seconds:.1f}"),
    ]


# The query's options are QueryConfig's and TrackerConfig's fields that carry them (reid.options);
# the tracker's confident score defaults to the detector's, which its help says.
@handle_errors
@with_config_options(
    QueryConfig, more=[(TrackerConfig, None, {"high_score": TRACK_HIGH_SCORE_HELP})], panels=QUERY_PANELS
)
def query(
    source: str = typer.Argument(
        ..., help="Image, folder or glob of crops, video file, camera index (0) or stream URL."
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help=with_default(MODEL_HELP, "the model the gallery records, where it is here")
    ),
    gallery: str = typer.Option(..., "--gallery", "-g", help=GALLERY_HELP),
    every: int | None = typer.Option(
        None, "--every", help=with_default("Keep one frame in N.", str(EVERY_FRAME)),
        rich_help_panel=SOURCE,
    ),
    max_frames: int | None = typer.Option(
        None, "--max-frames", help="Stop after N kept frames.", rich_help_panel=SOURCE
    ),
    fps: float | None = typer.Option(
        None,
        "--fps",
        help="Frames a second of the source, which turns the tracker's times in seconds into frames "
        "(default: what the video or camera reports).",
        rich_help_panel=SOURCE,
    ),
    jsonl: Path | None = typer.Option(
        None, "--jsonl", help="Write one JSON object per detection here.", rich_help_panel=OUTPUT
    ),
    save_video: Path | None = typer.Option(
        None, "--save-video", help="Write the frames with boxes and labels (.mp4, .avi).", rich_help_panel=OUTPUT
    ),
    save_crops: Path | None = typer.Option(
        None, "--save-crops", help="Save each crop under DIR/<identity>/.", rich_help_panel=OUTPUT
    ),
    tracks: Path | None = typer.Option(
        None,
        "--tracks",
        help="Write one JSON object per ended track here (videos, cameras, streams).",
        rich_help_panel=OUTPUT,
    ),
    mot: Path | None = typer.Option(
        None,
        "--mot",
        help="Write every tracked box here in MOTChallenge format (frame,id,x,y,w,h,score; frames from 1), "
        "for scoring against ground truth.",
        rich_help_panel=OUTPUT,
    ),
    json_out: Path | None = typer.Option(
        None, "--json", help="Also write the summary as JSON here.", rich_help_panel=OUTPUT
    ),
    **options: Any,
) -> None:
    """Find enrolled people in images, a video, a camera or a stream."""
    from reid.gallery import open_gallery
    from reid.models import load_encoder, recorded_model
    from reid.pipeline import QueryOutputs, QueryRun, check_outputs, open_source

    check_outputs(jsonl, save_video, save_crops, tracks, mot)
    if json_out:
        check_output_file(json_out, "--json")
    tracker = TrackerConfig(**config_overrides(TrackerConfig, options))
    config = QueryConfig(**config_overrides(QueryConfig, options), tracker=tracker)
    media = open_source(source, **given(every=every, max_frames=max_frames))
    if fps is not None:
        media = replace(media, fps=fps)
    # The gallery before the model: a wrong path is named before a published model is downloaded.
    with open_gallery(gallery) as store:
        if model is None:
            # The gallery refuses any model but its own, so its own is the one to use.
            model = recorded_model(store.meta.model_name, store.meta.model_fingerprint)
            if model is None:
                raise ConfigError(
                    f"{gallery}: give --model: the gallery was made with model {store.meta.model_name!r} "
                    f"(fingerprint {store.meta.model_fingerprint[:12]}), in no folder under models/ nor in the cache"
                )
            err_console.print(f"model {printable(model)}: the one gallery {printable(gallery)} records", soft_wrap=True)
        encoder = load_encoder(model)
        run = QueryRun(store, encoder, media, config)
        print_fallback_note(config.detector, run.detector.kind if run.detector is not None else None)
        fps = (media.fps or 10.0) / (media.every if media.fps else 1)
        interrupted = False
        gap = run.tracker.max_lost if run.tracker is not None else 0
        with QueryOutputs(
            jsonl, save_video, save_crops, fps, tracks, mot, config.tracker.min_boxes, gap, frame_step=media.every,
            trail=config.trail,
        ) as outputs:
            recent: deque[FrameResult] = deque(maxlen=8)
            with live_display(
                _live_view(recent, run.stats, media.expected_frames),
                plain=lambda: _status_line(run.stats, media.expected_frames),
            ) as live:
                try:
                    for result in run:
                        outputs.write(result)
                        recent.append(result)
                        live.update(_live_view(recent, run.stats, media.expected_frames))
                except KeyboardInterrupt:
                    interrupted = True
            outputs.write_tracks(run.finish_tracks())
    stats = run.stats
    if json_out:
        write_json(
            json_out,
            {"source": source, "threshold": run.threshold, "threshold_source": run.threshold_source, **stats.to_dict()},
        )
    _print_summary(stats, run.threshold, run.threshold_source)
    if run.threshold_note:
        console.print(printable(run.threshold_note), highlight=False, soft_wrap=True)
    print_skipped(stats.unreadable)
    print_skipped(stats.no_face)
    if interrupted:
        err_console.print("interrupted; outputs keep every frame answered so far")
        raise typer.Exit(130)
    if stats.frames == 0 and stats.unreadable:
        path, reason = stats.unreadable[0]
        raise DataError(f"{source}: no readable image ({len(stats.unreadable)} skipped; first {path}: {reason})")


def _live_view(recent: deque[FrameResult], stats: QueryStats, expected: int | None) -> Group:
    table = Table(title="latest frames", expand=False)
    for column in ("source", "frame", "people", "labels"):
        table.add_column(column)
    for result in recent:
        labels = ", ".join(f"{d.label} {distance(d.distance)}" for d in result.detections) or "-"
        name = printable(Path(result.source).name)
        table.add_row(name, str(result.frame), str(len(result.detections)), printable(labels))
    return Group(table, Text(_status_line(stats, expected)))


def _status_line(stats: QueryStats, expected: int | None) -> str:
    """The run so far in one line: frames, detections, named, unknown, tracks, rate."""
    total = f"/{count(expected)}" if expected else ""
    return (
        f"frames {count(stats.frames)}{total}  detections {count(stats.detections)}  named {count(stats.identified)}  "
        f"unknown {count(stats.unknown)}  tracks ended {count(stats.tracks)}  dropped {count(stats.dropped)}  "
        f"{frame_rate(stats.fps)}"
    )


def _print_summary(stats: QueryStats, threshold: float, threshold_source: str) -> None:
    rows = sorted(stats.per_identity.items(), key=lambda kv: (-kv[1], kv[0]))
    title = f"named under {distance(threshold)} (from {threshold_source})"
    print_table(title, ["identity", "detections"], rows + [("unknown", stats.unknown)])
    wall = max(stats.wall_seconds, 1e-9)
    stage_rows = [(name, f"{seconds:.2f}", f"{100.0 * seconds / wall:.1f}") for name, seconds in stats.stage_seconds.items()]
    # The stages run on their own threads at once, so their shares of the wall time can sum past 100.
    print_table(
        f"{count(stats.frames)} frames at {frame_rate(stats.fps)}; stages overlap",
        ["stage", "busy s", "% of wall"],
        stage_rows,
    )
    if stats.dropped:
        console.print(f"dropped {stats.dropped} frames of the live source that the pipeline could not keep up with")


gallery_app = CommandTyper(help="Inspect and maintain galleries.", no_args_is_help=True)


@gallery_app.command("info")
@handle_errors
def info(
    gallery: str = typer.Argument(..., help=GALLERY_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    check: bool = typer.Option(
        False,
        "--check",
        help="Verify every file's checksum, the whole database (SQLite integrity check, row types) and "
        "every item against the index; then measure index recall against exact search.",
    ),
    queries: int | None = typer.Option(
        None,
        "--queries",
        help=with_default("Stored items used as queries by --check.", str(RECALL_QUERIES)),
    ),
) -> None:
    """Items, identities, model, index; with --check, integrity and recall vs flat."""
    from reid.gallery import open_gallery

    with open_gallery(gallery) as store:
        summary = store.info().to_dict()
        if check:
            summary["check"] = store.check(**given(queries=queries)).to_dict()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    print_table(f"gallery {printable(summary['path'])}", ["field", "value"], _info_rows(summary))
    for line in _info_next(summary):
        console.print(line, highlight=False, soft_wrap=True)
    if check:
        recall = summary["check"]["recall"]
        print_table(
            f"check: {summary['check']['files']} files verified, database {summary['check']['database']}, "
            f"{summary['check']['items']} items of {summary['check']['identities']} identities match the index"
            + CHECKSUM_NOTES[summary["check"]["checksums"]],
            ["index", "queries", "Recall@1", f"Recall@{recall['k']}", "index q/s", "exact q/s"],
            [
                [
                    recall["index"],
                    recall["queries"],
                    percent(recall["recall_at_1"]),
                    percent(recall["recall_at_k"]),
                    f"{recall['index_qps']:.0f}",
                    f"{recall['exact_qps']:.0f}",
                ]
            ],
        )
        found = summary["check"]
        if found["same_image_other_identity"] or found["near_duplicates"]:
            console.print(
                f"of {found['scanned']} items scanned, {found['same_image_other_identity']} are the same image as an "
                f"item of another identity, {found['near_duplicates']} near duplicates within their identity",
                highlight=False,
                soft_wrap=True,
            )


# What a check's table says of row checksums: verified, not yet written (an older format),
# or kept by no such backend (reid.gallery.records.CheckReport).
CHECKSUM_NOTES = {
    True: "",
    False: " (older format: no row checksums until its next write)",
    None: " (this backend keeps no row checksums)",
}


# The index parameters that apply to each kind of index (reid.gallery.index.IndexSpec).
_IVF_PARAMS = ("nlist", "nprobe", "train_min", "train_size")
INDEX_PARAMS: dict[str, tuple[str, ...]] = {
    "flat": (),
    "hnsw": ("hnsw_m", "ef_construction", "ef_search"),
    "ivf": _IVF_PARAMS,
    "ivfpq": (*_IVF_PARAMS, "pq_m", "pq_bits", "refine"),
}
# Parameters whose 0 means "chosen from the gallery's size".
_AUTOMATIC = {"nlist", "nprobe", "train_size", "pq_m"}


def _index_text(summary: dict[str, Any]) -> str:
    """The index kind, what is built now when that differs, and the parameters of that kind only."""
    params = summary.get("index_params") or {}
    kind, built = summary["index"], summary["index_built"]
    text = kind if kind == built else f"{kind} (a {built} index until {params.get('train_min', 0):,} items)"
    shown = [
        f"{name} {'auto' if name in _AUTOMATIC and not params.get(name) else params.get(name)}"
        for name in INDEX_PARAMS.get(kind, ())
        if name in params
    ]
    if params.get("shard_size"):
        shown.append(f"{summary.get('shards', 1)} shards of up to {params['shard_size']:,} items")
    return text + (f": {', '.join(shown)}" if shown else "")


def _threshold_text(summary: dict[str, Any]) -> str:
    """Which threshold a query of this gallery answers at, as far as the gallery knows it
    (the model card, read by the query, may hold a newer one)."""
    calibration = summary.get("calibration")
    if calibration:
        return (
            f"{calibration['threshold']:.4f}, the gallery's own (FAR {calibration['far']:g} on "
            f"{calibration['sampled_identities']} identities, {calibration['impostor_pairs']:,} impostor pairs)"
        )
    if summary.get("threshold") is not None:
        return f"{summary['threshold']:.4f}, the model card's when the gallery was created"
    return "none"


def _info_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """``reid gallery info``'s table: only what applies to this gallery."""
    rows = [
        ("items", f"{summary['items']:,} of {summary['identities']:,} identities"),
        ("model", f"{printable(summary['model_name'])} ({summary['model_kind']}, fingerprint {summary['model_fingerprint']})"),
        ("embedding", f"{summary['dim']} dimensions"),
        ("index", _index_text(summary)),
        ("threshold", _threshold_text(summary)),
        ("files", f"{summary['segments']} segments, {summary['bytes']:,} bytes, generation {summary['generation']}"),
        ("created", timestamp(summary["created"])),
    ]
    if summary.get("search_device", "cpu") != "cpu":
        rows.insert(4, ("search device", summary["search_device"]))
    return rows


def _info_next(summary: dict[str, Any]) -> list[str]:
    """What to run next when the gallery lacks something a query wants (one line each)."""
    path = printable(summary["path"])
    if summary["identities"] == 0:
        return [f"next: enrol people with 'reid enroll IMAGES -m {printable(summary['model_name'])} -g {path}'"]
    if summary.get("calibration"):
        return []
    if summary["identities"] < 2:
        calibrate = "enrol a second identity, then 'reid gallery calibrate " + path + "'"
    else:
        calibrate = f"'reid gallery calibrate {path}' (its own threshold, from its {summary['identities']} identities)"
    if summary.get("threshold") is None:
        return [
            f"next: no threshold: run {calibrate}, or 'reid calibrate --model MODEL --data KIND:PATH', "
            "or give reid query --threshold"
        ]
    return [f"tip: queries answer at the model card's threshold; for the gallery's own run {calibrate}"]


@gallery_app.command("list")
@handle_errors
def list_items(
    gallery: str = typer.Argument(..., help=GALLERY_HELP),
    identity: str | None = typer.Option(None, "--id", help="List this identity's items instead."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Identities with their item counts, or one identity's items."""
    from reid.gallery import open_gallery

    with open_gallery(gallery) as store:
        if identity is not None:
            items = store.items(identity)
            if not items:
                raise ConfigError(f"{store.location}: no identity {identity!r} in the gallery")
            payload = [item.to_dict() for item in items]
            rows = [
                (i.id, i.source, i.camera or "", "" if i.frame is None else i.frame, list(i.box or ()), timestamp(i.enrolled))
                for i in items
            ]
            columns = ["id", "source", "camera", "frame", "box", "enrolled"]
        else:
            summaries = store.identities()
            payload = [
                {
                    "identity": s.identity,
                    "items": s.items,
                    "first_enrolled": s.first_enrolled,
                    "last_enrolled": s.last_enrolled,
                }
                for s in summaries
            ]
            rows = [(s.identity, count(s.items), timestamp(s.first_enrolled), timestamp(s.last_enrolled)) for s in summaries]
            columns = ["identity", "items", "first enrolled", "last enrolled"]
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
    else:
        print_table(f"gallery {store.location}", columns, rows)


@gallery_app.command("remove")
@handle_errors
def remove(
    gallery: str = typer.Argument(..., help=GALLERY_HELP),
    identity: str = typer.Option(..., "--id", help="Identity whose items are removed."),
) -> None:
    """Remove every item of one identity."""
    from reid.gallery import open_gallery

    with open_gallery(gallery) as store:
        removed = store.remove_identity(identity)
        left, identities = len(store), store.identity_count
    console.print(
        f"removed {removed} items of {printable(repr(identity))} (verified: none left in the database or the index); "
        f"{left} items of {identities} identities left",
        highlight=False,
        soft_wrap=True,
    )


@gallery_app.command("export")
@handle_errors
def export(
    gallery: str = typer.Argument(..., help=GALLERY_HELP),
    out: Path = typer.Argument(..., help=".npz (embeddings and items) or .jsonl (items only)."),
) -> None:
    """Export items (and embeddings) for use elsewhere."""
    from reid.gallery import open_gallery

    with open_gallery(gallery) as store:
        count = store.export(out)
    console.print(f"exported {count} items to {printable(out)}", highlight=False, soft_wrap=True)


@gallery_app.command("import")
@handle_errors
def import_items(
    source: Path = typer.Argument(..., help="A .npz written by reid gallery export (from any backend)."),
    gallery: str = typer.Argument(..., help=f"The new gallery: {GALLERY_HELP}"),
    index: str | None = typer.Option(
        None, "--index", help=f"Its index: {'|'.join(INDEX_KINDS)} (default: the exported gallery's).", rich_help_panel=INDEX
    ),
    ef_search: int | None = EF_SEARCH_OPTION,
    nprobe: int | None = NPROBE_OPTION,
    nlist: int | None = NLIST_OPTION,
) -> None:
    """Make a new gallery from an export: every item, embedding and enrol time, the model and
    the calibration, in one atomic write; move a gallery between a folder and a database this way."""
    from reid.gallery.transfer import import_gallery

    spec = optional_spec_from_flags(index, ef_search=ef_search, nprobe=nprobe, nlist=nlist)
    with import_gallery(source, gallery, spec) as store:
        count, identities, location = len(store), store.identity_count, store.location
    console.print(
        f"imported {count} items of {identities} identities from {printable(source)} into {printable(location)}",
        highlight=False,
        soft_wrap=True,
    )


@gallery_app.command("reindex")
@handle_errors
def reindex(
    gallery: str = typer.Argument(..., help=GALLERY_HELP),
    index: str = index_kind_option(required=True),
    ef_search: int | None = EF_SEARCH_OPTION,
    nprobe: int | None = NPROBE_OPTION,
    nlist: int | None = NLIST_OPTION,
    train_size: int | None = TRAIN_SIZE_OPTION,
    pq_m: int | None = PQ_M_OPTION,
    pq_bits: int | None = PQ_BITS_OPTION,
    refine: int | None = REFINE_OPTION,
    shard_size: int | None = SHARD_SIZE_OPTION,
) -> None:
    """Rebuild the index as another kind (flat, hnsw, ivf, ivfpq) or sharding, keeping every item."""
    from reid.gallery import open_gallery

    spec = spec_from_flags(
        index,
        ef_search=ef_search,
        nprobe=nprobe,
        nlist=nlist,
        train_size=train_size,
        pq_m=pq_m,
        pq_bits=pq_bits,
        refine=refine,
        shard_size=shard_size,
    )
    with open_gallery(gallery) as store:
        store.reindex(spec)
        built, shards = store.index_kind, store.info().shards
        recall = store.recall()
    console.print(
        f"{printable(store.location)}: index is now {built} ({len(store)} items"
        f"{f' in {shards} shards' if shards > 1 else ''}); "
        f"Recall@1 {percent(recall.recall_at_1)} against exact search",
        highlight=False,
        soft_wrap=True,
    )


@gallery_app.command("calibrate")
@handle_errors
def calibrate(
    gallery: str = typer.Argument(..., help=GALLERY_HELP),
    far: float | None = typer.Option(
        None,
        "--far",
        help=with_default(
            "Target false-accept rate: the share of pairs of two different enrolled identities the threshold may "
            "accept. A stranger meets every identity: with N identities, about N times this names a stranger.",
            f"{DEFAULT_FAR:g}",
        ),
    ),
    max_items: int | None = typer.Option(
        None,
        "--max-items",
        help=with_default(
            "Items sampled (evenly over identities); every pair of two different identities among them is measured.",
            str(MAX_ITEMS),
        ),
    ),
    scene: str | None = typer.Option(
        None,
        "--scene",
        help="A video of the camera the gallery is queried on: people tracked in one frame of it are different "
        "people, and the threshold is the tighter of the identities' and those pairs' at the same rate "
        "(needs --model).",
    ),
    frames: str | None = typer.Option(
        None,
        "--frames",
        help="With --scene: frames A:B of the video (from A up to but not including B, numbered from 0 as "
        "reid query's --jsonl numbers them). Default: every frame.",
    ),
    model: str | None = typer.Option(None, "--model", "-m", help=f"With --scene: {MODEL_HELP}"),
    detector: str | None = detector_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Store the gallery's own threshold (Euclidean distance between unit embeddings), chosen on the
    distances between its enrolled identities (and, with --scene, between people seen together by the
    camera) for a target false-accept rate; queries then answer at it."""
    from reid.gallery import open_gallery
    from reid.models import load_encoder
    from reid.pipeline import calibrate_on_scene, parse_frames

    check_far(far)
    if scene is None and (frames is not None or model is not None or detector is not None):
        raise ConfigError("--frames, --model and --detector describe a --scene video; give --scene VIDEO")
    if scene is not None and model is None:
        raise ConfigError("--scene needs --model: the scene's people are embedded with the gallery's model")
    if frames is not None:
        parse_frames(frames)
    with open_gallery(gallery) as store:
        default_far, asked = DEFAULT_FAR, far
        if far is None:
            # Without --far: the default rate, or the smallest the gallery's pairs resolve when
            # they are too few for it (said below).
            least = smallest_far(sampled_pairs([s.items for s in store.identities()], max_items or MAX_ITEMS))
            far = default_far if least is None or least <= default_far else round_rate_up(least)
        options = given(far=far, max_items=max_items)
        if scene is not None and model is not None:
            scene_config = QueryConfig(**given(detector=detector))
            calibration = calibrate_on_scene(store, load_encoder(model), scene, frames, scene_config, **options)
        else:
            calibration = store.calibrate(**options)
        folder = store.location
    needed = identities_needed(calibration.far)
    if asked is None and calibration.far != default_far:
        err_console.print(
            f"note: {calibration.impostor_pairs:,} impostor pairs cannot resolve the default FAR {default_far:g} (it "
            f"needs {math.ceil(MIN_ADMITTED / default_far):,}); calibrated at FAR {calibration.far:g}, the smallest "
            f"they resolve; enrol more identities for a smaller rate",
            highlight=False,
            soft_wrap=True,
        )
    if as_json:
        typer.echo(json.dumps({"gallery": str(folder), **calibration.to_dict(), "identities_needed": needed}, indent=2))
        return
    print_table(
        f"gallery {folder}: threshold at FAR {calibration.far:g} (Euclidean distance between unit embeddings)",
        ["field", "value"],
        [
            ("threshold", f"{calibration.threshold:.4f}"),
            ("identities", f"{calibration.identities} ({calibration.sampled_identities} sampled)"),
            ("items", f"{calibration.items} ({calibration.sampled_items} sampled)"),
            ("impostor pairs", f"{calibration.impostor_pairs:,} (pairs of items of two different identities)"),
            (_within(calibration), f"{calibration.admitted:,}"),
            *_scene_rows(calibration),
        ],
    )
    if not calibration.enough:
        console.print(
            f"note: {calibration.identity_pairs:,} pairs of identities expect fewer than {MIN_ADMITTED} within the "
            f"threshold; at FAR {calibration.far:g} the estimate wants {needed} identities (stored, and used since asked for)",
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"stored in {printable(folder)}; queries answer at it unless given --threshold or --far", highlight=False)


def _within(calibration: GalleryCalibration) -> str:
    return "within the threshold" if calibration.scene is None else "within the identities' threshold"


def _scene_rows(calibration: GalleryCalibration) -> list[tuple[str, str]]:
    """The table rows of a calibration's scene part (none without one)."""
    part = calibration.scene
    if part is None:
        return []
    tighter = "the scene's" if part.threshold < calibration.identities_threshold else "the identities'"
    return [
        ("identities' threshold", f"{calibration.identities_threshold:.4f}"),
        ("scene", f"{printable(part.source)} frames {part.frames}: {part.tracks} tracks"),
        ("scene impostor pairs", f"{part.pairs:,} (two tracks seen in one frame), {part.admitted} within"),
        ("scene's threshold", f"{part.threshold:.4f}"),
        ("decided at", f"{tighter} threshold, the tighter"),
    ]


def register(app: typer.Typer) -> None:
    app.command("enroll")(enroll)
    app.command("query")(query)
    app.add_typer(gallery_app, name="gallery")
