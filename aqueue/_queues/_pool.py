"""Random-order storages: RandomShuffleQueue's pool of fixed-shape elements, and its
pool of per-element tuples when shapes are not declared.

``PoolStorage`` (fixed shapes). Preallocated arrays plus ``_ids``, a permutation of the
slot numbers: its first ``size`` entries list the occupied slots ("dense positions"),
the rest the free ones. A take picks a uniformly random ordered sample of the dense
positions and moves it to the end of the dense run (one element: ``Generator.integers``
and a swap; k elements from a small pool: one ``Generator.shuffle`` of the dense run,
whose last k entries are then the sample; from a large pool:
``Generator.choice(size, k, replace=False)`` and a vectorised swap-remove), then gathers
the chosen rows in one ``np.take`` copy. The taken slots become the next free ones, so
enqueues refill the rows the last take just read (still in cache). Rows never move.

``ListPoolStorage`` (no declared shapes): a list of per-element tuples; a take swaps a
uniformly chosen entry with the last and pops it.

Both draw every random number from the queue's own ``numpy.random.Generator``, so with
a seed the order is a pure function of the sequence of operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._declare import Components, FixedShape
from ._storage import ArrayStorage, alloc, concat, row
from ._tuples import TupleStorage, stack

__all__ = ["ListPoolStorage", "PoolStorage"]

# A take of k from a pool of at most this + 4k elements shuffles the whole dense run: at
# ~9 ns per element that costs less than choice() and its swap-remove bookkeeping (about
# 12-20 us of numpy calls), measured on numpy 2.4.
_SHUFFLE_ALL = 1024


class PoolStorage(ArrayStorage):
    """Preallocated pool of fixed-shape elements taken in random order.

    Data rows never move once written: ``_ids`` is a permutation of the slot numbers
    whose first ``size`` entries name the occupied slots (in "dense" order) and whose
    rest are the free slots. A take picks dense positions, gathers their rows (the only
    data copy) and swap-removes the positions in ``_ids``; an enqueue writes into the
    next free slots. Moving slot numbers instead of rows saves a second pass over the
    data (a 4 KB element costs a random page access per move).
    """

    def __init__(
        self,
        capacity: int,
        dtypes: Sequence[np.dtype[Any]],
        shapes: Sequence[FixedShape],
        owner: str,
        rng: np.random.Generator,
    ) -> None:
        super().__init__(capacity, dtypes, shapes, owner)
        self._ids = np.arange(self._slots, dtype=np.intp)
        self._fresh = 0  # ids[j] == j for every j >= _fresh (slots never taken from)
        self._rng = rng

    def put_one(self, comps: Components) -> None:
        i = self.size
        if i >= self._slots:
            self._grow(max(2 * self._slots, i + 1))
        slot = self._ids[i]
        for buf, c in zip(self._bufs, comps):
            buf[slot, ...] = c
        self.size += 1

    def put_rows(self, comps: Components, start: int, stop: int) -> None:
        k = stop - start
        if k <= 0:
            return
        if self.size + k > self._slots:
            self._grow(self.size + k)
        s = self.size
        # Free slots never taken from are in order: a plain slice copy.
        target: Any = slice(s, s + k) if s >= self._fresh else self._ids[s : s + k]
        whole = k == len(comps[0])  # the whole batch: no slice of it needed
        for buf, c in zip(self._bufs, comps):
            buf[target] = c if whole else c[start:stop]
        self.size += k

    def take_one(self) -> Components:
        ids = self._ids
        i = int(self._rng.integers(self.size))
        last = self.size - 1
        slot = ids[i]
        out = tuple(row(buf, slot) for buf in self._bufs)
        ids[i] = ids[last]
        ids[last] = slot
        if self._has_objects:
            self._release(slot)
        if self.size > self._fresh:
            self._fresh = self.size
        self.size = last
        return out

    def take_chunk(self, k: int) -> Components:
        ids = self._ids
        size = self.size
        keep = size - k
        if size <= _SHUFFLE_ALL + 4 * k:
            # Small pool: one Fisher-Yates pass over the dense run (a single C loop, cheaper
            # here than choice() plus the bookkeeping below). Its last k entries are a
            # uniformly random ordered sample, its first `keep` the rest: the swap-remove
            # is done. The slots stay in `ids[keep:size]`, the next free ones.
            self._rng.shuffle(ids[:size])
            slots = ids[keep:size]
        else:
            pos = self._rng.choice(size, k, replace=False)
            slots = ids[pos]
            holes = pos[pos < keep]
            taken_above = np.zeros(k, dtype=bool)
            taken_above[pos[pos >= keep] - keep] = True
            movers = keep + np.flatnonzero(~taken_above)
            if holes.size:
                ids[holes] = ids[movers]
            ids[keep:size] = slots  # the taken slots become the next free ones
        out = []  # (a loop: a comprehension costs a frame per take)
        for buf in self._bufs:
            out.append(buf.take(slots, axis=0))
        if self._has_objects:
            self._release(slots)
        if size > self._fresh:
            self._fresh = size
        self.size = keep
        return tuple(out)

    take_batch = take_chunk  # (one chunk is already the batch)

    def assemble(self, chunks: Sequence[Components]) -> Components:
        return concat(chunks, len(self._bufs))

    def restore(self, chunks: Sequence[Components]) -> None:
        for chunk in chunks:
            n = int(chunk[0].shape[0])
            self.put_rows(chunk, 0, n)

    def _columns(self) -> Components:
        occupied = self._ids[: self.size]
        return tuple(np.take(buf, occupied, axis=0) for buf in self._bufs)

    def _grow(self, slots: int) -> None:
        new = alloc(slots, self._dtypes, self._shapes, self._owner)
        occupied = self._ids[: self.size]
        for old, buf in zip(self._bufs, new):
            buf[: self.size] = old[occupied]
        self._bufs, self._slots = new, slots
        self._ids = np.arange(slots, dtype=np.intp)
        self._fresh = self.size


class ListPoolStorage(TupleStorage):
    """Random-order pool of per-element tuples (no declared shapes)."""

    def __init__(self, dtypes: Sequence[np.dtype[Any]], rng: np.random.Generator) -> None:
        self._dtypes = tuple(dtypes)
        self._items: list[Components] = []
        self._rng = rng
        self.size = 0

    def take_one(self) -> Components:
        items = self._items
        i = int(self._rng.integers(len(items)))
        items[i], items[-1] = items[-1], items[i]
        self.size -= 1
        return items.pop()

    def take_chunk(self, k: int) -> list[Components]:
        return [self.take_one() for _ in range(k)]

    def assemble(self, chunks: Sequence[list[Components]]) -> Components:
        return stack([e for chunk in chunks for e in chunk], self._dtypes, False)

    def restore(self, chunks: Sequence[list[Components]]) -> None:
        for chunk in chunks:
            self._items.extend(chunk)
            self.size += len(chunk)
