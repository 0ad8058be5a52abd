"""One run of a Pipeline: PipelineRun (its queues, runners and stage steps), and the
public objects around it, OpenPipeline and PipelineItems.

``OpenPipeline`` (what ``Pipeline.open`` returns) enters a Coordinator if none was
given, builds a ``PipelineRun`` and starts it; leaving the block finishes the run
(every stage stops taking items, every queue is closed with ``cancel_pending_enqueues``,
ordered-map workers waiting for their turn are woken) and then leaves the coordinator.
``PipelineItems`` reads the last stage's queue.

Failures are the run's, not the coordinator's: each stage's runner is a ``StageRunner``
whose producers report a failure to ``PipelineRun.fail`` (and so do the tasks of a
stage, its worker processes' watcher). The first failure of stage ``i`` stops stages
``0..i`` (their steps end at their next check, their queues close, releasing pending
enqueues, their worker processes stop) while stages ``i + 1..`` go on with what had
passed it, to the end of their input; the consumer reads those items, and where the
last queue ends (OutOfRangeError) ``raise_failure`` raises the stage's exception
instead, at that read and each later one. The coordinator's scope is never cancelled by
a stage, so the body runs on until it reads. Leaving the block: a failure a read has
raised is not raised again (the body's own exit stands); one no read raised is raised
(or noted in the body's exception). Steps hand on the items done before a failing item
and raise at their next call (``_maps.py``, ``_sources.py``, ``process/_driver.py``).

Each stage ``i`` owns output queue ``i`` (a FIFOQueue of one object component holding
the items themselves, named ``"<i>:<label>"``, of the capacity ``_stage_spec.capacity``
gives) and one QueueRunner of the same name whose producers are the stage's steps
(``_sources.py``, ``_maps.py``, ``_stages.py``), all started in one Coordinator (its
own, or the one passed to ``open``); stage ``i`` reads queue ``i - 1``. Every step
returns a burst, which its runner enqueues in one ``enqueue_many``. End of input
travels down the chain as queue closes; a stage's exception fails the run (see
above). The run's measurements and report are in ``_describe.py``.

Workers: an async function runs in ``concurrency`` tasks; a sync function on
``concurrency`` long-lived threads that take and put items through the queues' blocking
views (no event-loop round trip per item); ``executor="process"`` in ``concurrency``
long-lived worker processes (a ``WorkerPool``, spawned when the run starts and reaped
before ``async with pipe.open()`` is left), each driven by one such thread that hands
it a burst at a time, the numpy results coming back through shared memory
(``process/_workers.py``, ``process/_driver.py``); where a batch stage follows, the
workers write the batches in place (a ``Fuser``). ``map`` delivers in completion order unless
``ordered=True``.
Sources: lists, tuples and ranges are read on the event loop (they fill the first queue
at once); other sync iterables and sync producers on a thread, since they may block.
Thread stages start a few event-loop iterations after the async ones, so that creating
threads does not delay the first items.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio

from ..._errors import OutOfRangeError, QueueClosedError, add_note
from ..._input._epochs import in_memory
from ..._queues._fifo import StageQueue
from ..._queues._queue import QueueBase
from ..._running._coordinator import Coordinator
from ..._running._monitor import Monitor
from ..._running._producers import NewThreads, ThreadRecord, is_async_callable
from ..._running._runner import QueueRunner, Supervisor
from ..flow._bursts import noted
from ..flow._control import Control, Stage
from ..flow._meter import Meter, StageStatistics
from ..flow._turns import AsyncTurns, ThreadTurns
from ..process._driver import Ledger, Sizes, fused_map_step, process_map_step
from ..process._inplace import Fuser
from ..process._shm import Arena
from ..process._workers import WorkerPool
from ..spec._stage_spec import StageSpec, capacity, fresh, fused, threaded
from ..spec._state import PipelineState
from ._checkpoint import apply_positions, apply_state, take_checkpoint
from ._describe import process_notes, sample_occupancy, stage_statistics
from ._maps import async_map_step, thread_map_step
from ._sources import AsyncSource, SequenceSource, SyncSource, producer_step, queue_step
from ._stages import ShuffleStep, batch_step, filter_step, prefetch_step, send_step

__all__ = ["OpenPipeline", "PipelineItems", "PipelineRun"]

T = TypeVar("T")
logger = logging.getLogger("aqueue")

_MAX_DEFER_CHECKPOINTS = 256  # at most this many loop iterations before thread stages start
_CLOSE_LIMIT_S = 10.0  # leaving the block waits at most this long for worker processes


class PipelineItems(Generic[T]):
    """The items of a running pipeline: what ``async with pipe.open() as items`` gives.

    ``async for item in items`` iterates until the pipeline has delivered everything;
    ``await items.get()`` takes the next one (OutOfRangeError after the last);
    ``await items.checkpoint()`` takes a ``PipelineState``. When a stage has failed,
    each of them raises the stage's exception once the items handed on before it are
    taken (see ``Pipeline.open``).
    """

    __slots__ = ("_queue", "_run")

    def __init__(self, run: PipelineRun) -> None:
        self._run = run
        self._queue = run.queues[-1]

    @property
    def queue(self) -> QueueBase[Any]:
        """The last stage's output queue (one object component: the items)."""
        return self._queue

    async def get(self) -> T:
        """The next item.

        Raises:
            OutOfRangeError: The pipeline has ended and every item was taken.
            Exception: A stage failed: its exception, once every item it had handed on
                was taken (again at each later call).
        """
        try:
            item: T = await self._queue.dequeue()
        except OutOfRangeError as exc:
            end = exc
        else:
            return item
        self._run.raise_failure()  # (outside the except clause: not chained to the end)
        raise end

    async def checkpoint(self) -> PipelineState:
        """A consistent cut of the running pipeline (see ``Pipeline.open``).

        Everything received so far came before it; opening the same pipeline with it
        (``pipe.open(state=...)``) delivers what this run would deliver next. The
        workers pause at their next item boundary for as short a time as the items
        they hold take to finish; cancelling this call leaves the run going unchanged.

        The state refers to the items themselves, not copies (so the pause stays
        short): the items it holds are the ones this run delivers next. Save it (or
        copy it) before changing delivered items in place.

        Raises:
            CheckpointError: A stage cannot say where it is (a one-shot source, an
                external queue, ``to_queue``); nothing was paused.
            Exception: A stage failed: its exception.
        """
        return await take_checkpoint(self._run)

    def __aiter__(self) -> PipelineItems[T]:
        return self

    async def __anext__(self) -> T:
        try:
            item: T = await self._queue.dequeue()
        except OutOfRangeError:
            pass
        else:
            return item
        self._run.raise_failure()  # (outside the except clause: see ``get``)
        raise StopAsyncIteration


class OpenPipeline(Generic[T]):
    """What ``Pipeline.open()`` returns: an async context manager that runs the
    pipeline while the block runs and gives its ``PipelineItems``; leaving the block
    stops every stage (see ``Pipeline.open``)."""

    __slots__ = ("_coord", "_monitor", "_on_run", "_own", "_run", "_specs", "_state")

    def __init__(
        self,
        specs: tuple[StageSpec, ...],
        coord: Coordinator | None,
        on_run: Callable[[PipelineRun], None],
        state: PipelineState | None,
        monitor: Monitor | None,
    ) -> None:
        self._specs = specs
        self._on_run = on_run  # the pipeline remembers its latest run
        self._coord = coord
        self._state = state
        self._monitor = monitor
        self._own: Coordinator | None = None
        self._run: PipelineRun | None = None

    async def __aenter__(self) -> PipelineItems[T]:
        source = self._specs[0]
        fresh(source, "Pipeline.open")  # (another open of it may have run since)
        if source.reads is not None:
            source.reads.opened = True
        coord = self._coord
        if coord is None:
            self._own = Coordinator(monitor=self._monitor)
            coord = await self._own.__aenter__()
        try:
            run = self._run = PipelineRun(self._specs, coord)
            self._on_run(run)
            if self._monitor is not None:
                self._monitor.attach_stages("pipeline", run.statistics)
            run.start(self._state)
            coord.watch(run.queues[-1])  # the queue the body consumes (input-bound)
        except BaseException as exc:
            if self._run is not None:
                self._run.finish()
            if self._own is not None:
                await self._own.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return PipelineItems(run)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        run = self._run
        assert run is not None
        run.finish()
        try:
            try:
                suppress = False
                if self._own is not None:
                    suppress = await self._own.__aexit__(exc_type, exc, tb)
            finally:
                await run.closed()
        except BaseException as escaped:  # the body's exception, or the coordinator's
            run.note_unread(escaped)
            raise
        if exc is None or suppress or isinstance(exc, OutOfRangeError):
            run.raise_unread()  # a failure nobody read beats a clean end
        else:
            run.note_unread(exc)
        return suppress


class _Reporter:
    """What a stage's runner is handed instead of its coordinator's supervision: the
    same, except that a producer's failure goes to the run (``PipelineRun.fail``),
    which stops the stages up to the failing one, instead of stopping everything and
    cancelling the coordinator's scope (the body included)."""

    __slots__ = ("_fail", "_inner")

    def __init__(self, inner: Supervisor, fail: Callable[[Exception], None]) -> None:
        self._inner = inner
        self._fail = fail

    def should_stop(self) -> bool:
        return self._inner.should_stop()

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

    def __init__(self, specs: tuple[StageSpec, ...], coord: Coordinator) -> None:
        self.specs = specs
        self.coord = coord
        self.stop = Control(len(specs))
        self.meters = [Meter() for _ in specs]
        self.runners: list[QueueRunner | None] = [None] * len(specs)
        self.workers = [0] * len(specs)  # workers per stage, once started
        self.reader: SequenceSource | SyncSource | AsyncSource | None = None
        self.shuffles: dict[int, ShuffleStep] = {}
        self.started = anyio.Event()  # set once every stage has started
        self.queues: list[StageQueue] = []
        self.turns: dict[int, ThreadTurns | AsyncTurns] = {}  # ordered maps, by stage
        self.pools: dict[int, WorkerPool] = {}  # process maps' worker processes, by stage
        self.fusers: dict[int, Fuser] = {}  # process maps that write their batches, by stage
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
        if state is not None:
            apply_state(self, state)
        for i, spec in enumerate(self.specs):
            if spec.kind == "map" and spec.executor == "process":
                self._start_pool(i, spec)
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
        self.coord.start_soon(
            sample_occupancy,
            self.queues,
            self.meters,
            self._ended,
            name="pipeline occupancy sampler",
        )

    def _start_pool(self, i: int, spec: StageSpec) -> None:
        """Start stage ``i``'s worker processes now (its drivers come later, with the
        other thread stages): spawning takes a while, and runs off the event loop."""
        label = f"{i} '{spec.label}'"
        arena = Arena(f"{os.getpid()}-{i}")
        pool = self.pools[i] = WorkerPool(spec.fn, spec.concurrency, label, arena)
        self.ledgers[i] = Ledger()
        if fused(self.specs, i):
            turns = ThreadTurns(self.stop, i)
            self.turns[i] = turns
            waiting = self.queues[i].size()  # a resume's items, before the buffers
            self.fusers[i] = Fuser(self.specs[i + 1].size, arena, turns, waiting)

        async def ended() -> None:
            await self.started.wait()
            runner = self.runners[i]
            if runner is not None:
                await runner.join()

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
        """Build stage ``i``'s runner and start it; return its number of workers."""
        spec = self.specs[i]
        steps = self._steps(i, spec, f"{i} '{spec.label}'")
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

    def _steps(self, i: int, spec: StageSpec, label: str) -> list[Any]:
        stage = Stage(self.stop, i, label, self.meters[i])
        k = spec.kind
        if k == "iterable":
            if in_memory(spec.fn):  # read on the loop, no thread
                source = SequenceSource(spec.fn, spec.epochs, stage, self.queues[0])
                self.reader = source
                return [source]
            self.reader = SyncSource(spec.fn, spec.epochs, stage)
            return [self.reader]
        if k == "async_iterable":
            self.reader = AsyncSource(spec.fn, spec.epochs, stage)
            return [self.reader]
        if k == "queue":
            return [queue_step(spec.fn, stage)]
        if k == "producer":
            return [producer_step(spec.fn, is_async_callable(spec.fn), stage)]
        inq = self.queues[i - 1]
        c = spec.concurrency
        if k == "map":
            if spec.executor == "process":
                return self._process_steps(i, spec, stage)
            if spec.executor == "thread":
                view = inq.blocking()
                tturns = ThreadTurns(self.stop, i) if spec.ordered else None
                if tturns is not None:
                    self.turns[i] = tturns
                return [thread_map_step(spec.fn, view, stage, tturns) for _ in range(c)]
            call = spec.fn  # an async function, run in tasks
            aturns = AsyncTurns(self.stop, i) if spec.ordered else None
            if aturns is not None:
                self.turns[i] = aturns
            return [async_map_step(call, inq, stage, aturns) for _ in range(c)]
        if k == "filter":
            return [filter_step(spec.fn, spec.executor == "task", inq, stage)]
        if k == "to_queue":
            return [send_step(inq, spec.pad, stage)]
        if k == "shuffle":
            shuffle = self.shuffles[i] = ShuffleStep(spec.size, spec.seed, inq, stage)
            return [shuffle]
        if k == "batch":
            fuser = self.fusers.get(i - 1)
            whole = None if fuser is None else fuser.whole
            return [batch_step(spec.size, spec.smaller, spec.pad, inq.blocking(), stage, whole)]
        assert k == "prefetch"
        return [prefetch_step(inq, stage)]

    def _process_steps(self, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
        pool, view, sizes = self.pools[i], self.queues[i - 1].blocking(), Sizes()
        ledger = self.ledgers[i]
        fuser = self.fusers.get(i)
        if fuser is not None:
            return [
                fused_map_step(w, view, stage, fuser.turns, fuser, ledger, sizes, spec.ordered)
                for w in pool.workers
            ]
        turns = ThreadTurns(self.stop, i) if spec.ordered else None
        if turns is not None:
            self.turns[i] = turns
        return [process_map_step(w, view, stage, turns, ledger, sizes) for w in pool.workers]

    def _ended(self) -> bool:
        return self.t1 is not None

    def finish(self) -> None:
        """Stop every stage: no new items are taken and every queue is closed."""
        if self.t1 is None:
            self.t1 = time.monotonic()
        self._stop_through(len(self.specs) - 1)

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
        for i, fuser in self.fusers.items():
            if i <= last:
                fuser.drop()
        for q in self.queues[: last + 1]:
            q.close(cancel_pending_enqueues=True)
        for i, t in self.turns.items():
            if i <= last:
                t.wake()

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
        """One StageStatistics per stage, so far (see ``_report.stage_statistics``)."""
        return stage_statistics(self.specs, self.queues, self.meters, self.elapsed)

    def notes(self) -> list[str]:
        """describe()'s lines about the run's process maps (``_report.process_notes``)."""
        return process_notes(self.specs, self.statistics(), self.pools, self.fusers)

    def startup(self) -> dict[int, float]:
        """Seconds each process map's workers took to start (so far, while starting)."""
        return {i: pool.ready_s or self.elapsed for i, pool in self.pools.items()}
