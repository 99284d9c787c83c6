"""Single-byte damage to a gallery database: how much of it ``reid gallery info --check`` finds.

Builds a small gallery (``--identities`` x ``--per-identity`` items, 32-d), then, for
every ``--step``-th byte offset of ``gallery.db``, copies the gallery, changes that one
byte (XOR 0x55) and sorts the outcome into:

* ``open``: opening the gallery reports damage (one-line GalleryError);
* ``check``: opening succeeds, ``Gallery.check`` (``info --check``) reports damage;
* ``unchanged``: neither reports anything and everything the gallery tells (facts, every
  item row, the answers to three probes) is as before: the byte was unused;
* ``missed``: neither reports anything, yet something the gallery tells has changed;
* ``crash``: an exception other than GalleryError (a traceback instead of one line).

Only the public gallery API is used, so the same script measures any version of reid
(point PYTHONPATH at it).  Run: ``python benchmarks/bench_gallery_damage.py --step 7``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from reid.errors import GalleryError
from reid.gallery import EmbeddingModel, Gallery, ItemMeta

FACTS = ("items", "identities", "dim", "index_params", "model_fingerprint", "model_name", "threshold", "created")


def build(folder: Path, identities: int, per_identity: int) -> None:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(identities, 32))
    vectors = np.repeat(centres, per_identity, axis=0) + 0.1 * rng.normal(size=(identities * per_identity, 32))
    labels = [f"id{i:04d}" for i in range(identities) for _ in range(per_identity)]
    items = [
        ItemMeta(label, source=f"img/{n}.jpg", camera="c1", frame=n, box=(0, 0, 64, 128), image_hash=f"h{n}")
        for n, label in enumerate(labels)
    ]
    model = EmbeddingModel(name="bench", fingerprint="0123456789abcdef", embedding_dim=32, threshold=0.8)
    with Gallery.create(folder, model) as gallery:
        gallery.add(vectors.astype(np.float32), items)


def contents(folder: Path) -> tuple[object, ...]:
    with Gallery.open(folder) as gallery:
        info = gallery.info().to_dict()
        rows = [tuple(item.to_dict().values()) for item in gallery.items()]
        probes = gallery.embeddings([1, len(rows) // 2, len(rows)])
        answers = [(m.identity, m.item_id) for found in gallery.search(probes, k=2) for m in found]
    return [info[key] for key in FACTS], rows, answers


def outcome(folder: Path, expected: tuple[object, ...]) -> str:
    try:
        gallery = Gallery.open(folder)
    except GalleryError:
        return "open"
    except Exception:
        return "crash"
    try:
        gallery.check(queries=10)
    except GalleryError:
        return "check"
    except Exception:
        return "crash"
    finally:
        gallery.close()
    try:
        return "unchanged" if contents(folder) == expected else "missed"
    except Exception:
        return "crash"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--identities", type=int, default=4)
    parser.add_argument("--per-identity", type=int, default=27)
    parser.add_argument("--step", type=int, default=7, help="Damage every STEP-th byte offset.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        original = Path(tmp) / "g"
        build(original, args.identities, args.per_identity)
        expected = contents(original)
        payload = (original / "gallery.db").read_bytes()
        counts: Counter[str] = Counter()
        missed: list[int] = []
        for offset in range(0, len(payload), args.step):
            copy = Path(tmp) / "copy"
            shutil.copytree(original, copy)
            damaged = bytearray(payload)
            damaged[offset] ^= 0x55
            (copy / "gallery.db").write_bytes(bytes(damaged))
            result = outcome(copy, expected)
            counts[result] += 1
            if result == "missed":
                missed.append(offset)
            shutil.rmtree(copy)
    total = sum(counts.values())
    print(f"gallery.db of {len(payload)} bytes, {args.identities * args.per_identity} items; {total} offsets damaged")
    for key in ("open", "check", "unchanged", "missed", "crash"):
        print(f"  {key:10s} {counts[key]:6d}")
    if missed:
        print(f"  missed offsets (first 10): {missed[:10]}")


if __name__ == "__main__":
    main()
