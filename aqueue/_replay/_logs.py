"""Logs of ids: reading which entries are still live.

An item store logs each item's key beside its slot as it arrives (``_store.py``), and a
trajectory ring logs each step's id beside its slot (``_trajectory/_ring.py``); an
entry stays live while its slot still holds what it logged. Both find their oldest
live entries with ``first_live``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["first_live"]

Array = npt.NDArray[Any]
_EMPTY = np.empty(0, dtype=np.int64)


def first_live(
    log_slots: Array, log_ids: Array, current: Array, pos: int, n: int, k: int
) -> tuple[Array, int]:
    """The slots of the first ``k`` live entries of a log from ``pos`` (before ``n``),
    in log order, and the new head: the log's first live entry from ``pos`` on (every
    entry before it is dead for good). An entry ``(slot, id)`` is live while
    ``current[slot] == id``: the slot still holds what the entry logged. The item
    store's key log and a trajectory ring's id log both read themselves this way."""
    parts: list[Array] = []
    head = pos
    first = True
    while k > 0 and pos < n:
        end = min(n, pos + max(2 * k, 64))
        slots = log_slots[pos:end]
        live = np.flatnonzero(current[slots] == log_ids[pos:end])
        if first:
            head = pos + (int(live[0]) if live.size else end - pos)
            first = not live.size
        take = live[:k]
        parts.append(slots[take])
        k -= len(take)
        pos = end
    if not parts:
        return _EMPTY, head
    return (parts[0] if len(parts) == 1 else np.concatenate(parts)), head
