"""The thread views of a Redis trajectory table: the table's (BlockingRedisTrajectoryTable,
``table.blocking()``) and a writer's (BlockingRedisTrajectoryWriter, ``w.blocking()``).

They run the async objects' ops with the sync driver (``_transport.run_blocking``) over
the synchronous client, in the calling thread, as the replay table's view does
(``../_blocking.py``): the table's view *is* that view's sampling side
(``BlockingRedisSampling``), with the trajectory table's sample op (``TrajSampleOp``),
statistics and names; the writer's runs the writer's own ops (``append_op``,
``control_op``), so an append from a thread is the same one server call as a task's.

Invariants: an append that waits (the rate limiter of every process holds back the
windows it completes) waits only between calls, so on ``timeout`` (TimeoutError) or
when the table is closed meanwhile (QueueClosedError) it has written nothing and is no
longer registered as a waiter; a writer's calls, from tasks and threads alike, run one
at a time (the writer's lock). Methods that may wait refuse an event loop's thread
(RuntimeError), where blocking would stall every task of the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt

from aqueue._replay._checks import timeout_arg
from aqueue._replay._trajectory._results import TrajectoryStatistics

from ..._core._transport import Deadline, SyncTransport, refuse_event_loop, run_blocking
from .._blocking import BlockingRedisSampling
from .._ops import SampleOp
from ._ops import TrajSampleOp, traj_statistics

if TYPE_CHECKING:
    from ._open import TrajHandle
    from ._table import RedisTrajectoryTable, RedisTrajectoryWriter

__all__ = ["BlockingRedisTrajectoryTable", "BlockingRedisTrajectoryWriter"]

T = TypeVar("T")
Keys = npt.NDArray[np.int64]


class BlockingRedisTrajectoryTable(BlockingRedisSampling[T]):
    """Blocking methods of one Redis trajectory table, for threads: ``sample``,
    ``samples``, ``update_priorities``, ``delete``, ``statistics``, ``size`` and
    ``close``, each as the table's (the waiting ones with ``timeout=``).

    Get one with ``table.blocking()``; writers have their own (``writer.blocking()``).
    """

    __slots__ = ()

    _view: ClassVar[str] = "BlockingTrajectoryTable"
    _kind: ClassVar[str] = "trajectory table"
    _sample_op: ClassVar[type[SampleOp]] = TrajSampleOp
    _h: TrajHandle
    _table: RedisTrajectoryTable[T]

    @property
    def table(self) -> RedisTrajectoryTable[T]:
        """The table this view belongs to."""
        return self._table

    def statistics(self) -> TrajectoryStatistics:
        """The counters of the items (every process's) and the steps, in one call."""
        return run_blocking(traj_statistics(self._h), self._t)


class BlockingRedisTrajectoryWriter:
    """A Redis writer's blocking methods, for threads other than an event loop's: the
    writer's checks and server calls, driven by the synchronous client. Get one with
    ``writer.blocking()``."""

    __slots__ = ("_t", "_writer")

    def __init__(self, writer: RedisTrajectoryWriter, transport: SyncTransport) -> None:
        self._writer = writer
        self._t = transport

    @property
    def writer(self) -> RedisTrajectoryWriter:
        """The writer this view belongs to."""
        return self._writer

    def __repr__(self) -> str:
        return f"<BlockingRedisTrajectoryWriter of {self._writer!r}>"

    def _run(self, comps: Any, k: int, prios: Any, timeout: Any, what: str) -> Keys:
        w = self._writer
        refuse_event_loop(f"BlockingTrajectoryWriter.{what}()", w.owner, f"writer.{what}(...)")
        t = timeout_arg(timeout, f"{w.owner}: {what}")
        deadline = None
        if t is not None:
            deadline = Deadline(t, f"BlockingTrajectoryWriter.{what}() of {w.owner}")
        w.enter(what)
        try:
            if k == 0:
                return np.empty(0, dtype=np.int64)
            return run_blocking(w.append_op(comps, k, prios), self._t, None, deadline)
        finally:
            w.leave()

    def append(
        self, step: Any, priority: float | None = None, timeout: float | None = None
    ) -> Keys:
        """Append one step (see ``RedisTrajectoryWriter.append``): the keys of the items
        it completed. Waits while the rate limiter holds back the window it completes.

        Raises:
            ElementSpecError: A bad step, priority or ``timeout`` (nothing is sent).
            QueueClosedError: The table or the writer is closed (or the table was closed
                while this waited), or the table is gone; nothing written.
            TimeoutError: ``timeout`` seconds passed first (nothing written).
            RuntimeError: Called on an event loop's thread, or another call of this
                writer is in flight.
        """
        comps, prio = self._writer.step_args.step(step, priority)
        return self._run(comps, 1, prio, timeout, "append")

    def append_many(self, steps: Any, priorities: Any = None, timeout: float | None = None) -> Keys:
        """Append consecutive steps, all or nothing, in one server call (see
        ``RedisTrajectoryWriter.append_many``); raises as ``append``."""
        comps, k, prios = self._writer.step_args.steps(steps, priorities)
        return self._run(comps, k, prios, timeout, "append_many")

    def end_episode(self) -> None:
        """End the current episode (see ``RedisTrajectoryWriter.end_episode``); never
        waits (one server call), so it works on any thread."""
        w = self._writer
        w.enter("end_episode")
        try:
            run_blocking(w.control_op("end"), self._t)
        finally:
            w.leave()

    def close(self) -> None:
        """End the episode and close the writer (see ``RedisTrajectoryWriter.close``)."""
        self._writer.close()
