"""Pipeline stages other than map: what each does per burst of items, and how it stops.

A running stage is a QueueRunner whose producers are *steps* built here, in
``_maps.py`` and in ``_sources.py``: each call of a step takes a burst of items from the
stage's input queue, does the stage's work and returns the burst's results, which the
runner enqueues into the stage's output queue in one ``enqueue_many``.

Invariants:

- Items travel between stages as bursts: 1-d ``dtype=object`` arrays of the items
  themselves (``pack`` builds one without looking into the items, so any Python
  object, tuples and arrays included, passes unchanged). Stage queues are FIFOQueues of
  one scalar object component; a burst costs one lock, one copy of references and at
  most one wake-up per hand-off, whatever its length.
- A step never returns an empty burst: it takes again, or ends.
- A step never takes a new burst once the run is stopping: it checks the run's
  ``Stopping`` flag first and raises QueueClosedError (a clean end for its runner).
- Bursts are taken with ``take`` (a task: what is there now without waiting, else
  ``dequeue_burst``) or the blocking view's ``dequeue_burst`` (a thread), at most
  ``burst_size`` items: a fair share of what the queue holds among the stage's workers,
  so one worker never sits on expensive items the others could work on, or more when
  items are cheap (see ``burst_size``).
- Measurements are per burst (``_meter.py``): a burst's get wait, its work time, and the
  put wait of the previous burst.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError, OutOfRangeError, QueueClosedError, QueueEmpty, add_note
from .._queues._tuples import pad_stack
from ._meter import Meter

if TYPE_CHECKING:
    from .._queues._queue import QueueBase
    from .._queues._views import BlockingQueue

__all__ = [
    "CLEAN",
    "Burst",
    "Stopping",
    "batch_step",
    "burst_size",
    "collate",
    "filter_step",
    "noted",
    "pack",
    "prefetch_step",
    "send_step",
    "shuffle_step",
    "take",
]

Burst = npt.NDArray[Any]  # a 1-d object array of items
_BURST_MAX = 256  # items per burst at most (bounds one step's loop time)

CLEAN = (OutOfRangeError, QueueClosedError)  # a source queue ended: not a failure
_perf = time.perf_counter


def pack(items: list[Any]) -> Burst:
    """A burst of ``items``: a 1-d object array holding each item as it is."""
    return np.fromiter(items, dtype=object, count=len(items))


_KEEP_BUSY_S = 0.0002  # a burst should keep its worker busy at least this long


def burst_size(held: int, workers: int, item_s: float) -> int:
    """How many items one of ``workers`` workers takes at a time from a queue that
    holds ``held``, when an item took it ``item_s`` seconds so far (0: not known yet).

    Its fair share of what is there, so that expensive items spread over every worker;
    but at least as many as keep it busy for ``_KEEP_BUSY_S``, so that cheap items are
    not handed over a few at a time by many workers (the hand-offs, not the items, would
    then cost the time). At least 1, at most ``_BURST_MAX``.
    """
    share = -(-held // workers)
    if item_s > 0.0:
        busy = int(_KEEP_BUSY_S / item_s)
        if busy > share:
            share = busy
    return 1 if share < 1 else share if share < _BURST_MAX else _BURST_MAX


async def take(queue: QueueBase[Any], n: int) -> Burst:
    """Up to ``n`` items of ``queue``: those there now, without a checkpoint, else the
    first ones to arrive (``dequeue_burst``).

    Only for steps that return what they take (or what they make of it): their
    runner's enqueue checkpoints once per burst, so taking without a checkpoint never
    starves other tasks.
    """
    burst: Burst
    if queue.size():
        try:
            burst = queue.dequeue_up_to_nowait(n)
            return burst
        except QueueEmpty:  # earlier dequeues are waiting: queue up behind them
            pass
    burst = await queue.dequeue_burst(n)
    return burst


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


def noted(exc: BaseException, label: str) -> None:
    """Name the stage in which ``exc`` was raised (a note, PEP 678)."""
    add_note(exc, f"raised in pipeline stage {label}")


# -- filter, shuffle, prefetch, batch -------------------------------------------------------


def filter_step(
    pred: Callable[[Any], Any],
    is_async: bool,
    source: QueueBase[Any],
    meter: Meter,
    stop: Stopping,
    label: str,
) -> Callable[[], Awaitable[Burst]]:
    """A task step: the items of the next burst for which ``pred`` is true (order kept)."""
    w = meter.worker()

    async def step() -> Burst:
        t0 = meter.began(w)
        while True:
            stop.check()
            burst = await take(source, _BURST_MAX)
            t1 = meter.got(t0)
            try:
                if is_async:
                    kept = [x for x in burst if await pred(x)]
                else:
                    kept = [x for x in burst if pred(x)]
            except Exception as exc:
                noted(exc, label)
                raise
            t0 = w.worked(t1)
            meter.dropped += len(burst) - len(kept)
            if kept:
                w.returned = t0
                return pack(kept)

    return step


def shuffle_step(
    keep: int, seed: int | None, source: QueueBase[Any], meter: Meter, stop: Stopping
) -> Callable[[], Awaitable[Burst]]:
    """A task step over a deterministic shuffle buffer.

    The buffer holds up to ``keep + 1`` items: each item read is appended, and while
    the buffer holds more than ``keep`` a uniformly chosen one is emitted, so the output
    order is a pure function of the input order and the seed (whatever the bursts). At
    the end of the input the buffer drains in random order.
    """
    w = meter.worker()
    rng = random.Random(seed)
    buf: list[Any] = []
    ended = False

    def pick() -> Any:
        j = rng.randrange(len(buf))
        buf[j], buf[-1] = buf[-1], buf[j]
        return buf.pop()

    async def step() -> Burst:
        nonlocal ended
        t0 = meter.began(w)
        stop.check()
        out: list[Any] = []
        waited = 0.0  # seconds spent waiting for input (not busy)
        while not out and not ended:
            t_wait = _perf()
            try:
                burst = await take(source, _BURST_MAX)
            except OutOfRangeError:
                ended = True
                break
            finally:
                waited += _perf() - t_wait
            for x in burst:
                buf.append(x)
                if len(buf) > keep:
                    out.append(pick())
        meter.get_waits.append(waited)
        if ended:
            while buf and len(out) < _BURST_MAX:
                out.append(pick())
        if not out:
            raise StopAsyncIteration
        w.returned = w.worked(t0 + waited)
        return pack(out)

    return step


def prefetch_step(source: QueueBase[Any], meter: Meter, stop: Stopping) -> Callable[[], Any]:
    """A task step that moves the next burst on."""
    w = meter.worker()

    async def step() -> Burst:
        t0 = meter.began(w)
        stop.check()
        burst = await take(source, _BURST_MAX)
        w.returned = meter.got(t0)
        return burst

    return step


def send_step(
    source: QueueBase[Any], many: bool, meter: Meter, stop: Stopping, label: str
) -> Callable[[], Awaitable[Any]]:
    """A task step of ``to_queue``: the next burst as one batch of the target queue's
    elements (``collate`` of the items; with ``many`` each item is already a batch, and
    they are joined along axis 0), which its runner sends with one ``enqueue_many``."""
    w = meter.worker()

    async def step() -> Any:
        t0 = meter.began(w)
        stop.check()
        burst = await take(source, _BURST_MAX)
        t1 = meter.got(t0)
        try:
            items = burst.tolist()
            batch = _joined(items) if many else collate(items)
        except Exception as exc:
            noted(exc, label)
            raise
        w.returned = w.worked(t1)
        return batch

    return step


def _joined(batches: list[Any]) -> Any:
    """Batches of one form joined along axis 0 (per component for tuples and dicts)."""
    first = batches[0]
    if len(batches) == 1:
        return first
    if isinstance(first, tuple):
        return tuple(np.concatenate([b[i] for b in batches]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: np.concatenate([b[k] for b in batches]) for k in first}
    return np.concatenate(batches)


def batch_step(
    size: int,
    smaller: bool,
    pad: bool,
    source: BlockingQueue[Any],
    meter: Meter,
    stop: Stopping,
    label: str,
) -> Callable[[], Burst]:
    """A thread step: take ``size`` items and stack them into one batch."""
    w = meter.worker()
    take_batch = source.dequeue_up_to if smaller else source.dequeue_many

    def step() -> Burst:
        t0 = meter.began(w)
        stop.check()
        items = take_batch(size)
        t1 = meter.got(t0)
        try:
            batch = collate(items.tolist(), pad=pad)
        except Exception as exc:
            noted(exc, label)
            raise
        w.returned = w.worked(t1)
        out = np.empty(1, dtype=object)
        out[0] = batch
        return out

    return step


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
    if isinstance(first, (int, float, bool, np.generic)) and not isinstance(first, np.bytes_):
        flat = np.asarray(items)  # numbers: one conversion for the whole batch
        if flat.ndim == 1 and flat.dtype.kind in "biufc":
            return flat
    if isinstance(first, np.ndarray) and first.dtype.kind not in "SUO":
        shape, dtype = first.shape, first.dtype
        if all(isinstance(x, np.ndarray) and x.shape == shape for x in items):
            return np.stack(items) if all(x.dtype == dtype for x in items) else _stacked(items)
    return _stacked(items, pad)


def _stacked(items: list[Any], pad: bool = False) -> Any:
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
