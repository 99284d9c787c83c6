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
