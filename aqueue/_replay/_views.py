"""Views of a replay table: the thread views (``table.blocking()``) and the iterator of
``table.samples(n)``.

BlockingSampling: the sampling side of a thread view, written once for every in-process
table (``BlockingReplayTable`` adds the inserts; ``BlockingTrajectoryTable`` of
``_trajectory/_table.py`` adds nothing, its items come from writers). A thread that
calls these methods runs the table's engine steps itself, under the table's lock,
exactly as a task does (the same checks, the same request, the same step, a
``thread_step`` of the waiting kernel), and blocks on a ``threading.Event`` of its own
only when it must wait, through the kernel's ``wait_thread``. Threads and tasks share
one arrival order per direction. Each method that may wait takes ``timeout=None``
(seconds); on expiry it raises TimeoutError and has changed nothing (an insert or a
sample is done whole in one step, or not at all). ``update_priorities`` and
``delete`` never wait; they take ``timeout`` too, for the view's shape that every
backend shares (a shared table's calls make round trips), and in process it is never
reached. Methods that may wait refuse to run on an event loop's thread
(RuntimeError), where blocking would stall every task of the loop.

SampleIterator is a class with ``__anext__`` (not an async generator, which would hold
its caller's cancel scopes across ``yield``): ``sample(n)`` until the table is closed
and cannot serve another (OutOfRangeError becomes StopAsyncIteration). A thread view's
``samples(n)`` is a plain generator (a thread has no cancel scopes to hold).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from .._errors import OutOfRangeError
from .._waiting._backend import in_event_loop
from .._waiting._wait import thread_step, wait_thread
from ._checks import timeout_arg
from ._engine import InsertRequest, SampleRequest
from ._results import ReplaySample, ReplayStatistics

if TYPE_CHECKING:
    from ._ops import TableOps
    from ._sampling import SamplingSide
    from ._table import ReplayTable

__all__ = ["BlockingReplayTable", "BlockingSampling", "SampleIterator", "Sampled", "loop_thread"]

T = TypeVar("T")


def loop_thread() -> int | None:
    """The calling thread's id if it runs an event loop (where a view is made by a
    task, the view refuses to block), else None (the view asks at each call)."""
    return threading.get_ident() if in_event_loop() else None


class BlockingSampling(Generic[T]):
    """The sampling side of a table's thread view (see the module docstring)."""

    __slots__ = ("_loop_thread", "_ops", "_table")

    _kind: ClassVar[str] = "replay table"  # the table's kind, in messages
    _table: SamplingSide[T]

    def __init__(self, table: SamplingSide[T], ops: TableOps[T], loop_thread: int | None) -> None:
        self._table = table
        self._ops = ops
        self._loop_thread = loop_thread  # the event loop's thread, when known

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._table!r}>"

    def _what(self, what: str, joint: str) -> str:
        return f"{type(self).__name__}.{what}() {joint} {self._kind} '{self._table.name}'"

    def _check(self, what: str) -> None:
        here = threading.get_ident()
        loop = self._loop_thread
        if here == loop if loop is not None else in_event_loop():
            raise RuntimeError(
                f"{self._what(what, 'of')} was called on an event-loop thread, where blocking "
                f"would stall the loop; use `await table.{what}(...)` there"
            )

    def _run(self, req: InsertRequest | SampleRequest, timeout: Any, what: str) -> Any:
        t = timeout_arg(timeout, f"{self._ops.owner}.{what}")
        engine = self._ops.engine
        result = thread_step(engine.start, req, threading.Event)
        if result is req:
            result = wait_thread(
                engine,
                req,
                t,
                self._what(what, "on"),
                self._table if isinstance(req, SampleRequest) else None,
            )
        return result

    def sample(self, n: int, timeout: float | None = None) -> ReplaySample[T]:
        """Draw ``n`` items (see the table's ``sample``).

        Raises:
            ElementSpecError: As the table's ``sample(n)``, or a bad ``timeout``.
            OutOfRangeError: The table is closed and cannot serve it now.
            TimeoutError: ``timeout`` seconds passed first (nothing sampled).
            RuntimeError: Called on an event loop's thread.
        """
        self._check("sample")
        sample: ReplaySample[T] = self._run(self._ops.sample_request(n), timeout, "sample")
        return sample

    def samples(self, n: int, timeout: float | None = None) -> Iterator[ReplaySample[T]]:
        """An iterator of ``sample(n, timeout)`` results; it ends when the table is
        closed and cannot serve another (the table is not closed by it).

        Raises:
            ElementSpecError: As ``sample(n)``, at once (a bad ``timeout`` too).
            RuntimeError: Called on an event loop's thread, at once.
        """
        self._check("samples")
        n = self._ops.sample_count(n)
        timeout_arg(timeout, f"{self._ops.owner}.samples")
        return self._samples(n, timeout)

    def _samples(self, n: int, timeout: float | None) -> Iterator[ReplaySample[T]]:
        while True:
            try:
                sample: ReplaySample[T] = self._run(SampleRequest(n), timeout, "samples")
            except OutOfRangeError:
                return
            yield sample

    def update_priorities(
        self, keys: Any, priorities: Any, timeout: float | None = None
    ) -> npt.NDArray[np.bool_]:
        """Set priorities (see the table's ``update_priorities``); never waits."""
        ops = self._ops
        k, p = ops.keys_and_priorities(keys, priorities)
        timeout_arg(timeout, f"{ops.owner}.update_priorities")
        found: npt.NDArray[np.bool_] = ops.engine.update(k, p)
        return found

    def delete(self, keys: Any, timeout: float | None = None) -> npt.NDArray[np.bool_]:
        """Remove items (see the table's ``delete``); never waits."""
        ops = self._ops
        k = ops.keys(keys)
        timeout_arg(timeout, f"{ops.owner}.delete")
        found: npt.NDArray[np.bool_] = thread_step(ops.engine.delete, k)
        return found

    def close(self) -> None:
        """Close the table (see the table's ``close``)."""
        self._table.close()

    def size(self) -> int:
        """Items held now."""
        return self._table.size()


class BlockingReplayTable(BlockingSampling[T]):
    """Blocking methods of one replay table, for threads other than an event loop's.

    Get one with ``table.blocking()``.
    """

    __slots__ = ()

    _table: ReplayTable[T]

    @property
    def table(self) -> ReplayTable[T]:
        """The table this view belongs to."""
        return self._table

    def insert(
        self, element: Any, priority: float | None = None, timeout: float | None = None
    ) -> int:
        """Insert one item (see ``ReplayTable.insert``): its key."""
        self._check("insert")
        keys = self._run(self._ops.insert_request(element, priority), timeout, "insert")
        return int(keys[0])

    def insert_many(
        self, batch: Any, priorities: Any = None, timeout: float | None = None
    ) -> npt.NDArray[np.int64]:
        """Insert a batch, all or nothing (see ``ReplayTable.insert_many``): its keys."""
        self._check("insert_many")
        req = self._ops.insert_many_request(batch, priorities)
        if req is None:
            timeout_arg(timeout, f"{self._ops.owner}.insert_many")
            return np.empty(0, dtype=np.int64)
        keys: npt.NDArray[np.int64] = self._run(req, timeout, "insert_many")
        return keys

    def enqueue(self, element: Any, timeout: float | None = None) -> None:
        """``insert(element, timeout=timeout)`` with the default priority, its key
        dropped (what a ``QueueRunner``'s producer threads call)."""
        self._check("enqueue")
        self._run(self._ops.insert_request(element, None), timeout, "enqueue")

    def enqueue_many(self, batch: Any, timeout: float | None = None) -> None:
        """Insert a batch with the default priority, as a queue's view does: without a
        timeout progressively (as ``ReplayTable.enqueue_many``), with one all or
        nothing (as ``insert_many``, so a batch the limiter could never admit at once
        is refused)."""
        self._check("enqueue_many")
        ops = self._ops
        if timeout is None:
            req = ops.enqueue_many_request(batch)
        else:
            req = ops.insert_many_request(batch, None)
        if req is None:
            timeout_arg(timeout, f"{ops.owner}.enqueue_many")
            return
        self._run(req, timeout, "enqueue_many")

    def statistics(self) -> ReplayStatistics:
        """The table's counters now."""
        return self._table.statistics()


class Sampled(Protocol[T]):
    """What ``SampleIterator`` iterates over: any table (in process, or shared through
    ``aqueue.redis``) with an awaitable ``sample(n)``."""

    async def sample(self, n: int) -> ReplaySample[T]: ...


class SampleIterator(Generic[T]):
    """The iterator of ``table.samples(n)`` (see the module docstring)."""

    __slots__ = ("_n", "_table")

    def __init__(self, table: Sampled[T], n: int) -> None:
        self._table = table
        self._n = n

    @property
    def table(self) -> Sampled[T]:
        """The table sampled."""
        return self._table

    def __aiter__(self) -> SampleIterator[T]:
        return self

    async def __anext__(self) -> ReplaySample[T]:
        try:
            return await self._table.sample(self._n)
        except OutOfRangeError:
            raise StopAsyncIteration from None
