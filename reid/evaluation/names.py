"""The ranking figures by the one name each has: the key of every JSON file and dictionary
that holds it (``reid eval --json``, ``reid train``'s history, ``reid demo --json``, a model
card's metrics), and the label tables and plots print it under.  The values under these
keys are fractions (0.2791), printed as percentages (27.91%).  A module that imports
nothing, so that the command line reads it without the engine."""

from __future__ import annotations

# Key -> label, in the order tables list them.
RANKING_METRICS: dict[str, str] = {
    "rank1": "Rank-1",
    "rank5": "Rank-5",
    "rank10": "Rank-10",
    "mAP": "mAP",
    "mINP": "mINP",
}


# How each kind of number is written wherever a user reads it: tables, notes, card sources,
# summaries (JSON keeps the plain values).  One function each, so that a threshold printed
# beside a distance is never rounded another way, nor a rate written as a fraction in one
# command and a percent in the next.
DISTANCE_DECIMALS = 4
PERCENT_DECIMALS = 2
# A false-accept rate is small (0.1% and less): two more decimals, so that FAR 0.0997% is
# not shown as 0.10% beside a target of 0.1%.
FAR_DECIMALS = 4
LOSS_DECIMALS = 4


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def percent(value: object, decimals: int = PERCENT_DECIMALS) -> str:
    """A rate in 0..1 (TAR, accuracy, EER, Rank-1, recall) as a percent with fixed decimals
    (``27.91%``); anything else (a hand-edited card may hold text) as its text."""
    if _is_number(value):
        return "nan" if value != value else f"{value:.{decimals}%}"
    return _text(value)


def far_percent(value: object) -> str:
    """A false-accept rate measured on pairs (0..1) as a percent with :data:`FAR_DECIMALS`
    decimals (``0.0997%``)."""
    return percent(value, FAR_DECIMALS)


def distance(value: object) -> str:
    """A distance or a threshold (Euclidean between unit embeddings, 0..2) with
    :data:`DISTANCE_DECIMALS` decimals (``0.9668``), so that a distance shown as unknown is
    never printed equal to or under the threshold beside it."""
    return _fixed(value, DISTANCE_DECIMALS)


def count(value: int) -> str:
    """A count of things (pairs, images, items) with thousands separators (``3,237``)."""
    return f"{value:,}"


def loss(value: object) -> str:
    """A training loss with :data:`LOSS_DECIMALS` decimals (``5.9534``), in the epoch lines and the report."""
    return _fixed(value, LOSS_DECIMALS)


def _fixed(value: object, decimals: int) -> str:
    """A number with ``decimals`` decimals (``nan`` as such); anything else as text."""
    if _is_number(value):
        return "nan" if value != value else f"{value:.{decimals}f}"
    return _text(value)


def frame_rate(frames_per_second: float) -> str:
    """A processing or video rate in one form, ``8.5 frames/s`` (one decimal)."""
    return f"{frames_per_second:.1f} frames/s"


def timestamp(when: object) -> str:
    """A moment as ISO 8601 in UTC to the second (``2026-12-06T12:04:43+00:00``): a
    ``datetime`` (naive ones are taken as UTC), seconds since the epoch, or a text that
    already is one (anything else as it is)."""
    from datetime import datetime, timezone

    if _is_number(when):
        moment = datetime.fromtimestamp(float(when), tz=timezone.utc)
    elif isinstance(when, datetime):
        moment = when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
    elif isinstance(when, str):
        try:
            moment = datetime.fromisoformat(when)
        except ValueError:
            return _text(when)
        moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
    else:
        return _text(when)
    return moment.astimezone(timezone.utc).replace(microsecond=0).isoformat()


def _text(value: object) -> str:
    from reid.text import printable

    return printable(value)
