"""Storages of per-element tuples, and the one implementation of padded stacking.

Queues without declared shapes keep each element as a tuple of components (copied on
admission, so later changes by the caller cannot leak in); batches are built by
``stack`` when taken.

``DequeStorage`` (FIFO): FIFOQueue[Any] without declared shapes, and PaddingFIFOQueue with
``None`` dimensions (``assemble`` pads each component to the batch maximum).

``HeapStorage`` (ascending int64 priority, component 0): a binary heap of
``(priority, sequence, comps)``; the sequence number keeps insertion order among equal
priorities, and restored entries keep theirs.

``pad_stack`` is the padding every part of aqueue uses (PaddingFIFOQueue batches, the
pipeline's ``batch(dynamic_pad=True)``, TF's ``dynamic_pad``): arrays of one rank are
padded at the end of each dimension to the largest, with 0 for numbers, ``""`` for str
and objects, ``b""`` for bytes.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError
from ._declare import Components
from ._storage import Storage, take_assembled

__all__ = ["DequeStorage", "HeapStorage", "TupleStorage", "own", "pad_stack", "stack"]


def pad_value(dt: np.dtype[Any]) -> Any:
    """What padding fills a ``dt`` array with."""
    if dt.kind == "U":
        return ""
    if dt.kind == "S":
        return b""
    if dt.kind == "O":
        return ""
    return 0


def pad_stack(
    arrays: Sequence[npt.NDArray[Any]], dtype: np.dtype[Any], *, owner: str = "batch"
) -> npt.NDArray[Any]:
    """Stack arrays of one rank into a new axis 0, padding each to the largest shape.

    Raises:
        ElementSpecError: The arrays differ in rank.
    """
    ranks = {a.ndim for a in arrays}
    if len(ranks) > 1:
        raise ElementSpecError(f"{owner}: cannot pad items of different ranks {sorted(ranks)}")
    if not arrays:
        return np.empty((0,), dtype=dtype)
    full = tuple(max(a.shape[d] for a in arrays) for d in range(arrays[0].ndim))
    out = np.full((len(arrays), *full), pad_value(dtype), dtype=dtype)
    for i, a in enumerate(arrays):
        where: tuple[Any, ...] = (i, *(slice(0, n) for n in a.shape))
        out[where] = a
    return out


def stack(elements: Sequence[Components], dtypes: Sequence[np.dtype[Any]], pad: bool) -> Components:
    """Stack per-element tuples into batch components, padding None dimensions if asked."""
    out = []
    for i, dt in enumerate(dtypes):
        # An object component holds any Python object as one value, tuples and lists
        # included: only an array is more than one value there.
        if dt.kind == "O":
            scalars = all(not isinstance(e[i], np.ndarray) for e in elements)
        else:
            scalars = all(np.ndim(e[i]) == 0 for e in elements)
        if elements and scalars:
            col = np.empty(len(elements), dtype=dt)
            for j, e in enumerate(elements):
                col[j] = e[i]  # scalars: no padding, no nested 0-d arrays
            out.append(col)
            continue
        parts = [np.asarray(e[i], dtype=dt) for e in elements]
        if pad and parts:
            out.append(pad_stack(parts, dt))
        elif parts:
            out.append(np.stack(parts))
        else:
            out.append(np.empty((0,), dtype=dt))
    return tuple(out)


def own(comps: Components) -> Components:
    """Copies of a converted element, so later changes by the caller cannot leak in."""
    return tuple(
        (c[()] if c.ndim == 0 else c.copy()) if isinstance(c, np.ndarray) else c for c in comps
    )


class TupleStorage(Storage):
    """Shared admission for storages that keep one tuple per element in ``_items``."""

    _items: deque[Components] | list[Components]

    # Snapshots get copies, and loaded elements are copied in: a dequeued array, which
    # its caller may change in place, is never shared with a snapshot.

    def dump(self) -> list[Components]:
        return [own(e) for e in self._items]

    def chunk_elements(self, chunk: list[Components]) -> list[Components]:
        return [own(e) for e in chunk]

    def load(self, elements: Sequence[Components]) -> None:
        self._items.extend(own(e) for e in elements)
        self.size += len(elements)

    def put_one(self, comps: Components) -> None:
        self._items.append(own(comps))
        self.size += 1

    def put_rows(self, comps: Components, start: int, stop: int) -> None:
        for j in range(start, stop):
            self._items.append(own(tuple(c[j] for c in comps)))
        self.size += max(0, stop - start)

    def take_batch(self, k: int) -> Components:
        return take_assembled(self, k)


class DequeStorage(TupleStorage):
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
        return stack(elements, self._dtypes, self._pad)

    def restore(self, chunks: Sequence[list[Components]]) -> None:
        elements = [e for chunk in chunks for e in chunk]
        self._items.extendleft(reversed(elements))
        self.size += len(elements)


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
        self._push(own(comps))

    def put_rows(self, comps: Components, start: int, stop: int) -> None:
        for j in range(start, stop):
            self._push(own(tuple(c[j] for c in comps)))

    def take_one(self) -> Components:
        self.size -= 1
        return heapq.heappop(self._heap)[2]

    def take_chunk(self, k: int) -> list[tuple[int, int, Components]]:
        self.size -= k
        return [heapq.heappop(self._heap) for _ in range(k)]

    def take_batch(self, k: int) -> Components:
        return take_assembled(self, k)

    def assemble(self, chunks: Sequence[list[tuple[int, int, Components]]]) -> Components:
        entries = sorted(e for chunk in chunks for e in chunk)
        return stack([e[2] for e in entries], self._dtypes, False)

    def dump(self) -> list[Components]:  # (copies: see TupleStorage.dump)
        return [own(entry[2]) for entry in sorted(self._heap)]

    def chunk_elements(self, chunk: list[tuple[int, int, Components]]) -> list[Components]:
        return [own(entry[2]) for entry in sorted(chunk)]

    def load(self, elements: Sequence[Components]) -> None:
        for comps in elements:
            self._push(own(comps))

    def restore(self, chunks: Sequence[list[tuple[int, int, Components]]]) -> None:
        for chunk in chunks:
            for entry in chunk:
                heapq.heappush(self._heap, entry)
                self.size += 1
