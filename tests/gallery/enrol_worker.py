"""A separate process that enrols batches into a gallery, for the concurrency and crash tests.

Usage: python enrol_worker.py LOCATION PREFIX BATCHES BATCH_SIZE (a gallery folder or a server's URI)
Prints "committed <ids...>" after each batch is stored, so the parent knows what must survive.
"""

from __future__ import annotations

import sys

from gallery_helpers import clustered, make_card, metas

from reid.gallery import open_gallery


def main() -> None:
    location, prefix, batches, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with open_gallery(location, make_card()) as gallery:
        for batch in range(batches):
            vectors, labels, _ = clustered(size // 4, 4, seed=batch)
            named = [f"{prefix}-{batch}-{label}" for label in labels]
            result = gallery.add(vectors, metas(named, f"{prefix}{batch}"))
            print("committed", *result.ids, flush=True)


if __name__ == "__main__":
    main()
