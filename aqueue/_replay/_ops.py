"""TableOps: what every operation of one table does before and after its engine step,
shared by the async table (``_table.py``) and its thread view (``_views.py``).

Before: check and convert the arguments (element spec, priorities, keys, counts),
refuse requests that could never be served (``check_sample``, ``check_insert``), and
build the request; nothing here touches the table's state, so a rejected call
changes nothing. After: turn the engine's raw result into a ``ReplaySample``. In
between, the caller runs the step: ``engine.start``, then ``wait_task`` or
``wait_thread`` if it parked.

The never-satisfiable rules (besides the limiter's, in ``_limiter.py``): with
``max_times_sampled = m > 0`` a table holds at most ``max_size * m`` draws, so a
``sample(n)`` with more is refused; ``n`` must be >= 1.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError
from .._queues._spec import ElementSpec
from ._checks import PriorityLimit, keys_arg, priorities_arg, priority_arg, sample_count_arg
from ._core import Sampled
from ._engine import ReplayEngine
from ._limiter import RateLimiter
from ._requests import InsertRequest, SampleRequest
from ._results import ReplaySample

__all__ = ["TableOps"]

T = TypeVar("T")


class TableOps(Generic[T]):
    """The checks and conversions of one table's operations (see the module docstring)."""

    __slots__ = ("engine", "limit", "limiter", "max_size", "mts", "owner", "spec")

    def __init__(
        self,
        spec: ElementSpec,
        engine: ReplayEngine,
        *,
        owner: str,
        max_size: int,
        limiter: RateLimiter,
        max_times_sampled: int,
        limit: PriorityLimit,
    ) -> None:
        self.spec = spec
        self.engine = engine
        self.owner = owner
        self.max_size = max_size
        self.limiter = limiter
        self.mts = max_times_sampled
        self.limit = limit

    def insert_request(self, element: Any, priority: Any) -> InsertRequest:
        """The request of ``insert(element, priority)``."""
        comps = self.spec.element(element)
        prio = priority_arg(priority, self.owner, self.limit)
        return InsertRequest(tuple(np.asarray(c)[np.newaxis] for c in comps), 1, prio)

    def insert_many_request(self, batch: Any, priorities: Any) -> InsertRequest | None:
        """The request of ``insert_many(batch, priorities)``; None for an empty batch."""
        comps, k = self.spec.batch(batch)
        prios = priorities_arg(priorities, k, self.owner, self.limit)
        if k == 0:
            return None
        self.limiter.check_insert_count(k, self.owner)
        return InsertRequest(comps, k, prios)

    def enqueue_many_request(self, batch: Any) -> InsertRequest | None:
        """The request of a sink's ``enqueue_many(batch)``: progressive (in pieces, as
        the limiter admits them), default priorities; None for an empty batch."""
        comps, k = self.spec.batch(batch)
        if k == 0:
            return None
        return InsertRequest(comps, k, None, progressive=True)

    def sample_count(self, n: Any) -> int:
        """``n`` checked for ``sample(n)``, refused if it could never be served."""
        count = sample_count_arg(n, self.owner)
        mts = self.mts
        if mts and count > self.max_size * mts:
            raise ElementSpecError(
                f"{self.owner}: sample({count}) could never be served: items leave after "
                f"max_times_sampled={mts} draws, so {self.max_size} items give at most "
                f"{self.max_size * mts} draws; sample at most that many at a time"
            )
        self.limiter.check_sample_count(count, self.owner)
        return count

    def sample_request(self, n: Any) -> SampleRequest:
        """The request of ``sample(n)``."""
        return SampleRequest(self.sample_count(n))

    def keys_and_priorities(
        self, keys: Any, priorities: Any
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The arguments of ``update_priorities``, checked."""
        k = keys_arg(keys, self.owner)
        if priorities is None:
            raise ElementSpecError(f"{self.owner}: update_priorities needs priorities, got None")
        p = priorities_arg(priorities, len(k), self.owner, self.limit)
        assert p is not None
        return k, p

    def keys(self, keys: Any) -> npt.NDArray[np.int64]:
        """The keys of ``delete``, checked."""
        return keys_arg(keys, self.owner)

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
