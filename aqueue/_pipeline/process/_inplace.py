"""Batches written in place: the batch buffers of a process map that a batch stage
follows (``BatchWriter``), and what the batch stage is handed (``BatchRecord``).

When ``batch(n)`` (without ``dynamic_pad``) follows the map, the map's drivers write
the batches themselves (a ``BatchWriter``): the writer cuts *batch buffers* of ``n``
rows out of the stage's shared memory, and the k-th numpy array of each result goes
straight into row ``r`` of column k of its buffer (one copy in all: the worker's). Rows
are assigned when items are taken, in take order (under the turns' lock); a burst never
spans two buffers. The driver that completes a buffer (every row assigned and done, or
the input ended) hands it on as one item, a ``BatchRecord``: its rows (the results, in
order) and, when every row was written in place from row 0, its columns; in buffer
order when the map is ordered (the turns number buffers, not bursts). The map's output
queue thus holds records, a batch each; the batch stage (``run/_stages.py``) takes a
record and stacks its rows, where a component's rows are the rows of one of its columns
taking the column itself (``BatchRecord.column``): no copy, no new allocation. Anything
else (a row that did not fit its column: another dtype or shape; the first buffer,
filled before the result's layout was known) is stacked as usual. Correctness never
depends on the layout: only the check in ``column`` decides.

Alignment. Records line up with the batch stage's batches: every buffer is ``n`` rows
but the first one after a resume, which starts at row ``start_row % n`` (the resumed
items, ahead of it in the queue as records of ``n`` rows, ``records_of``, end with a
record of ``start_row % n`` rows); the last buffer holds what was assigned when the
input ended (``allow_smaller_final_batch`` decides what becomes of it, as for any
leftover).

The counts a stage reports are rows: ``rows_out`` (handed on in records) and
``rows_taken`` (taken out of records by the batch stage); ``fused`` counts the batches
the batch stage took as written.

Invariants:

- Rows are assigned in take order under the turns' taking lock; a burst never spans two
  buffers; a buffer is *complete* when every row is assigned and done, or the input
  ended and every assigned row is done.
- A buffer is handed on once: ``delivered`` is set under the writer's lock by the one
  driver that finds it complete (or cuts it short after a failure).
- A record has columns only if each of its rows was written in place, from row 0, so
  each column's first ``len(rows)`` rows are exactly the rows' arrays.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ._handoff import Reply
from ._shm import Arena

__all__ = ["BatchRecord", "BatchWriter", "Buffer", "records_of"]

_ALIGN = 64
_PENDING = object()  # a row whose result has not come back

Column = np.ndarray[Any, Any]


class BatchRecord:
    """A batch's rows, handed on as one item: the results in order, and the columns
    their arrays were written into (None: not all in place)."""

    __slots__ = ("cols", "in_place", "rows")

    def __init__(self, rows: list[Any], cols: list[Column | None] | None) -> None:
        self.rows = rows
        self.cols = cols
        self.in_place = False  # a column was taken as a batch component

    def column(self, arrays: list[Any]) -> Column | None:
        """The column whose first rows ``arrays`` are, all of them in order (a batch
        component), or None. ``arrays`` are one component of each of ``rows``."""
        if self.cols is None or len(arrays) != len(self.rows):
            return None
        own = getattr(arrays[0], "base", None)  # each row of a column is a view of it
        for col in self.cols:
            if col is not None and col.base is own:
                break
        else:
            return None
        for a in arrays:
            if type(a) is not np.ndarray or a.base is not own:
                return None
        self.in_place = True
        return col if len(arrays) == len(col) else col[: len(arrays)]


def records_of(items: list[Any], n: int) -> list[BatchRecord]:
    """Resumed items as records of ``n`` rows (the last one shorter)."""
    return [BatchRecord(items[k : k + n], None) for k in range(0, len(items), n)]


class Buffer:
    """One batch buffer of a writer: ``n`` rows, filled from row ``r0``."""

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
        cols: list[Column | None] | None,
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


class BatchWriter:
    """The batch buffers of a process map (see the module docstring).

    Args:
        n: The batch size of the batch stage after the map.
        arena: The stage's shared memory.
        number: Numbers each new buffer (the turns' numbering, which, for an ordered
            map, is the buffers' delivery order).
        start_row: Items already in the map's output queue when the run starts (a
            resume): the first buffer starts at this row modulo ``n``, so later
            buffers line up with the batch stage's batches.
    """

    def __init__(self, n: int, arena: Arena, number: Callable[[], int], start_row: int) -> None:
        self.n = n
        self.arena = arena
        self._number = number
        self.layout: list[tuple[np.dtype[Any], tuple[int, ...]]] | None = None
        self.current: Buffer | None = None
        self.ended = False
        self.fused = 0  # batches the batch stage took as written
        self.rows_out = 0  # rows handed on in records
        self.rows_taken = 0  # rows the batch stage took out of records
        self._start_row = start_row % n
        self._lock = threading.Lock()

    def reserve(self) -> Buffer:
        """The buffer the next take goes into (a new one if none has room); called
        under the turns' taking lock."""
        with self._lock:
            buf = self.current
            if buf is None or buf.assigned == self.n:
                r0, self._start_row = self._start_row, 0
                buf = self.current = self._new(self._number(), r0)
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

    def deliver(self, buf: Buffer) -> BatchRecord:
        """The record of a complete buffer, to be handed on (with its columns when every
        row was written in place from row 0)."""
        rows = buf.rows[buf.r0 : buf.assigned]
        buf.rows = []
        cols = None
        if buf.cols is not None:
            if buf.r0 == 0 and buf.foreign == 0:
                cols = buf.cols
            elif buf.foreign:
                self.layout = None  # the results changed form: learn it again
        self.rows_out += len(rows)
        return BatchRecord(rows, cols)

    def cut_short(self, buf: Buffer) -> BatchRecord | None:
        """The record of the rows of ``buf`` done before the first one not done (a
        burst of it failed), or None if there are none; the buffer is delivered then."""
        with self._lock:
            if buf.delivered:
                return None
            buf.delivered = True
            if self.current is buf:
                self.current = None
            rows = buf.rows[buf.r0 : buf.assigned]
            buf.rows = []
        end = next((k for k, row in enumerate(rows) if row is _PENDING), len(rows))
        if not end:
            return None
        self.rows_out += end
        return BatchRecord(rows[:end], None)

    def _new(self, seq: int, r0: int) -> Buffer:
        layout, n = self.layout, self.n
        if layout is None:
            return Buffer(seq, r0, n, None, None)
        offsets: list[int | None] = []
        total = 0
        for dtype, shape in layout:
            if not shape or dtype.kind in "SU":  # 0-d, or text (np.stack's width): no column
                offsets.append(None)
                continue
            total = -(-total // _ALIGN) * _ALIGN
            offsets.append(total)
            total += n * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        block = self.arena.alloc(total)
        base = self.arena.adopt(block)  # freed once every column and row view is gone
        cols: list[Column | None] = []
        spec: list[Any] = []
        for (dtype, shape), off in zip(layout, offsets):
            if off is None:
                cols.append(None)
                spec.append(None)
                continue
            # Each column is an array of its own over the block (the ``base`` of each of
            # its rows), which keeps the block's base alive: ``BatchRecord.column`` tells
            # columns apart by it.
            count = n * int(np.prod(shape, dtype=np.int64))
            own = np.frombuffer(base.data, dtype=dtype, count=count, offset=off)
            cols.append(own.reshape((n, *shape)))
            spec.append((block.chunk, block.offset + off, dtype, shape, n))
        return Buffer(seq, r0, n, cols, tuple(spec))

    def drop(self) -> None:
        """The run is finishing: let go of the buffer being filled (its block is freed
        once no driver still holds it)."""
        with self._lock:
            self.current = None
