"""Checkpoints of a running pipeline: a consistent cut, taken with a short pause.

``take_checkpoint(run)`` (what ``await items.checkpoint()`` runs):

1. checks that every stage can say where it is (``refusal``): a source that is an
   in-memory sequence, or that implements ``state()``/``restore(state)``; no source that
   is an external queue or a one-shot iterator, no ``to_queue`` stage;
2. asks every worker to pause at its next pause point (``Control.pause``: the start of
   a step, before it takes new input, holding nothing);
3. waits until the run is at rest (``at_rest``): each worker of each stage is paused,
   or ended (or not started yet), or parked on its input queue, which cannot give it
   anything (``quiet_takers``; for an ordered map, every worker in the take section of
   its turns), or parked on its full output queue, which cannot take what it still has
   to admit (``quiet_putters``), or, in an ordered map, holding a finished burst that
   waits for a turn not yet its own. Items that were in a worker's hands when the
   pause began are finished first and then either land or wait in one of those ways;
   no queue is opened beyond its capacity, so checkpoints, however frequent, add
   nothing to the run's queues;
4. captures, with no await in between, every stage queue's items in order (the inputs
   an unordered async map took and has not worked on yet, as its burst did not fit in
   one slice; claims of a waiting batch dequeue; the items held; what its waiting
   enqueues will admit; an ordered map's finished bursts waiting for their turns; a
   process map's ledger: the results it received and has not handed on, after its
   output queue's items, and the inputs of the bursts still in its workers' hands, in
   front of its input queue's, see ``process/_driver.py``; the rows of the batch
   records in a process map's queue, when its workers write the batches in place, and
   the rows the batch stage holds while it waits for the rest of its batch), the
   source's position, each shuffle's buffer and random state and the settings the
   tuner holds in force (``state.settings``); a state holds items,
   never records (``apply_state`` puts resumed rows back in records of a batch);
5. checks that nothing moved while it looked (``_generation``: every queue's totals and
   closed flag, every stage's paused count, every ordered map's turn, every process
   map's ledger; a worker can only leave a state of rest through one of them) and
   otherwise looks again;
6. resumes the workers, also when it is cancelled or fails (so a cancelled checkpoint
   leaves the pipeline running, its output unchanged).

A stage whose order depends on timing (``inexact``: a map with several workers and
``ordered=False``, a shuffle without a seed) does not stop a checkpoint, but its
resume delivers every item once without delivering the same batches: the state names
those stages (``state.inexact``) and ``checkpoint()`` says so with a
CheckpointWarning, which Python shows once per line of code by default.

So the cut holds every item exactly once: unread at the source, in a queue, or in a
shuffle buffer; everything the consumer received came before it. ``apply_state``
puts a state into a run before its workers start.

A checkpoint reads the run through ``Running`` (what ``PipelineRun`` offers), so this
module does not import the run's.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Protocol

import anyio

from ..._errors import CheckpointError, CheckpointWarning, ElementSpecError
from ..._input._epochs import in_memory
from ..._running._runner import QueueRunner
from ..defs._stage_spec import StageSpec, resumable
from ..defs._state import PipelineState
from ..flow._meter import Meter
from ..process._inplace import records_of
from ._build import Site
from ._sources import SequenceSource

__all__ = [
    "apply_positions",
    "apply_state",
    "at_rest",
    "check_state",
    "fingerprint",
    "inexact",
    "refusal",
    "take_checkpoint",
]


class Running(Site, Protocol):
    """What a checkpoint reads of a run (``PipelineRun``), beside what its stages
    registered (``Site``)."""

    specs: tuple[StageSpec, ...]
    runners: list[QueueRunner | None]
    added: dict[int, list[QueueRunner]]  # runners of workers a tuner added, by stage
    meters: list[Meter]
    workers: list[int]
    started: anyio.Event

    @property
    def parked(self) -> dict[int, int]:
        """Workers parked at each tuned map's gate now, by stage."""
        ...

    def settings(self) -> dict[int, dict[str, int]]:
        """The settings in force of the stages the tuner holds, by stage."""
        ...

    def check_running(self) -> None:
        """Raise the run's failure, or QueueClosedError once it is finishing."""
        ...


_QUICK_POLLS = 10  # event-loop turns to look for rest before polling every half millisecond


def refusal(specs: Sequence[StageSpec]) -> str | None:
    """Why a pipeline of these stages cannot be checkpointed, or None."""
    head = specs[0]
    where = f"stage 0 '{head.label}'"
    if head.kind == "queue":
        return (
            f"{where} reads an external queue, whose position is the queue's own (take "
            "a snapshot of that queue instead)"
        )
    if head.kind == "producer" and not resumable(head.fn):
        return (
            f"{where} calls {type(head.fn).__name__} objects, which cannot say where they "
            "are; give the source state() and restore(state) methods"
        )
    if head.kind in ("iterable", "async_iterable"):
        source = head.fn
        if not in_memory(source) and not resumable(source):
            return (
                f"{where} reads a {type(source).__name__}, a one-shot iterator that cannot "
                "say where it is; pass a list, tuple, range or array, or give the source state() "
                "and restore(state) methods"
            )
    for i, spec in enumerate(specs):
        if spec.kind == "to_queue":
            return (
                f"stage {i} '{spec.label}' sends its items into an external queue (take a "
                "snapshot of that queue instead)"
            )
    return None


def inexact(specs: Sequence[StageSpec]) -> tuple[str, ...]:
    """The stages whose order depends on timing, each with what would fix it."""
    out = []
    for spec in specs:
        if spec.kind == "map" and not spec.ordered and spec.concurrency > 1:
            out.append(
                f"{spec.label}: {spec.concurrency} workers, ordered=False (pass ordered=True)"
            )
        elif spec.kind == "shuffle" and spec.seed is None:
            out.append(f"{spec.label}: no seed (pass seed=...)")
    return tuple(out)


def fingerprint(specs: Sequence[StageSpec]) -> list[dict[str, Any]]:
    """What a state must match to be restored into a pipeline of these stages."""
    out = []
    for spec in specs:
        entry: dict[str, Any] = {"kind": spec.kind, "label": spec.label}
        if spec.kind in ("iterable", "async_iterable"):
            entry["epochs"] = spec.epochs
            if in_memory(spec.fn):
                entry["length"] = len(spec.fn)
        # (not concurrency or capacities: a state may resume with other ones)
        for field in ("ordered", "size", "smaller", "pad", "seed"):
            entry[field] = getattr(spec, field)
        out.append(entry)
    return out


def at_rest(run: Running) -> bool:
    """Whether every worker of every stage is at rest (see the module docstring)."""
    for i in range(len(run.specs)):
        runner = run.runners[i]
        if runner is None:
            return False  # not started yet
        if not runner.running:
            continue  # ended, and its output queue was told
        # Ended workers hold nothing and take nothing more; idle ones (threads not yet
        # running) will pause before their first take.
        # (a tuned map's workers may be under several runners; a parked one is at rest)
        states = [s for r in (runner, *run.added.get(i, ())) for _, s in r.producer_states()]
        quiet = sum(1 for state in states if state in ("done", "idle"))
        quiet += run.stop.paused[i] + run.parked.get(i, 0)
        turns = run.turns.get(i)
        if i > 0:
            takers = run.queues[i - 1].quiet_takers()
            if turns is None:
                quiet += takers
            elif takers:  # the lock holder parked: it and those waiting for the lock
                quiet += turns.taking_count
        quiet += run.queues[i].quiet_putters()
        if turns is not None:
            quiet += turns.quiet_waiting()
        if quiet < run.workers[i]:
            return False
    return True


def _generation(run: Running) -> tuple[Any, ...]:
    """What changes whenever a worker leaves a state of rest (see the module
    docstring): two equal readings around a capture mean nothing moved in between."""
    queues = []
    for q in run.queues:
        st = q.statistics()
        queues.append((st.enqueued_total, st.dequeued_total, st.closed))
    turns = tuple((i, t.next_out) for i, t in sorted(run.turns.items()))
    ledgers = tuple((i, led.version) for i, led in sorted(run.ledgers.items()))
    return (tuple(queues), tuple(run.stop.paused), turns, ledgers)


async def take_checkpoint(run: Running) -> PipelineState:
    """A consistent cut of ``run`` (see the module docstring).

    Raises:
        CheckpointError: A stage cannot say where it is (nothing is paused then).
    """
    why = refusal(run.specs)
    if why is not None:
        raise CheckpointError(f"cannot checkpoint this pipeline: {why}")
    loose = inexact(run.specs)
    if loose:
        warnings.warn(
            CheckpointWarning(
                "a resume from this checkpoint delivers every item once, but not the same "
                "batches, since the order of these stages depends on timing: " + "; ".join(loose)
            ),
            stacklevel=3,  # the caller of items.checkpoint()
        )
    run.check_running()
    await run.started.wait()
    run.stop.pause()
    try:
        polls = 0
        while True:
            before = _generation(run)
            if at_rest(run):
                state = _capture(run)
                if _generation(run) == before:
                    return state
            run.check_running()
            polls += 1
            await anyio.sleep(0 if polls < _QUICK_POLLS else 0.0005)
    finally:
        run.stop.resume()


def _capture(run: Running) -> PipelineState:
    reader = run.reader
    source: dict[str, Any] = {}
    if reader is not None:
        source = reader.epochs.state()
        user = run.specs[0].fn
        if resumable(user):
            source["user"] = user.state()
    cuts = {i: led.cut(run.specs[i].ordered) for i, led in run.ledgers.items()}
    queues = []
    for i, q in enumerate(run.queues):
        items = q.items()
        if i in run.writers:  # batch records: their rows are the items
            items = [row for record in items for row in record.rows]
        turns = run.turns.get(i)
        if turns is not None:
            items += turns.waiting_items()
        if i in cuts:  # results a process map received and has not handed on
            items += cuts[i][0]
        if i + 1 < len(run.meters):  # inputs the next stage took and has not worked on
            items = [x for w in run.meters[i + 1].workers for x in w.held] + items
        if i + 1 in cuts:  # inputs a process map sent and has no results for (yet)
            items = cuts[i + 1][1] + items
        queues.append(items)
    return PipelineState(
        stages=fingerprint(run.specs),
        source=source,
        queues=queues,
        shuffles={i: s.state() for i, s in run.shuffles.items()},
        inexact=inexact(run.specs),
        settings=run.settings(),
    )


def check_state(specs: Sequence[StageSpec], state: PipelineState) -> None:
    """Refuse a state taken from another pipeline, naming the first difference.

    Raises:
        ElementSpecError: The stages differ (kind, label, source, concurrency, order,
            sizes, seeds).
    """
    mine = fingerprint(specs)
    if len(mine) != len(state.stages):
        raise ElementSpecError(
            f"Pipeline.open(state=...): the state is of a pipeline of {len(state.stages)} "
            f"stages, this one has {len(mine)}"
        )
    for i, (want, got) in enumerate(zip(mine, state.stages)):
        if want != got:
            keys = sorted(set(want) | set(got))
            first = next(k for k in keys if want.get(k) != got.get(k))
            raise ElementSpecError(
                f"Pipeline.open(state=...): stage {i} differs in {first}: the state has "
                f"{got.get(first)!r}, this pipeline has {want.get(first)!r} (state stage "
                f"{got.get('label')!r}, pipeline stage {want.get('label')!r})"
            )


def apply_state(run: Running, state: PipelineState) -> None:
    """Put ``state`` into ``run``: queue items now, the source's position and the
    shuffles' buffers once their steps exist (``apply_positions``)."""
    for i, (q, items) in enumerate(zip(run.queues, state.queues)):
        writer = run.writers.get(i)
        if items:
            q.load_items(items if writer is None else records_of(items, writer.n))


def apply_positions(run: Running, state: PipelineState) -> None:
    """The source's position and each shuffle's state (after the steps were built,
    before they run)."""
    reader = run.reader
    if reader is not None and state.source:
        user = run.specs[0].fn
        if "user" in state.source:
            user.restore(state.source["user"])
        reader.epochs.restore(state.source, reposition=not isinstance(reader, SequenceSource))
    for i, shuffle in run.shuffles.items():
        if i in state.shuffles:
            shuffle.restore(state.shuffles[i])
