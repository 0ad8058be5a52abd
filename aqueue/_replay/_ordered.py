"""The deterministic selector states: ``OrderState`` (Fifo, Lifo) and ``HeapState``
(MinHeap, MaxHeap), the ones that order their items.

They implement the ``SelectorState`` interface of ``_selection.py`` (which builds them,
``make_state``), and answer its two questions of order: ``first(k)``, the first ``k``
items in their order, and ``evictions(excess, priorities)``, which held slots and
which of the arriving items the remover evicts at once. Their ``draw`` is the first
item, every time, with probability 1; their ``victim`` the one eviction of a single
arrival.

Invariants:

- ``OrderState``: nothing of its own: the store's key log is the order by key
  (``ItemStore.oldest``/``newest``).
- ``HeapState``: a binary heap (``heapq``) of ``(priority or -priority, seq, slot)``
  with lazy deletion: an entry is valid while ``seq[slot]`` equals its seq. Every
  insert and update takes the next ``seq``, so among equal priorities the smallest seq
  (set longest ago) comes first; ``seq`` is the tie order snapshots keep. The heap is
  rebuilt when stale entries outnumber valid ones. A refill is a removal and an
  insert (the new items take new seqs). Unlike the others it holds one Python tuple
  per item and update: a heap selector costs about a microsecond per item, where the
  numpy states cost a few per batch.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from ._store import ItemStore

__all__ = ["HeapState", "OrderState"]

Array = npt.NDArray[Any]
_EMPTY = np.empty(0, dtype=np.int64)
_UNIT = np.empty(0, dtype=np.float64)  # "every weight is 1"


class _Ordered:
    """What an ordered state answers through its order (``first``, ``evictions``)."""

    __slots__ = ()
    deterministic = True

    def first(self, k: int) -> Array:
        raise NotImplementedError

    def evictions(self, excess: int, priorities: Array) -> tuple[Array, Array]:
        raise NotImplementedError

    def draw(self, m: int, rng: np.random.Generator) -> tuple[Array, Array, float]:
        """The first item, ``m`` times, each with probability 1."""
        return np.repeat(self.first(1), m), _UNIT, 1.0

    def victim(self, priority: float, rng: np.random.Generator) -> int:
        """The slot one arrival of ``priority`` evicts (-1: the arrival itself)."""
        old, _ = self.evictions(1, np.array([priority]))
        return int(old[0]) if len(old) else -1


class OrderState(_Ordered):
    """Fifo (oldest first) or Lifo (newest first), read from the store's key log (it
    keeps nothing of its own: ``insert``, ``update`` and ``remove`` do nothing)."""

    __slots__ = ("newest_first", "store")
    reads_store = True

    def __init__(self, store: ItemStore, newest_first: bool) -> None:
        self.store = store
        self.newest_first = newest_first

    def insert(self, slots: Array, priorities: Array) -> None:
        pass

    def update(self, slots: Array, priorities: Array) -> None:
        pass

    def refill(self, slots: Array, priorities: Array) -> None:
        pass

    def remove(self, slots: Array) -> None:
        pass

    def replace(self, gone: Array, slots: Array, priorities: Array) -> None:
        pass

    def first(self, k: int) -> Array:
        return self.store.newest(k) if self.newest_first else self.store.oldest(k)

    def check(self, store: ItemStore) -> None:
        pass  # (it keeps nothing: the store's key log is checked with the store)

    def evictions(self, excess: int, priorities: Array) -> tuple[Array, Array]:
        k = len(priorities)
        if self.newest_first:  # the arriving items are the newest: each evicts itself
            return _EMPTY, np.arange(k - excess, k)
        old = self.store.oldest(excess, leaving=True)
        return old, _EMPTY if len(old) == excess else np.arange(excess - len(old))

    def dump(self, index_of: Array) -> dict[str, Any]:
        return {}

    def load(self, slots: Array, priorities: Array, state: dict[str, Any]) -> None:
        pass


class HeapState(_Ordered):
    """MinHeap or MaxHeap by priority, ties by ``seq`` (see the module docstring)."""

    __slots__ = ("heap", "largest_first", "live", "next_seq", "seq", "store")
    reads_store = False

    def __init__(self, store: ItemStore, largest_first: bool) -> None:
        self.store = store
        self.largest_first = largest_first
        self.seq = np.full(store.max_size, -1, dtype=np.int64)
        self.next_seq = 0
        self.heap: list[tuple[float, int, int]] = []
        self.live = 0

    def _push(self, slots: Array, priorities: Array) -> None:
        k = len(slots)
        base = self.next_seq
        self.next_seq = base + k
        self.seq[slots] = np.arange(base, base + k)
        sign = -1.0 if self.largest_first else 1.0
        heap = self.heap
        for p, s, slot in zip((priorities * sign).tolist(), range(base, base + k), slots.tolist()):
            heapq.heappush(heap, (p, s, slot))
        if len(heap) > 2 * self.live + 64:
            self._rebuild()

    def _rebuild(self) -> None:
        held = np.flatnonzero(self.seq >= 0)
        sign = -1.0 if self.largest_first else 1.0
        keys = (self.store.priority[held] * sign).tolist()
        self.heap = list(zip(keys, self.seq[held].tolist(), held.tolist()))
        heapq.heapify(self.heap)

    def insert(self, slots: Array, priorities: Array) -> None:
        self.live += len(slots)
        self._push(slots, priorities)

    def update(self, slots: Array, priorities: Array) -> None:
        self._push(slots, priorities)

    def remove(self, slots: Array) -> None:
        self.seq[slots] = -1
        self.live -= len(slots)

    def refill(self, slots: Array, priorities: Array) -> None:
        self.remove(slots)
        self.insert(slots, priorities)

    def replace(self, gone: Array, slots: Array, priorities: Array) -> None:
        self.remove(gone)
        self.insert(slots, priorities)

    def check(self, store: ItemStore) -> None:
        held = store.key >= 0
        if self.live != store.size or not np.array_equal(self.seq >= 0, held):
            raise AssertionError("HeapState: its live slots are not the held ones")
        valid = {slot for _, s, slot in self.heap if self.seq[slot] == s}
        if valid != set(np.flatnonzero(held).tolist()):
            raise AssertionError("HeapState: a held slot has no valid heap entry")

    def _first_entries(self, k: int) -> list[tuple[float, int, int]]:
        heap, seq = self.heap, self.seq
        out: list[tuple[float, int, int]] = []
        while heap and len(out) < k:
            entry = heapq.heappop(heap)
            if seq[entry[2]] == entry[1]:
                out.append(entry)
        for entry in out:
            heapq.heappush(heap, entry)
        return out

    def first(self, k: int) -> Array:
        return np.array([e[2] for e in self._first_entries(k)], dtype=np.int64)

    def evictions(self, excess: int, priorities: Array) -> tuple[Array, Array]:
        sign = -1.0 if self.largest_first else 1.0
        held = self._first_entries(excess)
        base = self.next_seq  # (the seqs the arriving items will take, in order)
        arriving = [(p, base + j, -1 - j) for j, p in enumerate((priorities * sign).tolist())]
        chosen = sorted(held + arriving)[:excess]
        old = np.array([e[2] for e in chosen if e[2] >= 0], dtype=np.int64)
        new = np.array(sorted(-1 - e[2] for e in chosen if e[2] < 0), dtype=np.int64)
        return old, new

    def dump(self, index_of: Array) -> dict[str, Any]:
        held = np.flatnonzero(self.seq >= 0)
        seqs = np.empty(len(held), dtype=np.int64)
        seqs[index_of[held]] = self.seq[held]
        return {"seq": seqs, "next_seq": self.next_seq}

    def load(self, slots: Array, priorities: Array, state: dict[str, Any]) -> None:
        self.seq[slots] = state["seq"]
        self.next_seq = int(state["next_seq"])
        self.live = len(slots)
        self._rebuild()
