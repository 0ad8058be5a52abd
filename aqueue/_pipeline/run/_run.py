"""One run of a Pipeline: PipelineRun, its queues, runners and stages, and how a failure
or the end stops them.

Each stage ``i`` owns output queue ``i`` (a FIFOQueue of one object component holding
the items themselves, named ``"<i>:<label>"``, of the capacity ``_stage_spec.capacity``
gives) and one QueueRunner of the same name whose producers are the stage's steps
(built from the table in ``_build.py``), all started in one Coordinator (its own, or
the one passed to ``open``); stage ``i`` reads queue ``i - 1``. Every step returns a
burst, which its runner enqueues in one ``enqueue_many``. End of input travels down the
chain as queue closes. The run's measurements and report are in ``_describe.py``.

Failures are the run's, not the coordinator's: each stage's runner is a ``StageRunner``
whose producers report a failure to ``PipelineRun.fail`` (and so do the tasks of a
stage, its worker processes' watcher). The first failure of stage ``i`` stops stages
``0..i`` (their steps end at their next check, their queues close, releasing pending
enqueues, their worker processes stop) while stages ``i + 1..`` go on with what had
passed it, to the end of their input; the consumer reads those items, then the
stage's exception (``_open.py``). The coordinator's scope is never cancelled by a
stage, so the body runs on until it reads. Steps hand on the items done before a
failing item and raise at their next call (``_maps.py``, ``_sources.py``,
``process/_driver.py``).

Workers: an async function runs in ``concurrency`` tasks; a sync function on
``concurrency`` long-lived threads that take and put items through the queues' blocking
views (no event-loop round trip per item); ``executor="process"`` in ``concurrency``
long-lived worker processes (a ``WorkerPool``, spawned when the run starts and reaped
before ``async with pipe.open()`` is left), each driven by one such thread that hands
it a burst at a time, the numpy results coming back through shared memory
(``process/``); where a batch stage follows, the workers write the batches in place
(a ``BatchWriter``: the map's output queue then holds a record per batch, and the
stage counts report rows, ``row_counts``). ``map`` delivers in completion order unless
``ordered=True``. Sources: lists, tuples and ranges are read on the event loop (they
fill the first queue at once); other sync iterables and sync producers on a thread,
since they may block. Thread stages start a few event-loop iterations after the async
ones, so that creating threads does not delay the first items.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import anyio

from ..._errors import QueueClosedError, add_note
from ..._queues._fifo import StageQueue
from ..._running._coordinator import Coordinator
from ..._running._producers import NewThreads, ThreadRecord
from ..._running._runner import QueueRunner, Supervisor
from ..defs._stage_spec import StageSpec, capacity, fused, measures_cpu, threaded
from ..defs._state import PipelineState
from ..flow._bursts import noted
from ..flow._control import Control, Stage
from ..flow._meter import Meter, StageStatistics
from ..flow._turns import AsyncTurns, ThreadTurns
from ..process._driver import Ledger
from ..process._inplace import BatchWriter
from ..process._shm import Arena
from ..process._workers import WorkerPool
from ..tune._settings import Autotune
from ._build import BUILDERS, Reader, builder_key, map_steps, process_steps
from ._checkpoint import apply_positions, apply_state
from ._describe import process_notes, sample_occupancy, stage_statistics
from ._sources import SequenceSource
from ._stages import ShuffleStep
from ._tuning import Tuning

__all__ = ["PipelineRun", "StageRunner"]

logger = logging.getLogger("aqueue")

_MAX_DEFER_CHECKPOINTS = 256  # at most this many loop iterations before thread stages start
_CLOSE_LIMIT_S = 10.0  # leaving the block waits at most this long for worker processes


class _Reporter:
    """What a stage's runner is handed instead of its coordinator's supervision: the
    same, except that a producer's failure goes to the run (``PipelineRun.fail``),
    which stops the stages up to the failing one, instead of stopping everything and
    cancelling the coordinator's scope (the body included)."""

    __slots__ = ("_fail", "_inner", "should_stop")

    def __init__(self, inner: Supervisor, fail: Callable[[Exception], None]) -> None:
        self._inner = inner
        self._fail = fail
        # The coordinator's own check, not a call through this object: each producer
        # asks it before every burst.
        self.should_stop: Callable[[], bool] = inner.should_stop

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
        self._inner.spawn(fn, *args, name=name)

    def track_thread(self, record: ThreadRecord) -> None:
        self._inner.track_thread(record)

    def failed(self, exc: Exception) -> None:
        self._fail(exc)

    def start_threads(self, threads: NewThreads, go: threading.Event) -> None:
        self._inner.start_threads(threads, go)

    def start(self, runner: QueueRunner) -> None:
        self._inner.start(runner)


class StageRunner(QueueRunner[Any]):
    """The runner of one stage: a QueueRunner whose producers' failures go to the run
    (``fail``) rather than to the coordinator (see ``_Reporter``)."""

    def __init__(
        self, target: Any, steps: list[Any], name: str, fail: Callable[[Exception], None]
    ) -> None:
        super().__init__(target, steps, enqueue_many=True, name=name)
        self._fail = fail

    def launch(self, supervisor: Supervisor) -> None:
        super().launch(_Reporter(supervisor, self._fail))


class PipelineRun:
    """One run of a pipeline: its queues, runners and measurements."""

    def __init__(
        self,
        specs: tuple[StageSpec, ...],
        coord: Coordinator,
        autotune: Autotune | None = None,
        state: PipelineState | None = None,
    ) -> None:
        self.specs = specs
        self.coord = coord
        # The tuner of the "auto" maps and buffers (None: nothing is tuned); a resume
        # starts the tuned maps at the settings in force when the state was taken.
        tuned = any(s.auto is not None or s.auto_capacity is not None for s in specs)
        resumed = state.settings if state is not None else {}
        self.tuning = Tuning(specs, autotune or Autotune(), resumed) if tuned else None
        self.added: dict[int, list[QueueRunner]] = {}  # runners of workers a tuner added
        self._stages: dict[int, Stage] = {}
        self.stop = Control(len(specs))
        self.meters = [Meter() for _ in specs]
        self.runners: list[QueueRunner | None] = [None] * len(specs)
        self.workers = [0] * len(specs)  # workers per stage, once started
        self.reader: Reader | None = None
        self.shuffles: dict[int, ShuffleStep] = {}
        self.started = anyio.Event()  # set once every stage has started
        self.queues: list[StageQueue] = []
        self.turns: dict[int, ThreadTurns | AsyncTurns] = {}  # ordered maps, by stage
        self.pools: dict[int, WorkerPool] = {}  # process maps' worker processes, by stage
        self.writers: dict[int, BatchWriter] = {}  # process maps that write their batches
        self.ledgers: dict[int, Ledger] = {}  # process maps' bursts in hand, by stage
        self.t0 = time.monotonic()
        self.t1: float | None = None
        self.sent = 0  # items a to_queue stage sent out (once it has ended)
        self.failure: BaseException | None = None  # the first stage failure
        self.delivered = False  # the consumer was raised ``failure``

    def start(self, state: PipelineState | None = None) -> None:
        """Create every queue and runner and start them in the coordinator (from
        ``state``, when given: it was checked against the stages beforehand).

        Stages that run on threads (other than the source) are built and started a few
        event-loop iterations later: creating their threads, records and supervising
        tasks takes about 25 us per worker on the loop, which should not hold back the
        async stages' first items.
        """
        for i, spec in enumerate(self.specs):
            label = f"{i}:{spec.label}"
            self.queues.append(StageQueue(capacity(self.specs, i), name=label))
        for i, spec in enumerate(self.specs):
            if spec.kind == "map" and spec.executor == "process":
                self._start_pool(i, spec, len(state.queues[i]) if state is not None else 0)
        if state is not None:
            apply_state(self, state)
        later: list[int] = []
        tasks = 0
        for i, spec in enumerate(self.specs):
            if i > 0 and threaded(spec):
                later.append(i)
            else:
                tasks += self._start_stage(i)
        if state is not None:
            apply_positions(self, state)
        if isinstance(self.reader, SequenceSource):
            self.reader.prefill()
        if later:
            delay = min(_MAX_DEFER_CHECKPOINTS, 2 * tasks + 8)
            self.coord.start_soon(self._start_later, later, delay, name="pipeline thread stages")
        else:
            self.started.set()
        if self.tuning is not None:
            self.tuning.start(self)
            self.coord.start_soon(self.tuning.drive, self.started, name="pipeline tuner")
        self.coord.start_soon(
            sample_occupancy,
            self.queues,
            self.meters,
            self._ended,
            name="pipeline occupancy sampler",
        )

    def _start_pool(self, i: int, spec: StageSpec, resumed: int) -> None:
        """Start stage ``i``'s worker processes now (its drivers come later, with the
        other thread stages): spawning takes a while, and runs off the event loop. A
        batch writer, when the batch stage after it takes batches written in place,
        starts at row ``resumed`` (a resume's items in the map's output queue)."""
        label = f"{i} '{spec.label}'"
        arena = Arena(f"{os.getpid()}-{i}")
        n = spec.concurrency
        if self.tuning is not None and i in self.tuning.started:  # (tuned: its start)
            n = self.tuning.started[i]
        pool = self.pools[i] = WorkerPool(spec.fn, n, label, arena)
        self.ledgers[i] = Ledger()
        if fused(self.specs, i):
            turns = self.turns[i] = ThreadTurns(self.stop, i)
            self.writers[i] = BatchWriter(self.specs[i + 1].size, arena, turns.number, resumed)

        async def ended() -> None:
            await self.started.wait()
            runner = self.runners[i]
            if runner is not None:
                await runner.join()
            added = self.added.setdefault(i, [])  # drivers a tuner added (it may add more)
            k = 0
            while k < len(added):
                await added[k].join()
                k += 1

        self.coord.start_soon(
            self._guarded, i, pool.run, ended, name=f"pipeline stage {label} worker processes"
        )

    async def _guarded(self, i: int, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """``await fn(*args)``, a task of stage ``i``: its failure is the stage's."""
        try:
            await fn(*args)
        except Exception as exc:
            self.fail(i, exc)

    def _start_stage(self, i: int) -> int:
        """Build stage ``i``'s runner (its steps from ``BUILDERS``) and start it; return
        its number of workers."""
        spec = self.specs[i]
        gate = self.tuning.gates.get(i) if self.tuning is not None else None
        stage = self._stages[i] = Stage(self.stop, i, f"{i} '{spec.label}'", self.meters[i], gate)
        if gate is not None:  # a tuned map starts with the workers its gate admits
            spec = replace(spec, concurrency=gate.limit)
        steps = BUILDERS[builder_key(spec)](self, i, spec, stage)
        name = f"{i}:{spec.label}"
        target = spec.fn if spec.kind == "to_queue" else self.queues[i]
        runner = StageRunner(target, steps, name, functools.partial(self.fail, i))
        self.runners[i] = runner
        self.workers[i] = len(steps)
        self.coord.start(runner)
        if spec.kind == "to_queue":  # its items go out; its own queue closes when done
            self.coord.start_soon(self._close_when_sent, runner, i, name=f"{name} end")
        return len(steps)

    async def _close_when_sent(self, runner: QueueRunner, i: int) -> None:
        await runner.join()
        self.sent = self.queues[i - 1].statistics().dequeued_total
        self.queues[i].close()

    async def _start_later(self, stages: list[int], checkpoints: int) -> None:
        for _ in range(checkpoints):
            await anyio.lowlevel.checkpoint()
        for i in stages:
            if i < self.stop.cut:
                self.queues[i].close(cancel_pending_enqueues=True)
            else:
                self._start_stage(i)
        self.started.set()

    def _ended(self) -> bool:
        return self.t1 is not None

    def add_workers(self, i: int, slots: range) -> None:
        """A tuner raised map ``i``'s concurrency: start workers for ``slots`` (the next
        numbers after those started), under a runner of their own into the same queue
        (a queue closed meanwhile ends them cleanly at their registration)."""
        stage = self._stages.get(i)
        if stage is None or i < self.stop.cut or self.t1 is not None:
            return
        pool = self.pools.get(i)
        if pool is not None:  # worker processes: spawned off the loop, then driven
            steps = process_steps(self, i, self.specs[i], stage, pool.add_workers(len(slots)))
        else:
            steps = map_steps(self, i, self.specs[i], stage, slots)
        name = f"{i}:{self.specs[i].label} +{slots.start}"
        runner = StageRunner(self.queues[i], steps, name, functools.partial(self.fail, i))
        self.added.setdefault(i, []).append(runner)
        self.workers[i] += len(steps)
        self.coord.start(runner)

    def counters(self, i: int) -> tuple[int, int, float, float, float, float, int]:
        """Stage ``i``'s cumulative counters, for the tuner: items in, items out, busy,
        starved and blocked seconds, the occupancy integral and the capacity."""
        st = self.queues[i].statistics()
        items_in = st.enqueued_total if i == 0 else self.queues[i - 1].statistics().dequeued_total
        m = self.meters[i]
        cap = self.queues[i].capacity
        return items_in, st.enqueued_total, m.busy, m.get_wait_s, m.put_wait_s, m.occ_sum, cap

    def cpu(self, i: int) -> float | None:
        """CPU seconds stage ``i``'s work used: a thread or process map's (None else)."""
        return self.meters[i].cpu if measures_cpu(self.specs[i]) else None

    @property
    def parked(self) -> dict[int, int]:
        """Workers parked at each tuned map's gate now (a checkpoint counts them at rest)."""
        return {} if self.tuning is None else {i: g.parked for i, g in self.tuning.gates.items()}

    def settings(self) -> dict[int, dict[str, int]]:
        """The settings in force of the stages the tuner holds (for a checkpoint)."""
        return {} if self.tuning is None else self.tuning.settings()

    def consumer(self) -> tuple[int, float]:
        """Items the consumer took from the last queue, and seconds it waited on it."""
        st = self.queues[-1].statistics()
        return st.dequeued_total, st.time_empty_s

    def finish(self) -> None:
        """Stop every stage: no new items are taken and every queue is closed."""
        if self.t1 is None:
            self.t1 = time.monotonic()
        self._stop_through(len(self.specs) - 1)
        if self.tuning is not None:
            self.tuning.close()

    def fail(self, i: int, exc: BaseException) -> None:
        """Stage ``i`` failed with ``exc``: the stages up to it stop, and the stages
        after it go on with what had passed it, so the consumer receives that, then
        ``exc`` (``raise_failure``). ``exc`` gets the stage's note (a step's own, or
        one for a failure its runner met: an enqueue into a ``to_queue`` target, a
        worker process's death). The first failure is the run's; a later one is noted
        in it."""
        noted(exc, f"{i} '{self.specs[i].label}'")
        if self.failure is None:
            self.failure = exc
        elif exc is not self.failure:
            add_note(self.failure, f"the pipeline also failed in stage {i}: {exc!r}")
        self._stop_through(i)

    def _stop_through(self, last: int) -> None:
        """Stop stages ``0..last``: their steps end at their next check, their worker
        processes stop, their output queues close (releasing pending enqueues)."""
        self.stop.stop_through(last)
        for i, pool in self.pools.items():
            if i <= last:
                pool.stop()
        for i, writer in self.writers.items():
            if i <= last:
                writer.drop()
        for q in self.queues[: last + 1]:
            q.close(cancel_pending_enqueues=True)
        for i, t in self.turns.items():
            if i <= last:
                t.wake()
        if self.tuning is not None:  # parked workers go on to their stop test
            self.tuning.close(last)

    def raise_failure(self) -> None:
        """Raise the run's failure, if a stage failed (the consumer has seen it then)."""
        failure = self.failure
        if failure is not None:
            self.delivered = True
            raise failure

    def check_running(self) -> None:
        """Raise the run's failure, or QueueClosedError once the run is finishing."""
        self.raise_failure()
        if self.stop.set:
            raise QueueClosedError("the pipeline is stopping")

    def raise_unread(self) -> None:
        """Raise the run's failure if the consumer has not seen it (leaving the block)."""
        if not self.delivered:
            self.raise_failure()

    def note_unread(self, exc: BaseException) -> None:
        """The block is left with ``exc``: a failure the consumer has not seen goes in a
        note of ``exc`` (logged, when ``exc`` is a cancellation or an interrupt)."""
        failure = self.failure
        if failure is None or self.delivered or exc is failure:
            return
        self.delivered = True
        if isinstance(exc, Exception):
            add_note(exc, f"the pipeline had also failed, unread: {failure!r}")
        else:
            logger.error("pipeline left by %r after a stage failed, unread: %r", exc, failure)

    async def closed(self) -> None:
        """Wait (shielded, at most ``_CLOSE_LIMIT_S``) until every worker process of
        the run has been reaped: none outlives ``async with pipe.open()``."""
        if not self.pools:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_LIMIT_S):
            for pool in self.pools.values():
                await pool.closed.wait()

    @property
    def elapsed(self) -> float:
        return (self.t1 if self.t1 is not None else time.monotonic()) - self.t0

    def statistics(self) -> tuple[StageStatistics, ...]:
        """One StageStatistics per stage, so far (see ``_describe.stage_statistics``)."""
        specs = self.specs
        if self.tuning is not None:  # a tuned map's concurrency is the one in force
            specs = tuple(
                s if (n := self.tuning.concurrency(i)) is None else replace(s, concurrency=n)
                for i, s in enumerate(specs)
            )
        out = stage_statistics(specs, self.queues, self.meters, self.elapsed, self.row_counts())
        if self.pools:  # the worker processes that exist now
            out = tuple(
                s if (pool := self.pools.get(i)) is None else replace(s, worker_processes=pool.live)
                for i, s in enumerate(out)
            )
        tuning = self.tuning
        if tuning is None:
            return out
        return tuple(  # who set each map's concurrency, and the tuner's decisions on it
            replace(s, set_by=tuning.set_by(i), decisions=tuning.decisions(i, self.t0))
            for i, s in enumerate(out)
        )

    def row_counts(self) -> dict[int, tuple[int, int]]:
        """For each queue that holds batch records (a process map's that writes its
        batches in place): the rows put into it and taken out of it."""
        return {i: (w.rows_out, w.rows_taken) for i, w in self.writers.items()}

    def notes(self) -> list[str]:
        """describe()'s lines about the run's process maps (``_describe.process_notes``)."""
        notes = process_notes(self.specs, self.statistics(), self.pools, self.writers)
        if self.tuning is not None:
            notes += self.tuning.notes(lambda i: self.specs[i].label, self.t0)
        return notes

    def startup(self) -> dict[int, float]:
        """Seconds each process map's workers took to start (so far, while starting)."""
        return {i: pool.ready_s or self.elapsed for i, pool in self.pools.items()}
