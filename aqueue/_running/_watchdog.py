"""The coordinator's view of its queues, and the stall watchdog.

A ``QueueMonitor`` remembers every queue a coordinator has seen (the queues of the
runners it started, plus those passed to ``coord.watch``), with a baseline snapshot of
each queue's statistics taken when it was first seen. It only reads
``queue.statistics()`` and the runners' producer states; it never changes anything.
A shared queue, whose statistics need its server, is remembered but not checked here
(``base`` is None). ``report()`` (in ``_report.py``) reads the same entries.

Stall rule: a queue *stalls* when tasks or threads wait on it and neither its
enqueued nor its dequeued total has moved for ``threshold`` seconds (counted from the
later of the last progress and the moment waiting began). One warning is logged per
stall; progress re-arms it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio

from .._queues._protocol import AsyncQueue, local_statistics
from .._queues._stats import QueueStatistics

if TYPE_CHECKING:
    from ._runner import QueueRunner

__all__ = ["QueueMonitor", "Watched"]

logger = logging.getLogger("aqueue")


class Watched:
    """One queue a coordinator has seen."""

    __slots__ = (
        "base",
        "explicit",
        "last_change",
        "progress",
        "queue",
        "runners",
        "waiting_since",
        "warned",
    )

    def __init__(self, queue: AsyncQueue, now: float) -> None:
        self.queue = queue
        self.runners: list[QueueRunner] = []
        self.explicit = False  # passed to coord.watch: a queue the body consumes
        self.base = local_statistics(queue)  # None for a shared queue
        self.progress = (
            (self.base.enqueued_total, self.base.dequeued_total) if self.base else (0, 0)
        )
        self.last_change = now
        self.waiting_since: float | None = None
        self.warned = False


class QueueMonitor:
    """Queues seen by one coordinator, and their stall checks."""

    def __init__(self) -> None:
        self._watched: dict[int, Watched] = {}

    @property
    def watched(self) -> list[Watched]:
        """Every queue seen, with its runners and baseline, in the order first seen."""
        return list(self._watched.values())

    def add(
        self, queue: AsyncQueue, runner: QueueRunner | None = None, *, explicit: bool = False
    ) -> None:
        """Start watching ``queue`` (idempotent), optionally as fed by ``runner``."""
        w = self._watched.get(id(queue))
        if w is None:
            w = self._watched[id(queue)] = Watched(queue, time.monotonic())
        if runner is not None and runner not in w.runners:
            w.runners.append(runner)
        w.explicit = w.explicit or explicit

    @property
    def queues(self) -> list[AsyncQueue]:
        """Every queue seen, in the order first seen."""
        return [w.queue for w in self._watched.values()]

    # -- stall watchdog ------------------------------------------------------------------

    async def run(self, threshold: float) -> None:
        """Check every ``threshold / 5`` seconds (at most 1 s) until cancelled."""
        period = min(threshold / 5, 1.0)
        while True:
            await anyio.sleep(period)
            self.check(time.monotonic(), threshold)

    def check(self, now: float, threshold: float) -> list[str]:
        """Log (and return) a warning for each queue that newly stalled."""
        messages = []
        for w in self._watched.values():
            st = local_statistics(w.queue)
            if st is None:
                continue
            progress = (st.enqueued_total, st.dequeued_total)
            if progress != w.progress:
                w.progress = progress
                w.last_change = now
                w.warned = False
            if not (st.tasks_waiting_enqueue or st.tasks_waiting_dequeue):
                w.waiting_since = None
                w.warned = False
                continue
            if w.waiting_since is None:
                w.waiting_since = now
            stalled = now - max(w.last_change, w.waiting_since)
            if stalled >= threshold and not w.warned:
                w.warned = True
                message = self._stall_message(w, st, stalled)
                logger.warning("%s", message)
                messages.append(message)
        return messages

    def _stall_message(self, w: Watched, st: QueueStatistics, stalled: float) -> str:
        sides = []
        if st.tasks_waiting_enqueue:
            sides.append(f"{st.tasks_waiting_enqueue} waiting to enqueue")
        if st.tasks_waiting_dequeue:
            sides.append(f"{st.tasks_waiting_dequeue} waiting to dequeue")
        blocked = " and ".join(s for s in ("enqueue", "dequeue") if any(s in x for x in sides))
        parts = [
            f"queue '{w.queue.name}' made no progress for {stalled:.1f} s while tasks wait on "
            f"it (blocked side: {blocked}; {', '.join(sides)}; size {st.size}/{st.capacity}"
            f"{', closed' if st.closed else ''})"
        ]
        if not w.runners:
            parts.append("no QueueRunner started by this coordinator feeds it")
        for r in w.runners:
            states = r.producer_states()
            alive = sum(1 for _, s in states if s != "done")
            waiting = [label for label, s in states if s == "enqueueing"]
            text = f"QueueRunner '{r.name}': {alive} of {len(states)} producers alive"
            if waiting:
                text += f", blocked in enqueue: {', '.join(waiting)}"
            parts.append(text)
        return "; ".join(parts)
