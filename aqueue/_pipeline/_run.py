"""One run of a Pipeline: PipelineRun (its queues, runners and stage steps), and the
public objects around it, OpenPipeline and PipelineItems.

``OpenPipeline`` (what ``Pipeline.open`` returns) enters a Coordinator if none was
given, builds a ``PipelineRun`` and starts it; leaving the block finishes the run
(every stage stops taking items, every queue is closed with ``cancel_pending_enqueues``,
ordered-map workers waiting for their turn are woken) and then leaves the coordinator,
which raises the first stage failure as itself. ``PipelineItems`` reads the last
stage's queue.

Each stage ``i`` owns output queue ``i`` (a FIFOQueue of one object component holding
the items themselves, named ``"<i>:<label>"``, of the capacity ``_stage_spec.capacity``
gives) and one QueueRunner of the same name whose producers are the stage's steps
(``_sources.py``, ``_maps.py``, ``_stages.py``), all started in one Coordinator (its
own, or the one passed to ``open``); stage ``i`` reads queue ``i - 1``. Every step
returns a burst, which its runner enqueues in one ``enqueue_many``. End of input
travels down the chain as queue closes; a stage's exception ends the run: it leaves
``async with pipe.open()`` as itself, with a note naming the stage, and every other
stage stops. The run's measurements and report are in ``_report.py``.

Workers: an async function runs in ``concurrency`` tasks; a sync function on
``concurrency`` long-lived threads that take and put items through the queues' blocking
views (no event-loop round trip per item); ``executor="process"`` in ``concurrency``
long-lived worker processes (a ``WorkerPool``, spawned when the run starts and reaped
before ``async with pipe.open()`` is left), each driven by one such thread that hands
it a burst at a time, the numpy results coming back through shared memory
(``_pool.py``, ``_procmap.py``); where a batch stage follows, the workers write the
batches in place (a ``Fuser``). ``map`` delivers in completion order unless
``ordered=True``.
Sources: lists, tuples and ranges are read on the event loop (they fill the first queue
at once); other sync iterables and sync producers on a thread, since they may block.
Thread stages start a few event-loop iterations after the async ones, so that creating
threads does not delay the first items.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio

from .._errors import OutOfRangeError
from .._input._epochs import in_memory
from .._queues._fifo import StageQueue
from .._queues._queue import QueueBase
from .._running._coordinator import Coordinator
from .._running._monitor import Monitor
from .._running._producers import is_async_callable
from .._running._runner import QueueRunner
from ._checkpoint import apply_positions, apply_state, take_checkpoint
from ._control import Control, Stage
from ._fuser import Fuser
from ._maps import AsyncTurns, ThreadTurns, async_map_step, thread_map_step
from ._meter import Meter, StageStatistics
from ._pool import WorkerPool
from ._procmap import Ledger, Sizes, fused_map_step, process_map_step
from ._report import process_notes, sample_occupancy, stage_statistics
from ._shm import Arena
from ._sources import AsyncSource, SequenceSource, SyncSource, producer_step, queue_step
from ._stage_spec import StageSpec, capacity, fused, threaded
from ._stages import ShuffleStep, batch_step, filter_step, prefetch_step, send_step
from ._state import PipelineState

__all__ = ["OpenPipeline", "PipelineItems", "PipelineRun"]

T = TypeVar("T")

_MAX_DEFER_CHECKPOINTS = 256  # at most this many loop iterations before thread stages start
_CLOSE_LIMIT_S = 10.0  # leaving the block waits at most this long for worker processes


class PipelineItems(Generic[T]):
    """The items of a running pipeline: what ``async with pipe.open() as items`` gives.

    ``async for item in items`` iterates until the pipeline has delivered everything;
    ``await items.get()`` takes the next one (OutOfRangeError after the last);
    ``await items.checkpoint()`` takes a ``PipelineState``.
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
        """
        item: T = await self._queue.dequeue()
        return item

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
        """
        return await take_checkpoint(self._run)

    def __aiter__(self) -> PipelineItems[T]:
        return self

    async def __anext__(self) -> T:
        try:
            item: T = await self._queue.dequeue()
        except OutOfRangeError:
            raise StopAsyncIteration from None
        return item


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
        assert self._run is not None
        self._run.finish()
        try:
            if self._own is not None:
                return await self._own.__aexit__(exc_type, exc, tb)
            return False
        finally:
            await self._run.closed()


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
            turns = ThreadTurns(self.stop)
            self.turns[i] = turns
            waiting = self.queues[i].size()  # a resume's items, before the buffers
            self.fusers[i] = Fuser(self.specs[i + 1].size, arena, turns, waiting)

        async def ended() -> None:
            await self.started.wait()
            runner = self.runners[i]
            if runner is not None:
                await runner.join()

        self.coord.start_soon(pool.run, ended, name=f"pipeline stage {label} worker processes")

    def _start_stage(self, i: int) -> int:
        """Build stage ``i``'s runner and start it; return its number of workers."""
        spec = self.specs[i]
        steps = self._steps(i, spec, f"{i} '{spec.label}'")
        name = f"{i}:{spec.label}"
        target = spec.fn if spec.kind == "to_queue" else self.queues[i]
        runner = QueueRunner(target, steps, enqueue_many=True, name=name)
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
            if self.stop.set:
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
                tturns = ThreadTurns(self.stop) if spec.ordered else None
                if tturns is not None:
                    self.turns[i] = tturns
                return [thread_map_step(spec.fn, view, stage, tturns) for _ in range(c)]
            call = spec.fn  # an async function, run in tasks
            aturns = AsyncTurns(self.stop) if spec.ordered else None
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
        turns = ThreadTurns(self.stop) if spec.ordered else None
        if turns is not None:
            self.turns[i] = turns
        return [process_map_step(w, view, stage, turns, ledger, sizes) for w in pool.workers]

    def _ended(self) -> bool:
        return self.t1 is not None

    def finish(self) -> None:
        """Stop every stage: no new items are taken and every queue is closed."""
        if self.t1 is None:
            self.t1 = time.monotonic()
        self.stop.stop()
        for pool in self.pools.values():
            pool.stop()
        for fuser in self.fusers.values():
            fuser.drop()
        for q in self.queues:
            q.close(cancel_pending_enqueues=True)
        for t in self.turns.values():
            t.wake()

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
