"""A process map's step: one driver per worker process, and the ledger of bursts in hand.

``map(fn, concurrency=C, executor="process")`` runs as C *driver* threads in the main
process, each the step of one worker process of the stage's ``WorkerPool``
(``_workers.py``). A driver works as a thread worker does (``run/_maps.py``): it takes a
burst (about ``PROCESS_BURST_S`` of work in the worker: one hand-off per burst, not per
item), hands it to its worker and returns the results as one burst; ordered delivery
uses the same turns (``flow/_turns.py``). Two differences:

- Prefetch. A driver keeps up to ``WINDOW`` bursts sent to its worker: before it
  receives a burst's results it sends the next one (if items are there now), so the
  worker starts on it at once instead of waiting for the main process to hand the
  results on, take and send again (on a loaded machine the main process can take
  milliseconds to be scheduled). It reaches its pause point only with nothing sent.
- The ledger. Every burst a stage has taken and not handed on (returned, or in a batch
  record handed on) is in its ``Ledger``, with its inputs and, once received, its
  results. A checkpoint (``run/_checkpoint.py``) reads it: the results of the bursts
  received, up to the first one not received (all received ones, when the map is not
  ordered), belong after the stage's output queue's items; the inputs of the rest go
  back in front of its input queue's items. A driver waiting for a result is not at
  rest (items in a worker's hands finish before the cut); one parked on a full output
  queue or waiting for its turn is, with the bursts it has sent in the ledger.

Measurements: a worker's busy time is what it spent in ``fn`` (it says so in each
answer), and the driver's own CPU time, the *hand-off*, is counted apart.

Batches written in place. When ``batch(n)`` (without ``dynamic_pad``) follows the map,
the workers write the batches in place: the same driver, given the stage's
``BatchWriter`` (``_inplace.py``), takes its bursts into the rows of the current batch
buffer and, once it completes one, hands on the buffer's record (one item, a batch)
instead of each burst's results.

Failures: ``fn`` raising on an item (or an item that does not pickle) ends the burst
there; the driver hands on the results before it (a buffer's rows before it, with a
writer), in their turn, drops the bursts sent after it, and raises the exception at its
next call.

Invariants:

- Every item a stage took is in its ledger, in a burst returned to its runner (so in
  its output queue, or a pending enqueue of it), or in a batch record handed on.
- Ledger entries change only under its lock, and each change moves ``version`` (a
  checkpoint's sign that something moved while it looked).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..._errors import OutOfRangeError, QueueClosedError
from ..flow._bursts import Burst, noted, pack
from ..flow._control import Stage
from ..flow._meter import Worker as MeterWorker
from ..flow._turns import ThreadTurns
from ._handoff import Reply, Sent
from ._inplace import BatchWriter, Buffer
from ._workers import Worker

if TYPE_CHECKING:
    from ..._queues._views import BlockingQueue

__all__ = ["PROCESS_BURST_S", "WINDOW", "Ledger", "Sizes", "map_step"]

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


def _receive(
    worker: Worker,
    out: Sent,
    seq: int,
    label: str,
    ledger: Ledger,
    w: MeterWorker,
    pace: _Pace,
    sizes: Sizes,
) -> Reply:
    """Read the answer to burst ``out`` (ledger number ``seq``): its results go into the
    ledger, and the worker's time in ``fn``, the driver's CPU (this receive and the
    burst's send) and the scratch space it took into the figures. An exception from
    ``fn`` gets the stage's name in a note."""
    cpu0 = _cpu()
    try:
        reply = worker.receive(out)
    except QueueClosedError:
        raise
    except Exception as exc:
        noted(exc, label)
        raise
    if reply.error is not None:
        noted(reply.error, label)
    ledger.received(seq, reply.results)
    n, cpu = out.n, _cpu() - cpu0 + out.cpu
    w.busy += reply.busy_s
    w.cpu += reply.cpu_s
    per = reply.busy_s / n
    w.item_s = per if w.item_s == 0.0 else 0.75 * w.item_s + 0.25 * per
    w.handoff += cpu
    pace.cost_s = cpu if pace.cost_s == 0.0 else 0.75 * pace.cost_s + 0.25 * cpu
    sizes.update(reply.scratch_bytes, n)
    return reply


def map_step(
    worker: Worker,
    source: BlockingQueue[Any],
    stage: Stage,
    turns: ThreadTurns | None,
    ledger: Ledger,
    sizes: Sizes,
    *,
    ordered: bool,
    writer: BatchWriter | None = None,
) -> Callable[[], Burst]:
    """A driver's step: keep its worker fed (``WINDOW`` bursts sent) and hand on the
    results of the oldest burst sent: as they are, or, with a ``writer``, written into
    the rows of its batch buffer, handing on the buffer once that completes.

    Args:
        worker: The worker process this driver feeds.
        source: The stage's input queue (its thread view).
        stage: The stage's control and meter.
        turns: The stage's turns: their lock orders the drivers' takes and their
            numbers give the delivery order (bursts; with a writer, buffers). Always
            given with a writer (rows are assigned in take order), else only for an
            ordered map.
        ledger: The stage's bursts in hand.
        sizes: The stage's scratch space per item.
        ordered: Deliver in turn.
        writer: The stage's batch writer, when a batch stage follows.
    """
    meter, label, control, gate = stage.meter, stage.label, stage.control, stage.gate
    w = meter.worker()
    slot = worker.index
    pace = _Pace(len(worker.pool.workers))
    # Each burst in flight: what was sent, its ledger number, and where its results go:
    # its batch buffer (with a writer), else its turn (-1: unordered).
    sent: collections.deque[tuple[Sent, int, Buffer | int]] = collections.deque()
    failed: list[BaseException] = []  # raised by fn after the results handed on before it

    def take(wait: bool) -> Buffer | None:
        """Take a burst (waiting for items when ``wait``) and send it; with a writer,
        the buffer to hand on when the input has ended and it is complete. The caller
        holds the turns' taking lock, if there are turns."""
        n = pace.burst(w)
        buf = None
        if writer is not None:
            buf = writer.reserve()
            n = min(n, writer.room(buf))
        if not wait:
            items = _try_take(source, n)
        else:
            try:
                items = source.dequeue_burst(n).tolist()
            except OutOfRangeError:
                last = None if writer is None else writer.input_ended()
                if last is None:
                    raise
                return last
        if not items:
            return None
        seq = ledger.taken(items)
        scratch = sizes.estimate(len(items))
        cpu0 = _cpu()
        if buf is None:
            where: Buffer | int = -1 if turns is None else turns.number()
            out = worker.send(items, scratch=scratch, check=stage.check)
        else:
            assert writer is not None
            row0 = writer.assign(buf, len(items))
            buf.seqs.append(seq)
            where = buf
            out = worker.send(
                items,
                scratch=scratch,
                row0=row0,
                cols=buf.cols,
                spec=buf.spec,
                want_layout=writer.layout is None,
                check=stage.check,
            )
        out.cpu = _cpu() - cpu0
        sent.append((out, seq, where))
        return None

    def taken(wait: bool) -> Buffer | None:
        """``take`` under the turns' taking lock (without waiting for the lock when not
        ``wait``: another driver is taking then)."""
        if turns is None:
            return take(wait)
        if not wait:
            if not turns.taking.acquire(blocking=False):
                return None
            try:
                return take(False)
            finally:
                turns.taking.release()
        turns.count_taking(1)
        try:
            with turns.taking:
                return take(True)
        finally:
            turns.count_taking(-1)

    def in_turn(turn: int) -> None:
        if ordered and turns is not None:
            turns.wait(turn, [])  # (the results are in the ledger meanwhile)
            w.turn = turn

    def results(seq: int, turn: int, reply: Reply) -> Burst:
        """A burst's results, handed on as they are (in its turn)."""
        in_turn(turn)
        ledger.handed((seq,))
        w.returned = _perf()
        if reply.error is not None:
            failed.append(reply.error)
            sent.clear()  # (bursts after the failing item: dropped with the stage)
            if not reply.results:
                raise failed.pop()  # (in its turn: after every item before it)
        return pack(reply.results)

    def hand_on(buf: Buffer) -> Burst:
        """A complete buffer's record (in the buffer's turn)."""
        assert writer is not None
        in_turn(buf.seq)
        record = writer.deliver(buf)
        ledger.handed(buf.seqs)
        w.returned = _perf()
        return pack([record])

    def cut_short(buf: Buffer, error: BaseException) -> Burst:
        """``fn`` raised in a burst of ``buf``: hand on the buffer's rows before the
        failure (in the buffer's turn), and raise ``error`` at the next call. (The
        ledger keeps the buffer's bursts: the stage fails, a checkpoint cannot be taken
        any more.)"""
        assert writer is not None
        failed.append(error)
        sent.clear()  # (bursts after the failing item: dropped with the stage)
        in_turn(buf.seq)
        record = writer.cut_short(buf)
        if record is None:
            raise failed.pop()
        w.returned = _perf()
        return pack([record])

    def step() -> Burst:
        if failed:  # (holding its turn: no later burst goes before the stage stops)
            raise failed.pop()
        if ordered and turns is not None and w.turn >= 0:
            turns.release(w.turn)  # the runner enqueued our previous burst
            w.turn = -1
        while True:
            if not sent:
                t0 = meter.began(w)
                stage.start_thread(slot)  # holding nothing (a tuned map's gate: here)
                last = taken(True)
                if last is not None:
                    return hand_on(last)
                meter.got(t0)
            if len(sent) < WINDOW and not control.pausing and (gate is None or gate.admits(slot)):
                taken(False)  # (not past a tuned map's cut: its driver must drain to park)
            out, seq, where = sent.popleft()
            reply = _receive(worker, out, seq, label, ledger, w, pace, sizes)
            if not isinstance(where, Buffer):
                return results(seq, where, reply)
            assert writer is not None
            if writer.done(where, out.row0, reply):
                return hand_on(where)
            if reply.error is not None:
                return cut_short(where, reply.error)

    return step
