"""BlockingRedisReplayTable: the thread view of a Redis replay table (``table.blocking()``),
and BlockingRedisSampling, its sampling side, which the trajectory tables' view
(``trajectory/_blocking.py``) shares as the in-process views share ``BlockingSampling``.

Their methods run the same ops as the async table (``_ops``) with the sync driver
(``_transport.run_blocking``) over the synchronous client, in the calling thread: a
thread never touches the event loop. Threads may share one view.

The methods that may wait (``insert``, ``insert_many``, ``sample``, ``samples``) take
``timeout=None`` (seconds) and raise RuntimeError on a thread that runs an event loop,
as in process. On expiry they raise the built-in ``TimeoutError`` having changed
nothing: the op only waited between calls, and the one call that would complete it
either ran whole (the method returns) or never ran. ``update_priorities`` and
``delete`` are one call each; they take ``timeout`` too, for the view's shape every
backend shares, and work on any thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
import numpy.typing as npt

import aqueue
from aqueue._replay._checks import timeout_arg
from aqueue._replay._results import ReplaySample, ReplayStatistics

from .._core._transport import Deadline, Op, SyncTransport, refuse_event_loop, run_blocking
from . import _ops as ops
from ._ops import SampleOp

if TYPE_CHECKING:
    from ._sharded import TableOps
    from ._table import RedisReplayTable

__all__ = ["BlockingRedisReplayTable", "BlockingRedisSampling"]

T = TypeVar("T")


class BlockingRedisSampling(Generic[T]):
    """The sampling side of a Redis table's thread view: ``sample``, ``samples``,
    ``update_priorities``, ``delete``, ``close``, ``size`` and ``statistics``."""

    __slots__ = ("_h", "_ops", "_t", "_table")

    # What a subclass names: the in-process view's class and the table's kind (the
    # messages are the in-process view's, word for word), and the op of a sample (None:
    # the table's own, over its shards).
    _view: ClassVar[str] = "BlockingReplayTable"
    _kind: ClassVar[str] = "replay table"
    _sample_op: ClassVar[type[SampleOp] | None] = None

    def __init__(
        self, table_ops: TableOps, transport: SyncTransport, table: RedisReplayTable[T]
    ) -> None:
        self._ops = table_ops
        self._h = table_ops.h
        self._t = transport
        self._table = table

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._table!r}>"

    def sample(self, n: int, timeout: float | None = None) -> ReplaySample[T]:
        """Draw ``n`` items (see the table's ``sample``).

        Raises:
            ElementSpecError: As the table's ``sample(n)``, or a bad ``timeout``.
            OutOfRangeError: The table is closed and cannot serve it now, or is gone.
            TimeoutError: ``timeout`` seconds passed first (nothing sampled).
            RuntimeError: Called on an event loop's thread.
        """
        self._check("sample")
        count = self._ops.sample_count(n)
        deadline = self._deadline(timeout, "sample")
        return self._sample(count, deadline)

    def samples(self, n: int, timeout: float | None = None) -> Iterator[ReplaySample[T]]:
        """An iterator of ``sample(n, timeout)`` results; it ends when the table is
        closed (by any process) and cannot serve another (the table is not closed by it).

        Raises:
            ElementSpecError: As ``sample(n)``, at once (a bad ``timeout`` too).
            RuntimeError: Called on an event loop's thread, at once.
        """
        self._check("samples")
        count = self._ops.sample_count(n)
        timeout_arg(timeout, f"{self._h.settings.owner}.samples")
        return self._samples(count, timeout)

    def _samples(self, n: int, timeout: float | None) -> Iterator[ReplaySample[T]]:
        while True:
            try:
                sample = self._sample(n, self._deadline(timeout, "samples"))
            except aqueue.OutOfRangeError:
                return
            yield sample

    def _sample(self, n: int, deadline: Deadline | None) -> ReplaySample[T]:
        op: Op[ReplaySample[T]] = (
            self._ops.sample(n) if self._sample_op is None else self._sample_op(self._h, n).run()
        )
        sample: ReplaySample[T] = run_blocking(op, self._t, None, deadline)
        return sample

    def update_priorities(
        self, keys: Any, priorities: Any, timeout: float | None = None
    ) -> npt.NDArray[np.bool_]:
        """Set priorities (see ``RedisReplayTable.update_priorities``)."""
        k, p = self._h.args.keys_and_priorities(keys, priorities)
        timeout_arg(timeout, f"{self._h.settings.owner}.update_priorities")
        return run_blocking(self._ops.update(k, p), self._t)

    def delete(self, keys: Any, timeout: float | None = None) -> npt.NDArray[np.bool_]:
        """Remove items (see ``RedisReplayTable.delete``)."""
        k = self._h.args.keys(keys)
        timeout_arg(timeout, f"{self._h.settings.owner}.delete")
        return run_blocking(self._ops.delete(k), self._t)

    def close(self) -> None:
        """Close the table for every process (see ``RedisReplayTable.close``)."""
        self._table.close()

    def size(self) -> int:
        """Items held now (one server call)."""
        return run_blocking(self._ops.stats(), self._t)[0]

    def statistics(self) -> ReplayStatistics:
        """The table's counters now (one server call)."""
        return ops.statistics(self._h, run_blocking(self._ops.stats(), self._t))

    # -- driving ops ------------------------------------------------------------------------

    def _check(self, what: str) -> None:
        """Refuse to block a thread that runs an event loop (RuntimeError)."""
        of = f"{self._kind} '{self._h.name}'"
        refuse_event_loop(f"{self._view}.{what}()", of, f"table.{what}(...)")

    def _deadline(self, timeout: Any, what: str) -> Deadline | None:
        """The deadline of a call with ``timeout`` (checked), or None."""
        t = timeout_arg(timeout, f"{self._h.settings.owner}.{what}")
        if t is None:
            return None
        return Deadline(t, f"{self._view}.{what}() on {self._kind} '{self._h.name}'")


class BlockingRedisReplayTable(BlockingRedisSampling[T]):
    """Blocking methods of one Redis replay table, for threads: the sampling side and
    the inserts."""

    __slots__ = ()

    @property
    def table(self) -> RedisReplayTable[T]:
        """The table this view belongs to."""
        return self._table

    def insert(
        self, element: Any, priority: float | None = None, timeout: float | None = None
    ) -> int:
        """Insert one item (see ``RedisReplayTable.insert``): its key."""
        self._check("insert")
        comps, prio = self._h.args.element(element, priority)
        deadline = self._deadline(timeout, "insert")
        keys = run_blocking(self._ops.insert(comps, 1, prio), self._t, None, deadline)
        return int(keys[0])

    def insert_many(
        self, batch: Any, priorities: Any = None, timeout: float | None = None
    ) -> npt.NDArray[np.int64]:
        """Insert a batch, all or nothing (see ``RedisReplayTable.insert_many``)."""
        self._check("insert_many")
        comps, k, prios = self._h.args.batch(batch, priorities)
        self._ops.batch_count(k)
        deadline = self._deadline(timeout, "insert_many")
        if k == 0:
            return np.empty(0, dtype=np.int64)
        return run_blocking(self._ops.insert(comps, k, prios), self._t, None, deadline)

    def enqueue(self, element: Any, timeout: float | None = None) -> None:
        """``insert(element, timeout=timeout)`` with the default priority, its key
        dropped (see ``RedisReplayTable.enqueue``)."""
        self._check("enqueue")
        comps, prio = self._h.args.element(element, None)
        deadline = self._deadline(timeout, "enqueue")
        run_blocking(self._ops.insert(comps, 1, prio, sink=True), self._t, None, deadline)

    def enqueue_many(self, batch: Any, timeout: float | None = None) -> None:
        """Insert ``batch`` with the default priority: progressively without a timeout
        (see ``RedisReplayTable.enqueue_many``), all or nothing with one (as
        ``insert_many``: refused if the limiter could never admit it at once; on expiry
        TimeoutError, and nothing was inserted)."""
        self._check("enqueue_many")
        if timeout is None:
            comps, k = self._h.spec.batch(batch)
            if k:
                op = self._ops.insert(comps, k, None, progressive=True, sink=True)
                run_blocking(op, self._t)
            return
        comps, k, prios = self._h.args.batch(batch, None)
        self._ops.batch_count(k)
        deadline = self._deadline(timeout, "enqueue_many")
        if k:
            run_blocking(self._ops.insert(comps, k, prios, sink=True), self._t, None, deadline)
