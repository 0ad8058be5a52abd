"""Element storage of the fixed-shape queues, and the interfaces every storage offers.

Storages are synchronous code only: no awaits and no locking (the engine holds the
queue's lock around every call). Each keeps ``size`` = number of elements stored and
offers the ``Storage`` operations:

- ``put_one(comps)`` / ``put_rows(comps, start, stop)``: admit one element, or rows
  ``start:stop`` of a converted batch (the engine has checked free space).
- ``take_one()``: remove the next element (per the storage's order) and return its
  components.
- ``take_chunk(k)``: remove the next ``k`` elements as an opaque *chunk*;
  ``assemble(chunks)`` turns chunks (in claim order) into batch components;
  ``take_batch(n)`` is both at once: for the array storages one chunk already is the
  batch (``take_batch = take_chunk``), the others take, assemble and put back if
  assembling fails (``take_assembled``).
- ``restore(chunks)``: put claimed chunks back as if never taken (FIFO: at the front
  in their original order; pool: back into the pool; heap: back into the heap).
  Restoring may exceed the logical capacity for a while; storages grow instead of
  failing (the engine keeps enqueuers blocked until the size falls below capacity).
- ``dump()`` / ``chunk_elements(chunk)`` / ``load(elements)``: snapshots. Every stored
  element as independent values, in the order takes would see them, without changing
  anything; the elements of a claimed chunk; and storing elements back, in order,
  whatever the capacity.

A FIFO ring is also a ``FillableStorage``: a dequeue that waits at the head of the
queue may have its output batch filled in place (``empty_batch``, ``take_into``),
which saves one copy per element (see ``_engine.py``).

``RingStorage`` (fixed shapes, FIFO). One preallocated array per component of shape
``(slots, *shape)``. Elements live at ring positions ``head, head+1, ..., head+size-1``
(mod ``slots``); the tail slot is ``(head + size) % slots``; free slots = ``slots - size``.
A take that empties the ring sets ``head`` to 0, so a queue that hovers near empty reuses
a few cache-hot slots instead of walking the whole ring (W1: ~7% faster).
A run of k rows starting at position p is at most two slice copies (``p:slots`` and
``0:rest``), so enqueue_many and dequeue_many cost two copies per component at most
and no Python object per element. ``slots == capacity`` except after a restore
overflow or an all-or-nothing batch admitted above capacity, which grow the ring
(linearising it, head 0).

The other storages: ``PoolStorage`` and ``ListPoolStorage`` (random order) in
``_pool.py``; ``DequeStorage`` and ``HeapStorage`` (per-element tuples) in
``_tuples.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError
from ._declare import Components, FixedShape

__all__ = [
    "FillableStorage",
    "RingStorage",
    "Storage",
    "alloc",
    "concat",
    "row",
    "take_assembled",
]

Chunk = Any


class Storage(Protocol):
    """What the engine needs of every storage (see the module docstring)."""

    size: int
    """Elements stored now."""

    def put_one(self, comps: Components) -> None: ...

    def put_rows(self, comps: Components, start: int, stop: int) -> None: ...

    def take_one(self) -> Components: ...

    def take_chunk(self, k: int) -> Chunk: ...

    def assemble(self, chunks: Sequence[Chunk]) -> Components: ...

    def restore(self, chunks: Sequence[Chunk]) -> None: ...

    def dump(self) -> list[Components]:
        """Every stored element, in the order takes would see them (a pool: its dense
        order), as independent values; nothing changes."""
        ...

    def chunk_elements(self, chunk: Chunk) -> list[Components]:
        """The elements of a claimed ``chunk``, in claim order."""
        ...

    def load(self, elements: Sequence[Components]) -> None:
        """Store ``elements`` after those stored, in order, whatever the capacity (a
        restored snapshot)."""
        ...

    def take_batch(self, k: int) -> Components:
        """Remove the next ``k`` elements and return them as batch components (or, if
        they cannot be assembled, put them back and raise)."""
        ...


def take_assembled(storage: Storage, k: int) -> Components:
    """``storage.take_batch(k)`` of a storage whose chunks must be assembled into a batch
    (which may fail: the elements then go back, and the error propagates)."""
    chunk = storage.take_chunk(k)
    try:
        return storage.assemble([chunk])
    except BaseException:
        storage.restore([chunk])
        raise


class FillableStorage(Storage, Protocol):
    """A FIFO storage whose waiting batch dequeue fills its own output batch."""

    def empty_batch(self, n: int) -> Components:
        """Fresh, uninitialised batch arrays for ``n`` elements."""
        ...

    def take_into(self, out: Components, pos: int, k: int) -> None:
        """Remove the next ``k`` elements into ``out[c][pos:pos + k]``."""
        ...


def row(arr: npt.NDArray[Any], i: Any) -> Any:
    """Element ``i`` of a storage array as an independent value."""
    if arr.ndim == 1:
        return arr[i]  # numpy scalar (a copy) or the stored Python object
    return arr[i].copy()


def alloc(
    slots: int, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[FixedShape], owner: str
) -> list[npt.NDArray[Any]]:
    """One array of shape ``(slots, *shape)`` per component.

    Raises:
        ElementSpecError: The arrays cannot be allocated (an absurd capacity); the
            message names the queue, the capacity and the bytes it would take.
    """
    try:
        return [np.empty((slots, *shape), dtype=dt) for dt, shape in zip(dtypes, shapes)]
    except (ValueError, MemoryError, OverflowError) as exc:
        per = sum(math.prod(shape) * dt.itemsize for dt, shape in zip(dtypes, shapes))
        raise ElementSpecError(
            f"{owner}: capacity {slots} cannot be preallocated: {slots} elements of "
            f"{per} bytes take {slots * per:,} bytes ({type(exc).__name__}: {exc})"
        ) from exc


def concat(chunks: Sequence[Components], ncomp: int) -> Components:
    """Batch components from array chunks, in order."""
    if len(chunks) == 1:
        return tuple(chunks[0])
    return tuple(np.concatenate([c[i] for c in chunks]) for i in range(ncomp))


class ArrayStorage(Storage):
    """Fixed-shape elements in preallocated arrays of shape ``(slots, *shape)``, one per
    component (the base of RingStorage and PoolStorage)."""

    def __init__(
        self,
        capacity: int,
        dtypes: Sequence[np.dtype[Any]],
        shapes: Sequence[FixedShape],
        owner: str,
    ) -> None:
        self._dtypes = tuple(dtypes)
        self._shapes = tuple(shapes)
        self._owner = owner
        self._slots = max(capacity, 1)
        self._bufs = alloc(self._slots, dtypes, shapes, owner)
        self._has_objects = any(dt.kind == "O" for dt in dtypes)
        self.size = 0

    def _release(self, *where: Any) -> None:
        """Drop the references that object components hold at the given slots (indices,
        slices or index arrays) once their elements were taken."""
        for buf in self._bufs:
            if buf.dtype.kind == "O":
                for index in where:
                    buf[index] = None

    def _columns(self) -> Components:
        """Copies of the stored rows, one array per component, in take order."""
        raise NotImplementedError

    def dump(self) -> list[Components]:
        return _rows(self._columns())

    def chunk_elements(self, chunk: Components) -> list[Components]:
        return _rows(tuple(np.array(c, copy=True) for c in chunk))

    def load(self, elements: Sequence[Components]) -> None:
        for comps in elements:
            self.put_one(comps)  # (each kind grows when full)

    def _grow(self, slots: int) -> None:
        raise NotImplementedError


def _rows(cols: Components) -> list[Components]:
    """Per-element tuples of batch columns (rows of private copies: independent)."""
    n = len(cols[0]) if cols else 0
    if len(cols) == 1:
        col = cols[0]
        return [(col[j],) for j in range(n)] if col.ndim == 1 else [(row,) for row in col]
    return [tuple(c[j] for c in cols) for j in range(n)]


class RingStorage(ArrayStorage, FillableStorage):
    """Preallocated FIFO ring of fixed-shape elements (see the module docstring)."""

    def __init__(
        self,
        capacity: int,
        dtypes: Sequence[np.dtype[Any]],
        shapes: Sequence[FixedShape],
        owner: str,
    ) -> None:
        super().__init__(capacity, dtypes, shapes, owner)
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
        size = self.size
        if size >= self._slots:  # admitted above capacity (a checkpoint, a restore)
            self._grow(2 * size)
        i = self._head + size
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
        out = tuple(row(buf, i) for buf in self._bufs)
        if self._has_objects:
            self._release(i)
        self._advance(i, 1)
        return out

    def peek(self) -> Components | None:
        """The next element's components, left in place (None: empty)."""
        if self.size == 0:
            return None
        return tuple(buf[self._head] for buf in self._bufs)

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

    take_batch = take_chunk  # (one chunk is already the batch)

    def assemble(self, chunks: Sequence[Components]) -> Components:
        return concat(chunks, len(self._bufs))

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

    def _columns(self) -> Components:
        p, n = self._head, self.size
        first = min(n, self._slots - p)
        return tuple(np.concatenate((buf[p : p + first], buf[: n - first])) for buf in self._bufs)

    def _grow(self, slots: int) -> None:
        """Linearise into a larger ring (only after restores overflow the capacity)."""
        new = alloc(slots, self._dtypes, self._shapes, self._owner)
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
