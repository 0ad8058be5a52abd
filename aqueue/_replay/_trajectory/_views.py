"""BlockingTrajectoryTable: a trajectory table's thread view (``table.blocking()``).

The sampling side of every in-process table's thread view, ``BlockingSampling`` of
``aqueue/_replay/_views.py``, as it is: a learner thread samples, updates priorities,
deletes and reads the counters through the same checks and engine steps as a task,
waiting through the kernel's ``wait_thread``. Nothing is added but the names and the
counters' type: a trajectory table's items are made by writers (each with its own
thread view, ``writer.blocking()``), never inserted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, TypeVar

from .._views import BlockingSampling
from ._results import TrajectoryStatistics

if TYPE_CHECKING:
    from ._table import TrajectoryTable

__all__ = ["BlockingTrajectoryTable"]

T = TypeVar("T")


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
