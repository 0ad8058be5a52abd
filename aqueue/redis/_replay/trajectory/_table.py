"""RedisTrajectoryTable: a trajectory table stored in Redis, shared by every process that
opens its name (``server.trajectory_table(...)``), and its writers.

The operations are the in-process ``aqueue.TrajectoryTable``'s, with its checks and
records: each checks its arguments (a refused call sends nothing), checkpoints once,
then runs its op (``_ops`` of this folder, or the replay table's) with the async
driver. Sampling, ``update_priorities``, ``delete``, closing and the producers are the
replay table's (``RedisReplayTable``, whose methods this class inherits): its items
are the windows. The thread views (``_blocking``) run the same ops with the sync
driver: a writer's ``append_op`` and ``control_op`` are written once for both.

Invariants (besides those of ``_ops`` and ``_functions.lua``):
- an append or a sample changes the table in exactly one server call, or not at all: a
  cancelled one stored, inserted, evicted and sampled nothing and moved no counter;
- a writer object holds its id on the server (given by its first append) and nothing
  else: its episode lives on the server; one call of a writer at a time, from tasks
  and threads alike (a lock, tried, never waited on).
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, TypeVar

import anyio.lowlevel
import numpy as np
import numpy.typing as npt

import aqueue
from aqueue._replay._results import ReplaySample
from aqueue._replay._trajectory._checks import StepArgs
from aqueue._replay._trajectory._results import TrajectoryStatistics

from ..._core._connection import Connection
from ..._core._transport import AsyncTransport, Op, SyncTransport, run, run_blocking
from .._sharded import TableOps
from .._table import RedisReplayTable
from ._blocking import BlockingRedisTrajectoryTable, BlockingRedisTrajectoryWriter
from ._open import TrajHandle, open_trajectory
from ._ops import AppendOp, TrajSampleOp, traj_statistics, writer_op

__all__ = ["RedisTrajectoryTable", "RedisTrajectoryWriter", "TrajectoryTables"]

T = TypeVar("T")
Keys = npt.NDArray[np.int64]


class RedisTrajectoryTable(RedisReplayTable[T]):
    """A trajectory table stored in Redis (``server.trajectory_table``); see
    ``aqueue.redis`` and ``aqueue.TrajectoryTable`` for the semantics."""

    _h: TrajHandle

    @property
    def max_steps(self) -> int:
        """The most steps held at once."""
        return self._h.steps.max_steps

    @property
    def length(self) -> int:
        """Steps per window (item)."""
        return self._h.steps.length

    @property
    def stride(self) -> int:
        """Steps between the starts of consecutive windows of an episode."""
        return self._h.steps.stride

    @property
    def dtypes(self) -> tuple[np.dtype[Any], ...]:
        """One numpy dtype per field of a step."""
        return self._h.steps.spec.dtypes

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        """One shape per field of a step."""
        return self._h.steps.shapes

    @property
    def names(self) -> tuple[str, ...] | None:
        """Field names, or None."""
        return self._h.steps.spec.names

    def __repr__(self) -> str:
        st, s = self._h.steps, self._h.settings
        return (
            f"<RedisTrajectoryTable '{self._h.name}' max_steps={st.max_steps} "
            f"length={st.length} stride={st.stride} sampler={s.sampler!r} (Redis)>"
        )

    def writer(self) -> RedisTrajectoryWriter:
        """A new writer, one stream of steps, at the start of an episode. It is opened
        on the server by its first append (so an unused writer costs nothing there)."""
        return RedisTrajectoryWriter(self._h, self, self._t, self._sync)

    async def sample(self, n: int) -> ReplaySample[T]:
        """Draw ``n`` windows (see ``aqueue.TrajectoryTable.sample``): ``data`` holds
        ``(n, length, ...)`` per field, read in the same server call as the draw.

        Raises:
            ElementSpecError: ``n`` could never be served at once (nothing is sent).
            OutOfRangeError: The table is closed and cannot serve it now, or is gone.

        If cancelled, nothing was sampled: no counter, no ``times_sampled`` changed.
        """
        n = self._h.args.sample_count(n)
        await anyio.lowlevel.checkpoint()
        sample: ReplaySample[T] = await run(TrajSampleOp(self._h, n).run(), self._t)
        return sample

    async def statistics(self) -> TrajectoryStatistics:
        """The counters of the items (every process's) and the steps, in one call."""
        return await run(traj_statistics(self._h), self._t)

    # -- what a replay table has and a trajectory table has not: windows are made by
    # writers, whatever a sink or a thread would insert is a step of no episode

    def _no(self, what: str) -> TypeError:
        return TypeError(
            f"{self!r}.{what}: a trajectory table's items are windows made by writers "
            "(table.writer(), then await w.append(step))"
        )

    async def insert(self, element: Any, priority: float | None = None) -> int:
        """Not for trajectory tables (TypeError): items are made by writers."""
        raise self._no("insert")

    async def insert_many(self, batch: Any, priorities: Any = None) -> Keys:
        """Not for trajectory tables (TypeError): items are made by writers."""
        raise self._no("insert_many")

    async def enqueue(self, element: Any) -> None:
        """Not for trajectory tables (TypeError): items are made by writers."""
        raise self._no("enqueue")

    async def enqueue_many(self, batch: Any) -> None:
        """Not for trajectory tables (TypeError): items are made by writers."""
        raise self._no("enqueue_many")

    # The view is not a replay table's: it has no inserts (a trajectory table's items
    # come from writers), so a type checker flags an insert through it, where this
    # class, inheriting the replay table's methods, can only refuse them when called.
    def blocking(self) -> BlockingRedisTrajectoryTable[T]:  # type: ignore[override]
        """A view whose blocking methods threads may call (they use the synchronous
        client): ``sample``, ``samples``, ``update_priorities``, ``delete``,
        ``statistics``, ``size`` and ``close``, the waiting ones with ``timeout=``.
        Writers have their own (``writer.blocking()``)."""
        return BlockingRedisTrajectoryTable(self._ops, self._sync, self)


class RedisTrajectoryWriter:
    """One stream of steps of a ``RedisTrajectoryTable`` (``table.writer()``); see
    ``aqueue.TrajectoryWriter``."""

    def __init__(
        self,
        h: TrajHandle,
        table: RedisTrajectoryTable[Any],
        transport: AsyncTransport,
        sync: SyncTransport,
    ) -> None:
        self._h = h
        self._table = table
        self._t = transport
        self._sync = sync
        self._id = ""  # (given by the server at the first append)
        self._busy = threading.Lock()  # (held while a call is in flight, from any thread)
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    @property
    def step_args(self) -> StepArgs:
        """The checks of the steps it appends (the in-process table's)."""
        return self._h.step_args

    @property
    def owner(self) -> str:
        """The writer, as messages name it."""
        return f"writer {self._id or '(unopened)'} of trajectory table '{self._h.name}'"

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"id={self._id or 'unopened'}"
        return f"<RedisTrajectoryWriter of '{self._h.name}' {state}>"

    # -- one call at a time, and the ops both views run ---------------------------------

    def enter(self, what: str) -> None:
        """Start call ``what`` (``leave`` ends it).

        Raises:
            QueueClosedError: The writer is closed.
            RuntimeError: Another call of this writer is in flight (from any thread).
        """
        if self._closed:
            raise aqueue.QueueClosedError(f"{self!r} is closed; {what}() needs an open writer")
        if not self._busy.acquire(blocking=False):
            raise RuntimeError(
                f"{self!r}: {what}() while another call of this writer is in flight; "
                "await its calls in turn, or give each task its own writer"
            )

    def leave(self) -> None:
        """End the call in flight."""
        self._busy.release()

    def append_op(self, comps: Any, k: int, prios: Any) -> Op[Keys]:
        """The op of an append of ``k`` checked steps; it keeps the id the server gives
        the writer at its first append."""
        op = AppendOp(self._h, self._id, comps, k, prios)
        try:
            return (yield from op.run())
        finally:
            self._id = op.writer

    def control_op(self, what: str) -> Op[None]:
        """The op of ``end`` (the episode) or ``close`` (the writer): nothing to send for
        a writer no append opened on the server."""
        if self._id:
            yield from writer_op(self._h, what, self._id)
        if what == "close":
            self._closed = True

    # -- the calls ------------------------------------------------------------------------

    async def _append(self, comps: Any, k: int, prios: Any, what: str) -> Keys:
        self.enter(what)
        try:
            await anyio.lowlevel.checkpoint()
            if k == 0:
                return np.empty(0, dtype=np.int64)
            return await run(self.append_op(comps, k, prios), self._t)
        finally:
            self.leave()

    async def append(self, step: Any, priority: float | None = None) -> Keys:
        """Append the next step of this writer's episode: the keys of the items it
        completed. Waits while the rate limiter (of every process) holds back the
        window it completes; a step that completes none never waits.

        Raises:
            ElementSpecError: A step of the wrong shape or dtype, or a bad priority
                (nothing is sent).
            QueueClosedError: The table or the writer is closed, or the table is gone.
            RuntimeError: Another call of this writer is in flight.

        If cancelled, nothing was written.
        """
        comps, prio = self._h.step_args.step(step, priority)
        return await self._append(comps, 1, prio, "append")

    async def append_many(self, steps: Any, priorities: Any = None) -> Keys:
        """Append consecutive steps, all or nothing, in one server call: the keys of the
        items they completed (see ``aqueue.TrajectoryWriter.append_many``)."""
        comps, k, prios = self._h.step_args.steps(steps, priorities)
        return await self._append(comps, k, prios, "append_many")

    async def end_episode(self) -> None:
        """End the current episode: its windows not complete never become items; the
        next step starts a new episode. Never waits; works on a closed table too."""
        self.enter("end_episode")
        try:
            await anyio.lowlevel.checkpoint()
            await run(self.control_op("end"), self._t)
        finally:
            self.leave()

    async def aclose(self) -> None:
        """End the episode and close the writer (on the server too); idempotent."""
        if self._closed:
            return
        self.enter("close")
        try:
            await run(self.control_op("close"), self._t)
        finally:
            self.leave()

    def close(self) -> None:
        """``aclose`` as one blocking call (for code outside an event loop, or a
        thread)."""
        if self._closed:
            return
        self.enter("close")
        try:
            run_blocking(self.control_op("close"), self._sync)
        finally:
            self.leave()

    async def __aenter__(self) -> RedisTrajectoryWriter:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def blocking(self) -> BlockingRedisTrajectoryWriter:
        """A view whose blocking methods threads may call (they use the synchronous
        client): ``append``, ``append_many`` (each with ``timeout=``), ``end_episode``
        and ``close``."""
        return BlockingRedisTrajectoryWriter(self, self._sync)


class TrajectoryTables:
    """``RedisServer.trajectory_table`` (a base of RedisServer, over its connection)."""

    _conn: Connection

    async def trajectory_table(self, name: str, *args: Any, **kw: Any) -> RedisTrajectoryTable[Any]:
        """Open (creating if needed) the trajectory table ``name``, shared by every
        process that opens it; arguments as ``aqueue.TrajectoryTable``'s: ``max_steps,
        dtypes, shapes=None, names=None, *, length, stride=1, sampler, remover,
        max_times_sampled, rate_limiter, seed`` (no ``max_size``).

        Raises:
            ElementSpecError: A bad argument (as in process), a dtype AQ1 cannot carry,
                or a table (or queue) of that name exists with other settings (the
                message names the field, the stored and the given value).
        """
        c = self._conn
        op = open_trajectory(
            name, *args, wait_timeout=c.wait_timeout, lease_time=c.lease_time, **kw
        )
        return RedisTrajectoryTable(TableOps([await run(op, c.live())]), c.live(), c.sync, c)
