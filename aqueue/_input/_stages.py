"""Pipeline stages: what each stage does per item, and how it is measured.

A running stage is a QueueRunner whose producers are *steps* built here (the sources'
are in ``_sources.py``): each step takes what it needs from the stage's input queue,
does the stage's work and returns one item, which the runner enqueues into the stage's
output queue. Steps on worker threads use the input queue's blocking view; the others
are tasks on the event loop.

Invariants:

- Items travel between stages in ``Box``es, one per item, through single-component
  ``dtype=object`` queues, so any Python object (arrays, tuples, dicts) passes
  unchanged. A map stage reuses the box of its input item.
- A step never takes a new item once the run is stopping: it checks the run's
  ``Stopping`` flag first and raises QueueClosedError (a clean end for its runner).
- Per-worker figures (busy time, put-wait start) live in one ``Worker`` per step, so
  threads never share a counter; wait samples go to bounded deques (append is atomic).
- Ordered maps (``ordered=True`` with concurrency > 1) number items as they are taken
  (take and numbering happen in one event-loop step, no await between) and return
  item ``k`` only once item ``k - 1`` has been *enqueued*, which a worker learns when
  its runner calls it again; so output order equals input order.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_process
import anyio.to_thread
import numpy as np

from .._errors import ElementSpecError, OutOfRangeError, QueueClosedError, QueueEmpty, add_note
from .._queues._tuples import pad_stack
from ._meter import Meter

if TYPE_CHECKING:
    from .._queues._queue import QueueBase
    from .._queues._views import BlockingQueue

__all__ = [
    "CLEAN",
    "Box",
    "Stopping",
    "Turns",
    "async_map_step",
    "batch_step",
    "collate",
    "filter_step",
    "noted",
    "offloaded",
    "prefetch_step",
    "shuffle_step",
    "thread_map_step",
]

_perf = time.perf_counter


class Box:
    """One item in flight between stages."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Stopping:
    """The run's stop flag, set when the pipeline is torn down.

    Async sources wait for their next item inside ``interruptible()``: stopping cancels
    those waits, since an external source (a queue nobody closes, a network stream) may
    never deliver again.
    """

    __slots__ = ("_scopes", "set")

    def __init__(self) -> None:
        self.set = False
        self._scopes: set[anyio.CancelScope] = set()

    def check(self) -> None:
        if self.set:
            raise QueueClosedError("the pipeline is stopping")

    def stop(self) -> None:
        self.set = True
        for scope in list(self._scopes):
            scope.cancel()

    async def interruptible(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """``await fn()``, ended with QueueClosedError (a clean end) when stopping."""
        self.check()
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                return await fn()
            finally:
                self._scopes.discard(scope)
        raise QueueClosedError("the pipeline is stopping")


CLEAN = (OutOfRangeError, QueueClosedError)  # a source queue ended: not a failure


def noted(exc: BaseException, label: str) -> None:
    add_note(exc, f"raised in pipeline stage {label}")


# -- map ----------------------------------------------------------------------------------


def threaded_step(
    take: Callable[[], Any],
    work: Callable[[Any], Box],
    meter: Meter,
    stop: Stopping,
    label: str,
) -> Callable[[], Box]:
    """A step for a worker thread: ``take()`` its input, ``work`` on it, hand it back."""
    w = meter.worker()

    def step() -> Box:
        t0 = meter.began(w)
        stop.check()
        got = take()
        t1 = meter.got(t0)
        try:
            box = work(got)
        except Exception as exc:
            noted(exc, label)
            raise
        w.returned = w.worked(t1)
        return box

    return step


def thread_map_step(
    fn: Callable[[Any], Any],
    source: BlockingQueue[Any],
    meter: Meter,
    stop: Stopping,
    label: str,
) -> Callable[[], Box]:
    """A step for a worker thread: take an item, apply ``fn``, hand it back."""

    def apply(box: Box) -> Box:
        box.value = fn(box.value)
        return box

    return threaded_step(source.dequeue, apply, meter, stop, label)


class Turns:
    """Output turns of an ordered map (event-loop side only)."""

    __slots__ = ("_changed", "next_in", "next_out", "stop")

    def __init__(self, stop: Stopping) -> None:
        self.next_in = 0
        self.next_out = 0
        self.stop = stop
        self._changed = anyio.Event()

    def take(self) -> int:
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


def async_map_step(
    call: Callable[[Any], Any],
    source: QueueBase[Any],
    meter: Meter,
    stop: Stopping,
    label: str,
    turns: Turns | None,
) -> Callable[[], Any]:
    """A step for a task: ``await call(item)`` (an async fn, or a thread/process hop)."""
    w = meter.worker()

    async def step() -> Box:
        if turns is not None and w.turn >= 0:
            turns.release(w.turn)  # the runner enqueued our previous item: next one's turn
            w.turn = -1
        t0 = meter.began(w)
        stop.check()
        box: Box = await _take(source)
        seq = turns.take() if turns is not None else 0
        t1 = meter.got(t0)
        try:
            box.value = await call(box.value)
        except Exception as exc:
            noted(exc, label)
            raise
        w.worked(t1)
        if turns is not None:
            await turns.wait(seq)
            w.turn = seq
        w.returned = _perf()
        return box

    return step


async def _take(source: QueueBase[Any]) -> Any:
    """The next element of ``source``: taken at once when one is there, else awaited.

    Only for steps that return the element (or what they make of it): their runner's
    enqueue then yields to the event loop once per item, so taking without a checkpoint
    never starves other tasks, and an item waiting in the queue is worked on one
    event-loop iteration sooner.
    """
    if source.size():
        try:
            return source.dequeue_nowait()
        except QueueEmpty:  # earlier dequeues are waiting: queue up behind them
            pass
    return await source.dequeue()


def offloaded(fn: Callable[[Any], Any], executor: str, concurrency: int) -> Callable[[Any], Any]:
    """``fn`` as an async callable running on a thread or in a worker process."""
    limiter = anyio.CapacityLimiter(concurrency)
    if executor == "process":

        async def in_process(item: Any) -> Any:
            return await anyio.to_process.run_sync(fn, item, limiter=limiter)

        return in_process

    async def in_thread(item: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, item, limiter=limiter)

    return in_thread


# -- filter, shuffle, prefetch, batch -------------------------------------------------------


def filter_step(
    pred: Callable[[Any], Any],
    is_async: bool,
    source: QueueBase[Any],
    meter: Meter,
    stop: Stopping,
    label: str,
) -> Callable[[], Any]:
    """A task step that returns the next item for which ``pred`` is true."""
    w = meter.worker()

    async def step() -> Box:
        t0 = meter.began(w)
        while True:
            stop.check()
            box: Box = await source.dequeue()
            t1 = meter.got(t0)
            try:
                keep = await pred(box.value) if is_async else pred(box.value)
            except Exception as exc:
                noted(exc, label)
                raise
            t0 = w.worked(t1)
            if keep:
                w.returned = t0
                return box
            meter.dropped += 1

    return step


def shuffle_step(
    keep: int, seed: int | None, source: QueueBase[Any], meter: Meter, stop: Stopping
) -> Callable[[], Any]:
    """A task step over a deterministic shuffle buffer.

    The buffer holds up to ``keep + 1`` items: each call tops it up from the input and
    returns a uniformly chosen one, so the output order is a pure function of the input
    order and the seed. At the end of the input the buffer drains in random order.
    """
    w = meter.worker()
    rng = random.Random(seed)
    buf: list[Box] = []
    ended = False

    async def step() -> Box:
        nonlocal ended
        t0 = meter.began(w)
        stop.check()
        while not ended and len(buf) <= keep:
            try:
                buf.append(await source.dequeue())
            except OutOfRangeError:
                ended = True
        meter.got(t0)
        if not buf:
            raise StopAsyncIteration
        j = rng.randrange(len(buf))
        buf[j], buf[-1] = buf[-1], buf[j]
        w.returned = _perf()
        return buf.pop()

    return step


def prefetch_step(source: QueueBase[Any], meter: Meter, stop: Stopping) -> Callable[[], Any]:
    """A task step that moves one item on."""
    w = meter.worker()

    async def step() -> Box:
        t0 = meter.began(w)
        stop.check()
        box: Box = await _take(source)
        w.returned = meter.got(t0)
        return box

    return step


def batch_step(
    size: int,
    smaller: bool,
    pad: bool,
    source: BlockingQueue[Any],
    meter: Meter,
    stop: Stopping,
    label: str,
) -> Callable[[], Box]:
    """A thread step that takes ``size`` items and stacks them into one batch."""
    take = source.dequeue_up_to if smaller else source.dequeue_many

    def stack(boxes: Any) -> Box:
        return Box(collate([b.value for b in boxes], pad=pad))

    return threaded_step(lambda: take(size), stack, meter, stop, label)


def collate(items: list[Any], *, pad: bool = False) -> Any:
    """Stack items into a batch: tuples and dicts per component, arrays on a new axis 0.

    With ``pad``, arrays of one rank but different shapes are padded at the end of
    each dimension to the largest, with 0 (or ``""`` for strings and objects).

    Raises:
        ElementSpecError: Items differ in structure, or in shape without ``pad``.
    """
    first = items[0]
    if isinstance(first, tuple):
        if any(not isinstance(x, tuple) or len(x) != len(first) for x in items):
            raise ElementSpecError("batch: items must all be tuples of the same length")
        return tuple(collate([x[i] for x in items], pad=pad) for i in range(len(first)))
    if isinstance(first, dict):
        keys = list(first)
        if any(not isinstance(x, dict) or x.keys() != first.keys() for x in items):
            raise ElementSpecError(f"batch: items must all be dicts with keys {keys}")
        return {k: collate([x[k] for x in items], pad=pad) for k in keys}
    arrays = [np.asarray(x) for x in items]
    if any(a.dtype.kind in "SU" for a in arrays):
        arrays = [a.astype(object) for a in arrays]
    shapes = {a.shape for a in arrays}
    if len(shapes) == 1:
        return np.stack(arrays)
    if not pad:
        raise ElementSpecError(
            f"batch: items have different shapes {sorted(shapes)}; use "
            "batch(..., dynamic_pad=True) to pad them"
        )
    return pad_stack(arrays, np.result_type(*arrays))
