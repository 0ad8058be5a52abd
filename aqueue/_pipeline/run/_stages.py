"""Pipeline stages other than sources and maps: filter, shuffle, prefetch, ``to_queue``
and batch; what each does per burst of items, and how it stops.

A running stage is a QueueRunner whose producers are *steps* built here, in
``_maps.py`` and in ``_sources.py`` (a process map's in ``process/_driver.py``): each call
of a step takes a burst of items from the stage's input queue (``flow/_bursts.py``),
does the stage's work and returns the burst's results, which the runner enqueues into
the stage's output queue in one ``enqueue_many``.

Invariants:

- A step never takes a new burst once its stage is stopping, nor while it is paused: it
  starts at its ``Stage``'s ``start_task``/``start_thread`` (``flow/_control.py``),
  where a stopping stage raises QueueClosedError (a clean end for its runner) and a
  pause waits. It holds no item there, so a paused run holds every item in a queue or
  a buffer.
- Measurements are per burst (``flow/_meter.py``): a burst's get wait, its work time,
  and the put wait of the previous burst.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..._errors import ElementSpecError, OutOfRangeError
from ..._queues._tuples import pad_stack
from ..flow._bursts import BURST_MAX, Burst, noted, pack, take
from ..flow._control import Stage
from ..process._inplace import BatchWriter

if TYPE_CHECKING:
    from ..._queues._queue import QueueBase
    from ..._queues._views import BlockingQueue

__all__ = [
    "ShuffleStep",
    "batch_step",
    "record_batch_step",
    "collate",
    "filter_step",
    "prefetch_step",
    "send_step",
]

Whole = Callable[[list[Any]], "npt.NDArray[Any] | None"]  # see ``collate``
_perf = time.perf_counter


# -- filter, shuffle, prefetch, send, batch ------------------------------------------------


def filter_step(
    pred: Callable[[Any], Any], is_async: bool, source: QueueBase[Any], stage: Stage
) -> Callable[[], Awaitable[Burst]]:
    """A task step: the items of the next burst for which ``pred`` is true (order kept)."""
    meter = stage.meter
    w = meter.worker()
    failed: list[Exception] = []  # raised by an item after those kept before it

    async def step() -> Burst:
        if failed:
            raise failed.pop()
        t0 = meter.began(w)
        while True:
            await stage.start_task()
            burst = await take(source, BURST_MAX)
            t1 = meter.got(t0)
            kept: list[Any] = []
            seen = 0
            try:
                for x in burst:
                    if await pred(x) if is_async else pred(x):
                        kept.append(x)
                    seen += 1
            except Exception as exc:
                noted(exc, stage.label)
                if not kept:
                    raise
                failed.append(exc)
            t0 = w.worked(t1)
            meter.dropped += seen - len(kept)
            if kept:
                w.returned = t0
                return pack(kept)

    return step


class ShuffleStep:
    """A task step over a deterministic shuffle buffer.

    The buffer holds up to ``keep + 1`` items: each item read is appended, and while
    the buffer holds more than ``keep`` a uniformly chosen one is emitted, so the output
    order is a pure function of the input order and the seed (whatever the bursts). At
    the end of the input the buffer drains in random order. ``state()``/``restore()``
    give and take back the buffer and the random state (checkpoints).
    """

    def __init__(self, keep: int, seed: int | None, source: QueueBase[Any], stage: Stage) -> None:
        self._keep = keep
        self._rng = random.Random(seed)
        self._source = source
        self._stage = stage
        self._w = stage.meter.worker()
        self.buf: list[Any] = []
        self.ended = False

    def state(self) -> dict[str, Any]:
        """The buffer (items in order), the random state and whether the input ended."""
        version, internal, gauss = self._rng.getstate()
        return {
            "buffer": list(self.buf),
            "rng": [version, list(internal), gauss],
            "ended": self.ended,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Take back what ``state()`` gave (before the run starts)."""
        version, internal, gauss = state["rng"]
        self._rng.setstate((version, tuple(internal), gauss))
        self.buf = list(state["buffer"])
        self.ended = bool(state["ended"])

    def _pick(self) -> Any:
        buf = self.buf
        j = self._rng.randrange(len(buf))
        buf[j], buf[-1] = buf[-1], buf[j]
        return buf.pop()

    async def __call__(self) -> Burst:
        meter, w = self._stage.meter, self._w
        t0 = meter.began(w)
        await self._stage.start_task()
        out: list[Any] = []
        waited = 0.0  # seconds spent waiting for input (not busy)
        while not out and not self.ended:
            t_wait = _perf()
            try:
                burst = await take(self._source, BURST_MAX)
            except OutOfRangeError:
                self.ended = True
                break
            finally:
                waited += _perf() - t_wait
            for x in burst:
                self.buf.append(x)
                if len(self.buf) > self._keep:
                    out.append(self._pick())
        meter.get_waits.append(waited)
        if self.ended:
            while self.buf and len(out) < BURST_MAX:
                out.append(self._pick())
        if not out:
            raise StopAsyncIteration
        w.returned = w.worked(t0 + waited)
        return pack(out)


def prefetch_step(source: QueueBase[Any], stage: Stage) -> Callable[[], Any]:
    """A task step that moves the next burst on."""
    meter = stage.meter
    w = meter.worker()

    async def step() -> Burst:
        t0 = meter.began(w)
        await stage.start_task()
        burst = await take(source, BURST_MAX)
        w.returned = meter.got(t0)
        return burst

    return step


def send_step(source: QueueBase[Any], many: bool, stage: Stage) -> Callable[[], Awaitable[Any]]:
    """A task step of ``to_queue``: the next burst as one batch of the target queue's
    elements (``collate`` of the items; with ``many`` each item is already a batch, and
    they are joined along axis 0), which its runner sends with one ``enqueue_many``."""
    meter = stage.meter
    w = meter.worker()

    async def step() -> Any:
        t0 = meter.began(w)
        await stage.start_task()
        burst = await take(source, BURST_MAX)
        t1 = meter.got(t0)
        try:
            items = burst.tolist()
            batch = _joined(items) if many else collate(items)
        except Exception as exc:
            noted(exc, stage.label)
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
    size: int, smaller: bool, pad: bool, source: BlockingQueue[Any], stage: Stage
) -> Callable[[], Burst]:
    """A thread step: take ``size`` items and stack them into one batch."""
    meter = stage.meter
    w = meter.worker()
    take_batch = source.dequeue_up_to if smaller else source.dequeue_many

    def step() -> Burst:
        t0 = meter.began(w)
        stage.start_thread()
        try:
            items = take_batch(size)
        except OutOfRangeError:
            # The input ended with fewer than `size` items: without a smaller final
            # batch they are dropped, as in TF; take them so statistics count them.
            meter.dropped += len(source.dequeue_up_to(size))
            raise
        t1 = meter.got(t0)
        batch = _collated(items.tolist(), pad, stage.label)
        w.returned = w.worked(t1)
        return _one(batch)

    return step


def record_batch_step(
    size: int, smaller: bool, source: BlockingQueue[Any], stage: Stage, writer: BatchWriter
) -> Callable[[], Burst]:
    """A thread step of a batch stage whose input is a process map's ``BatchRecord``s
    (the map writes the batches in place, ``process/_inplace.py``): each record is a
    batch's rows, and a full one is a batch, its columns taken as they are.

    Records line up with batches; the rows of a record that does not fit the rest of a
    batch (a short last buffer of an unordered map, ahead of a full one) carry over to
    the next batch. The rows a step holds while it waits for the rest of its batch, or
    carries over, are in its worker's ``held`` (a checkpoint puts them back in front of
    the queue's items). At the end, leftovers are dropped unless ``smaller``, as by
    ``batch_step``.
    """
    meter = stage.meter
    w = meter.worker()
    rows: list[Any] = w.held  # (rows carried over from the last batch, if any)

    def step() -> Burst:
        t0 = meter.began(w)
        stage.start_thread()
        first = None  # the record the batch starts with, when nothing was carried over
        try:
            while len(rows) < size:
                got = source.dequeue()
                writer.rows_taken += len(got.rows)
                if first is None and not rows:
                    first = got
                rows.extend(got.rows)
        except OutOfRangeError:
            if not rows or not smaller:
                meter.dropped += len(rows)
                rows.clear()
                raise
        t1 = meter.got(t0)
        items = rows[:size]
        del rows[:size]
        record = first if first is not None and len(first.rows) == len(items) else None
        batch = _collated(items, False, stage.label, None if record is None else record.column)
        if record is not None and record.in_place:  # (the batch is that record's rows)
            writer.fused += 1
        w.returned = w.worked(t1)
        return _one(batch)

    return step


def _collated(items: list[Any], pad: bool, label: str, whole: Whole | None = None) -> Any:
    """``collate``, with the stage named in a failure's note."""
    try:
        return collate(items, pad=pad, whole=whole)
    except Exception as exc:
        noted(exc, label)
        raise


def _one(batch: Any) -> Burst:
    """A burst of one batch (``pack`` would look into a tuple)."""
    out = np.empty(1, dtype=object)
    out[0] = batch
    return out


def collate(items: list[Any], *, pad: bool = False, whole: Whole | None = None) -> Any:
    """Stack items into a batch: tuples and dicts per component, arrays on a new axis 0.

    With ``pad``, arrays of one rank but different shapes are padded at the end of
    each dimension to the largest, with 0 (or ``""`` for strings and objects).
    ``whole(arrays)``, when given, may return an array whose rows the arrays already
    are (a process map wrote them in place: ``BatchRecord.column``), which is then the
    component's batch, as it is.

    Raises:
        ElementSpecError: Items differ in structure, or in shape without ``pad``.
    """
    first = items[0]
    if isinstance(first, tuple):
        if any(not isinstance(x, tuple) or len(x) != len(first) for x in items):
            raise ElementSpecError("batch: items must all be tuples of the same length")
        return tuple(
            collate([x[i] for x in items], pad=pad, whole=whole) for i in range(len(first))
        )
    if isinstance(first, dict):
        keys = list(first)
        if any(not isinstance(x, dict) or x.keys() != first.keys() for x in items):
            raise ElementSpecError(f"batch: items must all be dicts with keys {keys}")
        return {k: collate([x[k] for x in items], pad=pad, whole=whole) for k in keys}
    if isinstance(first, (int, float, bool, np.generic)) and not isinstance(first, np.bytes_):
        flat = np.asarray(items)  # numbers: one conversion for the whole batch
        if flat.ndim == 1 and flat.dtype.kind in "biufc":
            return flat
    if isinstance(first, np.ndarray) and first.dtype.kind not in "SUO":
        if whole is not None:
            ready = whole(items)
            if ready is not None:
                return ready
        shape, dtype = first.shape, first.dtype
        if all(isinstance(x, np.ndarray) and x.shape == shape for x in items):
            return np.stack(items) if all(x.dtype == dtype for x in items) else _stacked(items)
    return _stacked(items, pad)


def _stacked(items: list[Any], pad: bool = False) -> Any:
    arrays = [np.asarray(x) for x in items]
    shapes = {a.shape for a in arrays}
    if len(shapes) == 1:
        return np.stack(arrays)  # (text keeps its kind: the widest item's width)
    if not pad:
        raise ElementSpecError(
            f"batch: items have different shapes {sorted(shapes)}; use "
            "batch(..., dynamic_pad=True) to pad them"
        )
    # The dtype np.stack would give the items (it promotes as concatenate does).
    dtype = np.concatenate([a.reshape(-1)[:0] for a in arrays]).dtype
    return pad_stack(arrays, dtype)
