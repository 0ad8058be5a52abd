"""Values repeated within one batch (slots drawn twice by a sample, keys named twice
by an update), handled without a table-sized array: ``count_draws`` counts a sample's
draws in order, ``last_of_each`` keeps an update's last value per key, and
``occurrences`` ranks draws made in rounds (``max_times_sampled``). Every batch pays
one check (``_repeated``: a plain sort of a copy); the rare batch with a few repeated
values handles them one by one, one with many sorts the batch stably (``_runs``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["count_draws", "last_of_each", "occurrences"]

Array = npt.NDArray[Any]

_FEW = 8  # repeated values handled one by one (more: one stable sort of the batch)


def _repeated(values: Array) -> list[int] | None:
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


def _runs(values: Array) -> tuple[Array, Array, Array]:
    """``(order, ordered, last)``: a stable argsort of ``values``, ``values[order]``,
    and where each run of equal values in ``ordered`` ends (a bool mask); for a batch
    with many repeated values (``_repeated`` says so first). It sorts the batch rather
    than mark slots in a table-sized array: out of cache, random access to such an
    array costs more than sorting a few hundred ints."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    last = np.empty(len(values), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
    last[-1] = True
    return order, ordered, last


def count_draws(counts: Array, slots: Array) -> tuple[Array, bool]:
    """Count each draw of ``slots`` in ``counts`` (a table's times sampled, changed in
    place), in draw order: each draw's count after it (a slot drawn twice reports
    c + 1, then c + 2), and whether any slot was drawn more than once."""
    times = counts[slots]
    times += 1
    again = None if len(slots) == 1 else _repeated(slots)
    if again is None:
        counts[slots] = times
        return times, False
    if again:  # (a few slots drawn more than once: about one batch of 256 in three
        counts[slots] = times  # from 100,000 prioritized items; each is set below)
        for slot in again:
            at = (slots == slot).nonzero()[0]  # its draws, in order: c + 1, c + 2, ...
            drawn = times[at[0]] + np.arange(len(at))
            times[at] = drawn
            counts[slot] = drawn[-1]
        return times, True
    n = len(slots)  # (many repeats: a small table)
    order, ordered, last = _runs(slots)
    pos = np.arange(n)
    start = np.zeros(n, dtype=np.intp)  # where each draw's run starts
    np.multiply(pos[1:], last[:-1], out=start[1:])
    np.maximum.accumulate(start, out=start)
    times[order] += pos - start  # each draw's rank among the draws of its slot
    ends = np.flatnonzero(last)
    counts[ordered[ends]] = times[order[ends]]
    return times, True


def last_of_each(values: Array) -> Array | None:
    """None if no value appears twice; else which entries to keep (a mask or
    positions, in order) so that each value keeps its last occurrence only."""
    again = _repeated(values)
    if again is None:
        return None
    if again:
        keep = np.empty(len(values), dtype=bool)
        keep.fill(True)
        for value in again:
            keep[(values == value).nonzero()[0][:-1]] = False
        return keep
    order, _, last = _runs(values)
    kept: Array = np.sort(order[last])  # (stable: a run ends at its last occurrence)
    return kept


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
