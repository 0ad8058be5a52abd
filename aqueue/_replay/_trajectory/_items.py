"""The windows as items of a replay core: ``CoreWindows``, what a step store asks of the
items (``WindowItems``), and ``TableSteps``, what the engine asks of the steps
(``StepSide``).

A trajectory table is a replay table whose items are int64 rows of ``length`` step
slots (``TableCore`` with one component of shape ``(length,)``), and a ``StepStore``
beside it under the same lock. The two are joined three ways, and nothing else:

- the step store inserts a window as an item (``insert_windows``: ``core.insert``) and
  evicts the items whose first step it evicted (``evict_windows``: ``core.evict``,
  which counts them as evictions);
- the core's item store reports every item that arrives or leaves, whatever the
  reason (an item cap's remover, ``max_times_sampled``, ``delete``, ``evict``), to the
  step store (``ItemStore.watcher``: ``held``/``left``), which counts the references to
  its steps and frees the ones nothing needs;
- the engine runs an append as one step (``TableSteps.append``: the steps appended,
  the windows they complete inserted, their keys returned) and a sample's rows are
  gathered into steps in the same step (the engine's ``pack``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..._queues._declare import Components
from .._core import TableCore
from ._steps import StepStore

__all__ = ["CoreWindows", "TableSteps"]

Array = npt.NDArray[Any]
_NO_KEYS = np.empty(0, dtype=np.int64)
_NO_KEYS.flags.writeable = False


class CoreWindows:
    """The ``WindowItems`` of a step store: the items of a replay core. It keeps the
    keys of the windows inserted since ``take_keys`` (what an append returns)."""

    __slots__ = ("core", "keys")

    def __init__(self, core: TableCore) -> None:
        self.core = core
        self.keys: list[Array] = []

    def insert_windows(self, rows: Array, priorities: Array | None) -> None:
        """Insert one item per row (the core's watcher reports them to the steps)."""
        self.keys.append(self.core.insert((rows,), len(rows), priorities))

    def evict_windows(self, keys: Array) -> None:
        """Remove the held items of ``keys``, counted as evictions."""
        self.core.evict(keys)

    def take_keys(self) -> Array:
        """The keys inserted since the last call, in order."""
        keys = self.keys
        if not keys:
            return _NO_KEYS
        self.keys = []
        return keys[0] if len(keys) == 1 else np.concatenate(keys)


class TableSteps:
    """The engine's ``StepSide`` of one trajectory table: its step store and windows."""

    __slots__ = ("store", "windows")

    def __init__(self, store: StepStore, windows: CoreWindows) -> None:
        self.store = store
        self.windows = windows

    def windows_completed(self, wid: int, k: int) -> int:
        """The windows an append of ``k`` steps by writer ``wid`` completes now."""
        return self.store.windows_completed(wid, k)

    def append(self, wid: int, comps: Components, k: int, priorities: Any) -> Array:
        """Append ``k`` steps of writer ``wid``: the keys of the windows inserted (an
        item cap may have evicted some of them on arrival already)."""
        self.store.append(wid, comps, k, priorities)
        return self.windows.take_keys()

    def check_invariants(self, keys: Array, rows: Array) -> None:
        """The step store's invariants, given the held items."""
        self.store.check_invariants(keys, rows)
