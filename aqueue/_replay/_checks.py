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
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError, int_arg
from ._selectors import Prioritized, Selector

__all__ = ["PriorityLimit", "keys_arg", "priorities_arg", "priority_arg", "sample_count_arg"]

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
    if count and not (float(out.min()) >= 0 and float(out.max()) <= limit.limit):  # (NaN: no)
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
