"""Argument checks of the replay-table operations, shared by every backend.

Each check runs before anything touches a table and raises ElementSpecError (a
ValueError) naming the table, the argument, what was expected and what was given; it
returns the value converted (numpy arrays of the table's types), so a rejected call
changes nothing.

- priorities: finite numbers >= 0 (float64); ``None`` means "the largest priority in
  the table" and is passed on as None. ``PriorityLimit`` adds the bound that keeps a
  Prioritized selector's weights, and their sum over a full table, finite.
- keys: a 1-d sequence of ints (int64). Keys the table does not hold are not an
  error: the operations report them.
- counts: ``sample(n)`` takes ``n >= 1``; batches may be empty.

Two classes gather them for a table, so every backend builds and checks the same way:
``table_settings`` checks a constructor's arguments into ``TableSettings`` (the spec
with fully defined shapes, the selectors, the limiter, ``max_times_sampled``, the seed,
the priority limit), and ``TableArgs`` checks each operation's arguments against them,
including the requests that could never be served (``sample_count``, ``batch``): with
``max_times_sampled = m > 0`` a table holds at most ``max_size * m`` draws, so a
``sample(n)`` with more is refused; so is one whose result alone could not fit in the
machine's memory (``n`` times an item and its key, priority, probability and times
sampled: its physical memory, ``physical_memory``), which would otherwise fail in numpy
("Unable to allocate") after the table had been asked; the limiter refuses the rest
(``_limiter.py``).
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError, int_arg, seed_arg
from .._queues._declare import Components, FixedShape, format_shape
from .._queues._spec import ElementSpec, declare_spec
from ._limiter import RateLimiter, limiter_arg
from ._selectors import Prioritized, Selector, selector_arg

__all__ = [
    "PriorityLimit",
    "physical_memory",
    "TableArgs",
    "TableSettings",
    "keys_arg",
    "priorities_arg",
    "priority_arg",
    "sample_count_arg",
    "stored_spec",
    "table_settings",
    "timeout_arg",
]

_DBL_MAX = float(np.finfo(np.float64).max)


class PriorityLimit:
    """The largest priority a table accepts: any finite one, unless a Prioritized
    selector raises priorities to a power; then its weights over ``max_size`` items
    must add up to a finite total."""

    __slots__ = ("limit", "why")

    def __init__(self, max_size: int, selectors: tuple[Selector, ...]) -> None:
        self.limit = _DBL_MAX
        self.why = ""
        for s in selectors:
            if isinstance(s, Prioritized):
                room = _DBL_MAX / (2 * max_size)
                limit = room ** (1.0 / max(1.0, s.exponent))
                if limit < self.limit:
                    self.limit = limit
                    self.why = (
                        f" (with {s!r} over up to {max_size} items, larger priorities would "
                        "make the weights' sum overflow)"
                    )


def _bad_priority(value: float, where: str, owner: str, limit: PriorityLimit) -> ElementSpecError:
    if math.isnan(value):
        what = "NaN"
    elif value < 0:
        what = "negative"
    elif math.isinf(value):
        what = "infinite"
    else:
        return ElementSpecError(
            f"{owner}: {where} is {value!r}, above the largest priority accepted, "
            f"{limit.limit:.6g}{limit.why}"
        )
    return ElementSpecError(
        f"{owner}: {where} is {value!r} ({what}); priorities must be finite numbers >= 0"
    )


def priority_arg(value: Any, owner: str, limit: PriorityLimit) -> npt.NDArray[np.float64] | None:
    """One item's priority as a float64 array of one, or None.

    Raises:
        ElementSpecError: It is not a number, or is negative, NaN, infinite or too large.
    """
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ElementSpecError(
            f"{owner}: priority must be a number or None, got {type(value).__name__}"
        )
    p = float(value)
    if not (0.0 <= p <= limit.limit):
        raise _bad_priority(p, "priority", owner, limit)
    return np.array([p])


def priorities_arg(
    values: Any, count: int, owner: str, limit: PriorityLimit, what: str = "priorities"
) -> npt.NDArray[np.float64] | None:
    """``count`` priorities as a float64 array, or None (only if ``values`` is None and
    ``what`` is "priorities" of an insert).

    Raises:
        ElementSpecError: Not a 1-d sequence of ``count`` numbers, or one of them is
            negative, NaN, infinite or too large (the message names its index).
    """
    if values is None:
        return None
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise ElementSpecError(f"{owner}: {what} could not be read as numbers: {exc}") from exc
    if arr.dtype.kind not in "iuf" or arr.ndim != 1 or len(arr) != count:
        got = f"dtype {arr.dtype}" if arr.dtype.kind not in "iuf" else f"shape {arr.shape}"
        raise ElementSpecError(
            f"{owner}: {what} must be a 1-d sequence of {count} numbers, got {got}"
        )
    out = arr.astype(np.float64)
    # (arg-min/max: a fraction of the reductions' cost; either finds a NaN, which fails)
    if count and not (out[out.argmin()] >= 0 and out[out.argmax()] <= limit.limit):
        bad = int(np.flatnonzero(~((out >= 0) & (out <= limit.limit)))[0])
        raise _bad_priority(float(out[bad]), f"{what}[{bad}]", owner, limit)
    return out


def keys_arg(keys: Any, owner: str) -> npt.NDArray[np.int64]:
    """Keys as a 1-d int64 array.

    Raises:
        ElementSpecError: Not a 1-d sequence of ints (a float, bool or str array, a
            scalar, or values beyond int64).
    """
    try:
        arr = np.asarray(keys)
    except (TypeError, ValueError) as exc:
        raise ElementSpecError(f"{owner}: keys could not be read as ints: {exc}") from exc
    if arr.ndim != 1 or not (arr.dtype.kind in "iu" or (arr.size == 0 and arr.dtype.kind == "f")):
        got = f"dtype {arr.dtype}" if arr.dtype.kind not in "iu" else f"shape {arr.shape}"
        raise ElementSpecError(f"{owner}: keys must be a 1-d sequence of ints, got {got}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ElementSpecError(f"{owner}: keys must fit int64, got {int(arr.max())}")
    return arr.astype(np.int64, copy=False)


def sample_count_arg(n: Any, owner: str) -> int:
    """``n`` of ``sample(n)``: an int >= 1.

    Raises:
        ElementSpecError: It is not an int, or < 1.
    """
    if type(n) is int and n >= 1:
        return n
    return int_arg(n, "n", f"{owner}.sample", 1)


def physical_memory() -> int:
    """The machine's physical memory in bytes (``sys.maxsize`` where the system does
    not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # (no sysconf, or not these names)
        return sys.maxsize


def _bytes(n: int) -> str:
    """``n`` bytes as a message reads them: 7.3 TiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{n} B"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def timeout_arg(timeout: Any, owner: str) -> float | None:
    """A thread view's ``timeout=`` checked: seconds >= 0, or None (no limit).

    Raises:
        ElementSpecError: Not a number, NaN or negative.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise ElementSpecError(
            f"{owner}: timeout must be a number of seconds or None, got {type(timeout).__name__}"
        )
    t = float(timeout)
    if math.isnan(t) or t < 0:
        raise ElementSpecError(f"{owner}: timeout must be >= 0 seconds, got {timeout}")
    return t


@dataclass(frozen=True)
class TableSettings:
    """A replay table's constructor arguments, checked (``table_settings``)."""

    owner: str
    """How messages name the table (``"ReplayTable 'name'"``)."""
    max_size: int
    spec: ElementSpec
    shapes: tuple[FixedShape, ...]
    """The spec's shapes, every one fully defined."""
    sampler: Selector
    remover: Selector
    max_times_sampled: int
    rate_limiter: RateLimiter
    seed: int | None
    limit: PriorityLimit


def stored_spec(
    owner: str,
    dtypes: Any,
    shapes: Any,
    names: Any,
    rows: tuple[str, str, str],
    parts: tuple[str, str],
) -> tuple[ElementSpec, tuple[FixedShape, ...]]:
    """The spec of what a table stores in preallocated arrays, and its shapes: declared,
    fully defined, no object or structured dtypes. ``rows``: what lives in the arrays,
    the argument that sizes them and an example call; ``parts``: what a part is called,
    and the table (for the messages).

    Raises:
        ElementSpecError: A bad declaration (naming what was expected and what was given).
    """
    what, size, example = rows
    part, table = parts
    spec = declare_spec(owner, dtypes, shapes, names, allow_unknown_dims=True)
    fixed = spec.fixed_shapes
    if fixed is None:
        got = "none" if spec.shapes is None else ", ".join(map(format_shape, spec.shapes))
        raise ElementSpecError(
            f"{owner}: shapes must be declared and fully defined ({what} live in "
            f"preallocated arrays of shape ({size}, *shape)); use shapes=() for "
            f"scalars, e.g. {example}; got {got}"
        )
    for i, dt in enumerate(spec.dtypes):
        if dt.kind in "OV":
            raise ElementSpecError(
                f"{owner}: {part} {i} has dtype {dt}; {table} stores numeric, bool and "
                f"fixed-size string {part}s (no object or structured dtypes)"
            )
    return spec, fixed


def table_settings(
    owner: str,
    max_size: Any,
    dtypes: Any,
    shapes: Any,
    names: Any,
    *,
    sampler: Any,
    remover: Any,
    max_times_sampled: Any,
    rate_limiter: Any,
    seed: Any,
) -> TableSettings:
    """A table's settings, checked in the order of its arguments.

    Raises:
        ElementSpecError: A bad argument (naming it, what was expected and what was
            given), or a rate limiter whose ``min_size_to_sample`` exceeds ``max_size``.
    """
    max_size = int_arg(max_size, "max_size", owner, 1)
    spec, fixed = stored_spec(
        owner,
        dtypes,
        shapes,
        names,
        ("items", "max_size", "ReplayTable(1000, np.float32, (84, 84))"),
        ("component", "a replay table"),
    )
    sampler = selector_arg(sampler, "sampler", owner)
    remover = selector_arg(remover, "remover", owner)
    mts = int_arg(max_times_sampled, "max_times_sampled", owner, 0)
    limiter = limiter_arg(rate_limiter, owner)
    if limiter.min_size_to_sample > max_size:
        raise ElementSpecError(
            f"{owner}: {limiter!r} waits for {limiter.min_size_to_sample} items before "
            f"the first sample, but max_size is {max_size}: no sample could ever be served"
        )
    return TableSettings(
        owner=owner,
        max_size=max_size,
        spec=spec,
        shapes=fixed,
        sampler=sampler,
        remover=remover,
        max_times_sampled=mts,
        rate_limiter=limiter,
        seed=seed_arg(seed, owner),
        limit=PriorityLimit(max_size, (sampler, remover)),
    )


class TableArgs:
    """The checks and conversions of one table's operations (nothing here touches a
    table, so a refused call changes nothing)."""

    __slots__ = (
        "draw_bytes",
        "limit",
        "limiter",
        "max_size",
        "memory",
        "most_samples",
        "mts",
        "owner",
        "spec",
    )

    def __init__(self, settings: TableSettings) -> None:
        self.spec = settings.spec
        self.owner = settings.owner
        self.max_size = settings.max_size
        self.limiter = settings.rate_limiter
        self.mts = settings.max_times_sampled
        self.limit = settings.limit
        # What one draw of a sample's result takes: the item, its key, priority,
        # probability and times sampled, and the slot it was read from.
        self.draw_bytes = 5 * 8 + sum(
            dt.itemsize * math.prod(shape)
            for dt, shape in zip(settings.spec.dtypes, settings.shapes)
        )
        self.memory = physical_memory()
        # The largest n that sample_count lets through (an int n in 1..most_samples is
        # one it returns as is, so the table tests that alone before calling it).
        self.most_samples = min(
            self.max_size * self.mts if self.mts else math.inf,
            self.limiter.most_samples_at_once(),
            self.memory // self.draw_bytes,
        )

    def element(
        self, element: Any, priority: Any
    ) -> tuple[Components, npt.NDArray[np.float64] | None]:
        """``insert(element, priority)``'s arguments: the element as a batch of one
        (one array per component) and its priority (None: the table's largest)."""
        comps = self.spec.element(element)
        prio = priority_arg(priority, self.owner, self.limit)
        return tuple(np.asarray(c)[np.newaxis] for c in comps), prio

    def batch(
        self, batch: Any, priorities: Any
    ) -> tuple[Components, int, npt.NDArray[np.float64] | None]:
        """``insert_many(batch, priorities)``'s arguments: components, count and
        priorities; refused if the limiter could never admit that many at once."""
        comps, k = self.spec.batch(batch)
        prios = priorities_arg(priorities, k, self.owner, self.limit)
        if k:
            self.limiter.check_insert_count(k, self.owner)
        return comps, k, prios

    def sample_count(self, n: Any) -> int:
        """``n`` checked for ``sample(n)``, refused if it could never be served (an int
        in ``1..most_samples`` is returned as is)."""
        count = sample_count_arg(n, self.owner)
        mts = self.mts
        if mts and count > self.max_size * mts:
            raise ElementSpecError(
                f"{self.owner}: sample({count}) could never be served: items leave after "
                f"max_times_sampled={mts} draws, so {self.max_size} items give at most "
                f"{self.max_size * mts} draws; sample at most that many at a time"
            )
        self.limiter.check_sample_count(count, self.owner)
        if count * self.draw_bytes > self.memory:
            raise ElementSpecError(
                f"{self.owner}: sample({count}) could never be served: its result alone "
                f"needs {_bytes(count * self.draw_bytes)} ({count} draws of "
                f"{self.draw_bytes} bytes: an item with its key, priority, probability and "
                f"times sampled), more than this machine's memory, "
                f"{_bytes(self.memory)}; sample fewer at a time"
            )
        return count

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
