"""Turns: the output order of an ordered map (``ordered=True`` with concurrency > 1).

Its workers (threads, tasks, or a process map's driver threads) deliver in input
order:

- a worker takes its burst and numbers it in one step (under ``taking``, so no other
  worker takes in between), works on it concurrently with the others, then waits for
  its turn (every earlier burst has been *enqueued*) before returning it;
- a worker learns that its previous burst was enqueued when its runner calls it again,
  and only then passes the turn on (``release``). So output order equals input order,
  burst by burst.

For checkpoints (``run/_checkpoint.py``) the turns tell which workers hold nothing yet
(``taking_count``: waiting for the lock, or parked in the take under it) and publish
the finished bursts that wait for their turn (``waiting``, by number): both are at
rest, and the waiting bursts belong to the output queue's items in the cut. Stopping
the stage wakes the workers waiting for their turn (``wake``): they end cleanly.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio

from ._control import Control

__all__ = ["AsyncTurns", "ThreadTurns"]


class _Turns:
    """What both kinds of turns share: numbering, and what a checkpoint reads."""

    __slots__ = ("next_in", "next_out", "stage", "stop", "taking_count", "waiting")

    def __init__(self, stop: Control, stage: int) -> None:
        self.next_in = 0
        self.next_out = 0
        self.stop = stop
        self.stage = stage  # the map's stage number (its stop)
        self.taking_count = 0  # workers waiting for ``taking`` or holding it
        self.waiting: dict[int, list[Any]] = {}  # finished bursts waiting for their turn

    def number(self) -> int:
        seq = self.next_in
        self.next_in += 1
        return seq

    def quiet_waiting(self) -> int:
        """Workers whose finished burst waits for a turn that is not theirs yet."""
        return sum(1 for seq in list(self.waiting) if seq != self.next_out)

    def waiting_items(self) -> list[Any]:
        """The items of the bursts waiting for their turn, in output order."""
        waiting = dict(self.waiting)
        return [x for seq in sorted(waiting) for x in waiting[seq]]


class ThreadTurns(_Turns):
    """Output turns of an ordered map whose workers are threads."""

    __slots__ = ("_cond", "taking")

    def __init__(self, stop: Control, stage: int) -> None:
        super().__init__(stop, stage)
        self.taking = threading.Lock()  # held while a worker takes and numbers a burst
        self._cond = threading.Condition()

    def count_taking(self, k: int) -> None:
        with self._cond:
            self.taking_count += k

    def release(self, seq: int) -> None:
        with self._cond:
            self.next_out = seq + 1
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def wait(self, seq: int, burst: list[Any]) -> None:
        with self._cond:
            self.waiting[seq] = burst
            try:
                while self.next_out != seq:
                    self.stop.check(self.stage)
                    self._cond.wait(0.1)  # (a stop sets no condition: look again soon)
            finally:
                del self.waiting[seq]


class AsyncTurns(_Turns):
    """Output turns of an ordered map whose workers are tasks (event-loop side only)."""

    __slots__ = ("_changed", "taking")

    def __init__(self, stop: Control, stage: int) -> None:
        super().__init__(stop, stage)
        self.taking = anyio.Lock()
        self._changed = anyio.Event()

    def count_taking(self, k: int) -> None:
        self.taking_count += k

    def release(self, seq: int) -> None:
        self.next_out = seq + 1
        self.wake()

    def wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait(self, seq: int, burst: list[Any]) -> None:
        self.waiting[seq] = burst
        try:
            while self.next_out != seq:
                self.stop.check(self.stage)
                await self._changed.wait()
        finally:
            del self.waiting[seq]
