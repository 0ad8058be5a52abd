"""Pipeline sources: the first stage's producers, which return bursts of items.

A source reads an iterable ``epochs`` times (None: forever) through ``Epochs``, or
calls a function (a user producer) until it signals the end, or takes from a queue:

- an in-memory sequence (a list, a tuple, a range) is read on the event loop (reading
  cannot block): ``prefill`` fills the source queue when the run starts, so the next
  stage's workers all find work at once; after that each refill is at least half the
  queue (at most ``_REFILL_MAX`` items, which bounds the time one refill holds the
  loop), admitted as the next stage takes items;
- another sync iterable runs on the runner's thread (it may block): each call reads
  items until it has ``_BURST`` of them or ``_BURST_S`` seconds have passed, so a fast
  iterator moves in bursts and a slow one still hands on each item soon;
- an async iterable runs in a task, one item per call, its wait cancelled when the run
  stops (an external source may never deliver again); so does an async producer;
- a sync producer is called on the runner's thread, one item per call;
- a queue (in process or shared): bursts of what it holds (``dequeue_burst``: one
  call, one server round trip for a shared queue), split into its elements.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..._input._epochs import Epochs
from ..flow._bursts import CLEAN, Burst, noted, pack
from ..flow._control import Stage

if TYPE_CHECKING:
    from ..._queues._protocol import AsyncQueue
    from ..._queues._queue import QueueBase

__all__ = ["AsyncSource", "SequenceSource", "SyncSource", "producer_step", "queue_step"]

_REFILL_MAX = 256  # items per refill of an in-memory source (about 0.1 ms of loop time)
_BURST = 64  # items per call of a sync iterable source, at most
_BURST_S = 0.001  # seconds a sync iterable source reads before handing on what it has

_QUIET = (StopIteration, StopAsyncIteration, *CLEAN)  # ends of a source, not failures


class _Source:
    """Reads an iterable through ``Epochs``; shared by the iterable source kinds."""

    _reads_async = False  # the kind's iterable is an async iterable

    def __init__(self, iterable: Any, epochs: int | None, stage: Stage) -> None:
        self._epochs = Epochs(iterable, epochs, is_async=self._reads_async)
        self._stage = stage
        self._meter = stage.meter
        self._w = stage.meter.worker()
        self._label = stage.label

    @property
    def epochs(self) -> Epochs:
        """The reader (its position is the source's state)."""
        return self._epochs


class SyncSource(_Source):
    """A sync iterable, read on the runner's thread (it may block).

    When the iterable raises, the items read before in the same call are handed on
    first: the call returns them and the next one raises (``_failed``).
    """

    _failed: Exception | None = None

    def __iter__(self) -> SyncSource:
        return self

    def __next__(self) -> Burst:
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
        t0 = self._meter.began(self._w)
        self._stage.start_thread()
        epochs = self._epochs
        items: list[Any] = []
        try:
            while len(items) < _BURST:
                got = epochs.take(1)
                if not got:
                    break
                items.append(got[0])
                if time.perf_counter() - t0 > _BURST_S:
                    break
        except Exception as exc:
            noted(exc, self._label)
            if not items:
                raise
            self._failed = exc
        if not items:
            raise StopIteration
        self._w.returned = self._w.worked(t0)
        return pack(items)


class AsyncSource(_Source):
    """An async iterable, read by a task."""

    _reads_async = True

    def __aiter__(self) -> AsyncSource:
        return self

    async def __anext__(self) -> Burst:
        t0 = self._meter.began(self._w)
        await self._stage.start_task()
        try:
            item = await self._stage.interruptible(self._epochs.anext)
        except StopAsyncIteration:
            raise
        except Exception as exc:
            noted(exc, self._label)
            raise
        self._w.returned = self._w.worked(t0)
        return pack([item])


class SequenceSource(_Source):
    """An in-memory sequence (a list, a range), read on the event loop in bursts (see
    the module docstring)."""

    def __init__(
        self, sequence: Any, epochs: int | None, stage: Stage, queue: QueueBase[Any]
    ) -> None:
        super().__init__(sequence, epochs, stage)
        self._queue = queue

    def __aiter__(self) -> SequenceSource:
        return self

    def _read(self, n: int) -> Burst | None:
        """Up to ``n`` items as a burst (None at the end of the last epoch)."""
        try:
            items = self._epochs.take(n)
        except Exception as exc:
            noted(exc, self._label)
            raise
        return pack(items) if items else None

    def prefill(self) -> None:
        """Fill the queue with the first items now (one enqueue for all of them)."""
        q = self._queue
        burst = self._read(q.capacity - q.size())
        if burst is not None:
            q.enqueue_many_nowait(burst)

    async def __anext__(self) -> Burst:
        t0 = self._meter.began(self._w)
        await self._stage.start_task()
        q = self._queue
        want = max(q.capacity - q.size(), (q.capacity + 1) // 2)
        burst = self._read(min(want, _REFILL_MAX))
        if burst is None:
            raise StopAsyncIteration
        self._w.returned = self._w.worked(t0)
        return burst


def queue_step(queue: AsyncQueue[Any], stage: Stage) -> Callable[[], Any]:
    """A task step that takes the elements of ``queue`` until it is closed and drained."""
    meter, label = stage.meter, stage.label
    w = meter.worker()

    async def next_burst() -> Burst:
        return elements_of(queue, await queue.dequeue_burst(_REFILL_MAX))

    async def step() -> Burst:
        t0 = meter.began(w)
        await stage.start_task()
        try:
            burst: Burst = await stage.interruptible(next_burst)
        except Exception as exc:
            if not isinstance(exc, _QUIET):
                noted(exc, label)
            raise
        w.returned = w.worked(t0)
        return burst

    return step


def elements_of(queue: AsyncQueue[Any], batch: Any) -> Burst:
    """The elements of a batch taken from ``queue``, as a burst, each in the form
    ``queue.dequeue()`` gives (an array, a tuple of arrays, a dict)."""
    names = queue.names
    if names is not None:
        return pack([dict(zip(names, row)) for row in zip(*(batch[k] for k in names))])
    if len(queue.dtypes) > 1:
        return pack(list(zip(*batch)))
    return pack(list(batch))


def producer_step(fn: Callable[[], Any], is_async: bool, stage: Stage) -> Callable[[], Any]:
    """A step that calls ``fn()`` for each item (async in a task, sync on a thread)."""
    meter, label = stage.meter, stage.label
    w = meter.worker()

    if is_async:

        async def astep() -> Burst:
            t0 = meter.began(w)
            await stage.start_task()
            try:
                value = await stage.interruptible(fn)
            except Exception as exc:
                if not isinstance(exc, _QUIET):
                    noted(exc, label)
                raise
            w.returned = w.worked(t0)
            return pack([value])

        return astep

    def step() -> Burst:
        t0 = meter.began(w)
        stage.start_thread()
        try:
            value = fn()
        except Exception as exc:
            if not isinstance(exc, _QUIET):
                noted(exc, label)
            raise
        w.returned = w.worked(t0)
        return pack([value])

    return step
