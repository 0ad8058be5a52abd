"""Values repeated within one batch (slots drawn twice by a sample, keys named twice
by an update): finding them, and ordering the draws of each, without a table-sized
array. ``repeated`` is the check every batch pays (a plain sort of a copy); the rare
batch with repeats then takes ``runs`` (many) or handles its few values one by one
(``_core.py``); ``occurrences`` serves draws made in rounds (``max_times_sampled``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["occurrences", "repeated", "runs"]

Array = npt.NDArray[Any]

_FEW = 8  # repeated values handled one by one (more: one stable sort of the batch)


def repeated(values: Array) -> list[int] | None:
    """None if no value appears twice; else the values that do, each once, when there
    are at most ``_FEW`` of them (a sampled batch of a large table: zero, one or two),
    or an empty list when there are more. A plain sort of a copy, one comparison."""
    check = values.copy()
    check.sort()
    at = (check[1:] == check[:-1]).nonzero()[0]  # (flatnonzero: three Python calls more)
    if not at.size:
        return None
    if at.size > _FEW:  # (a value three times shows twice here: this may count it twice)
        return []
    return sorted(set(check[at].tolist()))


def runs(values: Array) -> tuple[Array, Array, Array]:
    """``(order, ordered, last)``: a stable argsort of ``values``, ``values[order]``,
    and where each run of equal values in ``ordered`` ends (a bool mask); for a batch
    with many repeated values (``repeated`` says so first). It sorts the batch rather
    than mark slots in a table-sized array: out of cache, random access to such an
    array costs more than sorting a few hundred ints."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    last = np.empty(len(values), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
    last[-1] = True
    return order, ordered, last


def occurrences(values: Array) -> Array:
    """For each entry, how many equal entries come before it (0 for the first)."""
    n = len(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    sizes = np.diff(np.append(starts, n))
    occ = np.empty(n, dtype=np.int64)
    occ[order] = np.arange(n) - np.repeat(starts, sizes)
    return occ
