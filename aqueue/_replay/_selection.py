"""Selector state: what the in-process engine keeps for a sampler or a remover.

One state object per role (a table whose sampler and remover are both Uniform keeps
two), built by ``make_state`` from the public configuration (``_selectors.py``). Every
state implements one declared interface, ``SelectorState``, which ``TableCore`` calls
through (it never asks which class it holds). Every state sees every item: ``insert``
(new slots, distinct, with their priorities), ``update`` (distinct held slots, new
priorities), ``remove`` (distinct held slots), ``replace`` (``remove`` then ``insert``,
in one pass where a state can) and ``refill`` (distinct held slots whose items were
just replaced by new ones with these priorities: an insert at max_size whose evictions
freed as many slots as it fills), always in batches and under the table's lock.
Every state also answers:

- ``draw(m, rng)``: ``m`` slots drawn with replacement, each with its weight and the
  total weight (probability = weight / total; an empty weights array means every
  weight is 1): independent draws for the random states (Uniform, Prioritized), the
  first item ``m`` times, each with probability 1, for the deterministic ones;
- ``victim(priority, rng)``: the slot to evict when one more item of that priority
  arrives at ``max_size``, or -1 for the newcomer itself.

The deterministic states (Fifo, Lifo, MinHeap, MaxHeap: ``deterministic`` true) order
their items, and answer two questions more, which the core asks only of them:
``first(k)``, the first ``k`` items in their order (a sample with
``max_times_sampled`` takes them up in turn); and ``evictions(excess, priorities)``:
which held slots, and which of ``k`` arriving items (positions), the remover evicts
when they arrive together with ``excess`` items too many. Evicting the first in order
one insert at a time keeps the last ``max_size`` in that order, so one batched choice
over held and arriving items gives the same result. A random state has no order: it
refuses both (TypeError), and evicts one arriving item at a time (``victim``).

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
- ``OrderState`` and ``HeapState``, the deterministic states: ``_ordered.py``.

``dump``/``load`` give a state's own data in terms of item *indices* (positions in
the snapshot's key order), not slots, so they read the same whatever the layout.
``check(store)`` raises AssertionError when the state does not hold exactly the store's
items as stated above (for tests: ``TableCore.check_invariants``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from ._ordered import HeapState, OrderState
from ._selectors import Fifo, Lifo, MaxHeap, MinHeap, Prioritized, Selector, Uniform
from ._sumtree import SumTree

if TYPE_CHECKING:
    from ._store import ItemStore

__all__ = [
    "PrioritizedState",
    "SelectorState",
    "UniformState",
    "make_state",
]

Array = npt.NDArray[Any]
_UNIT = np.empty(0, dtype=np.float64)  # "every weight is 1" (a uniform draw)


class SelectorState(Protocol):
    """What the core asks of a sampler's or a remover's state (module docstring)."""

    deterministic: bool
    """The state orders its items (``first`` and ``evictions`` answer)."""
    reads_store: bool
    """The state keeps nothing of its own (the store's key log is its order)."""

    def insert(self, slots: Array, priorities: Array) -> None: ...

    def update(self, slots: Array, priorities: Array) -> None: ...

    def refill(self, slots: Array, priorities: Array) -> None: ...

    def remove(self, slots: Array) -> None: ...

    def replace(self, gone: Array, slots: Array, priorities: Array) -> None: ...

    def draw(self, m: int, rng: np.random.Generator) -> tuple[Array, Array, float]: ...

    def victim(self, priority: float, rng: np.random.Generator) -> int: ...

    def first(self, k: int) -> Array: ...

    def evictions(self, excess: int, priorities: Array) -> tuple[Array, Array]: ...

    def dump(self, index_of: Array) -> dict[str, Any]: ...

    def load(self, slots: Array, priorities: Array, state: dict[str, Any]) -> None: ...

    def check(self, store: ItemStore) -> None: ...


def _unordered(state: object) -> TypeError:
    return TypeError(f"{type(state).__name__} has no order: the core asks it to draw")


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

    def replace(self, gone: Array, slots: Array, priorities: Array) -> None:
        self.remove(gone)
        self.insert(slots, priorities)

    def draw(self, m: int, rng: np.random.Generator) -> tuple[Array, Array, float]:
        idx = rng.integers(0, self.n, m)
        if self.n == len(self.dense):  # full: every slot holds an item, draw slots
            return idx, _UNIT, float(self.n)
        return self.dense[idx], _UNIT, float(self.n)

    def victim(self, priority: float, rng: np.random.Generator) -> int:
        r = int(rng.integers(0, self.n + 1))
        return -1 if r == self.n else int(self.dense[r])

    def first(self, k: int) -> Array:
        raise _unordered(self)

    def evictions(self, excess: int, priorities: Array) -> tuple[Array, Array]:
        raise _unordered(self)

    def dump(self, index_of: Array) -> dict[str, Any]:
        return {"order": index_of[self.dense[: self.n]]}

    def load(self, slots: Array, priorities: Array, state: dict[str, Any]) -> None:
        order = slots[state["order"]]
        self.n = 0
        self.insert(order, priorities)

    def check(self, store: ItemStore) -> None:
        held, n = np.flatnonzero(store.key >= 0), self.n
        dense = self.dense[:n]
        if n != store.size or not np.array_equal(np.sort(dense), held):
            raise AssertionError(f"UniformState: dense[:{n}] is not the {store.size} held slots")
        if not np.array_equal(self.pos[dense], np.arange(n)):
            raise AssertionError("UniformState: pos[dense[i]] != i")
        free = np.flatnonzero(store.key < 0)
        if (self.pos[free] != -1).any():
            raise AssertionError("UniformState: a free slot has a position")


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

    def first(self, k: int) -> Array:
        raise _unordered(self)

    def evictions(self, excess: int, priorities: Array) -> tuple[Array, Array]:
        raise _unordered(self)

    def check(self, store: ItemStore) -> None:
        held = store.key >= 0
        if self.count != store.size or not np.array_equal(self.live, held):
            raise AssertionError("PrioritizedState: its live slots are not the held ones")
        leaves = self.tree.leaves()[: store.max_size]
        want = np.zeros(store.max_size)
        want[held] = self.weights(store.priority[held])
        if not np.array_equal(leaves, want):
            raise AssertionError("PrioritizedState: a leaf is not its item's weight")
        total = float(self.tree.prefix()[-1])
        if not np.isclose(total, want.sum(), rtol=1e-9, atol=0.0):
            raise AssertionError(f"PrioritizedState: total {total} != {want.sum()}")

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


def make_state(selector: Selector, store: ItemStore) -> SelectorState:
    """A fresh, empty state for ``selector`` over ``store``."""
    if isinstance(selector, Uniform):
        return UniformState(store.max_size)
    if isinstance(selector, Prioritized):
        return PrioritizedState(store.max_size, selector.exponent)
    if isinstance(selector, (Fifo, Lifo)):
        return OrderState(store, newest_first=isinstance(selector, Lifo))
    assert isinstance(selector, (MinHeap, MaxHeap))
    return HeapState(store, largest_first=isinstance(selector, MaxHeap))
