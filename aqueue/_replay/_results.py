"""What a replay table hands back: ``ReplaySample`` (one ``sample(n)``) and
``ReplayStatistics`` (its counters). Both are frozen records that any backend fills.

``ReplaySample.weights(beta)`` gives the prioritized-replay importance weights
``(N * P(i)) ** -beta`` normalised by their largest value in the batch, with ``N`` the
table's size and ``P(i)`` the probability each draw had (Schaul et al., 2015): with a
Uniform sampler they are all 1, and so with the deterministic selectors, which report
probability 1.

``ReplayStatistics`` is awaitable: ``await table.statistics()`` returns it at once,
without suspending, so code written for a shared table (whose ``statistics()`` is a
coroutine) also runs on an in-process one, whose ``statistics()`` returns the record.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError

__all__ = ["ReplaySample", "ReplayStatistics"]

if TYPE_CHECKING:  # a sample whose element type is not known holds Any
    from typing_extensions import Self
    from typing_extensions import TypeVar as _DefaultTypeVar

    T = _DefaultTypeVar("T", default=Any)
else:
    T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class ReplaySample(Generic[T]):
    """The result of ``table.sample(n)``: n draws, each with what the table knew of it.

    ``data`` is in the table's element form with a leading dimension of n (a bare
    array, a tuple of arrays, or a dict with the table's names); the other arrays have
    one entry per draw, in draw order. An item drawn twice appears twice.
    """

    data: T
    """The items drawn: one batch in the table's element form."""
    keys: npt.NDArray[np.int64]
    """Each draw's key (what ``update_priorities`` and ``delete`` take)."""
    priorities: npt.NDArray[np.float64]
    """Each draw's priority when it was drawn."""
    probabilities: npt.NDArray[np.float64]
    """The probability the sampler gave each draw at its moment (1.0 for Fifo, Lifo
    and the heaps)."""
    times_sampled: npt.NDArray[np.int64]
    """How many times each draw's item had been sampled, counting this draw."""
    table_size: int
    """Items in the table when the sample was taken (before items that reached
    ``max_times_sampled`` left)."""

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        return f"<ReplaySample of {len(self.keys)} draws from a table of {self.table_size}>"

    def weights(self, beta: float) -> npt.NDArray[np.float64]:
        """Importance weights ``(table_size * probabilities) ** -beta``, divided by
        their largest value (so the largest is 1.0).

        Args:
            beta: how much to correct for prioritized sampling: 0 gives all ones, 1
                corrects fully; a finite number >= 0.

        Raises:
            ElementSpecError: ``beta`` is not a finite number >= 0.
        """
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
            raise ElementSpecError(
                f"ReplaySample.weights: beta must be a number, got {type(beta).__name__}"
            )
        b = float(beta)
        if not math.isfinite(b) or b < 0:
            raise ElementSpecError(f"ReplaySample.weights: beta must be finite and >= 0, got {b}")
        if len(self.probabilities) == 0:
            return np.empty(0, dtype=np.float64)
        w = np.power(self.table_size * self.probabilities, -b)
        w /= w.max()
        return w


@dataclass(frozen=True)
class ReplayStatistics:
    """A replay table's counters at one moment (``table.statistics()``; also
    ``await table.statistics()``). Counts are in items since the table was created (a
    restored table continues its snapshot's), times in seconds."""

    size: int
    """Items held now."""
    max_size: int
    """The most items the table holds; beyond it the remover evicts."""
    inserts: int
    """Items inserted (items evicted as they arrived included)."""
    samples: int
    """Items sampled: a ``sample(n)`` counts n."""
    deletes: int
    """Items removed for any reason: evicted, sampled ``max_times_sampled`` times, or
    deleted. ``inserts - deletes == size``."""
    evictions: int
    """Items the remover evicted at ``max_size`` (also counted in ``deletes``)."""
    insert_wait_s: float
    """Seconds during which at least one insert waited (the rate limiter held the
    actors back)."""
    sample_wait_s: float
    """Seconds during which at least one sample waited (the limiter held the learner
    back, or too few items were held)."""
    inserts_waiting: int
    """Inserts (tasks and threads) waiting now."""
    samples_waiting: int
    """Samples (tasks and threads) waiting now."""
    closed: bool
    """Whether the table was closed."""

    def __await__(self) -> Generator[Any, None, Self]:
        """``await stats`` is ``stats`` itself, without suspending."""
        return self
        yield  # (unreachable: makes this a generator that returns at once)
