"""Process map stages: the drivers' steps, and batches written in place (fusion).

``map(fn, concurrency=C, executor="process")`` runs as C *driver* threads in the main
process, each the step of one worker process of the stage's ``WorkerPool``
(``_pool.py``). A driver works as a thread worker does (``_maps.py``): it takes a burst
(about ``PROCESS_BURST_S`` of work in the worker: one hand-off per burst, not per item),
hands it to its worker in one call, and returns the results as one burst; so ordered
delivery (``ThreadTurns``), pauses for checkpoints (items in hand finish first) and the
stop are the thread map's. Only the measurements differ: a worker's busy time is what
it spent in ``fn`` (it says so in each answer), and the driver's own CPU time, the
*hand-off*, is counted apart (``Worker.handoff``).

Fusion. When ``batch(n)`` (without ``dynamic_pad``) follows the map, the stage writes
the batches itself (a ``Fuser``): it cuts *batch buffers* of ``n`` rows out of the
stage's shared memory, and the k-th numpy array of each result goes straight into row
``r`` of column k of its buffer (one copy in all: the worker's). Rows are assigned when
items are taken, in take order; a burst never spans two buffers. The driver that
completes a buffer (every row assigned and done, or the input ended) hands on its rows
as one burst (one ``enqueue_many``, so a buffer's rows lie together and in order in the
map's output queue), in buffer order when the map is ordered (the turns number buffers,
not bursts). The batch stage (``batch_step``, given ``Fuser.whole``) then finds that
its ``n`` items are the ``n`` rows of one column and returns the column itself: no
copy, no new allocation. Anything else (a row that did not fit the column: another
dtype or shape; the first buffer, filled before the result's layout was known; rows
after a resume) is a view like any other item, and the batch stage copies it as usual.
Correctness never depends on the layout: only the check in ``whole`` decides.

Invariants:

- Every item a driver took is in its hands (in a call), in a finished burst it returns
  or that waits for its turn, or, in a fused stage, done in a buffer not yet handed on
  (``Fuser.held_items``: the rows of the current buffer, at rest all done).
- A buffer's rows are handed on once, whole: ``delivered`` is set under the fuser's
  lock by the one driver that finds it complete.
- ``whole`` returns a column only for a registered column (``registry``: one whose
  rows were all written in place, from row 0) whose rows are exactly the items; a
  column's registration goes with the column.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._errors import OutOfRangeError, QueueClosedError
from ._control import Stage
from ._maps import ThreadTurns
from ._meter import Worker as Meter_Worker
from ._pool import Reply, Worker
from ._shm import Arena
from ._stages import Burst, noted, pack

if TYPE_CHECKING:
    from .._queues._views import BlockingQueue

__all__ = ["PROCESS_BURST_S", "Fuser", "Sizes", "fused_map_step", "process_map_step"]

PROCESS_BURST_S = 0.004  # a process worker's burst holds about this much work
_BURST_MAX = 256
_ALIGN = 64
_perf = time.perf_counter
_cpu = time.thread_time


def process_burst_size(item_s: float) -> int:
    """Items per burst for a process worker, when an item took it ``item_s`` seconds
    (0: not known yet): about ``PROCESS_BURST_S`` of work, 1 to ``_BURST_MAX``."""
    if item_s <= 0.0:
        return 1
    n = int(PROCESS_BURST_S / item_s)
    return 1 if n < 1 else n if n < _BURST_MAX else _BURST_MAX


class Sizes:
    """How much scratch space a burst's results take, per item (shared by a stage's
    drivers; a stale reading only costs one more request for space)."""

    __slots__ = ("per_item",)

    def __init__(self) -> None:
        self.per_item = 0.0

    def estimate(self, n: int) -> int:
        return 0 if self.per_item <= 0.0 else int(self.per_item * n) + _ALIGN * n

    def update(self, used: int, n: int) -> None:
        self.per_item = max(used / n, 0.9 * self.per_item)


def _account(w: Meter_Worker, reply: Reply, n: int, cpu0: float, sizes: Sizes) -> None:
    w.busy += reply.busy_s
    per = reply.busy_s / n
    w.item_s = per if w.item_s == 0.0 else 0.75 * w.item_s + 0.25 * per
    w.handoff += _cpu() - cpu0
    sizes.update(reply.scratch_bytes, n)


def process_map_step(
    worker: Worker,
    source: BlockingQueue[Any],
    stage: Stage,
    turns: ThreadTurns | None,
    sizes: Sizes,
) -> Callable[[], Burst]:
    """A driver's step: take a burst, run it in the worker, return the results."""
    meter, label = stage.meter, stage.label
    w = meter.worker()
    check = stage.control.check

    def step() -> Burst:
        if turns is not None and w.turn >= 0:
            turns.release(w.turn)  # the runner enqueued our previous burst
            w.turn = -1
        t0 = meter.began(w)
        stage.start_thread()
        n = process_burst_size(w.item_s)
        if turns is None:
            burst = source.dequeue_burst(n)
        else:
            turns.count_taking(1)
            try:
                with turns.taking:
                    burst = source.dequeue_burst(n)
                    seq = turns.number()
            finally:
                turns.count_taking(-1)
        meter.got(t0)
        cpu0 = _cpu()
        try:
            reply = worker.call(burst.tolist(), scratch=sizes.estimate(len(burst)), check=check)
        except QueueClosedError:
            raise
        except Exception as exc:
            noted(exc, label)
            raise
        _account(w, reply, len(burst), cpu0, sizes)
        out = reply.results
        w.returned = _perf()
        if turns is not None:
            turns.wait(seq, out)
            w.turn = seq
        return pack(out)

    return step


class _Buffer:
    """One batch buffer of a fused stage: ``n`` rows, filled from row ``r0``."""

    __slots__ = ("assigned", "cols", "delivered", "done", "foreign", "r0", "rows", "seq", "spec")

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
        self.rows: list[Any] = [None] * n
        self.cols = cols
        self.spec = spec
        self.foreign = 0  # rows with an array that missed its column
        self.delivered = False


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
        self.current: _Buffer | None = None
        self.ended = False
        self.fused = 0  # batches the batch stage took as written
        self._start_row = start_row % n
        self._lock = threading.Lock()
        self._registry: dict[
            int, tuple[weakref.ref[np.ndarray[Any, Any]], int, tuple[int, ...]]
        ] = {}  # id(a column's own array) -> (it, rows handed on, its shape)

    # -- the drivers' side -------------------------------------------------------------------

    def reserve(self) -> _Buffer:
        """The buffer the next take goes into (a new one if none has room); called
        under the turns' taking lock."""
        with self._lock:
            buf = self.current
            if buf is None or buf.assigned == self.n:
                r0, self._start_row = self._start_row, 0
                buf = self.current = self._new(self.turns.number(), r0)
            return buf

    def room(self, buf: _Buffer) -> int:
        return self.n - buf.assigned

    def assign(self, buf: _Buffer, k: int) -> int:
        """Give the next ``k`` rows of ``buf`` to a burst; return the first."""
        with self._lock:
            row0 = buf.assigned
            buf.assigned += k
            return row0

    def done(self, buf: _Buffer, row0: int, reply: Reply) -> bool:
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

    def input_ended(self) -> _Buffer | None:
        """The input has ended: the current buffer, if it is now complete (its caller
        hands it on)."""
        with self._lock:
            self.ended = True
            buf = self.current
            if buf is not None and buf.assigned == buf.r0:  # reserved, never used
                self.current = buf = None  # (its block is freed with it)
            return buf if buf is not None and self._complete(buf) else None

    def _complete(self, buf: _Buffer) -> bool:
        if buf.delivered or buf.done < buf.assigned or buf.assigned == buf.r0:
            return False
        if buf.assigned < self.n and not self.ended:
            return False
        buf.delivered = True
        if self.current is buf:
            self.current = None
        return True

    def deliver(self, buf: _Buffer) -> list[Any]:
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

    def _new(self, seq: int, r0: int) -> _Buffer:
        layout, n = self.layout, self.n
        if layout is None:
            return _Buffer(seq, r0, n, None, None)
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
        return _Buffer(seq, r0, n, cols, tuple(spec))

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

    # -- checkpoints ------------------------------------------------------------------------

    def held_items(self) -> list[Any]:
        """The rows done in the current buffer, in order (at rest: every row assigned)."""
        buf = self.current
        if buf is None or buf.delivered:
            return []
        return list(buf.rows[buf.r0 : buf.done])


def fused_map_step(
    worker: Worker,
    source: BlockingQueue[Any],
    stage: Stage,
    turns: ThreadTurns,
    fuser: Fuser,
    sizes: Sizes,
    ordered: bool,
) -> Callable[[], Burst]:
    """A driver's step in a fused stage: take bursts and run them until a buffer it
    worked on is complete, then return that buffer's rows."""
    meter, label = stage.meter, stage.label
    w = meter.worker()
    check = stage.control.check

    def deliver(buf: _Buffer) -> Burst:
        items = fuser.deliver(buf)
        w.returned = _perf()
        if ordered:
            turns.wait(buf.seq, items)
            w.turn = buf.seq
        return pack(items)

    def step() -> Burst:
        if ordered and w.turn >= 0:
            turns.release(w.turn)
            w.turn = -1
        while True:
            t0 = meter.began(w)
            stage.start_thread()
            last: _Buffer | None = None
            turns.count_taking(1)
            try:
                with turns.taking:
                    buf = fuser.reserve()
                    n = min(process_burst_size(w.item_s), fuser.room(buf))
                    try:
                        burst = source.dequeue_burst(n)
                    except OutOfRangeError:
                        last = fuser.input_ended()
                        if last is None:
                            raise
                    else:
                        row0 = fuser.assign(buf, len(burst))
            finally:
                turns.count_taking(-1)
            if last is not None:
                return deliver(last)
            meter.got(t0)
            cpu0 = _cpu()
            try:
                reply = worker.call(
                    burst.tolist(),
                    scratch=sizes.estimate(len(burst)),
                    row0=row0,
                    cols=buf.cols,
                    spec=buf.spec,
                    want_layout=fuser.layout is None,
                    check=check,
                )
            except QueueClosedError:
                raise
            except Exception as exc:
                noted(exc, label)
                raise
            _account(w, reply, len(burst), cpu0, sizes)
            if fuser.done(buf, row0, reply):
                return deliver(buf)

    return step
