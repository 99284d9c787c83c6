"""A gallery's own threshold, from the impostor pairs its enrolled identities hold.

Every pair of items of two DIFFERENT enrolled identities is an impostor pair: a stranger
looks to the gallery like one more identity, so the distances between its identities
are a sample of the distances at which a stranger would meet them.  The threshold for a
target false-accept rate ``far`` is the distance within which that share of the impostor
pairs lies; pairs of items of the same identity never count (they are genuine pairs).

**Cost.**  Items are sampled, at most :data:`MAX_ITEMS` (default 2,048), the same number
from each identity where it can (identities with fewer items give all they have; with
more identities than the budget, one item each of a random subset), so that identities
with many items do not outweigh the rest.  Every pair of sampled items of different
identities is measured: about two million pairs from one Gram matrix of the sampled
embeddings, whatever the gallery's size (a 100,000-item gallery costs the same as a
2,048-item one, plus reading 2,048 embeddings).  The sample is drawn from a fixed seed,
so the same gallery calibrates to the same threshold.

**Enough identities.**  The items of two identities are not independent: the evidence
for a rate is the number of identity pairs, N(N-1)/2 for N identities.  A threshold is
trusted by default (a query uses it without being asked) when at least
:data:`MIN_ADMITTED` (10) identity pairs are expected within it: N(N-1)/2 x far >= 10, so
that the count the threshold rests on has a relative Poisson error of at most
1/sqrt(10), about a third.  At FAR 1e-3 that is 142 identities (10,011 identity pairs);
at 1e-2, 46.  ``reid gallery calibrate`` computes and stores one for fewer identities
when asked (it needs at least 10 sampled impostor pairs within the threshold) and says
what it rests on.

**A camera's own impostor pairs.**  The gallery's pairs are pairs of its enrolled
identities, often photographed elsewhere; strangers of one camera's scene can lie much
nearer the people enrolled from that scene.  People seen in the same frame of one camera
are different people, so the distances between the mean embeddings of two tracks that
have a box in one frame are impostor pairs of that scene (:func:`scene_impostor_distances`).
A calibration with a scene (:meth:`GalleryCalibration.with_scene`) decides at the TIGHTER
of the two thresholds, each taken at the same rate on its own pairs: a stranger may come
from either population, and the tighter threshold holds the rate on both.  A scene rarely holds the
``MIN_ADMITTED / far`` pairs a rate needs; its threshold then admits ``floor(far x n)`` of
its ``n`` pairs, which for ``far x n < 1`` is none (just below the nearest pair), the
tightest choice its evidence allows, and both counts are recorded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from reid.decision import GALLERY_CALIBRATION, Threshold, check_far, pair_distance, similarity_to_distance
from reid.errors import ConfigError
from reid.paths import parse_json_bounded
from reid.serial import as_dict

DEFAULT_FAR = 1e-3
MIN_ADMITTED = 10
MAX_ITEMS = 2048
SEED = 0
GRAM_ROWS = 512  # rows of the Gram matrix computed at a time

Embeddings = Callable[[np.ndarray], np.ndarray]


# Two boxes of one frame overlapping at least this much (IoU) may be one person boxed twice.
SAME_BOX_IOU = 0.5


@dataclass(frozen=True)
class SceneTrack:
    """One track of a camera: ``frames`` (F,) the frame numbers where it has a box, and
    ``embedding`` (D,) float32, the unit mean of its crops' embeddings; ``boxes`` (F, 4)
    its boxes (x, y, w, h in pixels) in those frames, or None when not known."""

    frames: np.ndarray
    embedding: np.ndarray
    boxes: np.ndarray | None = None


def scene_impostor_distances(tracks: Sequence[SceneTrack], same_box_iou: float = SAME_BOX_IOU) -> np.ndarray:
    """Distances (float64, Euclidean between unit embeddings) between the embeddings of every
    two ``tracks`` that have a box in one frame: people seen at the same time are different
    people, so these are impostor pairs of the camera's scene.  Tracks that never share a
    frame (one person lost and found again may be two tracks) give no pair, nor do two
    tracks whose boxes overlap at IoU ``same_box_iou`` or more in every frame they share
    (when both know their boxes): that is one person boxed twice as often as two people
    walking as one, as when a track goes on over a person a new track has taken.  Pairs
    come in the order (i, j), i < j, of the tracks given."""
    spans = [(int(np.min(t.frames)), int(np.max(t.frames))) if len(t.frames) else None for t in tracks]
    where = [{int(f): n for n, f in enumerate(np.asarray(t.frames, dtype=np.int64).tolist())} for t in tracks]
    left, right = [], []
    for i in range(len(tracks)):
        for j in range(i + 1, len(tracks)):
            a, b = spans[i], spans[j]
            if a is None or b is None or a[1] < b[0] or b[1] < a[0]:
                continue
            shared = where[i].keys() & where[j].keys()
            rows = [(where[i][f], where[j][f]) for f in shared]
            if shared and not _boxed_twice(tracks[i], tracks[j], rows, same_box_iou):
                left.append(i)
                right.append(j)
    if not left:
        return np.zeros(0)
    vectors = np.stack([np.asarray(t.embedding, dtype=np.float64).reshape(-1) for t in tracks])
    return pair_distance(vectors[left], vectors[right])


def _boxed_twice(a: SceneTrack, b: SceneTrack, rows: list[tuple[int, int]], same_box_iou: float) -> bool:
    """Whether the boxes of ``a`` and ``b`` (their ``rows`` in the shared frames) overlap at
    ``same_box_iou`` or more in every one of those frames; False when either has no boxes."""
    if a.boxes is None or b.boxes is None:
        return False
    # Imported here: the tracker's IoU is the one rule for it, and the gallery package
    # otherwise loads no detector or network code.
    from reid.track.tracker import iou

    return all(iou(tuple(a.boxes[m]), tuple(b.boxes[n])) >= same_box_iou for m, n in rows)


def threshold_admitting(distances: np.ndarray, far: float) -> tuple[float, int]:
    """The largest threshold that admits at most ``floor(far x n)`` of the ``n`` impostor
    ``distances`` (halfway to the next distance; just below the nearest when that is none),
    and how many it admits.  Unlike :func:`threshold_for_far` it asks no minimum count: a
    scene's few pairs give the tightest threshold they support.  ConfigError when empty."""
    check_far(far)
    d = np.sort(np.asarray(distances, dtype=np.float64).reshape(-1))
    if d.size == 0:
        raise ConfigError("no two tracks were seen in one frame: the scene holds no impostor pair")
    k = int(math.floor(far * d.size + 1e-9))
    if k == 0:
        threshold = float(np.nextafter(d[0], -np.inf))
    elif k >= d.size:
        threshold = float(d[-1])
    else:
        threshold = (d[k - 1] + d[k]) / 2 if d[k] > d[k - 1] else float(np.nextafter(d[k], -np.inf))
    threshold = float(min(max(threshold, 1e-6), 2.0))
    return threshold, int(np.searchsorted(d, threshold, side="right"))


@dataclass(frozen=True)
class SceneTracks:
    """The tracks of ``source`` over ``frames`` ("A:B", numbered from 0, B excluded, or
    "all") that a calibration takes its scene's impostor pairs from."""

    source: str
    frames: str
    tracks: tuple[SceneTrack, ...]

    def calibrate(self, far: float) -> SceneCalibration:
        """The scene's part at rate ``far``; ConfigError when no two tracks share a frame."""
        return SceneCalibration.measure(self.source, self.frames, self.tracks, far)


@dataclass(frozen=True)
class SceneCalibration:
    """A camera scene's part of a calibration: ``tracks`` tracks of ``source`` (frames
    ``frames``, "A:B" numbered from 0, B excluded, or "all") gave ``pairs`` impostor pairs
    (two tracks seen in one frame), of which ``admitted`` lie within ``threshold``, the
    scene's threshold at the calibration's rate (:func:`threshold_admitting`)."""

    source: str
    frames: str
    tracks: int
    pairs: int
    threshold: float
    admitted: int

    @classmethod
    def measure(cls, source: str, frames: str, tracks: Sequence[SceneTrack], far: float) -> SceneCalibration:
        """Calibrate on ``tracks``; ConfigError when no two of them share a frame."""
        distances = scene_impostor_distances(tracks)
        if distances.size == 0:
            raise ConfigError(
                f"{source}: no two of its {len(tracks)} tracks were seen in one frame, so the scene holds no "
                "impostor pair; calibrate on a part of the video where several people are in view"
            )
        threshold, admitted = threshold_admitting(distances, far)
        return cls(source, frames, len(tracks), int(distances.size), threshold, admitted)

    def describe(self) -> str:
        return (
            f"scene {self.source} frames {self.frames}: {self.pairs:,} pairs of {self.tracks} tracks seen in one "
            f"frame, {self.admitted} within {self.threshold:.4f}"
        )

    @classmethod
    def from_dict(cls, data: Any) -> SceneCalibration:
        """The scene part a gallery stored; ValueError naming the first bad value."""
        if not isinstance(data, dict):
            raise ValueError("scene is not a JSON object")
        for key in ("source", "frames"):
            if not isinstance(data.get(key), str):
                raise ValueError(f"scene {key} is not text")
        for key in ("tracks", "pairs", "admitted"):
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"scene {key} is not a count: {value!r}")
        value = data.get("threshold")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 2:
            raise ValueError(f"scene threshold is not in (0, 2]: {value!r}")
        if data["admitted"] > data["pairs"] or data["pairs"] < 1:
            raise ValueError("scene pairs are none, or fewer than those admitted")
        return cls(data["source"], data["frames"], data["tracks"], data["pairs"], float(value), data["admitted"])


@dataclass(frozen=True)
class GalleryCalibration:
    """A threshold (Euclidean distance between unit embeddings, in (0, 2]) chosen so that a
    share of at most ``far`` of the measured impostor pairs lies within it.

    ``identities``, ``items`` and ``last_id`` describe the gallery it was computed on (a
    later write makes it stale); ``sampled_items`` of ``sampled_identities`` identities
    gave ``impostor_pairs`` pairs of different identities, of which ``admitted`` lie
    within ``identities_threshold``, the threshold of those pairs alone; ``identity_pairs``
    is N(N-1)/2 over the sampled identities.  ``scene``: a camera's own impostor pairs, when
    calibrated on one; ``threshold``, the one decided at, is then the tighter of the two
    (module docstring), else ``identities_threshold``.
    ``stored``: read from the gallery (True) or computed for this run.
    """

    far: float
    threshold: float
    identities: int
    items: int
    last_id: int
    sampled_items: int
    sampled_identities: int
    impostor_pairs: int
    identity_pairs: int
    admitted: int
    created: str = ""
    stored: bool = False
    identities_threshold: float = 0.0
    scene: SceneCalibration | None = None

    def __post_init__(self) -> None:
        if not self.identities_threshold:
            object.__setattr__(self, "identities_threshold", self.threshold)

    @property
    def enough(self) -> bool:
        """Whether the estimate rests on enough identity pairs to be used by default."""
        return self.identity_pairs * self.far >= MIN_ADMITTED

    def current(self, items: int, identities: int, last_id: int) -> bool:
        """Whether it was computed on a gallery of this content (no write since)."""
        return (self.items, self.identities, self.last_id) == (items, identities, last_id)

    def with_scene(self, scene: SceneCalibration | None) -> GalleryCalibration:
        """This calibration deciding at the tighter of its identities' threshold and
        ``scene``'s (None: its identities' alone)."""
        own = self.identities_threshold
        return replace(self, threshold=own if scene is None else min(own, scene.threshold), scene=scene)

    def describe(self) -> str:
        how = "stored" if self.stored else "computed for this run"
        identities = (
            f"FAR {self.far:g} on {self.sampled_identities} identities: {self.impostor_pairs:,} impostor pairs of "
            f"{self.sampled_items:,} sampled items, {self.admitted} within"
        )
        if self.scene is None:
            return f"{identities}; {how}"
        tighter = "the scene's" if self.scene.threshold < self.identities_threshold else "the identities'"
        return (
            f"{identities} {self.identities_threshold:.4f}; {self.scene.describe()}; {tighter}, the tighter; {how}"
        )

    def as_threshold(self) -> Threshold:
        return Threshold(self.threshold, GALLERY_CALIBRATION, self.describe())

    def to_dict(self) -> dict[str, Any]:
        data = as_dict(self)
        data.pop("stored")
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GalleryCalibration:
        """The calibration a gallery stored; ValueError naming the first bad value."""
        try:
            # Bounded: a value nested thousands deep or a number of thousands of digits is
            # one error, not Python's RecursionError or its own limit.
            data = parse_json_bounded(text, "calibration", "calibration")
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("calibration: ")) from None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        counts = ("identities", "items", "last_id", "sampled_items", "sampled_identities")
        counts += ("impostor_pairs", "identity_pairs", "admitted")
        for key in counts:
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{key} is not a count: {value!r}")
        for key, low, high in (("far", 0.0, 1.0), ("threshold", 0.0, 2.0)):
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value <= high:
                raise ValueError(f"{key} is not in ({low:g}, {high:g}]: {value!r}")
        if not isinstance(data.get("created", ""), str):
            raise ValueError("created is not text")
        if data["admitted"] > data["impostor_pairs"] or data["sampled_items"] > data["items"]:
            raise ValueError("more pairs admitted than measured, or more items sampled than held")
        own = data.get("identities_threshold", data["threshold"])
        if isinstance(own, bool) or not isinstance(own, (int, float)) or not 0 < own <= 2:
            raise ValueError(f"identities_threshold is not in (0, 2]: {own!r}")
        scene = None if data.get("scene") is None else SceneCalibration.from_dict(data["scene"])
        calibration = cls(
            **{key: data[key] for key in (*counts, "far")},
            threshold=float(own),
            created=data.get("created", ""),
            stored=True,
            identities_threshold=float(own),
        ).with_scene(scene)
        if abs(calibration.threshold - data["threshold"]) > 1e-9:
            raise ValueError("threshold is not the tighter of the identities' and the scene's")
        return calibration


def identities_needed(far: float) -> int:
    """The fewest identities whose N(N-1)/2 identity pairs expect :data:`MIN_ADMITTED`
    within a threshold at ``far``: the default-use rule (module docstring)."""
    check_far(far)
    n = max(2, math.ceil((1 + math.sqrt(1 + 8 * MIN_ADMITTED / far)) / 2) - 1)
    while n * (n - 1) / 2 * far < MIN_ADMITTED:
        n += 1
    return n


def sample_items(codes: np.ndarray, max_items: int, seed: int = SEED) -> np.ndarray:
    """Positions of at most ``max_items`` items, as evenly over identities as they allow.

    ``codes``: (N,) identity codes.  Each identity gives ``max_items // identities`` random
    items (all it has when fewer); when there are more identities than ``max_items``, one
    random item each of ``max_items`` random identities.  Positions come back ascending.
    """
    if max_items < 2:
        raise ConfigError(f"a calibration needs at least 2 sampled items, got {max_items}")
    rng = np.random.default_rng(seed)
    codes = np.asarray(codes)
    order = rng.permutation(len(codes))
    order = order[np.argsort(codes[order], kind="stable")]
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    identities = len(starts)
    if identities > max_items:
        chosen = rng.choice(identities, size=max_items, replace=False)
        keep = order[starts[chosen]]
    else:
        keep = order[rank < max_items // identities]
    return np.sort(keep)


def impostor_distances(vectors: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Distances (float64, Euclidean between unit embeddings) of every pair i < j of rows of
    ``vectors`` (N, D) whose ``codes`` differ: the impostor pairs, never the genuine ones."""
    vectors = np.asarray(vectors, dtype=np.float32)
    codes = np.asarray(codes)
    parts = []
    for start in range(0, len(vectors), GRAM_ROWS):
        block = vectors[start : start + GRAM_ROWS] @ vectors.T
        rows = np.arange(start, start + len(block))[:, None]
        keep = (np.arange(len(vectors))[None, :] > rows) & (codes[start : start + len(block), None] != codes[None, :])
        parts.append(similarity_to_distance(block[keep]))
    return np.concatenate(parts) if parts else np.zeros(0)


def smallest_far(pairs: int) -> float | None:
    """The smallest false-accept rate ``pairs`` impostor pairs resolve: the one whose
    threshold has :data:`MIN_ADMITTED` of them within (:func:`threshold_for_far`); None when
    they are too few for any rate (at most :data:`MIN_ADMITTED`)."""
    return MIN_ADMITTED / pairs if pairs > MIN_ADMITTED else None


def sampled_pairs(items_per_identity: Sequence[int], max_items: int = MAX_ITEMS) -> int:
    """How many impostor pairs a calibration measures on identities holding
    ``items_per_identity`` items: the pairs of two different identities among the items
    :func:`sample_items` takes (each identity ``max_items // identities`` items, all it
    has when fewer; with more identities than ``max_items``, one item each of
    ``max_items`` of them)."""
    counts = [int(n) for n in items_per_identity if n > 0]
    if len(counts) > max_items:
        return max_items * (max_items - 1) // 2
    share = max_items // max(1, len(counts))
    taken = [min(n, share) for n in counts]
    return (sum(taken) ** 2 - sum(n * n for n in taken)) // 2


def threshold_for_far(distances: np.ndarray, far: float) -> tuple[float, int]:
    """The largest threshold (halfway to the next distance) that admits at most ``far`` of
    the impostor ``distances``, and how many it admits.

    Raises ConfigError when fewer than :data:`MIN_ADMITTED` pairs would be admitted: the
    pairs cannot resolve that rate.
    """
    check_far(far)
    d = np.sort(np.asarray(distances, dtype=np.float64))
    k = int(math.floor(far * d.size + 1e-9))
    if k < MIN_ADMITTED or k >= d.size:
        least = smallest_far(int(d.size))
        instead = f"give --far {round_rate_up(least):g} (the smallest these pairs resolve) or " if least is not None else ""
        raise ConfigError(
            f"{d.size:,} impostor pairs cannot resolve FAR {far:g}: at least {MIN_ADMITTED} of them must lie within "
            f"the threshold ({math.ceil(MIN_ADMITTED / far):,} pairs); {instead}enrol more identities"
        )
    threshold = (d[k - 1] + d[k]) / 2 if d[k] > d[k - 1] else float(np.nextafter(d[k], -np.inf))
    threshold = float(min(max(threshold, 1e-6), 2.0))
    return threshold, int(np.searchsorted(d, threshold, side="right"))


def round_rate_up(rate: float) -> float:
    """``rate`` rounded up to two significant digits (a rate a user can type, no smaller)."""
    digits = 1 - math.floor(math.log10(rate))
    return math.ceil(rate * 10**digits - 1e-9) / 10**digits


def calibrate(
    ids: np.ndarray,
    codes: np.ndarray,
    embeddings: Embeddings,
    far: float = DEFAULT_FAR,
    max_items: int = MAX_ITEMS,
    seed: int = SEED,
    created: str = "",
) -> GalleryCalibration:
    """Calibrate on items ``ids`` (N,) of identity ``codes`` (N,), reading their vectors with
    ``embeddings(ids) -> (n, D)`` float32 unit rows (only the sampled ones are read).

    Raises ConfigError for a rate outside (0, 1), fewer than two identities, or too few
    impostor pairs for ``far`` (:func:`threshold_for_far`).
    """
    check_far(far)
    ids, codes = np.asarray(ids, dtype=np.int64), np.asarray(codes)
    identities = len(np.unique(codes))
    if identities < 2:
        raise ConfigError(f"a gallery of {identities} identities holds no impostor pair to calibrate on")
    chosen = sample_items(codes, max_items, seed)
    sampled_codes = codes[chosen]
    distances = impostor_distances(embeddings(ids[chosen]), sampled_codes)
    threshold, admitted = threshold_for_far(distances, far)
    sampled_identities = len(np.unique(sampled_codes))
    return GalleryCalibration(
        far=float(far),
        threshold=threshold,
        identities=identities,
        items=len(ids),
        last_id=int(ids.max()),
        sampled_items=len(chosen),
        sampled_identities=sampled_identities,
        impostor_pairs=int(distances.size),
        identity_pairs=sampled_identities * (sampled_identities - 1) // 2,
        admitted=admitted,
        created=created,
    )
