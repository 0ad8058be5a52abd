"""SamplingSide: what every in-process table does on its sampling side, written once
for ``ReplayTable`` and ``TrajectoryTable`` (``_trajectory/_table.py``).

Both hold a ``ReplayEngine`` (``_engine``) and the ``TableOps`` of its checks
(``_ops``), and set their settings (``_name``, ``_seed``, ``_sampler``, ``_remover``,
``_limiter``) in their constructors; how items come in (inserts, or windows made by
writers) and what closing means for them is each class's own. Every operation has
the waiting kernel's shape: check the arguments, ``await checkpoint()`` once, one
engine step, and ``wait_task`` if it parked (see ``_table.py``).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from .._waiting._backend import checkpoint, make_waker
from .._waiting._wait import wait_task
from ._engine import ReplayEngine, SampleRequest
from ._limiter import RateLimiter
from ._ops import TableOps
from ._results import ReplaySample
from ._selectors import Selector
from ._views import SampleIterator

__all__ = ["SamplingSide"]

T = TypeVar("T")
Found = npt.NDArray[np.bool_]


class SamplingSide(Generic[T]):
    """The sampling side of an in-process table (see the module docstring)."""

    _engine: ReplayEngine
    _ops: TableOps[T]
    _name: str
    _seed: int | None
    _sampler: Selector
    _remover: Selector
    _limiter: RateLimiter

    @property
    def name(self) -> str:
        """The table's name, used in messages and reports."""
        return self._name

    @property
    def max_size(self) -> int:
        """The most items the table holds."""
        return self._engine.core.max_size

    @property
    def sampler(self) -> Selector:
        """The selector samples draw with."""
        return self._sampler

    @property
    def remover(self) -> Selector:
        """The selector that picks the item evicted at ``max_size``."""
        return self._remover

    @property
    def max_times_sampled(self) -> int:
        """Draws after which an item leaves (0: never)."""
        return self._ops.mts

    @property
    def rate_limiter(self) -> RateLimiter:
        """The rate limiter pacing inserts and samples."""
        return self._limiter

    @property
    def seed(self) -> int | None:
        """The seed the table was created with."""
        return self._seed

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._engine.closed

    def size(self) -> int:
        """Items held now."""
        return self._engine.core.store.size

    def __len__(self) -> int:
        return self._engine.core.store.size

    async def sample(self, n: int) -> ReplaySample[T]:
        """Draw ``n`` items (with replacement, by the sampler): a ``ReplaySample``.

        Counts as n samples for the rate limiter and waits until it allows all n at
        once and the table can supply them (at least one item; with
        ``max_times_sampled``, n draws left among the items). Never returns fewer.
        Items drawn ``max_times_sampled`` times leave the table; a batch never draws an
        item more often than it has left (see ``aqueue._replay._core``).

        Raises:
            ElementSpecError: ``n`` is not an int >= 1, or could never be served at once
                (the rate limiter's band, or ``max_size * max_times_sampled``, is too
                small; the message names the numbers).
            OutOfRangeError: The table is closed and cannot serve it now.

        If cancelled, nothing was sampled: no counter, no ``times_sampled`` changed.
        """
        engine = self._engine
        ops = self._ops
        # (an int within the bound the checks compute once passes them all)
        req = SampleRequest(
            n if type(n) is int and 0 < n <= ops.most_samples else ops.sample_count(n)
        )
        await checkpoint()
        got = engine.start(req, make_waker)
        if got is req:
            got = await wait_task(engine, req, self)
        sample: ReplaySample[T] = got
        return sample

    def samples(self, n: int) -> SampleIterator[T]:
        """An async iterator of ``sample(n)`` results; it ends when the table is closed
        and cannot serve another (the table is not closed by it).

        Raises:
            ElementSpecError: As ``sample(n)``, at once.
        """
        return SampleIterator(self, self._ops.sample_count(n))

    async def update_priorities(self, keys: Any, priorities: Any) -> Found:
        """Set the priorities of the items of ``keys``: for each key, whether the table
        held it (False for a key evicted, sampled out or deleted: never silently
        ignored). A key given twice takes its last priority. Never waits.

        Raises:
            ElementSpecError: Keys that are not a 1-d sequence of ints, or priorities that
                are not one finite number >= 0 per key (nothing changed).
        """
        k, p = self._ops.keys_and_priorities(keys, priorities)
        await checkpoint()
        found: Found = self._engine.update(k, p)
        return found

    async def delete(self, keys: Any) -> Found:
        """Remove the items of ``keys``: for each key, whether the table held it (a key
        given twice: True for its first). Each removal counts as a delete for the rate
        limiter. Never waits.

        Raises:
            ElementSpecError: Keys that are not a 1-d sequence of ints (nothing changed).
        """
        k = self._ops.keys(keys)
        await checkpoint()
        found: Found = self._engine.delete(k)
        return found

    def close(self) -> None:
        """Close the table; idempotent (see the table's class)."""
        self._engine.close()

    async def aclose(self) -> None:
        """Close the table (as ``close()``), then checkpoint."""
        self.close()
        await checkpoint()
