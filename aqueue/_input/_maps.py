"""Map stages: ``concurrency`` workers applying a function to every item, in bursts.

A sync function runs on ``concurrency`` long-lived threads, an async one in
``concurrency`` tasks, a sync one with ``executor="process"`` in worker processes
(through ``anyio.to_process``, one round trip per item). Every worker loops: take a
burst (about half a millisecond of work, see ``burst_size``), apply the
function to each item in order, return the results as one burst, which its runner
enqueues in one ``enqueue_many``. A thread worker therefore costs one lock and at most
one wake-up per burst on each side, and a task worker one checkpoint per burst (or per
``SLICE_S`` of work, whichever comes first: it never holds the event loop longer).

Ordered maps (``ordered=True`` with concurrency > 1) deliver in input order:

- a worker takes its burst and numbers it in one step (under ``Turns.taking``, so no
  other worker takes in between), works on it concurrently with the others, then
  waits for its turn (every earlier burst has been *enqueued*) before returning it;
- a worker learns that its previous burst was enqueued when its runner calls it again,
  and only then passes the turn on. So output order equals input order, burst by burst.

Invariants: a failing item ends the stage with the exception (a note names the stage);
the items of that burst before it are dropped with it (the run is failing anyway).
Stopping wakes workers waiting for their turn (they end cleanly).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_process
import anyio.to_thread

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
    "offloaded",
    "thread_map_step",
]

SLICE_S = 0.001  # seconds a task worker runs items before it hands on what it has done
_perf = time.perf_counter


class ThreadTurns:
    """Output turns of an ordered map whose workers are threads."""

    __slots__ = ("_cond", "next_in", "next_out", "stop", "taking")

    def __init__(self, stop: Control) -> None:
        self.next_in = 0
        self.next_out = 0
        self.stop = stop
        self.taking = threading.Lock()  # held while a worker takes and numbers a burst
        self._cond = threading.Condition()

    def number(self) -> int:
        seq = self.next_in
        self.next_in += 1
        return seq

    def release(self, seq: int) -> None:
        with self._cond:
            self.next_out = seq + 1
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def wait(self, seq: int) -> None:
        with self._cond:
            while self.next_out != seq:
                self.stop.check()
                self._cond.wait(0.1)  # (a stop sets no condition: look again soon)


class AsyncTurns:
    """Output turns of an ordered map whose workers are tasks (event-loop side only)."""

    __slots__ = ("_changed", "next_in", "next_out", "stop", "taking")

    def __init__(self, stop: Control) -> None:
        self.next_in = 0
        self.next_out = 0
        self.stop = stop
        self.taking = anyio.Lock()
        self._changed = anyio.Event()

    def number(self) -> int:
        seq = self.next_in
        self.next_in += 1
        return seq

    def release(self, seq: int) -> None:
        self.next_out = seq + 1
        self.wake()

    def wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait(self, seq: int) -> None:
        while self.next_out != seq:
            self.stop.check()
            await self._changed.wait()


def thread_map_step(
    fn: Callable[[Any], Any],
    source: BlockingQueue[Any],
    stage: Stage,
    turns: ThreadTurns | None,
) -> Callable[[], Burst]:
    """A step for a worker thread: take a burst, apply ``fn`` to each item, return it."""
    meter, label = stage.meter, stage.label
    w = meter.worker()

    def step() -> Burst:
        if turns is not None and w.turn >= 0:
            turns.release(w.turn)  # the runner enqueued our previous burst
            w.turn = -1
        t0 = meter.began(w)
        stage.start_thread()
        if turns is None:
            burst = source.dequeue_burst(burst_size(w.item_s))
        else:
            with turns.taking:
                burst = source.dequeue_burst(burst_size(w.item_s))
                seq = turns.number()
        t1 = meter.got(t0)
        try:
            out = [fn(x) for x in burst]
        except Exception as exc:
            noted(exc, label)
            raise
        w.returned = w.worked(t1, len(out))
        if turns is not None:
            turns.wait(seq)
            w.turn = seq
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

    async def step() -> Burst:
        nonlocal pending, seq
        if turns is not None and w.turn >= 0 and not pending:
            turns.release(w.turn)  # the runner enqueued the last of our previous burst
            w.turn = -1
        t0 = meter.began(w)
        if pending:  # a burst not finished in one slice: go on with it (no pause here)
            stage.control.check()
        else:
            await stage.start_task()
            if turns is None:
                burst = await take(source, burst_size(w.item_s))
            else:
                async with turns.taking:
                    burst = await take(source, burst_size(w.item_s))
                    seq = turns.number()
            pending = burst.tolist()
        t1 = meter.got(t0)
        out: list[Any] = []
        deadline = t1 + SLICE_S
        try:
            for x in pending:
                out.append(await call(x))
                if _perf() > deadline:
                    break
        except Exception as exc:
            noted(exc, label)
            raise
        del pending[: len(out)]
        w.returned = w.worked(t1, len(out))
        if turns is not None and w.turn < 0:
            await turns.wait(seq)
            w.turn = seq
        return pack(out)

    return step


def offloaded(fn: Callable[[Any], Any], executor: str, concurrency: int) -> Callable[[Any], Any]:
    """``fn`` as an async callable running in a worker process (``executor="process"``)
    or on anyio's thread pool."""
    limiter = anyio.CapacityLimiter(concurrency)
    if executor == "process":

        async def in_process(item: Any) -> Any:
            return await anyio.to_process.run_sync(fn, item, limiter=limiter)

        return in_process

    async def in_thread(item: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, item, limiter=limiter)

    return in_thread
