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

    def evaluation_overlap(self) -> tuple[int, int]:
        """``(identities, images)`` of the query and gallery that are also in the training
        split (distractors, pid 0, and junk, pid -1, are nobody's); both 0 when the
        evaluation is on held-out identities."""
        train_ids = {r.pid for r in self.train}
        train_paths = {r.path for r in self.train}
        held = [r for r in (*self.query, *self.gallery) if r.pid > 0]
        shared_ids = {r.pid for r in held if r.pid in train_ids}
        return len(shared_ids), sum(1 for r in (*self.query, *self.gallery) if r.path in train_paths)

    def evaluation_split(self) -> dict[str, object]:
        """What an evaluation on this data set's query/gallery split is computed on, for
        summaries: the data set, the numbers of query and gallery images and of their
        identities, whether those identities are held out of training, and whether the
        cameras are known (without them a same-camera match cannot be excluded)."""
        shared_ids, shared_images = self.evaluation_overlap()
        return {
            "dataset": self.name,
            "query_images": len(self.query),
            "gallery_images": len(self.gallery),
            "identities": len({r.pid for r in (*self.query, *self.gallery) if r.pid > 0}),
            "held_out": shared_ids == 0 and shared_images == 0,
            "cameras_known": self.cameras_known,
        }


def relabel(records: list[ImageRecord]) -> tuple[list[int], dict[int, int]]:
    """Map the pids of a training split onto 0..N-1 (in pid order), for the classifier.

    Returns the label of each record, in order, and the mapping pid -> label.
    """
    mapping = {pid: i for i, pid in enumerate(sorted({r.pid for r in records}))}
    return [mapping[r.pid] for r in records], mapping
