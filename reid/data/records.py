"""What a dataset split is: a list of (path, pid, camid) records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ImageRecord:
    """One labelled image.  ``pid`` is the dataset's identity number (0 = distractor);
    ``camid`` the camera it was taken by (0-based); an image of identity folders without a
    camera token gets a camera number of its own."""

    path: Path
    pid: int
    camid: int


@dataclass
class ReidDataset:
    """A dataset with a training split and a query/gallery evaluation split.

    ``cameras_known`` is False when the evaluation split carries no camera ids, so that
    the Market-1501 rule "same identity and same camera is not a match" removes nothing;
    ``skipped`` lists every folder entry that was not taken, with the reason.
    """

    name: str
    root: Path
    train: list[ImageRecord] = field(default_factory=list)
    query: list[ImageRecord] = field(default_factory=list)
    gallery: list[ImageRecord] = field(default_factory=list)
    cameras_known: bool = True
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def num_train_ids(self) -> int:
        return len({r.pid for r in self.train})


def relabel(records: list[ImageRecord]) -> tuple[list[int], dict[int, int]]:
    """Map the pids of a training split onto 0..N-1 (in pid order), for the classifier.

    Returns the label of each record, in order, and the mapping pid -> label.
    """
    mapping = {pid: i for i, pid in enumerate(sorted({r.pid for r in records}))}
    return [mapping[r.pid] for r in records], mapping
