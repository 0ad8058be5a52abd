"""What a test left running: coordinators, runners, producer threads, and threads
blocked in a queue's blocking call.

The running layer keeps weak sets of entered coordinators, launched runners and
producer thread records (``aqueue/_running/_alive.py``), and the queues layer a
registry of the threads inside a blocking call of a thread view
(``aqueue/_waiting/_tracking.py``, both backends). ``Running.now()`` takes a snapshot;
``leaks_since(before)`` names what runs now that did not run at the snapshot:

- a Coordinator whose block was entered and not left (its tasks may run in another
  thread's event loop, or in a task nobody awaits);
- a QueueRunner with a producer still alive;
- a producer thread that has not ended (abandoned by a coordinator after its grace
  period, with ``ignore_live_threads=True`` or a caught RuntimeError);
- any thread (a plain ``threading.Thread`` too) still blocked in a blocking call of a
  queue's thread view, such as ``q.blocking().enqueue(x)`` on a full queue.

Objects alive at the snapshot are excluded by identity (weakly held; a blocked call is
a new record per call), so what an earlier test or a wider-scoped fixture runs is not
blamed on this test. ``wait_for_leaks`` polls for up to a grace period first: a thread
released just before the end may need a moment to return. ``release_blocked`` then
ends the blocked calls a test left: an in-process queue is closed with
``cancel_pending_enqueues=True`` (its blocked threads raise QueueClosedError or
OutOfRangeError now, in the test that left them, instead of hanging the run or failing
a later test); a shared queue releases this process's producers
(``release_producers``: blocked enqueues raise QueueClosedError within its
``wait_timeout``; a blocked dequeue waits on, as the shared queue is not closed).
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any

from .._queues._queue import QueueBase
from .._running._alive import live_coordinators, live_runners, live_threads
from .._running._watchdog import describe_runner
from .._waiting._tracking import blocked_calls

__all__ = ["Running", "leaks_since", "release_blocked", "wait_for_leaks"]


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
        for call in blocked_calls():
            objects.add(call)
        return cls(objects)


def leaks_since(before: Running) -> list[str]:
    """One line per coordinator, runner, producer thread or blocked call running now but
    not at ``before`` (coordinators first, then runners, then threads, then calls)."""
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
    calls = [f"- {call.describe()}" for call in blocked_calls() if call not in before.objects]
    return sorted(coords) + sorted(runners) + sorted(threads) + sorted(calls)


def release_blocked(before: Running) -> list[str]:
    """End the blocked calls made since ``before`` (see the module docstring); one line
    per queue saying what was done."""
    done: dict[int, str] = {}
    for call in blocked_calls():
        q = call.queue
        if call in before.objects or id(q) in done:
            continue
        if isinstance(q, QueueBase):
            q.close(cancel_pending_enqueues=True)
            done[id(q)] = f"queue '{q.name}' closed with cancel_pending_enqueues=True"
        else:
            q.release_producers()
            done[id(q)] = f"shared queue '{q.name}': this process's producers released"
    return list(done.values())


def wait_for_leaks(before: Running, grace: float) -> list[str]:
    """``leaks_since(before)``, after waiting up to ``grace`` seconds for it to empty."""
    deadline = time.monotonic() + grace
    while True:
        lines = leaks_since(before)
        if not lines or time.monotonic() >= deadline:
            return lines
        time.sleep(min(0.01, grace))
