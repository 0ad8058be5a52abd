"""Batches written in place: the batch buffers of a process map that a batch stage
follows (``Fuser``).

When ``batch(n)`` (without ``dynamic_pad``) follows the map, the stage writes
the batches itself (a ``Fuser``): it cuts *batch buffers* of ``n`` rows out of the
stage's shared memory, and the k-th numpy array of each result goes straight into row
``r`` of column k of its buffer (one copy in all: the worker's). Rows are assigned when
items are taken, in take order (under the turns' lock); a burst never spans two
buffers. The driver that completes a buffer (every row assigned and done, or the input
ended) hands on its rows as one burst (one ``enqueue_many``, so a buffer's rows lie
together and in order in the map's output queue), in buffer order when the map is
ordered (the turns number buffers, not bursts). The batch stage (``batch_step``, given
``Fuser.whole``) then finds that its ``n`` items are the ``n`` rows of one column and
returns the column itself: no copy, no new allocation. Anything else (a row that did
not fit its column: another dtype or shape; the first buffer, filled before the
result's layout was known; rows after a resume) is a view like any other item, and the
batch stage copies it as usual. Correctness never depends on the layout: only the check
in ``whole`` decides.

Invariants:

- Rows are assigned in take order under the turns' taking lock; a burst never spans two
  buffers; a buffer is *complete* when every row is assigned and done, or the input
  ended and every assigned row is done.
- A buffer's rows are handed on once, whole: ``delivered`` is set under the fuser's
  lock by the one driver that finds it complete.
- ``whole`` returns a column only for a registered column (one whose rows were all
  written in place, from row 0) whose rows are exactly the items; a column's
  registration goes with the column.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from ..flow._turns import ThreadTurns
from ._handoff import Reply
from ._shm import Arena

__all__ = ["Buffer", "Fuser"]

_ALIGN = 64
_PENDING = object()  # a row whose result has not come back


class Buffer:
    """One batch buffer of a fused stage: ``n`` rows, filled from row ``r0``."""

    __slots__ = (
        "assigned",
        "cols",
        "delivered",
        "done",
        "foreign",
        "r0",
        "rows",
        "seq",
        "seqs",
        "spec",
    )

    def __init__(
        self,
        seq: int,
        r0: int,
        n: int,
        cols: list[np.ndarray[Any, Any] | None] | None,
        spec: tuple[Any, ...] | None,
    ) -> None:
        self.seq = seq
        self.r0 = r0
        self.assigned = r0  # rows given to drivers so far (rows r0..assigned-1)
        self.done = r0  # rows whose results are in ``rows``
        self.rows: list[Any] = [_PENDING] * n
        self.cols = cols
        self.spec = spec
        self.foreign = 0  # rows with an array that missed its column
        self.delivered = False
        self.seqs: list[int] = []  # the ledger entries of its bursts


class Fuser:
    """The batch buffers of a fused process map (see the module docstring).

    Args:
        n: The batch size of the batch stage after the map.
        arena: The stage's shared memory.
        turns: The stage's turns (their lock orders takes; for an ordered map they
            number buffers).
        start_row: Items already in the map's output queue when the run starts (a
            resume): the first buffer starts at this row modulo ``n``, so later
            buffers line up with the batch stage's batches.
    """

    def __init__(self, n: int, arena: Arena, turns: ThreadTurns, start_row: int) -> None:
        self.n = n
        self.arena = arena
        self.turns = turns
        self.layout: list[tuple[np.dtype[Any], tuple[int, ...]]] | None = None
        self.current: Buffer | None = None
        self.ended = False
        self.fused = 0  # batches the batch stage took as written
        self._start_row = start_row % n
        self._lock = threading.Lock()
        self._registry: dict[
            int, tuple[weakref.ref[np.ndarray[Any, Any]], int, tuple[int, ...]]
        ] = {}  # id(a column's own array) -> (it, rows handed on, its shape)

    # -- the drivers' side -------------------------------------------------------------------

    def reserve(self) -> Buffer:
        """The buffer the next take goes into (a new one if none has room); called
        under the turns' taking lock."""
        with self._lock:
            buf = self.current
            if buf is None or buf.assigned == self.n:
                r0, self._start_row = self._start_row, 0
                buf = self.current = self._new(self.turns.number(), r0)
            return buf

    def room(self, buf: Buffer) -> int:
        return self.n - buf.assigned

    def assign(self, buf: Buffer, k: int) -> int:
        """Give the next ``k`` rows of ``buf`` to a burst; return the first."""
        with self._lock:
            row0 = buf.assigned
            buf.assigned += k
            return row0

    def done(self, buf: Buffer, row0: int, reply: Reply) -> bool:
        """Store a burst's results from row ``row0``; whether ``buf`` is now complete
        (and so this caller must hand it on)."""
        with self._lock:
            buf.rows[row0 : row0 + len(reply.results)] = reply.results
            buf.done += len(reply.results)
            buf.foreign += reply.foreign
            fits = reply.layout and any(len(shape) for _, shape in reply.layout)
            if self.layout is None and fits:
                self.layout = reply.layout
            return self._complete(buf)

    def input_ended(self) -> Buffer | None:
        """The input has ended: the current buffer, if it is now complete (its caller
        hands it on)."""
        with self._lock:
            self.ended = True
            buf = self.current
            if buf is not None and buf.assigned == buf.r0:  # reserved, never used
                self.current = buf = None  # (its block is freed with it)
            return buf if buf is not None and self._complete(buf) else None

    def _complete(self, buf: Buffer) -> bool:
        if buf.delivered or buf.done < buf.assigned or buf.assigned == buf.r0:
            return False
        if buf.assigned < self.n and not self.ended:
            return False
        buf.delivered = True
        if self.current is buf:
            self.current = None
        return True

    def cut_short(self, buf: Buffer) -> list[Any]:
        """The rows of ``buf`` done before the first one not done (a burst of it
        failed), to be handed on as items; the buffer is delivered then."""
        with self._lock:
            if buf.delivered:
                return []
            buf.delivered = True
            if self.current is buf:
                self.current = None
            rows = buf.rows[buf.r0 : buf.assigned]
            buf.rows = []
        end = next((k for k, row in enumerate(rows) if row is _PENDING), len(rows))
        return rows[:end]

    def deliver(self, buf: Buffer) -> list[Any]:
        """The rows of a complete buffer, to be handed on; register its columns for
        ``whole`` when every row was written in place from row 0."""
        items = buf.rows[buf.r0 : buf.assigned]
        buf.rows = []
        if buf.cols is not None:
            if buf.r0 == 0 and buf.foreign == 0:
                for col in buf.cols:
                    if col is not None:
                        self._register(col, len(items))
            elif buf.foreign:
                self.layout = None  # the results changed form: learn it again
        return items

    def _new(self, seq: int, r0: int) -> Buffer:
        layout, n = self.layout, self.n
        if layout is None:
            return Buffer(seq, r0, n, None, None)
        offsets: list[int | None] = []
        total = 0
        for dtype, shape in layout:
            if not shape or dtype.kind in "SU":  # 0-d, or text (batched as objects): no column
                offsets.append(None)
                continue
            total = -(-total // _ALIGN) * _ALIGN
            offsets.append(total)
            total += n * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        block = self.arena.alloc(total)
        base = self.arena.adopt(block)  # freed once every column and row view is gone
        cols: list[np.ndarray[Any, Any] | None] = []
        spec: list[Any] = []
        for (dtype, shape), off in zip(layout, offsets):
            if off is None:
                cols.append(None)
                spec.append(None)
                continue
            # Each column is an array of its own over the block (its rows' ``base``),
            # which keeps the block's base alive: ``whole`` tells columns apart by it.
            count = n * int(np.prod(shape, dtype=np.int64))
            own = np.frombuffer(base.data, dtype=dtype, count=count, offset=off)
            cols.append(own.reshape((n, *shape)))
            spec.append((block.chunk, block.offset + off, dtype, shape, n))
        return Buffer(seq, r0, n, cols, tuple(spec))

    # -- the batch stage's side ---------------------------------------------------------------

    def _register(self, col: np.ndarray[Any, Any], m: int) -> None:
        own = col.base  # the column's own array, the ``base`` of each of its rows
        assert isinstance(own, np.ndarray)
        key = id(own)
        registry = self._registry

        def forget(_: object) -> None:
            registry.pop(key, None)

        registry[key] = (weakref.ref(own, forget), m, col.shape)

    def whole(self, arrays: list[Any]) -> np.ndarray[Any, Any] | None:
        """The column whose rows ``arrays`` are, all of them in order; else None."""
        own = getattr(arrays[0], "base", None)
        entry = self._registry.get(id(own))
        if entry is None or entry[0]() is not own or entry[1] != len(arrays):
            return None
        for a in arrays:
            if type(a) is not np.ndarray or a.base is not own:
                return None
        # The rows of a registered column reach the batch stage together and in order
        # (one enqueue_many), each once: these are its rows 0..m-1.
        del self._registry[id(own)]
        self.fused += 1
        assert isinstance(own, np.ndarray)
        col = own.reshape(entry[2])
        return col if len(arrays) == len(col) else col[: len(arrays)]

    def drop(self) -> None:
        """The run is finishing: let go of the buffer being filled (its block is freed
        once no driver still holds it)."""
        with self._lock:
            self.current = None
