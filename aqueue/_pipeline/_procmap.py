"""Process map stages: the drivers' steps, the ledger of bursts in hand, and batches
written in place (fusion).

``map(fn, concurrency=C, executor="process")`` runs as C *driver* threads in the main
process, each the step of one worker process of the stage's ``WorkerPool``
(``_pool.py``). A driver works as a thread worker does (``_maps.py``): it takes a
burst (about ``PROCESS_BURST_S`` of work in the worker: one hand-off per burst, not per
item), hands it to its worker and returns the results as one burst; ordered delivery
uses the same turns. Two differences:

- Prefetch. A driver keeps up to ``WINDOW`` bursts sent to its worker: before it
  receives a burst's results it sends the next one (if items are there now), so the
  worker starts on it at once instead of waiting for the main process to hand the
  results on, take and send again (on a loaded machine the main process can take
  milliseconds to be scheduled). It reaches its pause point only with nothing sent.
- The ledger. Every burst a stage has taken and not handed on (returned, or delivered
  in a batch buffer) is in its ``Ledger``, with its inputs and, once received, its
  results. A checkpoint (``_checkpoint.py``) reads it: the results of the bursts
  received, up to the first one not received (all received ones, when the map is not
  ordered), belong after the stage's output queue's items; the inputs of the rest go
  back in front of its input queue's items. A driver waiting for a result is not at
  rest (items in a worker's hands finish before the cut); one parked on a full output
  queue or waiting for its turn is, with the bursts it has sent in the ledger.

Measurements: a worker's busy time is what it spent in ``fn`` (it says so in each
answer), and the driver's own CPU time, the *hand-off*, is counted apart.

Fusion. When ``batch(n)`` (without ``dynamic_pad``) follows the map, the stage writes
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

- Every item a stage took is in its ledger, in a burst returned to its runner (so in
  its output queue, or a pending enqueue of it), or delivered in a batch buffer.
- Ledger entries change only under its lock, and each change moves ``version`` (a
  checkpoint's sign that something moved while it looked).
- A buffer's rows are handed on once, whole: ``delivered`` is set under the fuser's
  lock by the one driver that finds it complete.
- ``whole`` returns a column only for a registered column (one whose rows were all
  written in place, from row 0) whose rows are exactly the items; a column's
  registration goes with the column.
"""

from __future__ import annotations

import collections
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._errors import OutOfRangeError, QueueClosedError
from ._control import Stage
from ._maps import ThreadTurns
from ._meter import Worker as MeterWorker
from ._pool import Reply, Sent, Worker
from ._shm import Arena
from ._stages import Burst, noted, pack

if TYPE_CHECKING:
    from .._queues._views import BlockingQueue

__all__ = [
    "PROCESS_BURST_S",
    "WINDOW",
    "Fuser",
    "Ledger",
    "Sizes",
    "fused_map_step",
    "process_map_step",
]

PROCESS_BURST_S = 0.008  # a process worker's burst holds at least this much work
WINDOW = 2  # bursts a driver keeps sent to its worker (one worked on, one waiting)
_ITEM_HANDOFF_S = 10e-6  # bursts grow until a driver's CPU per item is at most this,
_HANDOFF_SHARE = 0.25  # and until all hand-offs take at most this share of a core,
_LONGEST_BURST_S = 0.05  # but hold at most this much work
_BURST_MAX = 256
_ALIGN = 64
_perf = time.perf_counter
_cpu = time.thread_time


def process_burst_size(item_s: float, cost_s: float, workers: int) -> int:
    """Items per burst for a process worker, when an item took it ``item_s`` seconds
    (0: not known yet) and a burst costs its driver ``cost_s`` seconds of main-process
    CPU: at least ``PROCESS_BURST_S`` of work, and enough items that the hand-off costs
    at most ``_ITEM_HANDOFF_S`` per item and the hand-offs of all ``workers`` take at
    most ``_HANDOFF_SHARE`` of one core (so the main process keeps up however many
    workers it feeds); at most ``_LONGEST_BURST_S`` of work; 1 to ``_BURST_MAX``."""
    if item_s <= 0.0:
        return 1
    work = max(PROCESS_BURST_S, workers * cost_s / _HANDOFF_SHARE)
    n = min(max(work / item_s, cost_s / _ITEM_HANDOFF_S), _LONGEST_BURST_S / item_s)
    return 1 if n < 1 else int(n) if n < _BURST_MAX else _BURST_MAX


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


class Ledger:
    """The bursts a process stage took and has not handed on (see the module
    docstring): by number, in take order, each its inputs and its results (None until
    received)."""

    __slots__ = ("_entries", "_lock", "_next", "version")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, list[Any]] = {}
        self._next = 0
        self.version = 0

    def taken(self, inputs: list[Any]) -> int:
        """A burst was taken: its number."""
        with self._lock:
            seq = self._next
            self._next += 1
            self._entries[seq] = [inputs, None]
            self.version += 1
            return seq

    def received(self, seq: int, results: list[Any]) -> None:
        with self._lock:
            self._entries[seq][1] = results
            self.version += 1

    def handed(self, seqs: Iterable[int]) -> None:
        """These bursts left the stage (returned to its runner, or in a batch)."""
        with self._lock:
            for seq in seqs:
                del self._entries[seq]
            self.version += 1

    def cut(self, ordered: bool) -> tuple[list[Any], list[Any]]:
        """(results that belong after the output queue's items, inputs that go back in
        front of the input queue's), for a checkpoint."""
        outputs: list[Any] = []
        inputs: list[Any] = []
        with self._lock:
            gap = False
            for seq in sorted(self._entries):
                given, results = self._entries[seq]
                if results is None or (ordered and gap):
                    gap = True
                    inputs.extend(given)
                else:
                    outputs.extend(results)
        return outputs, inputs


def _try_take(source: BlockingQueue[Any], n: int) -> list[Any] | None:
    """Up to ``n`` items there now, without waiting (None: none, or the input ended)."""
    try:
        return list(source.dequeue_burst(n, timeout=0))
    except (TimeoutError, OutOfRangeError):
        return None


class _Pace:
    """A driver's running figures: seconds of work per item (in its worker) and of
    main-process CPU per burst (sending and receiving), for ``process_burst_size``."""

    __slots__ = ("cost_s", "workers")

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.cost_s = 0.0

    def burst(self, w: MeterWorker) -> int:
        return process_burst_size(w.item_s, self.cost_s, self.workers)


def _account(w: MeterWorker, pace: _Pace, reply: Reply, n: int, cpu: float, sizes: Sizes) -> None:
    """Record a received burst: the worker's time in ``fn``, the driver's CPU ``cpu``
    (this receive and the burst's send), the scratch space it took."""
    w.busy += reply.busy_s
    per = reply.busy_s / n
    w.item_s = per if w.item_s == 0.0 else 0.75 * w.item_s + 0.25 * per
    w.handoff += cpu
    pace.cost_s = cpu if pace.cost_s == 0.0 else 0.75 * pace.cost_s + 0.25 * cpu
    sizes.update(reply.scratch_bytes, n)


def process_map_step(
    worker: Worker,
    source: BlockingQueue[Any],
    stage: Stage,
    turns: ThreadTurns | None,
    ledger: Ledger,
    sizes: Sizes,
) -> Callable[[], Burst]:
    """A driver's step: keep its worker fed (``WINDOW`` bursts), return the results of
    the oldest burst sent."""
    meter, label, control = stage.meter, stage.label, stage.control
    w = meter.worker()
    pace = _Pace(len(worker.pool.workers))
    sent: collections.deque[tuple[Sent, int, int]] = collections.deque()  # (sent, seq, turn)

    def send(items: list[Any]) -> None:
        """Number ``items`` (a turn, for an ordered map: the caller holds the turns'
        taking lock) and send them."""
        turn = -1 if turns is None else turns.number()
        seq = ledger.taken(items)
        cpu0 = _cpu()
        out = worker.send(items, scratch=sizes.estimate(len(items)), check=control.check)
        out.cpu = _cpu() - cpu0
        sent.append((out, seq, turn))

    def take(wait: bool) -> None:
        n = pace.burst(w)
        items = source.dequeue_burst(n).tolist() if wait else _try_take(source, n)
        if items:
            send(items)

    def step() -> Burst:
        if turns is not None and w.turn >= 0:
            turns.release(w.turn)  # the runner enqueued our previous burst
            w.turn = -1
        if not sent:
            t0 = meter.began(w)
            stage.start_thread()  # holding nothing
            if turns is None:
                take(wait=True)
            else:
                turns.count_taking(1)
                try:
                    with turns.taking:
                        take(wait=True)
                finally:
                    turns.count_taking(-1)
            meter.got(t0)
        if len(sent) < WINDOW and not control.pausing:
            if turns is None:
                take(wait=False)
            elif turns.taking.acquire(blocking=False):  # (else another driver is taking)
                try:
                    take(wait=False)
                finally:
                    turns.taking.release()
        out, seq, turn = sent.popleft()
        cpu0 = _cpu()
        try:
            reply = worker.receive(out)
        except QueueClosedError:
            raise
        except Exception as exc:
            noted(exc, label)
            raise
        ledger.received(seq, reply.results)
        _account(w, pace, reply, out.n, _cpu() - cpu0 + out.cpu, sizes)
        if turns is not None:
            turns.wait(turn, [])  # (the results are in the ledger meanwhile)
            w.turn = turn
        ledger.handed((seq,))
        w.returned = _perf()
        return pack(reply.results)

    return step


class _Buffer:
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
        self.rows: list[Any] = [None] * n
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


def fused_map_step(
    worker: Worker,
    source: BlockingQueue[Any],
    stage: Stage,
    turns: ThreadTurns,
    fuser: Fuser,
    ledger: Ledger,
    sizes: Sizes,
    ordered: bool,
) -> Callable[[], Burst]:
    """A driver's step in a fused stage: keep its worker fed, store the results in
    their buffers, and return the rows of a buffer it completes."""
    meter, label, control = stage.meter, stage.label, stage.control
    w = meter.worker()
    pace = _Pace(len(worker.pool.workers))
    sent: collections.deque[tuple[Sent, int, _Buffer]] = collections.deque()

    def take(wait: bool) -> _Buffer | None:
        """Take and send a burst into the current buffer (waiting for items when
        ``wait``); the buffer to hand on when the input has ended and it is complete.
        The caller holds the turns' taking lock."""
        buf = fuser.reserve()
        n = min(pace.burst(w), fuser.room(buf))
        if wait:
            try:
                items = source.dequeue_burst(n).tolist()
            except OutOfRangeError:
                last = fuser.input_ended()
                if last is None:
                    raise
                return last
        else:
            got = _try_take(source, n)
            if not got:
                return None
            items = got
        row0 = fuser.assign(buf, len(items))
        seq = ledger.taken(items)
        buf.seqs.append(seq)
        cpu0 = _cpu()
        out = worker.send(
            items,
            scratch=sizes.estimate(len(items)),
            row0=row0,
            cols=buf.cols,
            spec=buf.spec,
            want_layout=fuser.layout is None,
            check=control.check,
        )
        out.cpu = _cpu() - cpu0
        sent.append((out, seq, buf))
        return None

    def deliver(buf: _Buffer) -> Burst:
        if ordered:
            turns.wait(buf.seq, [])  # (its rows are in the ledger meanwhile)
            w.turn = buf.seq
        items = fuser.deliver(buf)
        ledger.handed(buf.seqs)
        w.returned = _perf()
        return pack(items)

    def step() -> Burst:
        if ordered and w.turn >= 0:
            turns.release(w.turn)
            w.turn = -1
        while True:
            if not sent:
                t0 = meter.began(w)
                stage.start_thread()  # holding nothing
                turns.count_taking(1)
                try:
                    with turns.taking:
                        last = take(wait=True)
                finally:
                    turns.count_taking(-1)
                if last is not None:
                    return deliver(last)
                meter.got(t0)
            if len(sent) < WINDOW and not control.pausing and turns.taking.acquire(False):
                try:
                    take(wait=False)
                finally:
                    turns.taking.release()
            out, seq, buf = sent.popleft()
            cpu0 = _cpu()
            try:
                reply = worker.receive(out)
            except QueueClosedError:
                raise
            except Exception as exc:
                noted(exc, label)
                raise
            ledger.received(seq, reply.results)
            _account(w, pace, reply, out.n, _cpu() - cpu0 + out.cpu, sizes)
            if fuser.done(buf, out.row0, reply):
                return deliver(buf)

    return step
