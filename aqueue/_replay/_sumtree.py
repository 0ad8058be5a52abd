"""SumTree: a float64 sum tree over a fixed number of leaves, set and searched in batches.

Layout: ``capacity = 2**depth >= size`` leaves; ``tree`` holds ``2 * capacity`` float64
values; node ``i`` has children ``2i`` and ``2i + 1``, leaf ``j`` is node ``capacity +
j``. Leaves beyond ``size`` stay 0. Only the levels from the leaves up to the *top
level* (``top = min(depth, 10)``: at most 1,024 nodes, ``tree[2**top : 2**(top + 1)]``)
are kept; the prefix sums of the top level (``prefix()``, one ``cumsum``) stand in for
the levels above it, and their last value is the total.

Invariant: once the *pending* leaves are propagated, every kept inner node holds
exactly ``tree[2i] + tree[2i + 1]`` as stored. A batched ``set`` writes the leaves at
once and leaves their ancestors pending; the first read of the inner nodes
(``prefix``, hence every search) propagates all pending leaves together, recomputing
their ancestors level by level from their children (each parent as the value just
written plus its sibling's: one gather per level, ``depth - top`` steps for everything
pending, however much). A table's loop sets leaves twice between two samples (the
insert's, then the update's): propagating them together halves the steps, whose cost
is numpy's per-call overhead, not the number of leaves. No deltas are ever added:
repeated indices are harmless, rounding cannot drift, and the tree is a pure function
of its leaves (``rebuild`` gives the same floats, which snapshots rely on). Pending
leaves are propagated as soon as ``_PENDING_MAX`` of them are waiting, so a table
filled without being sampled keeps a bounded list.

``find(u, prefix)`` maps each ``u`` in ``[0, total)`` to the leaf whose interval of the
prefix sums contains it (leaves of weight 0 own no interval): one ``searchsorted`` in
the top level's prefix sums, then one vectorized step per level below it. Rounding
can leave a ``u`` a few ulps past its subtree and land it on a leaf of weight 0; such
rare leaves are searched again by a guarded descent that never enters an empty
subtree.

For 100,000 leaves (depth 17): propagating 320 leaves takes 7 steps, a search of 256
values one cumsum of 1,024, one searchsorted and 7 steps (out of cache, about 50 and
85 µs).

Nothing here knows about tables: the prioritized selector (``_selection.py``) keeps
one tree over the table's slots, and another backend can reuse the arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["SumTree"]

Array = npt.NDArray[Any]
_TOP_LEVEL = 10  # the top kept level has at most 2**10 nodes (a cumsum of 1,024 is ~5 µs)
_PENDING_MAX = 4096  # leaves set and not yet propagated, at most


class SumTree:
    """A sum tree over ``size`` float64 leaves, all 0 at first."""

    __slots__ = ("_pending", "_waiting", "capacity", "depth", "size", "top", "tree")

    def __init__(self, size: int) -> None:
        depth = max(0, (size - 1).bit_length())
        self.size = size
        self.depth = depth
        self.capacity = 1 << depth
        self.top = min(depth, _TOP_LEVEL)
        self.tree = np.zeros(2 * self.capacity, dtype=np.float64)
        self._pending: list[Array] = []  # leaf nodes set, ancestors not yet recomputed
        self._waiting = 0  # how many, in all

    def leaves(self) -> Array:
        """A view of the leaves (``size`` of them); write through ``set`` only."""
        return self.tree[self.capacity : self.capacity + self.size]

    def set(self, idx: Array, values: Array, *, also: Array | None = None) -> None:
        """Set leaves ``idx`` to ``values`` (1-d, same length; where an index repeats,
        the caller makes its values agree); their ancestors are recomputed before the
        next read (see the module docstring). ``also``: leaves the caller wrote
        directly (``leaves()[also] = ...``) before, pending likewise."""
        nodes = idx + self.capacity  # (a new array: the caller's may change after)
        self.tree[nodes] = values
        if also is not None:
            self._pending.append(also + self.capacity)
            self._waiting += len(also)
        self._pending.append(nodes)
        self._waiting += len(nodes)
        if self._waiting >= _PENDING_MAX:
            self.propagate()

    def propagate(self) -> None:
        """Recompute the ancestors of every pending leaf (one pass for them all)."""
        pending = self._pending
        if not pending:
            return
        i = pending[0] if len(pending) == 1 else np.concatenate(pending)
        pending.clear()
        self._waiting = 0
        tree = self.tree
        v = tree[i]  # (read back: where an index repeats, every copy sees the value kept)
        for _ in range(self.depth - self.top):
            # parent = this node + its sibling; the sibling is current whether or not it
            # changed (it was written one level down), and a + b == b + a exactly, so
            # siblings that both changed write the same parent value
            v = v + tree[i ^ 1]
            i >>= 1
            tree[i] = v

    def rebuild(self) -> None:
        """Recompute every kept inner node from the leaves (nothing is pending after)."""
        self._pending.clear()
        self._waiting = 0
        tree = self.tree
        lo = self.capacity
        for _ in range(self.depth - self.top):
            tree[lo >> 1 : lo] = tree[lo : 2 * lo : 2] + tree[lo + 1 : 2 * lo : 2]
            lo >>= 1

    def prefix(self) -> Array:
        """The prefix sums of the top level; the last one is the total (pending leaves
        are propagated first)."""
        if self._pending:
            self.propagate()
        lo = 1 << self.top
        return self.tree[lo : 2 * lo].cumsum()

    def find(self, u: Array, prefix: Array) -> tuple[Array, Array]:
        """The leaf index for each value of ``u`` (float64, ``0 <= u < prefix[-1]``,
        which must be > 0; overwritten), given ``prefix = self.prefix()``, and each
        leaf's value. (Searching the values in increasing order reads each level front
        to back, but out of cache that saves less than the sort and unsort cost.)"""
        tree = self.tree
        lo = 1 << self.top
        j = prefix.searchsorted(u, side="right")  # (the methods skip numpy's Python wrappers)
        np.minimum(j, lo - 1, out=j)  # (a value at the total: rounding; see below)
        np.subtract(u, prefix[j] - tree[lo + j], out=u)
        i = j + lo
        for _ in range(self.depth - self.top):
            i <<= 1
            left = tree[i]
            right = u >= left
            u -= left * right  # (a masked subtract, ``where=right``, costs 3 µs more a level)
            i += right
        leaf = i - self.capacity
        value = tree[i]
        bad = value <= 0.0  # rounding ran past the last item of a subtree
        if bad[bad.argmax()]:  # (any: one C call, where count_nonzero is two Python calls)
            leaf[bad] = self._guarded(i[bad], prefix)
            value[bad] = tree[leaf[bad] + self.capacity]
        return leaf, value

    def _guarded(self, nodes: Array, prefix: Array) -> Array:
        """Leaves for the values that rounding sent to the empty leaves ``nodes``: the
        prefix sum at each such leaf is searched again, each step into a child of
        positive weight, so the result is a neighbour of positive weight."""
        tree = self.tree
        lo = 1 << self.top
        out = np.empty(len(nodes), dtype=np.intp)
        for k, node in enumerate(nodes.tolist()):
            rest = float(tree[self.capacity : node].sum())
            j = int(np.searchsorted(prefix, rest, side="right"))
            j = min(j, lo - 1)
            while tree[lo + j] <= 0.0 and j > 0:  # past the last positive top node
                j -= 1
            rest -= float(prefix[j] - tree[lo + j])
            i = lo + j
            for _ in range(self.depth - self.top):
                left, right = float(tree[2 * i]), float(tree[2 * i + 1])
                if (rest >= left and right > 0.0) or left <= 0.0:
                    rest -= left
                    i = 2 * i + 1
                else:
                    i = 2 * i
            out[k] = i - self.capacity
        return out
