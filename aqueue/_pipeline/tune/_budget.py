"""The machine's share for a pipeline: cores and memory, read once when a run starts.

The only module of the tuner that reads the machine. The parsers take the text of a
file (so they are tested on any text); the readers open the files and fall back when
a file is missing (macOS has no /proc, a container may have no cgroup files):

- cores: the CPUs this process may run on (``os.sched_getaffinity``; else
  ``os.cpu_count``), lowered by a cgroup v2 CPU quota (``cpu.max``: ``"max 100000"``
  means none, ``"150000 100000"`` one and a half cores);
- memory: ``MemAvailable`` of ``/proc/meminfo`` (else the free physical pages), lowered
  by a cgroup v2 limit (``memory.max`` minus ``memory.current``).

``resolve(settings)`` gives the ``Budget``: the user's numbers when given (they always
win), else the machine's (memory: ``memory_share`` of what is available).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ._settings import Autotune, Budget

__all__ = ["available_memory", "cpu_cores", "parse_cpu_max", "parse_meminfo", "resolve"]

_CGROUP = Path("/sys/fs/cgroup")


def parse_cpu_max(text: str) -> float | None:
    """Cores allowed by a cgroup v2 ``cpu.max`` (``"<quota> <period>"``; None: no
    quota, or text that is not one)."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_meminfo(text: str) -> int | None:
    """``MemAvailable`` of a ``/proc/meminfo`` text, in bytes (None: not there)."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                unit = fields[2].lower() if len(fields) > 2 else "b"
                scale = 1024 if unit == "kb" else 1
                return int(fields[1]) * scale
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cpu_cores() -> float:
    """The cores this process may use (see the module docstring); at least 1."""
    try:
        cores = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not on Linux
        cores = float(os.cpu_count() or 1)
    text = _read(_CGROUP / "cpu.max")
    quota = parse_cpu_max(text) if text is not None else None
    if quota is not None:
        cores = min(cores, quota)
    return max(1.0, cores)


def available_memory() -> float:
    """Bytes of memory available now (see the module docstring); math.inf if unknown."""
    text = _read(Path("/proc/meminfo"))
    avail: float | None = parse_meminfo(text) if text is not None else None
    if avail is None:
        try:
            avail = float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, ValueError, OSError):  # pragma: no cover - exotic systems
            avail = None
    limit, used = _read(_CGROUP / "memory.max"), _read(_CGROUP / "memory.current")
    if limit is not None and used is not None and limit.strip().isdigit():
        room = max(0.0, float(int(limit) - int(used.strip() or 0)))
        avail = room if avail is None else min(avail, room)
    return math.inf if avail is None else float(avail)


def resolve(settings: Autotune) -> Budget:
    """The budget for a run under ``settings`` (the user's numbers win)."""
    cpu = settings.cpu if settings.cpu is not None else cpu_cores()
    if settings.memory is not None:
        memory = float(settings.memory)
    else:
        memory = settings.memory_share * available_memory()
    return Budget(cpu=float(cpu), memory=memory)
