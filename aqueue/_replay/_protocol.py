"""The replay-table interfaces the upper layers rely on: ``AsyncReplayTable`` and its
thread view ``ReplayView``, which every backend's table implements (the
in-process ``aqueue.ReplayTable``; a table shared through a server later), and
``SampledTable``, its sampling side, which trajectory tables implement too (what the
coordinator watches and reports).

Code above the replay layer (runners, pipelines, the coordinator's report and the
Monitor) names these protocols, never a backend's class. A table is a ``Sink``
(``aqueue/_queues/_protocol.py``): producers fill it through ``enqueue`` and
``enqueue_many``, which insert with the default priority (the largest held), and
producer accounting closes it after its last producer.

``statistics()`` is awaitable on every backend, as a queue's: in process the call
returns the ``ReplayStatistics`` record itself (awaiting it gives it back without
suspending); on a shared table it is a coroutine that asks the server. Code that must
not wait uses ``local_statistics(table, ReplayStatistics)`` of
``aqueue/_queues/_protocol.py`` (the queues' convention, and function). ``size()`` is
not part of the interface: it is synchronous in process and awaited on a shared table;
read ``statistics().size``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._queues._protocol import Sink, SinkView
from ._results import ReplaySample, ReplayStatistics

__all__ = ["AsyncReplayTable", "ReplayView", "SampledTable"]

T = TypeVar("T")


@runtime_checkable
class ReplayView(SinkView, Protocol[T]):
    """A table's thread-side view (``table.blocking()``): blocking methods for threads
    that run no event loop, each with ``timeout`` in seconds (None: no limit; on expiry
    TimeoutError, and nothing changed)."""

    def insert(
        self, element: Any, priority: float | None = None, timeout: float | None = None
    ) -> int:
        """Insert one item: its key."""
        ...

    def insert_many(
        self, batch: Any, priorities: Any = None, timeout: float | None = None
    ) -> npt.NDArray[np.int64]:
        """Insert a batch, all or nothing: its keys."""
        ...

    def sample(self, n: int, timeout: float | None = None) -> ReplaySample[T]:
        """Draw ``n`` items."""
        ...

    def update_priorities(
        self, keys: Any, priorities: Any, timeout: float | None = None
    ) -> npt.NDArray[np.bool_]:
        """Set priorities: for each key, whether the table held it."""
        ...

    def delete(self, keys: Any, timeout: float | None = None) -> npt.NDArray[np.bool_]:
        """Remove items: for each key, whether the table held it."""
        ...


@runtime_checkable
class SampledTable(Protocol[T]):
    """What a learner samples from and what the coordinator watches and reports: every
    replay table (``AsyncReplayTable``) and the trajectory tables, whose items are made
    by writers rather than inserted (``aqueue.TrajectoryTable``)."""

    @property
    def name(self) -> str:
        """The table's name, used in messages and reports."""
        ...

    @property
    def max_size(self) -> int:
        """The most items the table holds."""
        ...

    async def sample(self, n: int) -> ReplaySample[T]:
        """Draw ``n`` items (waits until the rate limiter allows all n)."""
        ...

    def samples(self, n: int) -> AsyncIterator[ReplaySample[T]]:
        """``sample(n)`` results until the table is closed and cannot serve another."""
        ...

    async def update_priorities(self, keys: Any, priorities: Any) -> npt.NDArray[np.bool_]:
        """Set priorities: for each key, whether the table held it."""
        ...

    async def delete(self, keys: Any) -> npt.NDArray[np.bool_]:
        """Remove items: for each key, whether the table held it."""
        ...

    def statistics(self) -> Awaitable[ReplayStatistics]:
        """The table's counters: ``await table.statistics()`` on every backend."""
        ...

    async def aclose(self) -> None:
        """Close the table: later and waiting inserts fail, samples that cannot be
        served any more raise OutOfRangeError."""
        ...


@runtime_checkable
class AsyncReplayTable(Sink, SampledTable[T], Protocol[T]):
    """A replay table as the upper layers use it (every backend implements it); a
    ``Sink`` too (``enqueue`` inserts with the default priority), and a
    ``SampledTable`` (sampling, priorities, statistics, closing)."""

    @property
    def dtypes(self) -> tuple[np.dtype[Any], ...]:
        """One numpy dtype per component."""
        ...

    @property
    def names(self) -> tuple[str, ...] | None:
        """Component names, or None."""
        ...

    async def insert(self, element: Any, priority: float | None = None) -> int:
        """Insert one item: its key."""
        ...

    async def insert_many(self, batch: Any, priorities: Any = None) -> npt.NDArray[np.int64]:
        """Insert a batch, all or nothing: its keys."""
        ...

    def blocking(self) -> ReplayView[T]:
        """The thread-side view."""
        ...
