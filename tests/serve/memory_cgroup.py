"""A child process in a memory-limited control group (Linux, as root): cgroup v2 where its
memory controller can be given to a new group, else cgroup v1's memory controller.  The
group's peak and whether the kernel's OOM killer acted are read back.  Where neither can
be made (no cgroup file system, no permission), :func:`memory_cgroup` raises
:class:`NoCgroup` with the reason, for a test to skip with."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
_count = itertools.count()


class NoCgroup(Exception):
    """No memory-limited group can be made here; the message says why."""


@dataclass
class MemoryGroup:
    """A memory-limited group: put a process in it with :meth:`add` (or ``preexec``)."""

    path: Path
    version: int
    limit: int

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def preexec(self) -> None:
        """For ``subprocess.Popen(preexec_fn=...)``: the child joins the group before it runs."""
        self.add(os.getpid())

    def peak(self) -> int:
        """The most memory (bytes) the group's processes held at once."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        return int((self.path / name).read_text().split()[0])

    def current(self) -> int:
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        return int((self.path / name).read_text().split()[0])

    def reset_peak(self) -> None:
        """Start measuring the peak again from now (the group's current use)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        (self.path / name).write_text("0")

    def oom_killed(self) -> int:
        """How many processes of the group the OOM killer ended."""
        if self.version == 2:
            events = dict(line.split() for line in (self.path / "memory.events").read_text().splitlines())
            return int(events.get("oom_kill", 0))
        control = dict(line.split() for line in (self.path / "memory.oom_control").read_text().splitlines())
        return int(control.get("oom_kill", 0))


def _own_group(controller: str | None) -> Path | None:
    """This process's group of ``controller`` (None: the cgroup v2 group)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if controller is None and number == "0" and controllers == "":
            return Path(path.lstrip("/"))
        if controller is not None and controller in controllers.split(","):
            return Path(path.lstrip("/"))
    return None


def _v2(limit: int, name: str) -> MemoryGroup:
    own = _own_group(None)
    base = ROOT if (ROOT / "cgroup.controllers").is_file() else ROOT / "unified"
    if own is None or not (base / "cgroup.controllers").is_file():
        raise NoCgroup("no cgroup v2 hierarchy")
    parent = base / own
    if "memory" not in (parent / "cgroup.controllers").read_text().split():
        raise NoCgroup("cgroup v2 has no memory controller for this process's group")
    group = parent / name
    group.mkdir()
    try:
        (group / "memory.max").write_text(str(limit))
        if (group / "memory.swap.max").is_file():
            (group / "memory.swap.max").write_text("0")
    except OSError:
        group.rmdir()
        raise
    return MemoryGroup(group, 2, limit)


def _v1(limit: int, name: str) -> MemoryGroup:
    own = _own_group("memory")
    if own is None or not (ROOT / "memory").is_dir():
        raise NoCgroup("no cgroup v1 memory controller")
    group = ROOT / "memory" / own / name
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(limit))
        # Without swap in the limit a process over it would swap instead of being refused.
        if (group / "memory.memsw.limit_in_bytes").is_file():
            (group / "memory.memsw.limit_in_bytes").write_text(str(limit))
    except OSError:
        group.rmdir()
        raise
    return MemoryGroup(group, 1, limit)


@contextmanager
def memory_cgroup(limit: int) -> Iterator[MemoryGroup]:
    """A new group whose processes may hold at most ``limit`` bytes (no swap); removed on
    exit once its processes are gone.  Raises NoCgroup with the reason where none can be made."""
    name = f"reid-test-{os.getpid()}-{next(_count)}"
    reasons = []
    group = None
    for make in (_v2, _v1):
        try:
            group = make(limit, name)
            break
        except (NoCgroup, OSError) as exc:
            reasons.append(str(exc))
    if group is None:
        raise NoCgroup("; ".join(reasons))
    try:
        yield group
    finally:
        for _ in range(50):
            try:
                group.path.rmdir()
                break
            except OSError:
                time.sleep(0.1)
