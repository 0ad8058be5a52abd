"""Rate limiters: when a replay table lets inserts and samples through (Reverb's arithmetic).

A limiter is four numbers, ``samples_per_insert`` (spi), ``min_size_to_sample``,
``min_diff`` and ``max_diff``, applied to three counters the table keeps since it was
created: ``inserts`` and ``samples`` (items; a ``sample(n)`` counts n) and ``deletes``
(items removed for any reason: evicted, sampled ``max_times_sampled`` times, or
deleted). ``inserts - deletes`` is always the table's size. Exactly as Reverb's
``RateLimiter`` (``reverb/cc/rate_limiter.cc``):

- ``can_sample(n)``: ``inserts - deletes >= min_size_to_sample`` and
  ``inserts * spi - samples - n >= min_diff``;
- ``can_insert(n)``: ``inserts + n - deletes <= min_size_to_sample`` (filling up to the
  minimum is always allowed), else ``(inserts + n) * spi - samples <= max_diff``.

The three public limiters are this one class with its numbers filled in:

- ``MinSize(m)``: spi 1, min_diff -inf, max_diff +inf: samples wait for ``m`` items,
  inserts never wait (Reverb uses +-DBL_MAX; infinities compare the same way);
- ``SampleToInsertRatio(spi, min_size_to_sample, error_buffer)``: a number
  ``error_buffer`` gives ``[offset - eb, offset + eb]`` around ``offset = spi *
  min_size_to_sample``; a pair is used as ``(min_diff, max_diff)``. As Reverb's, a band
  narrower than ``2 * max(1, spi)`` or starting above ``offset`` is refused, and one
  ending below ``offset`` warns;
- ``RateLimiter(spi, min_size_to_sample, min_diff, max_diff)``: the general case.

**Requests that could never pass** are refused when they are made, instead of waiting
for ever (``check_sample_count``, ``check_insert_count``):

- ``sample(n)`` when ``n > max(max_diff, spi * min_size_to_sample) - min_diff``. Inserts
  stop once ``inserts * spi - samples`` would pass ``max_diff`` (or, while the table
  fills to ``min_size_to_sample``, at ``spi * min_size_to_sample``), and samples only
  lower it, so without removals it never climbs ``n`` above ``min_diff``. (Evictions
  below ``min_size_to_sample`` could, in principle, let it climb further; a table
  that depends on that is stalled in practice, so the rule ignores it.)
- ``insert_many(k)`` when ``k > min_size_to_sample`` and ``k * spi > max_diff -
  min(0, min_diff)``: exactly when no state of the counters admits ``k`` at once.
  ``k`` items never fit the filling stage (``size + k <= min_size_to_sample``, at best
  from an empty table), and the band needs ``inserts * spi - samples + k * spi <=
  max_diff``, where the difference ``inserts * spi - samples`` starts at 0 and samples
  never take it below ``min_diff`` (so its lowest value is ``min(0, min_diff)``: a
  table with ``min_diff > 0`` admits, while it fills, batches as wide as ``max_diff``).

Nothing here depends on the in-process engine: another backend applies the same
arithmetic to its own counters. ``limiter_config``/``limiter_from_config`` give a
limiter as plain JSON data and back.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from .._errors import ElementSpecError

__all__ = [
    "MinSize",
    "RateLimiter",
    "SampleToInsertRatio",
    "limiter_arg",
    "limiter_config",
    "limiter_from_config",
]


def _number(value: Any, what: str, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ElementSpecError(f"{owner}: {what} must be a number, got {type(value).__name__}")
    if math.isnan(float(value)):
        raise ElementSpecError(f"{owner}: {what} must not be NaN")
    return float(value)


def _count(value: Any, what: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ElementSpecError(f"{owner}: {what} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ElementSpecError(f"{owner}: {what} must be >= 1, got {value}")
    return int(value)


def _fmt(x: float) -> str:
    """A number as it reads best in a message: 4 rather than 4.0."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


class RateLimiter:
    """Pace inserts against samples (Reverb's ``RateLimiter``; see the module docstring).

    Args:
        samples_per_insert: how many samples each insert pays for (> 0, finite).
        min_size_to_sample: samples wait until the table holds this many items (>= 1).
        min_diff: samples wait while ``inserts * spi - samples - n`` would fall below it.
        max_diff: inserts wait while ``(inserts + n) * spi - samples`` would exceed it
            (once the table holds ``min_size_to_sample`` items). ``-inf``/``inf`` mean
            no bound; ``min_diff <= max_diff``.

    Raises:
        ElementSpecError: An argument is of the wrong type or out of range.
    """

    __slots__ = ("max_diff", "min_diff", "min_size_to_sample", "samples_per_insert")

    samples_per_insert: float
    min_size_to_sample: int
    min_diff: float
    max_diff: float

    def __init__(
        self,
        samples_per_insert: float,
        min_size_to_sample: int,
        min_diff: float,
        max_diff: float,
    ) -> None:
        owner = type(self).__name__
        spi = _number(samples_per_insert, "samples_per_insert", owner)
        if not (math.isfinite(spi) and spi > 0):
            raise ElementSpecError(f"{owner}: samples_per_insert must be finite and > 0, got {spi}")
        lo = _number(min_diff, "min_diff", owner)
        hi = _number(max_diff, "max_diff", owner)
        if lo > hi:
            raise ElementSpecError(
                f"{owner}: min_diff must be <= max_diff, got {_fmt(lo)} > {_fmt(hi)}"
            )
        self._set(spi, _count(min_size_to_sample, "min_size_to_sample", owner), lo, hi)

    def _set(self, spi: float, min_size: int, lo: float, hi: float) -> None:
        object.__setattr__(self, "samples_per_insert", spi)
        object.__setattr__(self, "min_size_to_sample", min_size)
        object.__setattr__(self, "min_diff", lo)
        object.__setattr__(self, "max_diff", hi)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _key(self) -> tuple[Any, ...]:
        return (
            type(self),
            self.samples_per_insert,
            self.min_size_to_sample,
            self.min_diff,
            self.max_diff,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RateLimiter) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"RateLimiter(samples_per_insert={self.samples_per_insert!r}, "
            f"min_size_to_sample={self.min_size_to_sample}, min_diff={self.min_diff!r}, "
            f"max_diff={self.max_diff!r})"
        )

    # -- the arithmetic ---------------------------------------------------------------

    def can_sample(self, inserts: int, samples: int, deletes: int, n: int) -> bool:
        """Whether ``n`` samples may happen now, given the table's counters."""
        return (
            inserts - deletes >= self.min_size_to_sample
            and inserts * self.samples_per_insert - samples - n >= self.min_diff
        )

    def can_insert(self, inserts: int, samples: int, deletes: int, n: int) -> bool:
        """Whether ``n`` items may be inserted now, given the table's counters."""
        if inserts + n - deletes <= self.min_size_to_sample:
            return True
        return (inserts + n) * self.samples_per_insert - samples <= self.max_diff

    def admitted(self, inserts: int, samples: int, deletes: int, k: int) -> int:
        """How many of ``k`` items, inserted in a row, may go in now: the largest ``m <=
        k`` with ``can_insert(m)`` (0 when not even one may). Both conditions of
        ``can_insert`` only get harder as ``m`` grows, so admitting a prefix of a batch
        now and the rest later admits exactly what single inserts in a row would."""
        fill = self.min_size_to_sample - (inserts - deletes)  # filling up to the minimum
        if math.isinf(self.max_diff):
            band = k
        else:
            band = math.floor((self.max_diff + samples) / self.samples_per_insert) - inserts
        m = max(0, min(k, max(fill, band)))
        # (float rounding at the edge of the band: settle it with can_insert itself)
        while m > 0 and not self.can_insert(inserts, samples, deletes, m):
            m -= 1
        while m < k and self.can_insert(inserts, samples, deletes, m + 1):
            m += 1
        return m

    def most_samples_at_once(self) -> float:
        """The largest ``n`` a ``sample(n)`` can ever be allowed (see the module
        docstring); ``inf`` when unbounded."""
        top = max(self.max_diff, self.samples_per_insert * self.min_size_to_sample)
        return top - self.min_diff

    def check_sample_count(self, n: int, owner: str) -> None:
        """Refuse a ``sample(n)`` that this limiter could never allow at once.

        Raises:
            ElementSpecError: It names ``n``, the limit and the numbers behind it.
        """
        if n > self.most_samples_at_once():
            raise ElementSpecError(
                f"{owner}: sample({n}) could never be allowed at once by {self!r}: a "
                f"sample(n) needs inserts * {_fmt(self.samples_per_insert)} - samples to "
                f"reach min_diff + n = {_fmt(self.min_diff + n)}, but inserts stop at "
                f"{_fmt(max(self.max_diff, self.samples_per_insert * self.min_size_to_sample))}"
                f"; sample at most {_fmt(math.floor(self.most_samples_at_once()))} at a time, "
                "or widen the limiter's band"
            )

    def check_insert_count(self, k: int, owner: str) -> None:
        """Refuse an ``insert_many`` of ``k`` items this limiter could never admit at once.

        Raises:
            ElementSpecError: It names ``k``, the limit and the numbers behind it.
        """
        # (the lowest the difference inserts * spi - samples ever is: see the module)
        room = self.max_diff - min(0.0, self.min_diff)
        if k > self.min_size_to_sample and k * self.samples_per_insert > room:
            most = max(self.min_size_to_sample, math.floor(room / self.samples_per_insert))
            raise ElementSpecError(
                f"{owner}: insert_many of {k} items could never be admitted at once by "
                f"{self!r}: {k} > min_size_to_sample and {k} * "
                f"{_fmt(self.samples_per_insert)} = {_fmt(k * self.samples_per_insert)} > "
                f"max_diff - min(0, min_diff) = {_fmt(room)}; insert at most {most} at a time"
            )


class MinSize(RateLimiter):
    """Samples wait until the table holds ``min_size_to_sample`` items; inserts never
    wait (Reverb's ``MinSize``)."""

    __slots__ = ()

    def __init__(self, min_size_to_sample: int) -> None:
        self._set(
            1.0, _count(min_size_to_sample, "min_size_to_sample", "MinSize"), -math.inf, math.inf
        )

    def __repr__(self) -> str:
        return f"MinSize({self.min_size_to_sample})"


class SampleToInsertRatio(RateLimiter):
    """Keep ``samples / inserts`` near ``samples_per_insert`` (Reverb's limiter).

    Stage 1, until the table holds ``min_size_to_sample`` items: inserts go through and
    samples wait (as ``MinSize``). Stage 2: ``inserts * spi - samples`` stays within
    ``[min_diff, max_diff]``; an insert that would leave the band above waits for
    samples, a sample that would leave it below waits for inserts. Removals can take the
    table back to stage 1.

    Args:
        samples_per_insert: the target ratio (> 0, finite).
        min_size_to_sample: items needed before the first sample (>= 1).
        error_buffer: a number ``eb >= 0``, giving the band ``[offset - eb, offset + eb]``
            around ``offset = samples_per_insert * min_size_to_sample``; or a pair
            ``(min_diff, max_diff)`` used as is.

    Raises:
        ElementSpecError: As Reverb's: the band is narrower than ``2 * max(1,
            samples_per_insert)`` (inserts or samples could block each other for good),
            or starts above ``offset`` (a deadlock once the table is full enough to
            sample); or an argument is of the wrong type. A band ending below ``offset``
            warns (RuntimeWarning): it deadlocks unless samples run concurrently.
    """

    __slots__ = ("error_buffer",)

    error_buffer: float | tuple[float, float]

    def __init__(
        self,
        samples_per_insert: float,
        min_size_to_sample: int,
        error_buffer: float | tuple[float, float],
    ) -> None:
        owner = "SampleToInsertRatio"
        spi = _number(samples_per_insert, "samples_per_insert", owner)
        if not (math.isfinite(spi) and spi > 0):
            raise ElementSpecError(f"{owner}: samples_per_insert must be finite and > 0, got {spi}")
        min_size = _count(min_size_to_sample, "min_size_to_sample", owner)
        offset = spi * min_size
        eb: float | tuple[float, float]
        if isinstance(error_buffer, (tuple, list)):
            if len(error_buffer) != 2:
                raise ElementSpecError(
                    f"{owner}: error_buffer must be a number or a (min_diff, max_diff) pair, "
                    f"got {len(error_buffer)} values"
                )
            lo = _number(error_buffer[0], "error_buffer[0] (min_diff)", owner)
            hi = _number(error_buffer[1], "error_buffer[1] (max_diff)", owner)
            eb = (lo, hi)
        else:
            width = _number(error_buffer, "error_buffer", owner)
            if width < 0:
                raise ElementSpecError(f"{owner}: error_buffer must be >= 0, got {_fmt(width)}")
            lo, hi = offset - width, offset + width
            eb = width
        if hi - lo < 2 * max(1.0, spi):
            raise ElementSpecError(
                f"{owner}: the band [min_diff, max_diff] = [{_fmt(lo)}, {_fmt(hi)}] is "
                f"{_fmt(hi - lo)} wide, narrower than 2 * max(1, samples_per_insert) = "
                f"{_fmt(2 * max(1.0, spi))}: inserts and samples could block each other for "
                "good; use an error_buffer of at least max(1, samples_per_insert)"
            )
        if lo > offset:
            raise ElementSpecError(
                f"{owner}: min_diff {_fmt(lo)} is above samples_per_insert * "
                f"min_size_to_sample = {_fmt(offset)}: no sample could start once "
                f"{min_size} items are in (a deadlock)"
            )
        if hi < offset:
            warnings.warn(
                f"{owner}: max_diff {_fmt(hi)} is below samples_per_insert * "
                f"min_size_to_sample = {_fmt(offset)}: inserts stall as soon as "
                f"{min_size} items are in unless samples run concurrently",
                RuntimeWarning,
                stacklevel=2,
            )
        self._set(spi, min_size, lo, hi)
        object.__setattr__(self, "error_buffer", eb)

    def _key(self) -> tuple[Any, ...]:
        return (*super()._key(), self.error_buffer)

    def __repr__(self) -> str:
        return (
            f"SampleToInsertRatio(samples_per_insert={self.samples_per_insert!r}, "
            f"min_size_to_sample={self.min_size_to_sample}, error_buffer={self.error_buffer!r})"
        )


def limiter_arg(value: Any, owner: str) -> RateLimiter:
    """``value`` checked as a rate limiter.

    Raises:
        ElementSpecError: It is not a RateLimiter (or one of its kinds).
    """
    if isinstance(value, RateLimiter):
        return value
    raise ElementSpecError(
        f"{owner}: rate_limiter must be aqueue.MinSize(n), SampleToInsertRatio(...) or "
        f"RateLimiter(...), got {value!r:.80}"
    )


def limiter_config(limiter: RateLimiter) -> dict[str, Any]:
    """The limiter as plain JSON data (infinities as JSON's ``Infinity``)."""
    if isinstance(limiter, MinSize):
        return {"kind": "MinSize", "min_size_to_sample": limiter.min_size_to_sample}
    if isinstance(limiter, SampleToInsertRatio):
        eb = limiter.error_buffer
        return {
            "kind": "SampleToInsertRatio",
            "samples_per_insert": limiter.samples_per_insert,
            "min_size_to_sample": limiter.min_size_to_sample,
            "error_buffer": list(eb) if isinstance(eb, tuple) else eb,
        }
    return {
        "kind": "RateLimiter",
        "samples_per_insert": limiter.samples_per_insert,
        "min_size_to_sample": limiter.min_size_to_sample,
        "min_diff": limiter.min_diff,
        "max_diff": limiter.max_diff,
    }


_FIELDS = {
    "MinSize": ("min_size_to_sample",),
    "SampleToInsertRatio": ("samples_per_insert", "min_size_to_sample", "error_buffer"),
    "RateLimiter": ("samples_per_insert", "min_size_to_sample", "min_diff", "max_diff"),
}


def limiter_from_config(config: Any) -> RateLimiter:
    """The limiter ``limiter_config`` described (no warning: it was given once).

    Raises:
        ElementSpecError: ``config`` is not such a description, or its numbers are out
            of range.
    """
    kind = config.get("kind") if isinstance(config, dict) else None
    fields = _FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        raise ElementSpecError(f"not a rate limiter description: {config!r:.80}")
    if set(config) != {"kind", *fields}:
        raise ElementSpecError(f"rate limiter {kind}: fields must be exactly {list(fields)}")
    args = [config[f] for f in fields]
    if kind == "MinSize":
        return MinSize(*args)
    if kind == "SampleToInsertRatio":
        eb = args[2]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return SampleToInsertRatio(args[0], args[1], tuple(eb) if isinstance(eb, list) else eb)
    return RateLimiter(*args)
