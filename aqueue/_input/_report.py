"""What a pipeline run reports: its StageStatistics, ``describe()`` text and bottleneck.

Statistics are measured per stage: the workers record into the stage's ``Meter``
(``_meter.py``), the queues count what went through them, and ``sample_occupancy``, a
task of the run, samples every queue's occupancy until the run ends or every queue is
closed and empty: every ``_SAMPLE_MIN_S`` at first, then less often as the run ages (a
hundredth of its age, at most every ``_SAMPLE_MAX_S``), so a short run still gets about
a hundred samples and a long one wakes the event loop rarely; each sample is weighted
by the interval it stands for. ``stage_statistics`` turns these into one
StageStatistics per stage; it only reads, so it may be called at any time, during the
run or after it. Before a run, every stage reports zeros (``zero_statistics``).

A stage's ``items_in`` is what the previous stage's queue gave out (for a source, what
it enqueued); its ``items_out`` what its own queue took in, except for ``to_queue``,
whose items leave the pipeline: there, items out equal items in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import anyio

from .._queues._fifo import StageQueue
from ._meter import Meter, StageStatistics, percentiles
from ._stage_spec import StageSpec

__all__ = [
    "bottleneck",
    "describe_run",
    "sample_occupancy",
    "stage_statistics",
    "zero_statistics",
]

_perf = time.perf_counter
_SAMPLE_MIN_S = 0.005  # the shortest interval between occupancy samples
_SAMPLE_MAX_S = 0.05  # the longest
_BUSY = 0.5  # a stage this busy (fraction of its workers' time) can limit throughput
_FULL = 0.5  # an output queue this full on average: the consumer is the limit
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
    zero = dict.fromkeys(_ZERO_FIELDS, 0.0)
    return tuple(
        StageStatistics(
            name=s.label,
            items_in=0,
            items_out=0,
            items_dropped=0,
            concurrency=s.concurrency,
            **zero,
        )
        for s in specs
    )


def stage_statistics(
    specs: Sequence[StageSpec],
    queues: Sequence[StageQueue],
    meters: Sequence[Meter],
    elapsed: float,
) -> tuple[StageStatistics, ...]:
    """One StageStatistics per stage whose queue exists, ``elapsed`` seconds into the run."""
    elapsed = max(elapsed, 1e-9)
    out: list[StageStatistics] = []
    for i, spec in enumerate(specs):
        if i >= len(queues):
            break
        st = queues[i].statistics()
        items_in = queues[i - 1].statistics().dequeued_total if i > 0 else st.enqueued_total
        items_out = items_in if spec.kind == "to_queue" else st.enqueued_total
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
            )
        )
    return tuple(out)


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


def describe_run(stats: tuple[StageStatistics, ...], elapsed: float | None) -> str:
    """The text of ``Pipeline.describe()``: one line per stage, then the bottleneck.

    ``elapsed`` is the run's duration so far, None for a pipeline not run yet.
    """
    head = (
        f"{'#':>2} {'stage':<28} {'conc':>4} {'in':>8} {'out':>8} {'dropped':>7} {'items/s':>9} "
        f"{'busy':>5} {'occ':>5} {'starved':>7} {'get p50/p99 ms':>15} {'put p50/p99 ms':>15}"
    )
    total = elapsed if elapsed is not None else 0.0
    lines = [f"pipeline: {len(stats)} stages, {total:.3f} s", head]
    for i, s in enumerate(stats):
        busy = s.busy_fraction
        lines.append(
            f"{i:>2} {s.name[:28]:<28} {s.concurrency:>4} {s.items_in:>8} "
            f"{s.items_out:>8} {s.items_dropped:>7} {s.items_per_s:>9.1f} {busy:>5.0%} "
            f"{s.occupancy_mean:>5.2f} {s.starved_fraction:>7.0%} "
            f"{s.get_wait_p50_s * 1e3:>7.2f}/{s.get_wait_p99_s * 1e3:<7.2f} "
            f"{s.put_wait_p50_s * 1e3:>7.2f}/{s.put_wait_p99_s * 1e3:<7.2f}"
        )
    if elapsed is None or not stats:
        lines.append("bottleneck: n/a (not run yet)")
    else:
        lines.append(f"bottleneck: {bottleneck(stats)}")
    return "\n".join(lines)
