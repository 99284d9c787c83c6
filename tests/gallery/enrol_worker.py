"""A separate process that enrols batches into a gallery, for the concurrency and crash tests.

Usage: python enrol_worker.py FOLDER PREFIX BATCHES BATCH_SIZE
Prints "committed <ids...>" after each batch is stored, so the parent knows what must survive.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gallery_helpers import clustered, make_card, metas

from reid.gallery import Gallery


def main() -> None:
    folder, prefix, batches, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with Gallery.open_or_create(folder, make_card()) as gallery:
        for batch in range(batches):
            vectors, labels, _ = clustered(size // 4, 4, seed=batch)
            named = [f"{prefix}-{batch}-{label}" for label in labels]
            result = gallery.add(vectors, metas(named, f"{prefix}{batch}"))
            print("committed", *result.ids, flush=True)


if __name__ == "__main__":
    main()
