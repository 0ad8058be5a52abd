"""How each kind of stage is built: one builder per kind, in a table (``BUILDERS``).

A run builds stage ``i`` with ``BUILDERS[builder_key(spec)](run, i, spec, stage)``:
the builder returns the stage's steps (its runner's producers: ``_sources.py``,
``_maps.py``, ``_stages.py``, ``process/_driver.py``) and registers, in the run, what
the run keeps of the stage while it goes (``Site``): the source's reader, a shuffle's
buffer, an ordered map's turns. A map's key says its executor (``"map/thread"``); a
process map's worker processes, batch writer and ledger exist before its drivers are
built (the run starts them first, ``PipelineRun.start``).

A new kind of stage is a spec (``defs/_stage_spec.py``), its steps, and one line here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from ..._input._epochs import in_memory
from ..._queues._fifo import StageQueue
from ..._running._producers import is_async_callable
from ..defs._stage_spec import StageSpec
from ..flow._bursts import Burst
from ..flow._control import Control, Stage
from ..flow._turns import AsyncTurns, ThreadTurns
from ..process._driver import Ledger, Sizes, map_step
from ..process._inplace import BatchWriter
from ..process._workers import Worker, WorkerPool
from ..tune._gate import Gate
from ._maps import async_map_step, thread_map_step
from ._sources import AsyncSource, SequenceSource, SyncSource, producer_step, queue_step
from ._stages import (
    ShuffleStep,
    batch_step,
    filter_step,
    prefetch_step,
    record_batch_step,
    send_step,
)

__all__ = ["BUILDERS", "Reader", "Site", "builder_key", "map_steps", "process_steps"]

Reader = SequenceSource | SyncSource | AsyncSource  # a source that reads an iterable


class Site(Protocol):
    """What a builder reads from, and registers in, the run (``PipelineRun``)."""

    stop: Control
    queues: list[StageQueue]
    reader: Reader | None
    shuffles: dict[int, ShuffleStep]
    turns: dict[int, ThreadTurns | AsyncTurns]
    pools: dict[int, WorkerPool]
    writers: dict[int, BatchWriter]
    ledgers: dict[int, Ledger]


Builder = Callable[[Site, int, StageSpec, Stage], list[Any]]


def builder_key(spec: StageSpec) -> str:
    """The key of ``spec``'s builder: its kind, and a map's executor."""
    return f"map/{spec.executor}" if spec.kind == "map" else spec.kind


# -- sources -------------------------------------------------------------------------------


def _iterable(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    source: Reader
    if in_memory(spec.fn):  # read on the loop, no thread
        source = SequenceSource(spec.fn, spec.epochs, stage, run.queues[0])
    else:
        source = SyncSource(spec.fn, spec.epochs, stage)
    run.reader = source
    return [source]


def _async_iterable(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    run.reader = AsyncSource(spec.fn, spec.epochs, stage)
    return [run.reader]


def _queue(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    return [queue_step(spec.fn, stage)]


def _producer(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    return [producer_step(spec.fn, is_async_callable(spec.fn), stage)]


# -- maps ----------------------------------------------------------------------------------


def _task_map(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    if spec.ordered:
        run.turns[i] = AsyncTurns(run.stop, i)
    return map_steps(run, i, spec, stage, range(spec.concurrency))


def _thread_map(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    if spec.ordered:
        run.turns[i] = ThreadTurns(run.stop, i)
    return map_steps(run, i, spec, stage, range(spec.concurrency))


def map_steps(run: Site, i: int, spec: StageSpec, stage: Stage, slots: range) -> list[Any]:
    """The steps of a task or thread map's workers ``slots`` (at the start, and those a
    tuner adds to a running map: they share its turns, if ordered)."""
    turns = run.turns.get(i)
    if spec.executor == "task":
        assert turns is None or isinstance(turns, AsyncTurns)
        inq = run.queues[i - 1]
        steps = [async_map_step(spec.fn, inq, stage, turns, k) for k in slots]
        return steps if stage.gate is None else [_opening_task(s, stage.gate) for s in steps]
    assert turns is None or isinstance(turns, ThreadTurns)
    view = run.queues[i - 1].blocking()
    steps_t = [thread_map_step(spec.fn, view, stage, turns, k) for k in slots]
    return steps_t if stage.gate is None else [_opening_thread(s, stage.gate) for s in steps_t]


# A tuned map's worker that ends (its input ended, the stage stops or fails) opens the
# gate: workers parked there are still producers of the output queue, which closes only
# once each of them has met the end too. (A thread map's gate has only threads parked
# at it, so closing it from a worker thread touches no event-loop object.)


def _opening_thread(step: Callable[[], Burst], gate: Gate) -> Callable[[], Burst]:
    def opening() -> Burst:
        try:
            return step()
        except BaseException:
            gate.close()
            raise

    return opening


def _opening_task(
    step: Callable[[], Awaitable[Burst]], gate: Gate
) -> Callable[[], Awaitable[Burst]]:
    async def opening() -> Burst:
        try:
            return await step()
        except BaseException:
            gate.close()
            raise

    return opening


def _process_map(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    if run.turns.get(i) is None and spec.ordered:
        run.turns[i] = ThreadTurns(run.stop, i)
    return process_steps(run, i, spec, stage, run.pools[i].workers)


def process_steps(
    run: Site, i: int, spec: StageSpec, stage: Stage, workers: Sequence[Worker]
) -> list[Any]:
    """The drivers of a process map's ``workers`` (at the start, and those a tuner adds
    to a running map: they share its turns, ledger and batch writer)."""
    writer = run.writers.get(i)  # (made with its turns when the run started)
    turns = run.turns.get(i)
    assert turns is None or isinstance(turns, ThreadTurns)
    view, ledger, sizes = run.queues[i - 1].blocking(), run.ledgers[i], Sizes()
    steps = [
        map_step(w, view, stage, turns, ledger, sizes, ordered=spec.ordered, writer=writer)
        for w in workers
    ]
    return steps if stage.gate is None else [_opening_thread(s, stage.gate) for s in steps]


# -- the other stages ----------------------------------------------------------------------


def _filter(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    return [filter_step(spec.fn, spec.executor == "task", run.queues[i - 1], stage)]


def _shuffle(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    shuffle = run.shuffles[i] = ShuffleStep(spec.size, spec.seed, run.queues[i - 1], stage)
    return [shuffle]


def _batch(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    view = run.queues[i - 1].blocking()
    writer = run.writers.get(i - 1)  # the map before writes the batches in place
    if writer is not None:
        return [record_batch_step(spec.size, spec.smaller, view, stage, writer)]
    return [batch_step(spec.size, spec.smaller, spec.pad, view, stage)]


def _prefetch(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    return [prefetch_step(run.queues[i - 1], stage)]


def _to_queue(run: Site, i: int, spec: StageSpec, stage: Stage) -> list[Any]:
    return [send_step(run.queues[i - 1], spec.pad, stage)]


BUILDERS: dict[str, Builder] = {
    "iterable": _iterable,
    "async_iterable": _async_iterable,
    "queue": _queue,
    "producer": _producer,
    "map/task": _task_map,
    "map/thread": _thread_map,
    "map/process": _process_map,
    "filter": _filter,
    "shuffle": _shuffle,
    "batch": _batch,
    "prefetch": _prefetch,
    "to_queue": _to_queue,
}
