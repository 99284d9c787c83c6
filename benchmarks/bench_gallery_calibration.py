"""What a gallery's own calibration costs at 100,000 items, beside searching the same gallery.

Builds flat galleries of 100,000 clustered unit embeddings (dimension 128) over 1,000 and
10,000 identities, then times ``Gallery.calibrate`` (2,048 sampled items, every pair of
two different identities among them) and, in the same run, a search of 2,048 stored items
(k=5) as the peer: a calibration reads only its sample, so its cost does not grow with the
gallery.

Run: ``python benchmarks/bench_gallery_calibration.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from reid.gallery import EmbeddingModel, Gallery, ItemMeta

ITEMS = 100_000
DIM = 128
QUERIES = 2048


def clustered(identities: int, seed: int = 1) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    per = ITEMS // identities
    centres = rng.normal(size=(identities, DIM))
    vectors = np.repeat(centres / np.linalg.norm(centres, axis=1, keepdims=True), per, axis=0)
    vectors += rng.normal(size=vectors.shape) * 0.25 / np.sqrt(DIM)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32), [f"id{i:05d}" for i in range(identities) for _ in range(per)]


def main() -> None:
    card = EmbeddingModel(name="bench", fingerprint="0123456789abcdef", embedding_dim=DIM)
    print("| items | identities | calibrate (s) | impostor pairs | sampled items | search of 2,048 (s) | calibrate / search |")
    print("|---|---|---|---|---|---|---|")
    for identities in (1_000, 10_000):
        vectors, labels = clustered(identities)
        with tempfile.TemporaryDirectory() as folder, Gallery.create(Path(folder) / "g", card) as gallery:
            gallery.add(vectors, [ItemMeta(label, source=f"{n}.jpg") for n, label in enumerate(labels)])
            start = time.perf_counter()
            calibration = gallery.calibrate(1e-3, store=False)
            calibrate_s = time.perf_counter() - start
            start = time.perf_counter()
            gallery.search(vectors[:QUERIES], k=5)
            search_s = time.perf_counter() - start
        print(
            f"| {len(labels):,} | {identities:,} | {calibrate_s:.2f} | {calibration.impostor_pairs:,} | "
            f"{calibration.sampled_items:,} | {search_s:.2f} | {calibrate_s / search_s:.2f} |"
        )


if __name__ == "__main__":
    main()
