"""What a pipeline run reports: its StageStatistics, ``describe()`` text and bottleneck.

Statistics are measured per stage: the workers record into the stage's ``Meter``
(``flow/_meter.py``), the queues count what went through them, and ``sample_occupancy``, a
task of the run, samples every queue's occupancy until the run ends or every queue is
closed and empty: every ``_SAMPLE_MIN_S`` at first, then less often as the run ages (a
hundredth of its age, at most every ``_SAMPLE_MAX_S``), so a short run still gets about
a hundred samples and a long one wakes the event loop rarely; each sample is weighted
by the interval it stands for. ``stage_statistics`` turns these into one
StageStatistics per stage; it only reads, so it may be called at any time, during the
run or after it. Before a run, every stage reports zeros (``zero_statistics``).

A stage's ``items_in`` is what the previous stage's queue gave out (for a source, what
it enqueued); its ``items_out`` what its own queue took in, except for ``to_queue``,
whose items leave the pipeline: there, items out equal items in. A queue of batch
records (a process map whose workers write the batches in place) counts rows, as the
run gives them (``rows``): the items the map put into it and the batch stage took out.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..._queues._fifo import StageQueue
from ..defs._stage_spec import StageSpec, measures_cpu
from ..flow._meter import Meter, StageStatistics, percentiles

if TYPE_CHECKING:
    from ..process._inplace import BatchWriter
    from ..process._workers import WorkerPool

__all__ = [
    "bottleneck",
    "describe_run",
    "free_threaded",
    "interpreter",
    "process_notes",
    "sample_occupancy",
    "stage_statistics",
    "zero_statistics",
]

_perf = time.perf_counter
_SAMPLE_MIN_S = 0.005  # the shortest interval between occupancy samples
_SAMPLE_MAX_S = 0.05  # the longest
_BUSY = 0.6  # a stage this busy (fraction of its workers' time) limits throughput
_IDLE = 0.3  # every stage below this: the hand-offs, not the stages' work, set the pace
_SOURCE_KINDS = ("iterable", "async_iterable", "queue", "producer")
_FULL = 0.5  # an output queue this full on average: the consumer is the limit
_HANDOFF = 0.5  # a process map's hand-off taking this share of one core limits throughput
_STARTUP = 0.5  # worker processes starting for this share of the run limit its throughput
_ZERO_FIELDS = (
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


async def sample_occupancy(
    queues: Sequence[StageQueue], meters: Sequence[Meter], ended: Callable[[], bool]
) -> None:
    """Add each live queue's occupancy to its stage's meter, weighted by the interval
    until the next sample (see the module docstring), until ``ended()`` or no queue is
    live any more."""
    start = _perf()
    while not ended():
        dt = min(_SAMPLE_MAX_S, max(_SAMPLE_MIN_S, (_perf() - start) / 100))
        live = False
        for q, m in zip(queues, meters):
            size = q.size()
            if size or not q.closed:
                live = True
                m.occ_sum += dt * size / q.capacity
                m.occ_n += dt
        if not live:
            return
        await anyio.sleep(dt)


def zero_statistics(specs: Sequence[StageSpec]) -> tuple[StageStatistics, ...]:
    """One StageStatistics of zeros per stage (a pipeline not run yet)."""
    zero: dict[str, Any] = dict.fromkeys(_ZERO_FIELDS, 0.0)
    return tuple(
        StageStatistics(
            name=s.label,
            items_in=0,
            items_out=0,
            items_dropped=0,
            concurrency=s.concurrency,
            cpu_s=0.0 if measures_cpu(s) else None,
            **zero,
        )
        for s in specs
    )


def stage_statistics(
    specs: Sequence[StageSpec],
    queues: Sequence[StageQueue],
    meters: Sequence[Meter],
    elapsed: float,
    rows: Mapping[int, tuple[int, int]] | None = None,
) -> tuple[StageStatistics, ...]:
    """One StageStatistics per stage whose queue exists, ``elapsed`` seconds into the run.

    ``rows[i]``, for a queue that holds batch records rather than items (a process map
    that writes its batches in place): the items (rows) put into it and taken out of
    it, which its own totals (records) do not say.
    """
    elapsed = max(elapsed, 1e-9)
    rows = rows or {}
    out: list[StageStatistics] = []
    for i, spec in enumerate(specs):
        if i >= len(queues):
            break
        st = queues[i].statistics()
        if i == 0:
            items_in = st.enqueued_total
        elif i - 1 in rows:
            items_in = rows[i - 1][1]
        else:
            items_in = queues[i - 1].statistics().dequeued_total
        put = rows[i][0] if i in rows else st.enqueued_total
        items_out = items_in if spec.kind == "to_queue" else put
        m = meters[i]
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
                handoff_s=m.handoff,
                cpu_s=m.cpu if measures_cpu(spec) else None,
            )
        )
    return tuple(out)


def free_threaded() -> bool:
    """Whether this interpreter runs without a GIL (free-threaded CPython 3.13+)."""
    probe = getattr(sys, "_is_gil_enabled", None)
    return probe is not None and not probe()


def interpreter() -> str:
    """This interpreter in a few words, and whether threads share a GIL."""
    gil = "free-threaded: no GIL" if free_threaded() else "with the GIL"
    return f"{platform.python_implementation()} {platform.python_version()}, {gil}"


def _is_process(spec: StageSpec | None) -> bool:
    return spec is not None and spec.kind == "map" and spec.executor == "process"


def _handoff_share(s: StageStatistics) -> float:
    """The share of one core the stage's hand-off took."""
    return s.handoff_s / s.elapsed_s if s.elapsed_s > 0 else 0.0


def process_notes(
    specs: Sequence[StageSpec],
    stats: tuple[StageStatistics, ...],
    pools: Mapping[int, WorkerPool],
    writers: Mapping[int, BatchWriter],
) -> list[str]:
    """describe()'s line for each process map: its workers, what the hand-off costs
    the main process per item, and whether the batches after it are written in place."""
    lines = []
    for i, pool in sorted(pools.items()):
        if i >= len(stats):
            continue
        s = stats[i]
        per_item = s.handoff_s / s.items_in * 1e6 if s.items_in else 0.0
        ready = f"ready after {pool.ready_s:.2f} s" if pool.ready_s else "not all ready"
        if pool.retired:  # (a tuned map whose cuts held: its parked processes ended)
            ready += f"; {pool.live} running, {pool.retired} retired after the tuner's cuts"
        line = (
            f"{i} {specs[i].label}: {s.concurrency} worker processes (spawn, {ready}); "
            f"hand-off {per_item:.0f} µs of main-process CPU per item "
            f"({_handoff_share(s):.0%} of one core)"
        )
        writer = writers.get(i)
        if writer is not None and i + 1 < len(stats):
            line += (
                f"; {writer.fused} of {stats[i + 1].items_out} batches of stage {i + 1} "
                "written in place by the workers"
            )
        lines.append(line)
    return lines


def _gil(spec: StageSpec) -> str:
    """The GIL's caveat for a thread map (nothing for other maps or free-threaded builds)."""
    if spec.executor != "thread" or free_threaded():
        return ""
    return (
        " (with the GIL, threads run Python code one at a time: a function that holds it "
        "scales with executor='process')"
    )


def _advice(spec: StageSpec | None) -> str:
    """What would relieve a busy stage of this kind (a batch stage has no function and
    one worker, so "more concurrency" is no advice for it)."""
    kind = "" if spec is None else spec.kind
    if spec is not None and kind == "map" and spec.auto is not None:
        # (the tuner sets this map's concurrency: "add workers" is its job, not the user's)
        return (
            "its concurrency is the tuner's (see its last decision above: it adds workers "
            "while that helps, within its budgets), so a faster function, a higher cap "
            f"(Auto(max=...)) or more CPU budget would help{_gil(spec)}"
        )
    if spec is not None and kind == "map":
        if spec.executor == "process":
            return (
                "more worker processes there (map(..., concurrency=N), while cores are "
                "free) or a cheaper function would help"
            )
        if spec.executor == "thread":
            return (
                "more threads there (map(..., concurrency=N), while cores are free) or a "
                f"faster function would help{_gil(spec)}"
            )
        return "more concurrency there (map(..., concurrency=N)) or a faster function would help"
    if kind == "filter":
        return (
            "a filter stage has one worker: a cheaper predicate would help (or filtering "
            "inside a concurrent map)"
        )
    if kind == "batch":
        return (
            "a batch stage has one worker and no function of its own: its time goes to "
            "copying every item into the batch arrays, so smaller items would help, not "
            "more concurrency"
        )
    if kind == "shuffle":
        return (
            "a shuffle stage has one worker and no function of its own: its time goes to "
            "moving each item through its buffer, so fewer, larger items would help "
            "(batch before shuffling)"
        )
    if kind == "prefetch":
        return "a prefetch stage only moves items between queues: fewer, larger items would help"
    if kind == "to_queue":
        return "sending the items into the target queue is its work: a faster target would help"
    if kind in _SOURCE_KINDS:
        return "reading the items is its work, on one worker: a faster source would help"
    return "a faster stage would help"


def bottleneck(
    stats: tuple[StageStatistics, ...],
    specs: Sequence[StageSpec | None] = (),
    startup: Mapping[int, float] | None = None,
) -> str:
    """What limits the run's throughput, in one line (``specs[i]`` is stage ``i``'s, for
    advice that fits its kind; ``startup[i]`` the seconds stage ``i``'s worker
    processes took to start). The one rule, with margins so that a run like the last
    one gets the same verdict:

    - Worker start-up, when a process map's workers took at least ``_STARTUP`` (half)
      of the run to start.
    - The consumer, when the pipeline keeps ahead of it: the last stage's output queue
      was at least ``_FULL`` full on average and the consumer waited less than 10% of
      the time.
    - Else each stage whose workers were busy at least ``_BUSY`` (60%) of the time
      (more than one: all of them, busiest first), with what would relieve it.
    - Else, when every stage was busy less than ``_IDLE`` (30%) of the time, no stage's
      own work limits the run: the hand-offs between stages (per-item overhead) do.
    - Else no clear bottleneck: the busiest stage was busy between 30% and 60% of the
      time, too little to name it and too much to blame the hand-offs alone.
    """
    last = stats[-1]
    for i, took in sorted((startup or {}).items()):
        if i < len(stats) and took >= _STARTUP * stats[i].elapsed_s:
            s = stats[i]
            return (
                f"worker start-up — the {s.concurrency} worker processes of {s.name} took "
                f"{took:.2f} s of the run's {s.elapsed_s:.2f} s to start (each a fresh "
                "interpreter that imports the function's module): a longer run, or one "
                "pipeline kept open across epochs (repeat), spreads that cost"
            )
    if last.occupancy_mean >= _FULL and last.starved_fraction < 0.1:
        return (
            f"the consumer — the pipeline keeps ahead of it (its output queue was "
            f"{last.occupancy_mean:.0%} full on average, the consumer waited "
            f"{last.starved_fraction:.0%} of the time)"
        )
    order = sorted(range(len(stats)), key=lambda i: -stats[i].busy_fraction)
    busy = [i for i in order if stats[i].busy_fraction >= _BUSY]
    worst = stats[order[0]]  # the busiest
    if busy:
        first = stats[busy[0]]
        spec = specs[busy[0]] if busy[0] < len(specs) else None
        advice = _advice(spec)
        if len(busy) == 1:
            n = first.concurrency
            if _is_process(spec):
                who = "its worker process was" if n == 1 else f"its {n} worker processes were"
            else:
                who = "its worker was" if n == 1 else f"its {n} workers were"
            handoff = ""
            if _is_process(spec):
                handoff = f" (the hand-off took {_handoff_share(first):.0%} of one core)"
            return (
                f"{first.name} — {who} busy {first.busy_fraction:.0%} of the time"
                f"{handoff}; {advice}"
            )
        names = " and ".join(f"{stats[i].name} ({stats[i].busy_fraction:.0%} busy)" for i in busy)
        return (
            f"{names} — each was busy at least {_BUSY:.0%} of the time; for {first.name}: {advice}"
        )
    handing = [
        i
        for i in order
        if i < len(specs) and _is_process(specs[i]) and _handoff_share(stats[i]) >= _HANDOFF
    ]
    if handing:
        s = stats[handing[0]]
        per_item = s.handoff_s / s.items_in * 1e6 if s.items_in else 0.0
        return (
            f"{s.name} — handing items to and from its worker processes took "
            f"{_handoff_share(s):.0%} of one core of the main process ({per_item:.0f} µs "
            f"per item) while they were busy only {s.busy_fraction:.0%} of the time: the "
            "hand-off, not the workers, sets the pace; fewer, larger items (group them "
            "before the map) or a batch stage right after the map would help"
        )
    if worst.busy_fraction < _IDLE:
        return (
            f"per-item overhead — no stage was busy more than {worst.busy_fraction:.0%} of "
            f"the time and the consumer waited {last.starved_fraction:.0%} of it: the "
            "hand-offs between stages, not the stages' work, set the pace"
        )
    return (
        f"no clear bottleneck — the busiest stage, {worst.name}, was busy "
        f"{worst.busy_fraction:.0%} of the time (a stage is named from {_BUSY:.0%}, "
        f"per-item overhead below {_IDLE:.0%}) and the consumer waited "
        f"{last.starved_fraction:.0%} of it"
    )


def describe_run(
    stats: tuple[StageStatistics, ...],
    elapsed: float | None,
    specs: Sequence[StageSpec | None] = (),
    notes: Sequence[str] = (),
    startup: Mapping[int, float] | None = None,
) -> str:
    """The text of ``Pipeline.describe()``: one line per stage, ``notes`` (the process
    maps', ``process_notes``), then the bottleneck.

    ``elapsed`` is the run's duration so far, None for a pipeline not run yet; ``specs``
    the stages' descriptions (for advice that fits each stage's kind). The first line
    names the interpreter and whether it runs with a GIL.
    """
    head = (
        f"{'#':>2} {'stage':<28} {'conc':>4} {'in':>8} {'out':>8} {'dropped':>7} {'items/s':>9} "
        f"{'busy':>5} {'occ':>5} {'starved':>7} {'get p50/p99 ms':>15} {'put p50/p99 ms':>15}"
    )
    total = elapsed if elapsed is not None else 0.0
    lines = [f"pipeline: {len(stats)} stages, {total:.3f} s ({interpreter()})", head]
    for i, s in enumerate(stats):
        busy = s.busy_fraction
        lines.append(
            f"{i:>2} {s.name[:28]:<28} {s.concurrency:>4} {s.items_in:>8} "
            f"{s.items_out:>8} {s.items_dropped:>7} {s.items_per_s:>9.1f} {busy:>5.0%} "
            f"{s.occupancy_mean:>5.2f} {s.starved_fraction:>7.0%} "
            f"{s.get_wait_p50_s * 1e3:>7.2f}/{s.get_wait_p99_s * 1e3:<7.2f} "
            f"{s.put_wait_p50_s * 1e3:>7.2f}/{s.put_wait_p99_s * 1e3:<7.2f}"
        )
    lines.extend(notes)
    if elapsed is None or not stats:
        lines.append("bottleneck: n/a (not run yet)")
    else:
        lines.append(f"bottleneck: {bottleneck(stats, specs, startup)}")
    return "\n".join(lines)
