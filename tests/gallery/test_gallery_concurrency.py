"""Two writer processes at once, and a writer killed with SIGKILL in the middle of its work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gallery_helpers import clustered, make_card, metas

from reid.gallery import Gallery, IndexSpec, open_gallery

WORKER = Path(__file__).with_name("enrol_worker.py")


def start_worker(folder: Path, prefix: str, batches: int, size: int) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(WORKER.parent), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(folder), prefix, str(batches), str(size)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_two_concurrent_enrol_processes_both_land(tmp_path: Path) -> None:
    folder = tmp_path / "g"
    workers = [start_worker(folder, prefix, batches=12, size=100) for prefix in ("left", "right")]
    outputs = [w.communicate(timeout=120) for w in workers]
    for worker, (out, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err
        assert out.count("committed") == 12
    with open_gallery(folder) as gallery:
        assert len(gallery) == 2400
        labels = {s.identity.split("-")[0] for s in gallery.identities()}
        assert labels == {"left", "right"}
        assert gallery.check(queries=50).database == "ok"


def kill_mid_enrol(folder: Path, batches_before: int, delay: float) -> list[int]:
    """Start a worker enrolling batches of 1500, SIGKILL it ``delay`` s after it committed
    ``batches_before`` batches, and return the ids it reported committed."""
    worker = start_worker(folder, "w", batches=1000, size=1500)
    committed: list[int] = []
    assert worker.stdout is not None
    while len(committed) < batches_before * 1500:
        line = worker.stdout.readline()
        assert line, worker.stderr.read() if worker.stderr else "worker ended"
        committed += [int(x) for x in line.split()[1:]]
    time.sleep(delay)
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=30)
    for line in worker.stdout:
        committed += [int(x) for x in line.split()[1:]]
    assert worker.returncode == -signal.SIGKILL
    return committed


def check_survivors(folder: Path, committed: list[int]) -> int:
    with open_gallery(folder) as gallery:
        stored = gallery.get_items(committed)
        assert len(stored) == len(committed), "an item committed before the kill is gone"
        assert len(gallery) >= len(committed)
        # Whatever else is stored came in whole batches: the kill never leaves half of one.
        assert len(gallery) % 1500 == 0
        assert gallery.check(queries=20).database == "ok"
        return len(gallery)


def add_after(folder: Path, survivors: int) -> None:
    """The next writer cleans up after the dead one and carries on."""
    with Gallery.open_or_create(folder, make_card()) as gallery:
        vectors, labels, _ = clustered(1, 2, seed=99)
        gallery.add(vectors, metas(labels, "after"))
        assert len(gallery) == survivors + 2
    assert not [p.name for p in folder.iterdir() if ".tmp-" in p.name]


@pytest.mark.parametrize("delay", [0.0, 0.15, 0.4])
def test_sigkill_mid_enrol_keeps_every_committed_batch(tmp_path: Path, delay: float) -> None:
    folder = tmp_path / "g"
    Gallery.create(folder, make_card()).close()
    # Batches of 1500 make every third batch fold the segments into a new snapshot, so
    # kills land in segment writes, commits and snapshot rewrites alike.
    committed = kill_mid_enrol(folder, 3, delay)
    add_after(folder, check_survivors(folder, committed))
    assert len(list(folder.glob("index-*.faiss"))) == 1


@pytest.mark.parametrize("delay", [0.05, 0.3])
def test_sigkill_while_sealing_shards_keeps_every_committed_batch(tmp_path: Path, delay: float) -> None:
    folder = tmp_path / "g"
    # Every second batch of 1500 fills a shard of 3000, so kills land in seals too.
    Gallery.create(folder, make_card(), IndexSpec("flat", shard_size=3000)).close()
    committed = kill_mid_enrol(folder, 5, delay)
    survivors = check_survivors(folder, committed)
    add_after(folder, survivors)
    with open_gallery(folder) as gallery:
        assert gallery.shard_count == (survivors + 2) // 3000 + 1
        # Exactly the files the database names: one per shard.
        assert len(list(folder.glob("index-*.faiss"))) == gallery.shard_count
