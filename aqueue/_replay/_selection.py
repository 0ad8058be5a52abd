"""Selector state: what the in-process engine keeps for a sampler or a remover.

One state object per role (a table whose sampler and remover are both Uniform keeps
two), built by ``make_state`` from the public configuration (``_selectors.py``). Every
state sees every item: ``insert`` (new slots, distinct, with their priorities),
``update`` (distinct held slots, new priorities), ``remove`` (distinct held slots)
and ``refill`` (distinct held slots whose items were just replaced by new ones with
these priorities: an insert at max_size whose evictions freed as many slots as it
fills), always in batches and under the table's lock. Then:

- random states (Uniform, Prioritized) ``draw(m, rng)``: ``m`` slots drawn
  independently, with replacement, each with its weight and the total weight
  (probability = weight / total; an empty weights array means every weight is 1);
  and ``victim(priority, rng)``: the slot to evict when one more item of that
  priority arrives at ``max_size``, or -1 for the newcomer itself;
- deterministic states (Fifo, Lifo, MinHeap, MaxHeap) ``first(k)``: the first ``k``
  items in their order; and ``evictions(excess, priorities)``: which held slots, and
  which of ``k`` arriving items (positions), the remover evicts when they arrive
  together with ``excess`` items too many. Evicting the first in order one insert at
  a time keeps the last ``max_size`` in that order, so one batched choice over held and
  arriving items gives the same result.

The states (invariants):

- ``UniformState``: ``dense[:n]`` lists the held slots; ``pos[slot]`` is each one's
  index there. A batch removal of k fills the holes below the new ``n`` with the
  survivors among the last k positions (ascending with ascending), so draws index a
  dense array in O(1) and a removal costs O(k). A refill keeps the slots where they
  are (nothing to do). When the table is full every slot holds an item, and draws
  are slots themselves (one random read fewer per draw).
- ``PrioritizedState``: a ``SumTree`` whose leaf ``slot`` holds ``priority**exponent``
  (0 for priority 0 and for free slots). When the total is 0, every held item is
  equally likely (draws then index ``flatnonzero(live)``, O(max_size)). ``replace``
  removes and inserts in one pass over the tree (an insert at max_size); a refill is
  an update.
- ``OrderState``: nothing of its own: the store's key log is the order by key.
- ``HeapState``: a binary heap (``heapq``) of ``(priority or -priority, seq, slot)``
  with lazy deletion: an entry is valid while ``seq[slot]`` equals its seq. Every
  insert and update takes the next ``seq``, so among equal priorities the smallest seq
  (set longest ago) comes first; ``seq`` is the tie order snapshots keep. The heap is
  rebuilt when stale entries outnumber valid ones. A refill is a removal and an
  insert (the new items take new seqs). Unlike the others it holds one
  Python tuple per item and update: a heap selector costs about a microsecond per
  item, where the numpy states cost a few per batch.

``dump``/``load`` give a state's own data in terms of item *indices* (positions in
the snapshot's key order), not slots, so they read the same whatever the layout.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ._selectors import Fifo, Lifo, MaxHeap, MinHeap, Prioritized, Selector, Uniform
from ._sumtree import SumTree

if TYPE_CHECKING:
    from ._store import ItemStore

__all__ = ["HeapState", "OrderState", "PrioritizedState", "State", "UniformState", "make_state"]

Array = npt.NDArray[Any]
_EMPTY = np.empty(0, dtype=np.int64)
_UNIT = np.empty(0, dtype=np.float64)  # "every weight is 1" (a uniform draw)


class UniformState:
    """Each held item equally likely (see the module docstring)."""

    __slots__ = ("dense", "n", "pos")
    deterministic = False
    reads_store = False

    def __init__(self, max_size: int) -> None:
        self.dense = np.empty(max_size, dtype=np.int64)
        self.pos = np.full(max_size, -1, dtype=np.int64)
        self.n = 0

    def insert(self, slots: Array, priorities: Array) -> None:
        n, k = self.n, len(slots)
        self.dense[n : n + k] = slots
        self.pos[slots] = np.arange(n, n + k)
        self.n = n + k

    def update(self, slots: Array, priorities: Array) -> None:
        pass

    def refill(self, slots: Array, priorities: Array) -> None:
        pass  # (the slots stay held, at their positions)

    def remove(self, slots: Array) -> None:
        k = len(slots)
        if not k:
            return
        n = self.n - k
        gone = self.pos[slots]
        self.pos[slots] = -1
        below = gone < n
        holes = np.sort(gone[below])
        if holes.size:
            stays = np.ones(k, dtype=bool)  # which of the last k positions survive
            stays[gone[~below] - n] = False
            moved = self.dense[n + np.flatnonzero(stays)]
            self.dense[holes] = moved
            self.pos[moved] = holes
        self.n = n

    def draw(self, m: int, rng: np.random.Generator) -> tuple[Array, Array, float]:
        idx = rng.integers(0, self.n, m)
        if self.n == len(self.dense):  # full: every slot holds an item, draw slots
            return idx, _UNIT, float(self.n)
        return self.dense[idx], _UNIT, float(self.n)

    def victim(self, priority: float, rng: np.random.Generator) -> int:
        r = int(rng.integers(0, self.n + 1))
        return -1 if r == self.n else int(self.dense[r])

    def dump(self, index_of: Array) -> dict[str, Any]:
        return {"order": index_of[self.dense[: self.n]]}

    def load(self, slots: Array, priorities: Array, state: dict[str, Any]) -> None:
        order = slots[state["order"]]
        self.n = 0
        self.insert(order, priorities)


class PrioritizedState:
    """P(i) proportional to ``priority**exponent`` (see the module docstring)."""

    __slots__ = ("count", "exponent", "live", "tree")
    deterministic = False
    reads_store = False

    def __init__(self, max_size: int, exponent: float) -> None:
        self.exponent = exponent
        self.tree = SumTree(max_size)
        self.live = np.zeros(max_size, dtype=bool)
        self.count = 0

    def weights(self, priorities: Array) -> Array:
        """``priorities ** exponent``, with ``0 ** exponent`` = 0."""
        if self.exponent == 1.0:
            return priorities.astype(np.float64)
        w = np.power(priorities, self.exponent)
        if self.exponent == 0.0:
            w[priorities == 0] = 0.0
        return w

    def insert(self, slots: Array, priorities: Array) -> None:
        self.tree.set(slots, self.weights(priorities))
        self.live[slots] = True
        self.count += len(slots)

    def update(self, slots: Array, priorities: Array) -> None:
        self.tree.set(slots, self.weights(priorities))

    refill = update  # (new weights for the same leaves)

    def remove(self, slots: Array) -> None:
        self.tree.set(slots, np.zeros(len(slots)))
        self.live[slots] = False
        self.count -= len(slots)

    def replace(self, gone: Array, slots: Array, priorities: Array) -> None:
        """``remove(gone)`` then ``insert(slots, priorities)``, in one pass over the tree
        (at max_size each insert evicts: the slots freed are mostly the ones filled)."""
        self.tree.leaves()[gone] = 0.0
        self.live[gone] = False
        self.tree.set(slots, self.weights(priorities), also=gone)
        self.live[slots] = True
        self.count += len(slots) - len(gone)

    def draw(self, m: int, rng: np.random.Generator) -> tuple[Array, Array, float]:
        prefix = self.tree.prefix()
        total = float(prefix[-1])
        if total > 0.0:
            u = rng.random(m)
            u *= total
            slots, weights = self.tree.find(u, prefix)
            return slots, weights, total
        held = np.flatnonzero(self.live)
        return held[rng.integers(0, self.count, m)], np.ones(m), float(self.count)

    def victim(self, priority: float, rng: np.random.Generator) -> int:
        weight = float(self.weights(np.array([priority]))[0])
        prefix = self.tree.prefix()
        total = float(prefix[-1])
        if total + weight > 0.0:
            u = float(rng.random()) * (total + weight)
            if u >= total:
                return -1
            return int(self.tree.find(np.array([u]), prefix)[0][0])
        r = int(rng.integers(0, self.count + 1))
        return -1 if r == self.count else int(np.flatnonzero(self.live)[r])

    def dump(self, index_of: Array) -> dict[str, Any]:
        return {}

    def load(self, slots: Array, priorities: Array, state: dict[str, Any]) -> None:
        self.insert(slots, priorities)


class OrderState:
    """Fifo (oldest first) or Lifo (newest first), read from the store's key log (it
    keeps nothing of its own: ``insert``, ``update`` and ``remove`` do nothing)."""

    __slots__ = ("newest_first", "store")
    deterministic = True
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

    def first(self, k: int) -> Array:
        return self.store.newest(k) if self.newest_first else self.store.oldest(k)

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


class HeapState:
    """MinHeap or MaxHeap by priority, ties by ``seq`` (see the module docstring)."""

    __slots__ = ("heap", "largest_first", "live", "next_seq", "seq", "store")
    deterministic = True
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


State = UniformState | PrioritizedState | OrderState | HeapState


def make_state(selector: Selector, store: ItemStore) -> State:
    """A fresh, empty state for ``selector`` over ``store``."""
    if isinstance(selector, Uniform):
        return UniformState(store.max_size)
    if isinstance(selector, Prioritized):
        return PrioritizedState(store.max_size, selector.exponent)
    if isinstance(selector, (Fifo, Lifo)):
        return OrderState(store, newest_first=isinstance(selector, Lifo))
    assert isinstance(selector, (MinHeap, MaxHeap))
    return HeapState(store, largest_first=isinstance(selector, MaxHeap))
