"""What a test left running: coordinators, runners and producer threads.

The running layer keeps weak sets of entered coordinators, launched runners and
producer thread records (``aqueue/_running/_alive.py``). ``Running.now()`` takes a
snapshot; ``leaks_since(before)`` names what runs now that did not run at the
snapshot:

- a Coordinator whose block was entered and not left (its tasks may run in another
  thread's event loop, or in a task nobody awaits);
- a QueueRunner with a producer still alive;
- a producer thread that has not ended (abandoned by a coordinator after its grace
  period, with ``ignore_live_threads=True`` or a caught RuntimeError).

Objects alive at the snapshot are excluded by identity (weakly held), so what an
earlier test or a wider-scoped fixture runs is not blamed on this test.
``wait_for_leaks`` polls for up to a grace period first: a thread released just
before the end may need a moment to return.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any

from .._running._alive import live_coordinators, live_runners, live_threads
from .._running._watchdog import describe_runner

__all__ = ["Running", "leaks_since", "wait_for_leaks"]


@dataclass(frozen=True)
class Running:
    """What ran at one moment (weakly held)."""

    objects: weakref.WeakSet[Any]

    @classmethod
    def now(cls) -> Running:
        """Everything running now."""
        objects: weakref.WeakSet[Any] = weakref.WeakSet()
        for coord in live_coordinators():
            objects.add(coord)
        for runner in live_runners():
            if runner.running:
                objects.add(runner)
        for record in live_threads():
            if not record.finished:
                objects.add(record)
        return cls(objects)


def leaks_since(before: Running) -> list[str]:
    """One line per coordinator, runner or producer thread running now but not at
    ``before`` (coordinators first, then runners, then threads)."""
    coords, runners, threads = [], [], []
    for coord in live_coordinators():
        if coord not in before.objects:
            names = ", ".join(f"'{r.name}'" for r in coord.runners) or "none"
            coords.append(f"- {coord!r} (its runners: {names})")
    for runner in live_runners():
        if runner.running and runner not in before.objects:
            runners.append(f"- {describe_runner(runner)}")
    for record in live_threads():
        if not record.finished and record not in before.objects:
            threads.append(f"- producer thread '{record.name}' ({record.producer.state})")
    return sorted(coords) + sorted(runners) + sorted(threads)


def wait_for_leaks(before: Running, grace: float) -> list[str]:
    """``leaks_since(before)``, after waiting up to ``grace`` seconds for it to empty."""
    deadline = time.monotonic() + grace
    while True:
        lines = leaks_since(before)
        if not lines or time.monotonic() >= deadline:
            return lines
        time.sleep(min(0.01, grace))
