"""Map stages: ``concurrency`` workers applying a function to every item, in bursts.

A sync function runs on ``concurrency`` long-lived threads, an async one in
``concurrency`` tasks (a sync one with ``executor="process"`` in worker processes,
driven by threads that work as these do: ``process/_driver.py``). Every worker loops: take a
burst (about half a millisecond of work, see ``burst_size``), apply the
function to each item in order, return the results as one burst, which its runner
enqueues in one ``enqueue_many``. A thread worker therefore costs one lock and at most
one wake-up per burst on each side, and a task worker one checkpoint per burst (or per
``SLICE_S`` of work, whichever comes first: it never holds the event loop longer).

Ordered maps (``ordered=True`` with concurrency > 1) deliver in input order, by turns
(``flow/_turns.py``): a worker takes its burst and numbers it in one step, works on it
concurrently with the others, then waits for its turn before returning it; a task
worker finishes its whole burst first (it yields to the loop every ``SLICE_S`` instead
of returning part of it).

Invariants: a failing item ends the stage with the exception (a note names the stage),
after the items of its burst before it: the step returns those (in their turn, for an
ordered map) and its next call raises the exception. Stopping wakes workers waiting
for their turn (they end cleanly).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from ..flow._bursts import Burst, burst_size, noted, pack, take
from ..flow._control import Stage
from ..flow._turns import AsyncTurns, ThreadTurns

if TYPE_CHECKING:
    from ..._queues._queue import QueueBase
    from ..._queues._views import BlockingQueue

__all__ = ["SLICE_S", "async_map_step", "thread_map_step"]

SLICE_S = 0.001  # seconds a task worker runs items before it hands on what it has done
_perf = time.perf_counter
_cpu = time.thread_time  # a thread map's CPU: its worker threads' own


def thread_map_step(
    fn: Callable[[Any], Any],
    source: BlockingQueue[Any],
    stage: Stage,
    turns: ThreadTurns | None,
    slot: int = 0,
) -> Callable[[], Burst]:
    """A step for a worker thread: take a burst, apply ``fn`` to each item, return it
    (``slot``: the worker's number, passed to a tuned map's gate)."""
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
        stage.start_thread(slot)
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
        c1 = _cpu()
        out: list[Any] = []
        keep = out.append  # (bound once: the loop costs what a comprehension does)
        try:
            for x in burst:
                keep(fn(x))
        except Exception as exc:
            noted(exc, label)
            failed.append(exc)
        w.cpu += _cpu() - c1
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
    slot: int = 0,
) -> Callable[[], Awaitable[Burst]]:
    """A step for a task: take a burst, ``await call(item)`` for each, return it
    (``slot``: see ``thread_map_step``).

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
            await stage.start_task(slot)
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
