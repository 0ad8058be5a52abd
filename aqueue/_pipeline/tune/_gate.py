"""Gate: a stage's resizable limit on its workers, for concurrency changed live.

A tuned stage's workers are numbered from 0 (their *slots*). Before each burst, where
a worker holds no item (the start of its step, before its pause point), it passes the
gate: slot ``k`` goes on while ``k < limit``, and otherwise parks until the limit
rises above it or the gate closes. So lowering the limit takes effect at each
worker's next burst (the burst in hand is finished, never dropped), and raising it
wakes the parked workers at once; workers beyond the number started are created by
the run (the gate only admits).

A thread waits on a condition (polling every 0.1 s so that ``check``, the run's stop
test, is seen even if nobody notifies it); a task waits on an event that every change
replaces. ``resize`` and ``close`` are called on the event loop's thread; ``parked``
(workers waiting at the gate now) is read by a checkpoint, for which a parked worker
is at rest: it holds nothing and takes nothing.

``parked_for(slot)`` says how long the thread of ``slot`` has been parked (a process
map retires the worker process of a driver parked long enough: ``process/_workers.py``).

Invariants: passing costs one comparison when the slot is admitted; a parked worker
never holds an item or an ordered map's turn; ``check`` runs before each wait and
after it, so a stopping run ends parked workers cleanly (it raises); after
``close()`` every slot passes (the run is ending: the workers end at their stop
test).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import anyio

__all__ = ["Gate"]

_POLL_S = 0.1  # a parked thread looks at the stop test at least this often


class Gate:
    """A resizable limit on a stage's workers (see the module docstring).

    Args:
        limit: How many workers may work at first (>= 0).
    """

    __slots__ = ("_changed", "_closed", "_cond", "_limit", "_since", "parked")

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"Gate: limit must be >= 0, got {limit}")
        self._limit = limit
        self._closed = False
        self._cond = threading.Condition()
        self._changed: anyio.Event | None = None  # created by the first parked task
        self._since: dict[int, float] = {}  # parked threads: slot -> when it parked
        self.parked = 0

    @property
    def limit(self) -> int:
        return self._limit

    def admits(self, slot: int) -> bool:
        """Whether the worker of ``slot`` may take its next burst now."""
        return slot < self._limit or self._closed

    def resize(self, limit: int) -> None:
        """Allow ``limit`` workers from now on (event loop's thread)."""
        if limit < 0:
            raise ValueError(f"Gate.resize: limit must be >= 0, got {limit}")
        with self._cond:
            self._limit = limit
            self._cond.notify_all()
        self._wake_tasks()

    def close(self) -> None:
        """Let every worker through from now on (the run is ending)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._wake_tasks()

    def _wake_tasks(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def parked_for(self, slot: int) -> float | None:
        """Seconds the thread of ``slot`` has been parked, while the limit still keeps
        it out (None: it is not parked, or it may go on now)."""
        with self._cond:
            since = self._since.get(slot)
            if since is None or slot < self._limit or self._closed:
                return None
            return time.monotonic() - since

    def _count(self, k: int) -> None:
        with self._cond:
            self.parked += k

    def pass_thread(self, slot: int, check: Callable[[], None]) -> None:
        """A worker thread's pass: return at once if ``slot`` is admitted, else wait
        until it is (``check()`` is called before each wait and after: it raises to
        end the worker when the run stops)."""
        if slot < self._limit or self._closed:
            return
        with self._cond:
            self.parked += 1
            self._since[slot] = time.monotonic()
            try:
                while slot >= self._limit and not self._closed:
                    check()
                    self._cond.wait(_POLL_S)
            finally:
                self.parked -= 1
                del self._since[slot]
        check()

    async def pass_task(self, slot: int, check: Callable[[], None]) -> None:
        """A task's pass (see ``pass_thread``); cancellation leaves it parked no more."""
        while slot >= self._limit and not self._closed:
            check()
            changed = self._changed
            if changed is None:
                changed = self._changed = anyio.Event()
            self._count(1)
            try:
                await changed.wait()
            finally:
                self._count(-1)
        check()
