"""What a camera search writes: thumbnails, events as JSON lines and SQLite, one annotated
video per camera, a static HTML report and a JSON summary."""

from __future__ import annotations

import html
import json
import os
import shutil
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from reid import ConfigError, DataError, write_bytes_atomic
from reid.cli import distance
from reid.pipeline import Label, VideoWriter, draw_labels, make_label, open_source

from apps.camera_search.search import CameraRun, SearchConfig, SearchResult, TrackEvent

# The annotated videos' formats (suffix picks the codec; see reid.pipeline.FOURCC).
VIDEO_FORMATS = (".avi", ".mp4")
EVENT_COLUMNS = (
    ("camera", "INTEGER NOT NULL"),
    ("source", "TEXT NOT NULL"),
    ("track", "INTEGER NOT NULL"),
    ("start", "REAL"),
    ("end", "REAL"),
    ("first_frame", "INTEGER NOT NULL"),
    ("last_frame", "INTEGER NOT NULL"),
    ("boxes", "INTEGER NOT NULL"),
    ("identity", "TEXT"),
    ("distance", "REAL"),
    ("nearest", "TEXT"),
    ("role", "TEXT NOT NULL"),
    ("thumbnail", "TEXT NOT NULL"),
)


@dataclass
class OutputFiles:
    events_jsonl: Path
    events_sqlite: Path
    report: Path
    summary: Path
    videos: list[Path]
    thumbnails: Path


def _write_jpeg(path: Path, rgb: np.ndarray) -> None:
    ok, payload = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 90])
    if not ok:
        raise DataError(f"{path}: cannot encode the thumbnail")
    path.write_bytes(payload.tobytes())


def write_thumbnails(result: SearchResult, folder: Path, out: Path) -> None:
    """One JPEG per track (its largest crop); each event gets its path relative to ``out``.

    The folder is emptied first so that a rerun with fewer tracks leaves no stale pictures.
    """
    if folder.is_dir():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    tracks = {(run.camera, t.id): t for run in result.cameras for t in run.tracks}
    for event in result.events:
        track = tracks[(event.camera, event.track)]
        if track.thumbnail is None or not track.thumbnail.size:
            continue
        path = folder / f"cam{event.camera}-{event.track:03d}.jpg"
        _write_jpeg(path, track.thumbnail)
        event.thumbnail = path.relative_to(out).as_posix()


def write_events_jsonl(events: list[TrackEvent], path: Path) -> None:
    write_bytes_atomic(path, "".join(json.dumps(event.to_dict()) + "\n" for event in events).encode("utf-8"))


def write_events_sqlite(result: SearchResult, path: Path) -> None:
    """Table ``events`` (the JSON lines, column for key) and ``boxes`` (every box of every track)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    # "end" is an SQL keyword, so every column name is quoted.
    columns = ", ".join(f'"{name}" {kind}' for name, kind in EVENT_COLUMNS)
    names = [name for name, _ in EVENT_COLUMNS]
    quoted = ", ".join(f'"{name}"' for name in names)
    db = sqlite3.connect(tmp)
    try:
        with db:
            db.execute(f"CREATE TABLE events ({columns}, PRIMARY KEY (camera, track))")
            db.execute(
                "CREATE TABLE boxes (camera INTEGER NOT NULL, track INTEGER NOT NULL, frame INTEGER NOT NULL, "
                "time REAL, x INTEGER, y INTEGER, w INTEGER, h INTEGER, score REAL)"
            )
            db.executemany(
                f"INSERT INTO events ({quoted}) VALUES ({', '.join('?' for _ in names)})",
                [tuple(event.to_dict()[n] for n in names) for event in result.events],
            )
            db.executemany(
                "INSERT INTO boxes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (run.camera, track.id, o.frame, o.time, *o.box, round(o.score, 4))
                    for run in result.cameras
                    for track in run.tracks
                    for o in track.observations
                ],
            )
    finally:
        db.close()
    os.replace(tmp, path)


def _label(event: TrackEvent, box: tuple[int, int, int, int]) -> Label:
    """A reference track names itself (no distance); a searched one shows its answer."""
    distance = None if event.role == "reference" else event.distance
    return make_label(box, event.track, event.identity, distance)


def write_annotated_video(run: CameraRun, events: list[TrackEvent], config: SearchConfig, path: Path) -> int:
    """Decode the camera's kept frames again and draw every kept track's box and answer.

    Answers exist only once every camera is tracked and matched, so the frames are read a
    second time rather than held in memory; decoding is cheap next to detection.
    Returns the number of frames written (the frames the search processed).
    """
    if path.suffix.lower() not in VIDEO_FORMATS:
        raise ConfigError(f"{path}: annotated videos must end in {', '.join(VIDEO_FORMATS)}")
    answers = {e.track: e for e in events if e.camera == run.camera}
    per_frame: dict[int, list[Label]] = defaultdict(list)
    for track in run.tracks:
        for o in track.observations:
            per_frame[o.frame].append(_label(answers[track.id], o.box))
    fps = (run.fps or 10.0 * config.every) / config.every
    source = open_source(run.source, every=config.every, max_frames=run.frames)
    writer = VideoWriter(path, fps)
    frames = source.frames()
    try:
        for frame in frames:
            canvas = cv2.cvtColor(frame.image, cv2.COLOR_RGB2BGR)
            draw_labels(canvas, per_frame.get(frame.index, []))
            writer.write(canvas)
    finally:
        frames.close()
        writer.close()
    return writer.frames


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f} s"


def _sighting(event: TrackEvent) -> str:
    caption = f"cam{event.camera} #{event.track}<br>{_seconds(event.start)} – {_seconds(event.end)}"
    if event.role == "reference":
        caption += "<br>reference"
    elif event.distance is not None:
        caption += f"<br>d = {distance(event.distance)}"
    image = f'<img src="{html.escape(event.thumbnail)}" alt="">' if event.thumbnail else ""
    return f'<figure class="sighting">{image}<figcaption>{caption}</figcaption></figure>'


def _where_when(events: list[TrackEvent]) -> str:
    rows = []
    for event in events:
        rows.append(
            f"cam{event.camera} ({html.escape(Path(event.source).name)}): "
            f"{_seconds(event.start)} – {_seconds(event.end)}, frames {event.first_frame}–{event.last_frame}"
        )
    return "<br>".join(rows)


STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; width: 100%; margin-bottom: 2em; }
th, td { border: 1px solid #ccc; padding: 0.4em; vertical-align: top; text-align: left; }
th { background: #f0f0f0; }
figure.sighting { display: inline-block; margin: 0.2em; text-align: center; font-size: 0.8em; }
figure.sighting img { height: 128px; display: block; margin: auto; }
.meta { color: #555; }
"""


def write_report(result: SearchResult, config: SearchConfig, model: str, path: Path) -> None:
    """Static HTML: one row per identity (thumbnails, cameras, times), then the unknown tracks."""
    by_identity: dict[str, list[TrackEvent]] = defaultdict(list)
    unknown: list[TrackEvent] = []
    for event in result.events:
        if event.identity is None:
            unknown.append(event)
        else:
            by_identity[event.identity].append(event)
    rows = []
    for identity in sorted(by_identity, key=lambda name: min((e.start or 0.0, e.camera) for e in by_identity[name])):
        events = sorted(by_identity[identity], key=lambda e: (e.camera, e.first_frame))
        cameras = sorted({e.camera for e in events})
        rows.append(
            f'<tr class="identity" data-identity="{html.escape(identity)}">'
            f"<td><b>{html.escape(identity)}</b></td>"
            f"<td>{''.join(_sighting(e) for e in events)}</td>"
            f"<td>{', '.join(f'cam{c}' for c in cameras)}</td>"
            f"<td>{_where_when(events)}</td></tr>"
        )
    unknown_rows = [
        f'<tr class="unknown"><td>{_sighting(e)}</td><td>{_where_when([e])}</td>'
        f"<td>{html.escape(e.nearest or '–')}</td></tr>"
        for e in sorted(unknown, key=lambda e: (e.camera, e.first_frame))
    ]
    cameras = "".join(
        f"<li>cam{run.camera}: {html.escape(run.source)} — {run.frames} frames, {len(run.tracks)} tracks</li>"
        for run in result.cameras
    )
    how = (
        f"tracks of cam{config.reference_camera} enrolled as identities; other cameras matched against them"
        if result.mode == "reference"
        else f"every track matched against gallery {html.escape(str(result.gallery))}"
    )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Camera search report</title><style>{STYLE}</style></head>
<body>
<h1>Camera search</h1>
<p class="meta">model {html.escape(model)}; {how}; a track is named when its nearest identity is at most
{distance(result.threshold)} away (Euclidean distance between L2-normalized embeddings; threshold from
{html.escape(result.threshold_source)}).</p>
<ul class="meta">{cameras}</ul>
<h2>Identities ({len(rows)})</h2>
<table>
<thead><tr><th>identity</th><th>sightings</th><th>cameras</th><th>where and when</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody>
</table>
<h2>Not identified ({len(unknown_rows)})</h2>
<table>
<thead><tr><th>track</th><th>where and when</th><th>nearest identity (beyond the threshold)</th></tr></thead>
<tbody>
{chr(10).join(unknown_rows)}
</tbody>
</table>
</body></html>
"""
    write_bytes_atomic(path, page.encode("utf-8"))


def summary(result: SearchResult, config: SearchConfig, model: str, files: OutputFiles) -> dict[str, Any]:
    identified = [e for e in result.events if e.role == "query" and e.identity is not None]
    return {
        "model": model,
        "mode": result.mode,
        "gallery": str(result.gallery),
        "threshold": result.threshold,
        "threshold_source": result.threshold_source,
        "interrupted": result.interrupted,
        "cameras": [run.to_dict() for run in result.cameras],
        "tracks": len(result.events),
        "searched_tracks": sum(e.role == "query" for e in result.events),
        "identified_tracks": len(identified),
        "identities": sorted({e.identity for e in result.events if e.identity is not None}),
        "files": {
            "events_jsonl": str(files.events_jsonl),
            "events_sqlite": str(files.events_sqlite),
            "report": str(files.report),
            "videos": [str(v) for v in files.videos],
        },
        "every": config.every,
        "max_frames": config.max_frames,
    }


def write_outputs(result: SearchResult, config: SearchConfig, model: str, video_suffix: str = ".avi") -> OutputFiles:
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    files = OutputFiles(
        events_jsonl=out / "events.jsonl",
        events_sqlite=out / "events.sqlite",
        report=out / "report.html",
        summary=out / "summary.json",
        videos=[out / f"{run.name}{video_suffix}" for run in result.cameras],
        thumbnails=out / "thumbs",
    )
    write_thumbnails(result, files.thumbnails, out)
    write_events_jsonl(result.events, files.events_jsonl)
    write_events_sqlite(result, files.events_sqlite)
    for run, video in zip(result.cameras, files.videos, strict=True):
        write_annotated_video(run, result.events, config, video)
    write_report(result, config, model, files.report)
    write_bytes_atomic(files.summary, (json.dumps(summary(result, config, model, files), indent=2) + "\n").encode("utf-8"))
    return files
