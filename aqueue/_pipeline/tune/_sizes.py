"""Bytes per item, estimated from the items that pass (the tuner's memory budget).

``item_bytes(item)`` is what an item holds, counted the way a user would: an array's
``nbytes`` (the data, not the view over shared memory that a process map hands on:
that memory is held as long as the item is), ``len`` of bytes and strings, tuples,
lists and dicts summed one level deep (a record of arrays), else ``sys.getsizeof``.
``ItemBytes`` keeps one estimate per queue: the run samples the next item of each
queue at every tuner tick (``StageQueue.sample``, one look under the queue's lock, no
cost per item), and the estimate follows the larger items at once and the smaller
ones slowly, so a buffer sized from it errs on the side of the budget.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["ItemBytes", "item_bytes"]

_DOWN = 0.1  # share of a smaller sample taken into the estimate


def item_bytes(item: Any, depth: int = 0) -> int:
    """The bytes ``item`` holds (see the module docstring)."""
    if isinstance(item, np.ndarray):
        return int(item.nbytes)
    if isinstance(item, (bytes, bytearray, memoryview, str)):
        return len(item)
    if depth == 0 and isinstance(item, (tuple, list)):
        return sum(item_bytes(x, 1) for x in item) + sys.getsizeof(item)
    if depth == 0 and isinstance(item, dict):
        return sum(item_bytes(x, 1) for x in item.values()) + sys.getsizeof(item)
    return sys.getsizeof(item)


class ItemBytes:
    """Estimates of bytes per item, one per queue (see the module docstring)."""

    def __init__(self, queues: int) -> None:
        self.values = [0.0] * queues

    def see(self, i: int, item: Any) -> float:
        """Take ``item`` (the next item of queue ``i``, None: it is empty) into the
        estimate of queue ``i``; return the estimate."""
        if item is not None:
            size = float(item_bytes(item))
            old = self.values[i]
            self.values[i] = size if size >= old else old + _DOWN * (size - old)
        return self.values[i]
