"""Pipeline stages: what each stage does per item, and how it is measured.

A running stage is a QueueRunner whose producers are *steps* built here (the sources'
are in ``_sources.py``): each step takes what it needs from the stage's input queue,
does the stage's work and returns one item, which the runner enqueues into the stage's
output queue. Steps on worker threads use the input queue's blocking view; the others
are tasks on the event loop.

Invariants:

- Items travel between stages in ``_Box``es, one per item, through single-component
  ``dtype=object`` queues, so any Python object (arrays, tuples, dicts) passes
  unchanged. A map stage reuses the box of its input item.
- A step never takes a new item once the run is stopping: it checks the run's
  ``_Stopping`` flag first and raises QueueClosedError (a clean end for its runner).
- Per-worker figures (busy time, put-wait start) live in one ``_Worker`` per step, so
  threads never share a counter; wait samples go to bounded deques (append is atomic).
- Ordered maps (``ordered=True`` with concurrency > 1) number items as they are taken
  (take and numbering happen in one event-loop step, no await between) and return
  item ``k`` only once item ``k - 1`` has been *enqueued*, which a worker learns when
  its runner calls it again; so output order equals input order.
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_process
import anyio.to_thread
import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError, OutOfRangeError, QueueClosedError, QueueEmpty, add_note

if TYPE_CHECKING:
    from .._queues._queue import QueueBase
    from .._queues._views import BlockingQueue

__all__ = ["StageStatistics"]

_WAIT_SAMPLES = 10_000  # wait percentiles are computed over the last this many items

_perf = time.perf_counter


class _Box:
    """One item in flight between stages."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


@dataclass(frozen=True)
class StageStatistics:
    """A snapshot of one pipeline stage, from ``Pipeline.statistics()``."""

    name: str
    """The stage's label, e.g. ``"map(load)"``."""
    items_in: int
    """Items taken from the previous stage (for a source: items read from it)."""
    items_out: int
    """Items put into this stage's output queue (batches, for a batch stage)."""
    items_dropped: int
    """Items a filter stage dropped (0 for other stages)."""
    items_per_s: float
    """``items_out`` divided by the run's duration so far, in items per second."""
    busy_s: float
    """Seconds spent in the stage's own work (the function, the source), summed over
    its workers."""
    concurrency: int
    """Number of workers (tasks, threads or process slots)."""
    occupancy_mean: float
    """Mean fraction of the output queue's capacity in use (sampled every 5 ms)."""
    starved_fraction: float
    """Fraction of the run during which a consumer waited on the empty output queue."""
    put_wait_p50_s: float
    """Median seconds between finishing an item and its output being enqueued."""
    put_wait_p99_s: float
    """99th percentile of the put wait, in seconds."""
    get_wait_p50_s: float
    """Median seconds a worker waited for an input item."""
    get_wait_p99_s: float
    """99th percentile of the get wait, in seconds."""

    elapsed_s: float
    """Seconds since the run started (until it ended, for a finished run)."""

    @property
    def busy_fraction(self) -> float:
        """``busy_s`` over (concurrency x elapsed_s): 1.0 means always working."""
        return self.busy_s / (self.concurrency * self.elapsed_s) if self.elapsed_s > 0 else 0.0


class _Worker:
    """Per-step bookkeeping: busy time and when the last item was handed back."""

    __slots__ = ("busy", "returned", "turn")

    def __init__(self) -> None:
        self.busy = 0.0
        self.returned = 0.0  # perf_counter() when the step last returned an item
        self.turn = -1  # ordered maps: the sequence number this worker holds

    def worked(self, since: float) -> float:
        """The step worked on an item from ``since`` until now; return now."""
        now = _perf()
        self.busy += now - since
        return now


class _Meter:
    """One stage's measurements (shared by its workers)."""

    __slots__ = ("dropped", "get_waits", "occ_n", "occ_sum", "put_waits", "workers")

    def __init__(self) -> None:
        self.workers: list[_Worker] = []
        self.get_waits: collections.deque[float] = collections.deque(maxlen=_WAIT_SAMPLES)
        self.put_waits: collections.deque[float] = collections.deque(maxlen=_WAIT_SAMPLES)
        self.dropped = 0
        self.occ_sum = 0.0
        self.occ_n = 0

    def worker(self) -> _Worker:
        w = _Worker()
        self.workers.append(w)
        return w

    def began(self, w: _Worker) -> float:
        """A step starts: record the put wait of the previous item; return now."""
        now = _perf()
        if w.returned:
            self.put_waits.append(now - w.returned)
            w.returned = 0.0
        return now

    def got(self, since: float) -> float:
        """A step waited for its input from ``since`` until now; return now."""
        now = _perf()
        self.get_waits.append(now - since)
        return now

    @property
    def busy(self) -> float:
        return sum(w.busy for w in self.workers)


def _percentiles(samples: collections.deque[float]) -> tuple[float, float]:
    if not samples:
        return 0.0, 0.0
    p50, p99 = np.percentile(np.fromiter(list(samples), dtype=np.float64), [50, 99])
    return float(p50), float(p99)


class _Stopping:
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


_CLEAN = (OutOfRangeError, QueueClosedError)  # a source queue ended: not a failure


def _noted(exc: BaseException, label: str) -> None:
    add_note(exc, f"raised in pipeline stage {label}")


# -- map ----------------------------------------------------------------------------------


def _thread_step(
    take: Callable[[], Any],
    work: Callable[[Any], _Box],
    meter: _Meter,
    stop: _Stopping,
    label: str,
) -> Callable[[], _Box]:
    """A step for a worker thread: ``take()`` its input, ``work`` on it, hand it back."""
    w = meter.worker()

    def step() -> _Box:
        t0 = meter.began(w)
        stop.check()
        got = take()
        t1 = meter.got(t0)
        try:
            box = work(got)
        except Exception as exc:
            _noted(exc, label)
            raise
        w.returned = w.worked(t1)
        return box

    return step


def thread_map_step(
    fn: Callable[[Any], Any],
    source: BlockingQueue,
    meter: _Meter,
    stop: _Stopping,
    label: str,
) -> Callable[[], _Box]:
    """A step for a worker thread: take an item, apply ``fn``, hand it back."""

    def apply(box: _Box) -> _Box:
        box.value = fn(box.value)
        return box

    return _thread_step(source.dequeue, apply, meter, stop, label)


class _Turns:
    """Output turns of an ordered map (event-loop side only)."""

    __slots__ = ("_changed", "next_in", "next_out", "stop")

    def __init__(self, stop: _Stopping) -> None:
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
    source: QueueBase,
    meter: _Meter,
    stop: _Stopping,
    label: str,
    turns: _Turns | None,
) -> Callable[[], Any]:
    """A step for a task: ``await call(item)`` (an async fn, or a thread/process hop)."""
    w = meter.worker()

    async def step() -> _Box:
        if turns is not None and w.turn >= 0:
            turns.release(w.turn)  # the runner enqueued our previous item: next one's turn
            w.turn = -1
        t0 = meter.began(w)
        stop.check()
        box: _Box = await _take(source)
        seq = turns.take() if turns is not None else 0
        t1 = meter.got(t0)
        try:
            box.value = await call(box.value)
        except Exception as exc:
            _noted(exc, label)
            raise
        w.worked(t1)
        if turns is not None:
            await turns.wait(seq)
            w.turn = seq
        w.returned = _perf()
        return box

    return step


async def _take(source: QueueBase) -> Any:
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
    source: QueueBase,
    meter: _Meter,
    stop: _Stopping,
    label: str,
) -> Callable[[], Any]:
    """A task step that returns the next item for which ``pred`` is true."""
    w = meter.worker()

    async def step() -> _Box:
        t0 = meter.began(w)
        while True:
            stop.check()
            box: _Box = await source.dequeue()
            t1 = meter.got(t0)
            try:
                keep = await pred(box.value) if is_async else pred(box.value)
            except Exception as exc:
                _noted(exc, label)
                raise
            t0 = w.worked(t1)
            if keep:
                w.returned = t0
                return box
            meter.dropped += 1

    return step


def shuffle_step(
    keep: int, seed: int | None, source: QueueBase, meter: _Meter, stop: _Stopping
) -> Callable[[], Any]:
    """A task step over a deterministic shuffle buffer.

    The buffer holds up to ``keep + 1`` items: each call tops it up from the input and
    returns a uniformly chosen one, so the output order is a pure function of the input
    order and the seed. At the end of the input the buffer drains in random order.
    """
    w = meter.worker()
    rng = random.Random(seed)
    buf: list[_Box] = []
    ended = False

    async def step() -> _Box:
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


def prefetch_step(source: QueueBase, meter: _Meter, stop: _Stopping) -> Callable[[], Any]:
    """A task step that moves one item on."""
    w = meter.worker()

    async def step() -> _Box:
        t0 = meter.began(w)
        stop.check()
        box: _Box = await _take(source)
        w.returned = meter.got(t0)
        return box

    return step


def batch_step(
    size: int,
    smaller: bool,
    pad: bool,
    source: BlockingQueue,
    meter: _Meter,
    stop: _Stopping,
    label: str,
) -> Callable[[], _Box]:
    """A thread step that takes ``size`` items and stacks them into one batch."""
    take = source.dequeue_up_to if smaller else source.dequeue_many

    def stack(boxes: Any) -> _Box:
        return _Box(collate([b.value for b in boxes], pad=pad))

    return _thread_step(lambda: take(size), stack, meter, stop, label)


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
    return _padded(arrays)


def _padded(arrays: list[npt.NDArray[Any]]) -> npt.NDArray[Any]:
    ranks = {a.ndim for a in arrays}
    if len(ranks) != 1:
        raise ElementSpecError(f"batch: cannot pad items of different ranks {sorted(ranks)}")
    dtype = np.result_type(*arrays)
    full = tuple(max(a.shape[d] for a in arrays) for d in range(arrays[0].ndim))
    out = np.zeros((len(arrays), *full), dtype=dtype)
    if dtype.kind == "O":
        out[...] = ""
    for i, a in enumerate(arrays):
        where: tuple[Any, ...] = (i, *(slice(0, n) for n in a.shape))
        out[where] = a
    return out
