"""TrajectoryWriter: one stream of steps into a trajectory table, and the thread views of
trajectory tables: a writer's (BlockingTrajectoryWriter) and a table's
(BlockingTrajectoryTable).

A writer is one actor's stream (``table.writer()``): the steps it appends are
consecutive steps of its current episode, and the windows they complete become the
table's items. Every call has the waiting kernel's shape, as a replay table's
``insert``: check the arguments (a refused call writes nothing), ``await
checkpoint()`` once, one engine step under the table's lock (``AppendRequest``: the
steps appended and the windows they complete inserted, all in that step), and, if the
rate limiter holds those windows back, ``wait_task`` until it admits them. A cancelled
or timed-out append therefore wrote nothing: no step stored, no window inserted, no
step or item evicted, no counter moved. ``end_episode`` never waits (checkpoint, one
step).

A writer is one stream: its calls run one at a time (a second call while one is in
flight, from another task or thread, raises RuntimeError, since the order of the
two would be the order of chance). ``close()`` ends its episode and frees what only
its pending windows needed; a closed writer refuses every call (QueueClosedError), and
so does an append to a closed table.

A table's thread view, for a learner thread, is the sampling side of every in-process
table's view, ``BlockingSampling`` of ``aqueue/_replay/_views.py``, as it is (the same
checks and engine steps as a task's, waiting through the kernel's ``wait_thread``);
only the names and the counters' type are its own, since a trajectory table's items
are made by writers, never inserted.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt

from ..._errors import QueueClosedError
from ..._waiting._backend import checkpoint, in_event_loop, make_waker
from ..._waiting._wait import thread_step, wait_task, wait_thread
from .._checks import timeout_arg
from .._engine import AppendRequest, ReplayEngine
from .._views import BlockingSampling
from ._checks import StepArgs
from ._results import TrajectoryStatistics
from ._steps import StepStore

if TYPE_CHECKING:
    from ._table import TrajectoryTable

__all__ = ["BlockingTrajectoryTable", "BlockingTrajectoryWriter", "TrajectoryWriter"]

T = TypeVar("T")

Keys = npt.NDArray[np.int64]
_NO_KEYS = np.empty(0, dtype=np.int64)


class TrajectoryWriter:
    """One stream of steps (one actor's episodes) into a trajectory table.

    Get one with ``table.writer()``; use it as ``async with table.writer() as w:`` to
    close it at the end. See ``aqueue.TrajectoryTable``.
    """

    __slots__ = ("_args", "_busy", "_closed", "_engine", "_store", "_wid", "owner")

    def __init__(self, engine: ReplayEngine, store: StepStore, args: StepArgs, wid: int) -> None:
        self._engine = engine
        self._store = store
        self._args = args
        self._wid = wid
        self._busy = threading.Lock()  # (held while a call is in flight)
        self._closed = False
        self.owner = f"writer {wid} of trajectory table '{engine.name}'"

    @property
    def id(self) -> int:
        """The writer's id in its table (``table.writer(resume=id)`` after a restore)."""
        return self._wid

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    @property
    def engine(self) -> ReplayEngine:
        """The table's engine (what the thread view runs its steps on)."""
        return self._engine

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<TrajectoryWriter {self._wid} of '{self._engine.name}' {state}>"

    # -- one call at a time -------------------------------------------------------------

    def enter(self, what: str) -> None:
        """Start call ``what`` (``leave`` ends it).

        Raises:
            QueueClosedError: The writer is closed.
            RuntimeError: Another call of this writer is in flight.
        """
        if self._closed:
            raise QueueClosedError(f"{self.owner} is closed; {what}() needs an open writer")
        if not self._busy.acquire(blocking=False):
            raise RuntimeError(
                f"{self.owner}: {what}() while another call of this writer is in flight; "
                "a writer is one stream of steps: await its calls in turn, or give each "
                "task its own writer"
            )

    def leave(self) -> None:
        """End the call in flight."""
        self._busy.release()

    def append_request(self, step: Any, priority: Any) -> AppendRequest:
        """The request of ``append(step, priority)`` (checked: nothing written if not)."""
        comps, prio = self._args.step(step, priority)
        return AppendRequest(self._wid, comps, 1, prio)

    def append_many_request(self, steps: Any, priorities: Any) -> AppendRequest | None:
        """The request of ``append_many(steps, priorities)``; None for no steps."""
        comps, k, prios = self._args.steps(steps, priorities)
        return AppendRequest(self._wid, comps, k, prios) if k else None

    def end_step(self) -> None:
        """``end_episode``'s step, under the table's lock (it never waits)."""
        with self._engine.lock:
            self._store.end_episode(self._wid)

    # -- the calls ------------------------------------------------------------------------

    async def _run(self, req: AppendRequest | None, what: str) -> Keys:
        self.enter(what)
        try:
            await checkpoint()
            if req is None:
                empty: Keys = _NO_KEYS.copy()
                return empty
            engine = self._engine
            keys = engine.start(req, make_waker)
            if keys is req:
                keys = await wait_task(engine, req)
            result: Keys = keys
            return result
        finally:
            self.leave()

    async def append(self, step: Any, priority: float | None = None) -> Keys:
        """Append the next step of this writer's episode: the keys of the items it
        completed (none until ``length`` steps are in, then one per ``stride`` steps).

        Waits while the rate limiter holds back the window this step completes (a step
        that completes none never waits).

        Args:
            step: one value per field, in the table's element form (a bare array for
                one unnamed field, a tuple for several, a dict with ``names``).
            priority: the priority of the window this step completes, a finite number
                >= 0; None (default): the largest held (1.0 in an empty table).

        Raises:
            ElementSpecError: A step of the wrong shape or dtype, or a bad priority (the
                message names what was expected and what was given; nothing written).
            QueueClosedError: The table or the writer is closed, or the table was closed
                while this waited (nothing written).
            RuntimeError: Another call of this writer is in flight.

        If cancelled, nothing was written.
        """
        return await self._run(self.append_request(step, priority), "append")

    async def append_many(self, steps: Any, priorities: Any = None) -> Keys:
        """Append consecutive steps (sliced along axis 0) of this writer's episode, all
        or nothing, as that many ``append`` calls in a row: the keys of the items they
        completed. Waits until the rate limiter admits all those windows at once.

        Args:
            steps: the steps, in the table's batch form.
            priorities: one priority per step (the priority of the window that step
                completes, if any), or None for the default.

        Raises:
            ElementSpecError: Bad steps or priorities, or more windows than the rate
                limiter could ever admit at once (nothing written).
            QueueClosedError: As ``append``.
            RuntimeError: Another call of this writer is in flight.

        If cancelled, nothing was written.
        """
        return await self._run(self.append_many_request(steps, priorities), "append_many")

    async def end_episode(self) -> None:
        """End the current episode: windows not complete yet never become items (a
        window never crosses an episode's end), and the next step starts a new
        episode. Never waits; works on a closed table too.

        Raises:
            QueueClosedError: The writer is closed.
            RuntimeError: Another call of this writer is in flight.
        """
        self.enter("end_episode")
        try:
            await checkpoint()
            self.end_step()
        finally:
            self.leave()

    def close(self) -> None:
        """End the episode (as ``end_episode``) and close the writer; idempotent.

        Raises:
            RuntimeError: A call of this writer is in flight.
        """
        if self._closed:
            return
        self.enter("close")
        try:
            with self._engine.lock:
                self._store.close_writer(self._wid)
            self._closed = True
        finally:
            self.leave()

    async def __aenter__(self) -> TrajectoryWriter:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def blocking(self) -> BlockingTrajectoryWriter:
        """A view whose blocking methods may be called from threads that run no event
        loop (RuntimeError there otherwise), each with ``timeout=``."""
        loop_thread = threading.get_ident() if in_event_loop() else None
        return BlockingTrajectoryWriter(self, loop_thread)


class BlockingTrajectoryWriter:
    """A writer's blocking methods, for threads other than an event loop's (the same
    checks and engine steps as the writer's, waiting through ``wait_thread``; on a
    timeout, TimeoutError and nothing written). Get one with ``writer.blocking()``."""

    __slots__ = ("_loop_thread", "_writer")

    def __init__(self, writer: TrajectoryWriter, loop_thread: int | None) -> None:
        self._writer = writer
        self._loop_thread = loop_thread

    @property
    def writer(self) -> TrajectoryWriter:
        """The writer this view belongs to."""
        return self._writer

    def __repr__(self) -> str:
        return f"<BlockingTrajectoryWriter of {self._writer!r}>"

    def _run(self, req: AppendRequest | None, timeout: Any, what: str) -> Keys:
        w = self._writer
        here = threading.get_ident()
        loop = self._loop_thread
        if here == loop if loop is not None else in_event_loop():
            raise RuntimeError(
                f"BlockingTrajectoryWriter.{what}() of {w.owner} was called on an event-loop "
                f"thread, where blocking would stall the loop; use `await writer.{what}(...)`"
            )
        t = timeout_arg(timeout, f"{w.owner}: {what}")
        w.enter(what)
        try:
            if req is None:
                empty: Keys = _NO_KEYS.copy()
                return empty
            engine = w.engine
            keys = thread_step(engine.start, req, threading.Event)
            if keys is req:
                keys = wait_thread(
                    engine, req, t, f"BlockingTrajectoryWriter.{what}() of {w.owner}"
                )
            result: Keys = keys
            return result
        finally:
            w.leave()

    def append(
        self, step: Any, priority: float | None = None, timeout: float | None = None
    ) -> Keys:
        """Append one step (see ``TrajectoryWriter.append``): the keys of the items it
        completed."""
        return self._run(self._writer.append_request(step, priority), timeout, "append")

    def append_many(self, steps: Any, priorities: Any = None, timeout: float | None = None) -> Keys:
        """Append consecutive steps, all or nothing (see ``TrajectoryWriter.append_many``)."""
        req = self._writer.append_many_request(steps, priorities)
        return self._run(req, timeout, "append_many")

    def end_episode(self) -> None:
        """End the current episode (see ``TrajectoryWriter.end_episode``); never waits."""
        w = self._writer
        w.enter("end_episode")
        try:
            w.end_step()
        finally:
            w.leave()

    def close(self) -> None:
        """Close the writer (see ``TrajectoryWriter.close``)."""
        self._writer.close()


class BlockingTrajectoryTable(BlockingSampling[T]):
    """Blocking methods of one trajectory table, for threads other than an event
    loop's: ``sample``, ``samples``, ``update_priorities``, ``delete``, ``statistics``,
    ``size`` and ``close``, each as the table's (the waiting ones with ``timeout=``).

    Get one with ``table.blocking()``; writers have their own (``writer.blocking()``).
    """

    __slots__ = ()

    _kind: ClassVar[str] = "trajectory table"
    _table: TrajectoryTable[T]

    @property
    def table(self) -> TrajectoryTable[T]:
        """The table this view belongs to."""
        return self._table

    def statistics(self) -> TrajectoryStatistics:
        """The counters of the items and the steps now."""
        return self._table.statistics()
