"""Pipeline sources: the first stage's producers.

A source reads an iterable ``epochs`` times (None: forever) through ``Epochs``, or
calls a function (a queue's dequeue, a user producer) until it signals the end, and
boxes each item.
In-memory sequences (lists, tuples, ranges) are read on the event loop, in batches,
and fill their output queue at once when the run starts; other sync iterables and sync
producers run on the runner's thread (they may block); async ones run in a task, and
their waits are cancelled when the run stops (an external source may never deliver
again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ._epochs import Epochs
from ._meter import Meter
from ._stages import CLEAN, Box, Stopping, noted

if TYPE_CHECKING:
    from .._queues._queue import QueueBase

__all__ = ["AsyncSource", "SequenceSource", "SyncSource", "source_step"]

_REFILL_MAX = 256  # items per refill batch of an in-memory source (about 0.1 ms of loop time)


class _Source:
    """Reads an iterable through ``Epochs``; shared by the source kinds."""

    _reads_async = False  # the kind's iterable is an async iterable

    def __init__(
        self, iterable: Any, epochs: int | None, meter: Meter, stop: Stopping, label: str
    ) -> None:
        self._epochs = Epochs(iterable, epochs, is_async=self._reads_async)
        self._meter = meter
        self._w = meter.worker()
        self._stop = stop
        self._label = label

    def _done(self, t0: float, value: Any) -> Box:
        self._w.returned = self._w.worked(t0)
        return Box(value)


class SyncSource(_Source):
    """A sync iterable, read on the runner's thread (it may block)."""

    def __iter__(self) -> SyncSource:
        return self

    def __next__(self) -> Box:
        t0 = self._meter.began(self._w)
        self._stop.check()
        try:
            items = self._epochs.take(1)
        except Exception as exc:
            noted(exc, self._label)
            raise
        if not items:
            raise StopIteration
        return self._done(t0, items[0])


class AsyncSource(_Source):
    """An async iterable, read by a task."""

    _reads_async = True

    def __aiter__(self) -> AsyncSource:
        return self

    async def __anext__(self) -> Box:
        t0 = self._meter.began(self._w)
        self._stop.check()
        try:
            return self._done(t0, await self._stop.interruptible(self._epochs.anext))
        except StopAsyncIteration:
            raise
        except Exception as exc:
            noted(exc, self._label)
            raise


class SequenceSource(_Source):
    """An in-memory sequence (a list, a range), read on the event loop in batches.

    Reading cannot block, so the source needs no thread. Its runner enqueues batches
    (``enqueue_many``): ``prefill`` fills the whole queue when the run starts, so
    workers that start on it all take their first item in the same event-loop
    iteration; after that each batch is at least half the queue's capacity (at most
    ``_REFILL_MAX`` items, which bounds the time one refill holds the loop), admitted
    progressively as the next stage takes items. Refilling item by item would cost a
    task step (and an event-loop iteration) per item, on the loop that also serves
    the consumer and the async stages.
    """

    def __init__(
        self,
        sequence: Any,
        epochs: int | None,
        meter: Meter,
        stop: Stopping,
        label: str,
        queue: QueueBase[Any],
    ) -> None:
        super().__init__(sequence, epochs, meter, stop, label)
        self._queue = queue

    def __aiter__(self) -> SequenceSource:
        return self

    def _read(self, n: int) -> npt.NDArray[Any] | None:
        """Up to ``n`` boxed items as a batch (None at the end of the last epoch)."""
        try:
            items = self._epochs.take(n)
        except Exception as exc:
            noted(exc, self._label)
            raise
        if not items:
            return None
        batch = np.empty(len(items), dtype=object)
        batch[:] = [Box(v) for v in items]
        return batch

    def prefill(self) -> None:
        """Fill the queue with the first items now (one enqueue for all of them)."""
        q = self._queue
        batch = self._read(q.capacity - q.size())
        if batch is not None:
            q.enqueue_many_nowait(batch)

    async def __anext__(self) -> npt.NDArray[Any]:
        t0 = self._meter.began(self._w)
        self._stop.check()
        q = self._queue
        want = max(q.capacity - q.size(), (q.capacity + 1) // 2)
        batch = self._read(min(want, _REFILL_MAX))
        if batch is None:
            raise StopAsyncIteration
        self._w.returned = self._w.worked(t0)
        return batch


def source_step(
    fn: Callable[[], Any], is_async: bool, meter: Meter, stop: Stopping, label: str
) -> Callable[[], Any]:
    """A producer that calls ``fn()`` for each item (a queue's dequeue, a callable)."""
    w = meter.worker()
    quiet = (StopIteration, StopAsyncIteration, *CLEAN)  # ends, not failures

    if is_async:

        async def astep() -> Box:
            t0 = meter.began(w)
            try:
                value = await stop.interruptible(fn)
            except Exception as exc:
                if not isinstance(exc, quiet):
                    noted(exc, label)
                raise
            w.returned = w.worked(t0)
            return Box(value)

        return astep

    def step() -> Box:
        t0 = meter.began(w)
        stop.check()
        try:
            value = fn()
        except Exception as exc:
            if not isinstance(exc, quiet):
                noted(exc, label)
            raise
        w.returned = w.worked(t0)
        return Box(value)

    return step
