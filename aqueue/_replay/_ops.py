"""TableOps: what every operation of one table does before its engine step, shared by
the async table (``_table.py``) and its thread view (``_views.py``).

Check and convert the arguments (``TableArgs`` of ``_checks.py``, which every backend
shares: element spec, priorities, keys, counts, the requests that could never be
served) and build the request; nothing here touches the table's state, so a rejected
call changes nothing. Then the caller runs the step: ``engine.start``, then
``wait_task`` or ``wait_thread`` if it parked (a sample's result is its
``ReplaySample`` already); ``update_priorities`` and ``delete`` are one step each
(``engine.update``, ``engine.delete``).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from ._checks import TableArgs, TableSettings
from ._engine import InsertRequest, ReplayEngine, SampleRequest

__all__ = ["TableOps"]

T = TypeVar("T")


class TableOps(TableArgs, Generic[T]):
    """The checks and conversions of one table's operations (see the module docstring)."""

    __slots__ = ("engine",)

    def __init__(self, settings: TableSettings, engine: ReplayEngine) -> None:
        super().__init__(settings)
        self.engine = engine

    def insert_request(self, element: Any, priority: Any) -> InsertRequest:
        """The request of ``insert(element, priority)``."""
        comps, prio = self.element(element, priority)
        return InsertRequest(comps, 1, prio)

    def insert_many_request(self, batch: Any, priorities: Any) -> InsertRequest | None:
        """The request of ``insert_many(batch, priorities)``; None for an empty batch."""
        comps, k, prios = self.batch(batch, priorities)
        if k == 0:
            return None
        return InsertRequest(comps, k, prios)

    def enqueue_many_request(self, batch: Any) -> InsertRequest | None:
        """The request of a sink's ``enqueue_many(batch)``: progressive (in pieces, as
        the limiter admits them), default priorities; None for an empty batch."""
        comps, k = self.spec.batch(batch)
        if k == 0:
            return None
        return InsertRequest(comps, k, None, progressive=True)

    def sample_request(self, n: Any) -> SampleRequest:
        """The request of ``sample(n)``."""
        return SampleRequest(self.sample_count(n))
