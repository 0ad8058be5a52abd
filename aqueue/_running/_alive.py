"""What is running now (entered coordinators, started runners, producer threads), and
the runners registered with ``add_queue_runner``.

These registries are read only by ``aqueue.testing``, to fail a test that leaves
something running and to name the runners feeding a stuck queue (started, or
registered and never started); nothing in aqueue itself reads them, and they are
written only while the test-only bookkeeping is on (``tracking`` of
``aqueue/_waiting/_tracking.py``, which ``aqueue.testing`` turns on). Four weak sets,
each written at one place:

- a Coordinator joins ``_coordinators`` when its block is entered and leaves it when
  its ``__aexit__`` is done (so the set holds exactly the coordinators still running);
- a QueueRunner joins ``_runners`` when it is launched (``runner.running`` says whether
  a producer of its latest start is still alive);
- every producer thread's ``ThreadRecord`` joins ``_threads`` when it is created
  (``record.finished`` says whether the thread has ended);
- a QueueRunner joins ``_registered`` when ``add_queue_runner`` registers it, in any
  context (``runner.started`` says whether it was ever started).

Only weak references are held: nothing here keeps an object alive, and a thread that
still runs is kept alive by its own frame. Each hook is one ``WeakSet.add`` (about
0.4 µs) next to work that costs far more (entering a task group, starting a thread),
and with tracking off a test of one attribute.
Nothing here starts a thread or a task: they are only read when a test asks.
Readers copy a set (``weak_snapshot``) before iterating it: another thread may add
meanwhile.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from .._waiting._tracking import tracking, weak_snapshot

if TYPE_CHECKING:
    from ._coordinator import Coordinator
    from ._producers import ThreadRecord
    from ._runner import QueueRunner

__all__ = [
    "coordinator_entered",
    "coordinator_exited",
    "live_coordinators",
    "live_runners",
    "live_threads",
    "runner_launched",
    "runner_registered",
    "thread_created",
    "unstarted_runners",
]

_coordinators: weakref.WeakSet[Coordinator] = weakref.WeakSet()
_runners: weakref.WeakSet[QueueRunner] = weakref.WeakSet()
_threads: weakref.WeakSet[ThreadRecord] = weakref.WeakSet()
_registered: weakref.WeakSet[QueueRunner] = weakref.WeakSet()


def coordinator_entered(coord: Coordinator) -> None:
    """``coord``'s block was entered."""
    if tracking.on:
        _coordinators.add(coord)


def coordinator_exited(coord: Coordinator) -> None:
    """``coord``'s block was left (its tasks are done, its threads waited for)."""
    _coordinators.discard(coord)


def runner_launched(runner: QueueRunner) -> None:
    """``runner`` was started by a coordinator."""
    if tracking.on:
        _runners.add(runner)


def thread_created(record: ThreadRecord) -> None:
    """A producer thread (not yet started) is described by ``record``."""
    if tracking.on:
        _threads.add(record)


def runner_registered(runner: QueueRunner) -> None:
    """``runner`` was registered with ``add_queue_runner`` (in any context)."""
    if tracking.on:
        _registered.add(runner)


def live_coordinators() -> list[Coordinator]:
    """Coordinators whose block was entered and not yet left."""
    return weak_snapshot(_coordinators)


def live_runners() -> list[QueueRunner]:
    """Runners ever launched and not yet garbage-collected (``running`` tells which
    still have producers alive)."""
    return weak_snapshot(_runners)


def live_threads() -> list[ThreadRecord]:
    """Records of producer threads not yet garbage-collected (``finished`` tells which
    threads have ended)."""
    return weak_snapshot(_threads)


def unstarted_runners() -> list[QueueRunner]:
    """Runners registered with ``add_queue_runner`` (in any context) and never started,
    not yet garbage-collected."""
    return [r for r in weak_snapshot(_registered) if not r.started]
