"""TableOps: what every operation of one table does before and after its engine step,
shared by the async table (``_table.py``) and its thread view (``_views.py``).

Before: check and convert the arguments (``TableArgs`` of ``_checks.py``, which every
backend shares: element spec, priorities, keys, counts, the requests that could never
be served) and build the request; nothing here touches the table's state, so a
rejected call changes nothing. After: turn the engine's raw result into a
``ReplaySample``. In between, the caller runs the step: ``engine.start``, then
``wait_task`` or ``wait_thread`` if it parked.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from ._checks import TableArgs, TableSettings
from ._core import Sampled
from ._engine import ReplayEngine
from ._requests import InsertRequest, SampleRequest
from ._results import ReplaySample

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

    def update_now(
        self, keys: npt.NDArray[np.int64], priorities: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.bool_]:
        """``update_priorities``'s step (it never waits)."""
        engine = self.engine
        with engine.lock:
            found: npt.NDArray[np.bool_] = engine.core.update(keys, priorities)
        return found

    def delete_now(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """``delete``'s step (it never waits; it may let waiting inserts through)."""
        engine = self.engine
        with engine.lock:
            found: npt.NDArray[np.bool_] = engine.core.delete(keys)
            engine.changed()
        return found

    def to_sample(self, raw: Sampled) -> ReplaySample[T]:
        """The engine's result of a sample as a ``ReplaySample``."""
        data, keys, priorities, probabilities, times, size = raw
        packed: T = self.spec.pack(data)
        return ReplaySample(packed, keys, priorities, probabilities, times, size)
