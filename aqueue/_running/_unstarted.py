"""The warning for TF's most common silent hang: a consumer blocked on the queue of a
runner that was registered with ``add_queue_runner`` and never started.

It needs no thread, task or timer of its own, and works with or without a
Coordinator. While some registered runner has not started, this module's watch is
registered with the waiting kernel (``watch_slow_waits``, ``aqueue/_waiting/_wait.py``):
a consumer (a dequeue, a sample, on a task or a thread) that parks on the queue or
table of such a runner gives its first sleep a deadline of ``SLOW_WAIT_S`` (a second);
on expiry the watch logs one warning on the "aqueue" logger naming the queue, the
runner and the fix, and the consumer goes on waiting. When the last unstarted runner
starts (``started``) or is garbage-collected, the watch is withdrawn and waits pay
nothing for it again.

Invariants (under ``_lock``; registrations, starts and waits may come from any
thread): the watch is registered exactly while ``_unstarted`` may hold a runner not
yet started (a collected runner leaves the weak set at once; the watch is withdrawn at
the next registration, start or watched wait); each queue is warned about at most once
(``_warned``, weak). Queues whose consumers do not wait in process (shared queues)
are never watched: their waits do not go through the waiting kernel.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, Protocol

from .._queues._protocol import Sink
from .._replay._protocol import SampledTable
from .._waiting import _wait
from .._waiting._tracking import weak_snapshot

__all__ = ["registered", "started"]

logger = logging.getLogger("aqueue")


class _Runner(Protocol):
    """What the watch reads of a runner."""

    @property
    def name(self) -> str: ...

    @property
    def queue(self) -> Sink: ...

    @property
    def started(self) -> bool: ...


_lock = threading.Lock()
_unstarted: weakref.WeakSet[_Runner] = weakref.WeakSet()
_warned: weakref.WeakSet[Any] = weakref.WeakSet()  # queues and tables warned about


def _pending() -> list[_Runner]:
    """The registered runners not yet started; withdraws the watch when there are
    none (lock held)."""
    runners = [r for r in weak_snapshot(_unstarted) if not r.started]
    if not runners:
        _unstarted.clear()
        _wait.watch_slow_waits(None)
    return runners


class _Watch:
    """The ``SlowWaitWatch`` registered while a runner waits to be started."""

    def watches(self, consumed: Any) -> bool:
        with _lock:
            return any(r.queue is consumed for r in _pending()) and not any(
                w is consumed for w in weak_snapshot(_warned)
            )

    def waited(self, consumed: Any) -> None:
        with _lock:
            runner = next((r for r in _pending() if r.queue is consumed), None)
            if runner is None or any(w is consumed for w in weak_snapshot(_warned)):
                return
            _warned.add(consumed)
        what = "replay table" if isinstance(consumed, SampledTable) else "queue"
        logger.warning(
            "%s '%s': a consumer has waited %g s, but QueueRunner '%s' that feeds it was "
            "registered with add_queue_runner() and never started; call "
            "coord.start_queue_runners() (or coord.start(runner)) inside `async with "
            "Coordinator() as coord:`",
            what,
            consumed.name,
            _wait.SLOW_WAIT_S,
            runner.name,
        )


_WATCH = _Watch()


def registered(runner: _Runner) -> None:
    """``runner`` was registered with ``add_queue_runner``: watched until it starts."""
    if runner.started:
        return
    with _lock:
        _unstarted.add(runner)
        _wait.watch_slow_waits(_WATCH)


def started(runner: _Runner) -> None:
    """``runner`` was started: no longer watched (nor anything, once none is left)."""
    if not _unstarted:  # (nothing registered is waiting to start: nothing to do)
        return
    with _lock:
        _unstarted.discard(runner)
        _pending()
