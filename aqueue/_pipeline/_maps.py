"""Map stages: ``concurrency`` workers applying a function to every item, in bursts.

A sync function runs on ``concurrency`` long-lived threads, an async one in
``concurrency`` tasks (a sync one with ``executor="process"`` in worker processes,
driven by threads that work as these do: ``_procmap.py``). Every worker loops: take a
burst (about half a millisecond of work, see ``burst_size``), apply the
function to each item in order, return the results as one burst, which its runner
enqueues in one ``enqueue_many``. A thread worker therefore costs one lock and at most
one wake-up per burst on each side, and a task worker one checkpoint per burst (or per
``SLICE_S`` of work, whichever comes first: it never holds the event loop longer).

Ordered maps (``ordered=True`` with concurrency > 1) deliver in input order:

- a worker takes its burst and numbers it in one step (under ``Turns.taking``, so no
  other worker takes in between), works on it concurrently with the others, then
  waits for its turn (every earlier burst has been *enqueued*) before returning it;
  a task worker finishes its whole burst first (it yields to the loop every
  ``SLICE_S`` instead of returning part of it);
- a worker learns that its previous burst was enqueued when its runner calls it again,
  and only then passes the turn on. So output order equals input order, burst by burst.

For checkpoints (``_checkpoint.py``) the turns tell which workers hold nothing yet
(``taking``: waiting for the lock, or parked in the take under it) and publish the
finished bursts that wait for their turn (``waiting``, by number): both are at rest,
and the waiting bursts belong to the output queue's items in the cut.

Invariants: a failing item ends the stage with the exception (a note names the stage),
after the items of its burst before it: the step returns those (in their turn, for an
ordered map) and its next call raises the exception. Stopping wakes workers waiting
for their turn (they end cleanly).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from ._control import Control, Stage
from ._stages import Burst, burst_size, noted, pack, take

if TYPE_CHECKING:
    from .._queues._queue import QueueBase
    from .._queues._views import BlockingQueue

__all__ = [
    "SLICE_S",
    "AsyncTurns",
    "ThreadTurns",
    "async_map_step",
    "thread_map_step",
]

SLICE_S = 0.001  # seconds a task worker runs items before it hands on what it has done
_perf = time.perf_counter


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


def thread_map_step(
    fn: Callable[[Any], Any],
    source: BlockingQueue[Any],
    stage: Stage,
    turns: ThreadTurns | None,
) -> Callable[[], Burst]:
    """A step for a worker thread: take a burst, apply ``fn`` to each item, return it."""
    meter, label = stage.meter, stage.label
    w = meter.worker()
    failed: list[Exception] = []  # raised by an item after those handed on before it

    def step() -> Burst:
        if failed:  # (holding its turn: no later burst goes before the stage stops)
            raise failed.pop()
        if turns is not None and w.turn >= 0:
            turns.release(w.turn)  # the runner enqueued our previous burst
            w.turn = -1
        t0 = meter.began(w)
        stage.start_thread()
        if turns is None:
            burst = source.dequeue_burst(burst_size(w.item_s))
        else:
            turns.count_taking(1)
            try:
                with turns.taking:
                    burst = source.dequeue_burst(burst_size(w.item_s))
                    seq = turns.number()
            finally:
                turns.count_taking(-1)
        t1 = meter.got(t0)
        out: list[Any] = []
        try:
            for x in burst:
                out.append(fn(x))
        except Exception as exc:
            noted(exc, label)
            failed.append(exc)
        w.returned = w.worked(t1, len(out))
        if turns is not None:
            turns.wait(seq, out)
            w.turn = seq
        if failed and not out:
            raise failed.pop()  # (in its turn: after every item before it)
        return pack(out)

    return step


def async_map_step(
    call: Callable[[Any], Awaitable[Any]],
    source: QueueBase[Any],
    stage: Stage,
    turns: AsyncTurns | None,
) -> Callable[[], Awaitable[Burst]]:
    """A step for a task: take a burst, ``await call(item)`` for each, return it.

    The task runs on the event loop, so a call returns what it has done after
    ``SLICE_S`` seconds and keeps the rest of its burst for the next call: the loop is
    never held longer than that (plus one item), even by a function that never awaits.
    """
    meter, label = stage.meter, stage.label
    w = meter.worker()
    pending: list[Any] = []  # the rest of the current burst
    seq = -1  # the current burst's number (ordered maps)
    failed: list[Exception] = []  # raised by an item after those handed on before it

    async def step() -> Burst:
        nonlocal pending, seq
        if failed:  # (holding its turn: no later burst goes before the stage stops)
            raise failed.pop()
        if turns is not None and w.turn >= 0 and not pending:
            turns.release(w.turn)  # the runner enqueued the last of our previous burst
            w.turn = -1
        t0 = meter.began(w)
        if pending:  # a burst not finished in one slice: go on with it (no pause here)
            stage.check()
        else:
            await stage.start_task()
            if turns is None:
                burst = await take(source, burst_size(w.item_s))
            else:
                turns.count_taking(1)
                try:
                    async with turns.taking:
                        burst = await take(source, burst_size(w.item_s))
                        seq = turns.number()
                finally:
                    turns.count_taking(-1)
            pending = w.held = burst.tolist()
        t1 = meter.got(t0)
        out: list[Any] = []
        deadline = t1 + SLICE_S
        try:
            for x in pending:
                out.append(await call(x))
                if _perf() > deadline:
                    if turns is None:
                        break  # hand on what is done; the rest at the next call
                    await anyio.lowlevel.checkpoint()  # ordered: finish the burst
                    deadline = _perf() + SLICE_S
        except Exception as exc:
            noted(exc, label)
            failed.append(exc)
        del pending[: len(out)]
        w.returned = w.worked(t1, len(out))
        if turns is not None:
            await turns.wait(seq, out)
            w.turn = seq
        if failed and not out:
            raise failed.pop()  # (in its turn: after every item before it)
        return pack(out)

    return step
