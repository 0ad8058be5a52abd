"""Element storage for the queues: synchronous code only, no awaits, no locking.

The queue layer (``_base.py``) holds its lock around every call here. Every storage
keeps ``size`` = number of elements stored and offers the same operations:

- ``put_one(comps)`` / ``put_rows(comps, start, stop)``: admit one element, or rows
  ``start:stop`` of a converted batch (the caller has checked free space).
- ``take_one()``: remove the next element (per the storage's order) and return its
  components.
- ``take_chunk(k)``: remove the next ``k`` elements as an opaque *chunk*.
- ``assemble(chunks)``: turn chunks (in claim order) into batch components.
- ``restore(chunks)``: put claimed chunks back as if never taken (FIFO: at the front
  in their original order; pool: back into the pool; heap: back into the heap).
  Restoring may exceed the logical capacity for a while; storages grow instead of
  failing (the queue keeps enqueuers blocked until the size falls below capacity).

Storages:

``RingStorage`` (fixed shapes, FIFO). One preallocated array per component of shape
``(slots, *shape)``. Elements live at ring positions ``head, head+1, ..., head+size-1``
(mod ``slots``); the tail slot is ``(head + size) % slots``; free slots = ``slots - size``.
A take that empties the ring sets ``head`` to 0, so a queue that hovers near empty reuses
a few cache-hot slots instead of walking the whole ring (W1: ~7% faster).
A run of k rows starting at position p is at most two slice copies (``p:slots`` and
``0:rest``), so enqueue_many and dequeue_many cost two copies per component at most
and no Python object per element. ``slots == capacity`` except after a restore
overflow or an all-or-nothing batch admitted above capacity (see ``QueueCore``), which
grow the ring (linearising it, head 0).

``PoolStorage`` (fixed shapes, random order). Preallocated arrays plus ``_ids``, a
permutation of the slot numbers: its first ``size`` entries list the occupied slots
("dense positions"), the rest the free ones. A take picks a uniformly random ordered
sample of the dense positions and moves it to the end of the dense run (one element:
``Generator.integers`` and a swap; k elements from a small pool: one
``Generator.shuffle`` of the dense run, whose last k entries are then the sample; from
a large pool: ``Generator.choice(size, k, replace=False)`` and a vectorised
swap-remove), then gathers the chosen rows in one ``np.take`` copy. The taken slots
become the next free ones, so enqueues refill the rows the last take just read (still
in cache). Rows never move.

``DequeStorage`` (FIFO of per-element tuples): queues without declared shapes, and
PaddingFIFOQueue with ``None`` dimensions (``assemble`` pads each component to the
batch maximum with 0, or "" for strings and objects).

``ListPoolStorage`` (random order of per-element tuples): RandomShuffleQueue without
declared shapes.

``HeapStorage`` (ascending int64 priority, component 0): a binary heap of
``(priority, sequence, comps)``; the sequence number keeps insertion order among equal
priorities, and restored entries keep theirs.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._spec import Components, Shape

__all__ = [
    "DequeStorage",
    "HeapStorage",
    "ListPoolStorage",
    "PoolStorage",
    "RingStorage",
    "Storage",
]

Chunk = Any


def _row(arr: npt.NDArray[Any], i: int) -> Any:
    """Element ``i`` of a storage array as an independent value."""
    if arr.ndim == 1:
        return arr[i]  # numpy scalar (a copy) or the stored Python object
    return arr[i].copy()


class Storage:
    """Interface shared by every storage (see the module docstring)."""

    size: int = 0

    def put_one(self, comps: Components) -> None:
        raise NotImplementedError

    def put_rows(self, comps: Components, start: int, stop: int) -> None:
        raise NotImplementedError

    def take_one(self) -> Components:
        raise NotImplementedError

    def take_chunk(self, k: int) -> Chunk:
        raise NotImplementedError

    def assemble(self, chunks: Sequence[Chunk]) -> Components:
        raise NotImplementedError

    def restore(self, chunks: Sequence[Chunk]) -> None:
        raise NotImplementedError

    def take_batch(self, n: int) -> Components:
        """Remove the next ``n`` elements and return them as batch components."""
        return self.assemble([self.take_chunk(n)])


def _alloc(
    slots: int, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[Shape]
) -> list[npt.NDArray[Any]]:
    # Shapes reaching a preallocated storage are fully defined (no None).
    return [np.empty((slots, *shape), dtype=dt) for dt, shape in zip(dtypes, shapes)]  # type: ignore[arg-type]


def _concat(chunks: Sequence[Components], ncomp: int) -> Components:
    if len(chunks) == 1:
        return tuple(chunks[0])
    return tuple(np.concatenate([c[i] for c in chunks]) for i in range(ncomp))


class _ArrayStorage(Storage):
    """Fixed-shape elements in preallocated arrays of shape ``(slots, *shape)``, one per
    component (the base of RingStorage and PoolStorage)."""

    def __init__(
        self, capacity: int, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[Shape]
    ) -> None:
        self._dtypes = tuple(dtypes)
        self._shapes = tuple(shapes)
        self._slots = max(capacity, 1)
        self._bufs = _alloc(self._slots, dtypes, shapes)
        self._has_objects = any(dt.kind == "O" for dt in dtypes)
        self.size = 0

    def _release(self, *where: Any) -> None:
        """Drop the references that object components hold at the given slots (indices,
        slices or index arrays) once their elements were taken."""
        for buf in self._bufs:
            if buf.dtype.kind == "O":
                for index in where:
                    buf[index] = None


class RingStorage(_ArrayStorage):
    """Preallocated FIFO ring of fixed-shape elements (see the module docstring)."""

    def __init__(
        self, capacity: int, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[Shape]
    ) -> None:
        super().__init__(capacity, dtypes, shapes)
        # The common case (one numeric component) gets a shorter path per element.
        self._only: npt.NDArray[Any] | None = (
            self._bufs[0] if len(self._bufs) == 1 and not self._has_objects else None
        )
        self._only_copy = bool(self._only is not None and self._only.ndim > 1)
        # ... and so does one scalar object component (file names, pipeline items).
        one = self._bufs[0] if len(self._bufs) == 1 else None
        self._obj1: npt.NDArray[Any] | None = (
            one if one is not None and one.dtype.kind == "O" and one.ndim == 1 else None
        )
        self._head = 0

    def put_one(self, comps: Components) -> None:
        i = self._head + self.size
        if i >= self._slots:
            i -= self._slots
        only = self._only
        if only is not None:
            only[i] = comps[0]
        else:
            for buf, c in zip(self._bufs, comps):
                buf[i, ...] = c  # `...` so a 0-d object array stores its item, not itself
        self.size += 1

    def _advance(self, p: int, k: int) -> None:
        """The ``k`` elements from position ``p`` (the head) have been taken."""
        self.size -= k
        # An emptied ring restarts at slot 0, so a queue that hovers near empty keeps
        # reusing the same (cache-hot) slots instead of walking the whole ring.
        self._head = 0 if self.size == 0 else (p + k) % self._slots

    def put_rows(self, comps: Components, start: int, stop: int) -> None:
        k = stop - start
        if k <= 0:
            return
        if self.size + k > self._slots:  # an all-or-nothing batch let in above capacity
            self._grow(self.size + k)
        p = (self._head + self.size) % self._slots
        first = min(k, self._slots - p)
        for buf, c in zip(self._bufs, comps):
            buf[p : p + first] = c[start : start + first]
            if k > first:
                buf[0 : k - first] = c[start + first : stop]
        self.size += k

    def take_one(self) -> Components:
        i = self._head
        only = self._only
        if only is not None:
            size = self.size - 1
            self.size = size
            self._head = 0 if size == 0 else i + 1 if i + 1 < self._slots else 0  # _advance
            return (only[i].copy() if self._only_copy else only[i],)
        obj1 = self._obj1
        if obj1 is not None:
            value = obj1[i]
            obj1[i] = None  # drop the reference held by the slot
            self._advance(i, 1)
            return (value,)
        out = tuple(_row(buf, i) for buf in self._bufs)
        if self._has_objects:
            self._release(i)
        self._advance(i, 1)
        return out

    def take_chunk(self, k: int) -> Components:
        p = self._head
        first = min(k, self._slots - p)
        out = []
        for buf in self._bufs:
            if k == first:
                chunk = buf[p : p + k].copy()
            else:
                chunk = np.concatenate((buf[p:], buf[: k - first]))
            out.append(chunk)
        if self._has_objects:
            self._release(slice(p, p + first), slice(0, k - first))
        self._advance(p, k)
        return tuple(out)

    def assemble(self, chunks: Sequence[Components]) -> Components:
        return _concat(chunks, len(self._bufs))

    def empty_batch(self, n: int) -> Components:
        """Fresh, uninitialised batch arrays for ``n`` elements."""
        if len(self._bufs) == 1:  # (a generator expression costs ~0.5 µs more)
            return (np.empty((n, *self._shapes[0]), self._dtypes[0]),)
        return tuple(np.empty((n, *sh), dtype=dt) for dt, sh in zip(self._dtypes, self._shapes))

    def take_into(self, out: Components, pos: int, k: int) -> None:
        """Remove the next ``k`` elements into ``out[c][pos:pos + k]`` (two copies at most)."""
        p = self._head
        first = min(k, self._slots - p)
        for buf, o in zip(self._bufs, out):
            o[pos : pos + first] = buf[p : p + first]
            if k > first:
                o[pos + first : pos + k] = buf[: k - first]
        if self._has_objects:
            self._release(slice(p, p + first), slice(0, k - first))
        self._advance(p, k)

    def restore(self, chunks: Sequence[Components]) -> None:
        rows = self.assemble(chunks) if chunks else ()
        k = int(rows[0].shape[0]) if rows else 0
        if k == 0:
            return
        if self.size + k > self._slots:
            self._grow(self.size + k)
        self._head = (self._head - k) % self._slots
        p = self._head
        first = min(k, self._slots - p)
        for buf, c in zip(self._bufs, rows):
            buf[p : p + first] = c[:first]
            if k > first:
                buf[0 : k - first] = c[first:]
        self.size += k

    def _grow(self, slots: int) -> None:
        """Linearise into a larger ring (only after restores overflow the capacity)."""
        new = _alloc(slots, self._dtypes, self._shapes)
        p, n = self._head, self.size
        first = min(n, self._slots - p)
        for old, buf in zip(self._bufs, new):
            buf[:first] = old[p : p + first]
            buf[first:n] = old[: n - first]
        self._bufs, self._slots, self._head = new, slots, 0
        if self._only is not None:
            self._only = new[0]
        if self._obj1 is not None:
            self._obj1 = new[0]


# A take of k from a pool of at most this + 4k elements shuffles the whole dense run: at
# ~9 ns per element that costs less than choice() and its swap-remove bookkeeping (about
# 12-20 us of numpy calls), measured on numpy 2.4.
_SHUFFLE_ALL = 1024


class PoolStorage(_ArrayStorage):
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
        shapes: Sequence[Shape],
        rng: np.random.Generator,
    ) -> None:
        super().__init__(capacity, dtypes, shapes)
        self._ids = np.arange(self._slots, dtype=np.intp)
        self._rng = rng

    def put_one(self, comps: Components) -> None:
        i = self.size
        if i >= self._slots:
            self._grow(i + 1)
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
        slots = self._ids[s : s + k]
        first = int(slots[0])
        if int(slots[-1]) - first == k - 1 and bool(np.all(np.diff(slots) == 1)):
            target: Any = slice(first, first + k)  # contiguous free run: a plain copy
        else:
            target = slots
        for buf, c in zip(self._bufs, comps):
            buf[target] = c[start:stop]
        self.size += k

    def take_one(self) -> Components:
        ids = self._ids
        i = int(self._rng.integers(self.size))
        last = self.size - 1
        slot = ids[i]
        out = tuple(_row(buf, slot) for buf in self._bufs)
        ids[i] = ids[last]
        ids[last] = slot
        if self._has_objects:
            self._release(slot)
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
        out = tuple(np.take(buf, slots, axis=0) for buf in self._bufs)
        if self._has_objects:
            self._release(slots)
        self.size = keep
        return out

    def take_batch(self, n: int) -> Components:
        return self.take_chunk(n)  # one chunk is already the batch

    def assemble(self, chunks: Sequence[Components]) -> Components:
        return _concat(chunks, len(self._bufs))

    def restore(self, chunks: Sequence[Components]) -> None:
        for chunk in chunks:
            n = int(chunk[0].shape[0])
            self.put_rows(chunk, 0, n)

    def _grow(self, slots: int) -> None:
        new = _alloc(slots, self._dtypes, self._shapes)
        occupied = self._ids[: self.size]
        for old, buf in zip(self._bufs, new):
            buf[: self.size] = old[occupied]
        self._bufs, self._slots = new, slots
        self._ids = np.arange(slots, dtype=np.intp)


def _pad_value(dt: np.dtype[Any]) -> Any:
    if dt.kind == "U":
        return ""
    if dt.kind == "S":
        return b""
    if dt.kind == "O":
        return ""
    return 0


def _stack(
    elements: Sequence[Components], dtypes: Sequence[np.dtype[Any]], pad: bool
) -> Components:
    """Stack per-element tuples into batch components, padding None dimensions if asked."""
    out = []
    for i, dt in enumerate(dtypes):
        if elements and all(np.ndim(e[i]) == 0 for e in elements):
            col = np.empty(len(elements), dtype=dt)
            for j, e in enumerate(elements):
                col[j] = e[i]  # scalars: no padding, no nested 0-d arrays
            out.append(col)
            continue
        parts = [np.asarray(e[i], dtype=dt) for e in elements]
        if pad and parts:
            target = tuple(max(p.shape[d] for p in parts) for d in range(parts[0].ndim))
            batch = np.full((len(parts), *target), _pad_value(dt), dtype=dt)
            for j, p in enumerate(parts):
                region = (j, *(slice(0, s) for s in p.shape))
                batch[region] = p  # type: ignore[index]
            out.append(batch)
        elif parts:
            out.append(np.stack(parts))
        else:
            out.append(np.empty((0,), dtype=dt))
    return tuple(out)


def _own(comps: Components) -> Components:
    """Copies of a converted element, so later changes by the caller cannot leak in."""
    return tuple(
        (c[()] if c.ndim == 0 else c.copy()) if isinstance(c, np.ndarray) else c for c in comps
    )


class _TupleStorage(Storage):
    """Shared admission for storages that keep one tuple per element in ``_items``."""

    _items: deque[Components] | list[Components]

    def put_one(self, comps: Components) -> None:
        self._items.append(_own(comps))
        self.size += 1

    def put_rows(self, comps: Components, start: int, stop: int) -> None:
        for j in range(start, stop):
            self._items.append(_own(tuple(c[j] for c in comps)))
        self.size += max(0, stop - start)


class DequeStorage(_TupleStorage):
    """FIFO of per-element tuples (no declared shapes, or padded shapes)."""

    def __init__(self, dtypes: Sequence[np.dtype[Any]], *, pad: bool) -> None:
        self._dtypes = tuple(dtypes)
        self._pad = pad
        self._items: deque[Components] = deque()
        self.size = 0

    def take_one(self) -> Components:
        self.size -= 1
        return self._items.popleft()

    def take_chunk(self, k: int) -> list[Components]:
        self.size -= k
        pop = self._items.popleft
        return [pop() for _ in range(k)]

    def assemble(self, chunks: Sequence[list[Components]]) -> Components:
        elements = [e for chunk in chunks for e in chunk]
        return _stack(elements, self._dtypes, self._pad)

    def restore(self, chunks: Sequence[list[Components]]) -> None:
        elements = [e for chunk in chunks for e in chunk]
        self._items.extendleft(reversed(elements))
        self.size += len(elements)


class ListPoolStorage(_TupleStorage):
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
        return _stack([e for chunk in chunks for e in chunk], self._dtypes, False)

    def restore(self, chunks: Sequence[list[Components]]) -> None:
        for chunk in chunks:
            self._items.extend(chunk)
            self.size += len(chunk)


class HeapStorage(Storage):
    """Binary heap ordered by the int64 priority in component 0, then by arrival."""

    def __init__(self, dtypes: Sequence[np.dtype[Any]]) -> None:
        self._dtypes = tuple(dtypes)
        self._heap: list[tuple[int, int, Components]] = []
        self._seq = 0
        self.size = 0

    def _push(self, comps: Components) -> None:
        heapq.heappush(self._heap, (int(comps[0]), self._seq, comps))
        self._seq += 1
        self.size += 1

    def put_one(self, comps: Components) -> None:
        self._push(_own(comps))

    def put_rows(self, comps: Components, start: int, stop: int) -> None:
        for j in range(start, stop):
            self._push(_own(tuple(c[j] for c in comps)))

    def take_one(self) -> Components:
        self.size -= 1
        return heapq.heappop(self._heap)[2]

    def take_chunk(self, k: int) -> list[tuple[int, int, Components]]:
        self.size -= k
        return [heapq.heappop(self._heap) for _ in range(k)]

    def assemble(self, chunks: Sequence[list[tuple[int, int, Components]]]) -> Components:
        entries = sorted(e for chunk in chunks for e in chunk)
        return _stack([e[2] for e in entries], self._dtypes, False)

    def restore(self, chunks: Sequence[list[tuple[int, int, Components]]]) -> None:
        for chunk in chunks:
            for entry in chunk:
                heapq.heappush(self._heap, entry)
                self.size += 1
