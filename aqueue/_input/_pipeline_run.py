"""One run of a Pipeline: its queues, runners, measurements and report.

``Opened`` (what ``Pipeline.open`` returns) enters a Coordinator if none was given,
builds a ``_Run`` and starts it; leaving the block finishes the run (every stage stops
taking items, every queue is closed with ``cancel_pending_enqueues``, ordered-map
workers waiting for their turn are woken) and then leaves the coordinator, which raises
the first stage failure as itself.

Each stage ``i`` owns output queue ``i`` (a FIFOQueue of one object component holding
the items themselves, named ``"<i>:<label>"``) and one QueueRunner of the same name
whose producers are the stage's steps (``_sources.py``, ``_maps.py``, ``_stages.py``);
stage ``i`` reads queue ``i - 1``. Every step returns a burst, which its runner
enqueues in one ``enqueue_many``.

Default capacities: a queue holds at least ``_MIN_CAPACITY`` items, twice the
concurrency of the stages on either side, and twice the batch size when a batch stage
reads it (so its ``dequeue_many`` waits for its batch in one copy); a source's queue
holds at least ``_SOURCE_CAPACITY`` items, so the next stage's workers take their
items in bursts and the source refills rarely.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio

from .._errors import OutOfRangeError
from .._queues._fifo import StageQueue
from .._queues._queue import QueueBase
from .._running._coordinator import Coordinator
from .._running._monitor import Monitor
from .._running._producers import is_async_callable
from .._running._runner import QueueRunner
from ._checkpoint import apply_positions, apply_state, take_checkpoint
from ._control import Control, Stage
from ._epochs import in_memory
from ._maps import AsyncTurns, ThreadTurns, async_map_step, offloaded, thread_map_step
from ._meter import Meter, StageStatistics, percentiles
from ._sources import AsyncSource, SequenceSource, SyncSource, producer_step, queue_step
from ._stages import ShuffleStep, batch_step, filter_step, prefetch_step, send_step
from ._state import PipelineState

__all__ = [
    "ZERO_FIELDS",
    "OpenPipeline",
    "PipelineItems",
    "PipelineRun",
    "StageSpec",
    "bottleneck",
    "describe_run",
]

T = TypeVar("T")

_SAMPLE_INTERVAL_S = 0.005  # how often the run samples its queues' occupancy
_MAX_DEFER_CHECKPOINTS = 256  # at most this many loop iterations before thread stages start
_MIN_CAPACITY = 8  # default output queue capacity: max(this, 2 x neighbouring concurrency)
_SOURCE_CAPACITY = 256  # default capacity of a source's output queue, at least
_SOURCES = ("iterable", "async_iterable", "queue", "producer")
ZERO_FIELDS = (
    "items_per_s",
    "busy_s",
    "occupancy_mean",
    "starved_fraction",
    "put_wait_p50_s",
    "put_wait_p99_s",
    "get_wait_p50_s",
    "get_wait_p99_s",
    "elapsed_s",
)


@dataclass(frozen=True)
class StageSpec:
    """One stage of a Pipeline description."""

    kind: str  # iterable | async_iterable | queue | producer | map | filter | shuffle | ...
    label: str
    fn: Any = None
    concurrency: int = 1
    capacity: int | None = None
    ordered: bool = False
    executor: str = "task"  # task | thread | process
    epochs: int | None = 1
    size: int = 0
    smaller: bool = False
    pad: bool = False
    seed: int | None = None


def threaded(spec: StageSpec) -> bool:
    """Whether a (non-source) stage's workers are threads (see ``PipelineRun._steps``)."""
    return spec.kind == "batch" or (spec.kind == "map" and spec.executor == "thread")


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
        if self._own is not None:
            return await self._own.__aexit__(exc_type, exc, tb)
        return False


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
        self.t0 = time.monotonic()
        self.t1: float | None = None
        self.sent = 0  # items a to_queue stage sent out (once it has ended)

    def _capacity(self, i: int) -> int:
        """Stage ``i``'s output queue capacity (see the module docstring)."""
        spec = self.specs[i]
        if spec.capacity is not None:
            return spec.capacity
        cap = max(_MIN_CAPACITY, 2 * spec.concurrency)
        if spec.kind in _SOURCES:
            cap = max(cap, _SOURCE_CAPACITY)
        if i + 1 < len(self.specs):
            after = self.specs[i + 1]
            cap = max(cap, 2 * after.concurrency)
            if after.kind == "batch":
                cap = max(cap, 2 * after.size)
        return cap

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
            self.queues.append(StageQueue(self._capacity(i), name=label))
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
        self.coord.start_soon(self._sample, name="pipeline occupancy sampler")

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
            if spec.executor == "thread":
                view = inq.blocking()
                tturns = ThreadTurns(self.stop) if spec.ordered else None
                if tturns is not None:
                    self.turns[i] = tturns
                return [thread_map_step(spec.fn, view, stage, tturns) for _ in range(c)]
            call = spec.fn if spec.executor == "task" else offloaded(spec.fn, spec.executor, c)
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
            return [batch_step(spec.size, spec.smaller, spec.pad, inq.blocking(), stage)]
        assert k == "prefetch"
        return [prefetch_step(inq, stage)]

    async def _sample(self) -> None:
        while self.t1 is None:
            live = False
            for q, m in zip(self.queues, self.meters):
                size = q.size()
                if size or not q.closed:
                    live = True
                    m.occ_sum += size / q.capacity
                    m.occ_n += 1
            if not live:
                return
            await anyio.sleep(_SAMPLE_INTERVAL_S)

    def finish(self) -> None:
        """Stop every stage: no new items are taken and every queue is closed."""
        if self.t1 is None:
            self.t1 = time.monotonic()
        self.stop.stop()
        for q in self.queues:
            q.close(cancel_pending_enqueues=True)
        for t in self.turns.values():
            t.wake()

    @property
    def elapsed(self) -> float:
        return (self.t1 if self.t1 is not None else time.monotonic()) - self.t0

    def statistics(self) -> tuple[StageStatistics, ...]:
        elapsed = max(self.elapsed, 1e-9)
        out: list[StageStatistics] = []
        for i, spec in enumerate(self.specs):
            if i >= len(self.queues):
                break
            st = self.queues[i].statistics()
            items_in = (
                self.queues[i - 1].statistics().dequeued_total if i > 0 else st.enqueued_total
            )
            items_out = items_in if spec.kind == "to_queue" else st.enqueued_total
            m = self.meters[i]
            g50, g99 = percentiles(m.get_waits)
            p50, p99 = percentiles(m.put_waits)
            out.append(
                StageStatistics(
                    name=spec.label,
                    items_in=items_in,
                    items_out=items_out,
                    items_dropped=m.dropped,
                    items_per_s=items_out / elapsed,
                    busy_s=m.busy,
                    concurrency=spec.concurrency,
                    occupancy_mean=m.occ_sum / m.occ_n if m.occ_n else 0.0,
                    starved_fraction=min(1.0, st.time_empty_s / elapsed),
                    put_wait_p50_s=p50,
                    put_wait_p99_s=p99,
                    get_wait_p50_s=g50,
                    get_wait_p99_s=g99,
                    elapsed_s=elapsed,
                )
            )
        return tuple(out)


_BUSY = 0.5  # a stage this busy (fraction of its workers' time) can limit throughput
_FULL = 0.5  # an output queue this full on average: the consumer is the limit


def bottleneck(stats: tuple[StageStatistics, ...]) -> str:
    """What limits the run's throughput, in one line.

    - The consumer, when the pipeline keeps ahead of it: the last stage's output queue
      was at least ``_FULL`` full on average and the consumer rarely waited.
    - Else the busiest stage, when its workers were busy at least ``_BUSY`` of the
      time: adding workers (or a faster function) there is what helps.
    - Else no stage's own work limits the run: the hand-offs between stages (per-item
      overhead) or a source that delivers slowly do.
    """
    last = stats[-1]
    if last.occupancy_mean >= _FULL and last.starved_fraction < 0.1:
        return (
            f"the consumer — the pipeline keeps ahead of it (its output queue was "
            f"{last.occupancy_mean:.0%} full on average, the consumer waited "
            f"{last.starved_fraction:.0%} of the time)"
        )
    fractions = [s.busy_fraction for s in stats]
    worst = max(range(len(stats)), key=fractions.__getitem__)
    s = stats[worst]
    if fractions[worst] >= _BUSY:
        return (
            f"{s.name} — its {s.concurrency} worker(s) were {fractions[worst]:.0%} busy; "
            "more concurrency there (or a faster function) would help"
        )
    return (
        f"per-item overhead — no stage was busy more than {fractions[worst]:.0%} of the "
        f"time and the consumer waited {last.starved_fraction:.0%} of it: the hand-offs "
        "between stages, not the stages' work, set the pace"
    )


def describe_run(stats: tuple[StageStatistics, ...], run: PipelineRun | None) -> str:
    """The text of ``Pipeline.describe()``: one line per stage, then the bottleneck."""
    elapsed = run.elapsed if run is not None else 0.0
    head = (
        f"{'#':>2} {'stage':<28} {'conc':>4} {'in':>8} {'out':>8} {'dropped':>7} {'items/s':>9} "
        f"{'busy':>5} {'occ':>5} {'starved':>7} {'get p50/p99 ms':>15} {'put p50/p99 ms':>15}"
    )
    lines = [f"pipeline: {len(stats)} stages, {elapsed:.3f} s", head]
    for i, s in enumerate(stats):
        busy = s.busy_fraction
        lines.append(
            f"{i:>2} {s.name[:28]:<28} {s.concurrency:>4} {s.items_in:>8} "
            f"{s.items_out:>8} {s.items_dropped:>7} {s.items_per_s:>9.1f} {busy:>5.0%} "
            f"{s.occupancy_mean:>5.2f} {s.starved_fraction:>7.0%} "
            f"{s.get_wait_p50_s * 1e3:>7.2f}/{s.get_wait_p99_s * 1e3:<7.2f} "
            f"{s.put_wait_p50_s * 1e3:>7.2f}/{s.put_wait_p99_s * 1e3:<7.2f}"
        )
    if run is None or not stats:
        lines.append("bottleneck: n/a (not run yet)")
    else:
        lines.append(f"bottleneck: {bottleneck(stats)}")
    return "\n".join(lines)
