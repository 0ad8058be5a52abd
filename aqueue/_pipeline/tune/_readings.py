"""What the tuner reads: cumulative readings of a running pipeline, and windows.

A ``Reading`` is a snapshot of counters that only grow while a run goes on (items,
seconds busy, seconds waiting), taken at time ``t`` by whoever drives the tuner: the
pipeline's run, or a simulator in the tests. The tuner keeps the reading that opened
its current window; ``Window.between(a, b)`` turns two readings into what a decision
needs: rates, shares of the workers' time, seconds per item, the consumer's wait.

Units: seconds, items, bytes. A stage's shares are of its workers' time
(``workers x seconds``): ``busy + starved + blocked`` is about 1 for a stage whose
workers are always in one of those states (the rest is hand-off overhead).

Invariants: a window is only made of two readings of the same run, the later one
second (``between`` refuses a shrinking counter with ValueError: a driver that mixed
up its readings is a bug, not a measurement); every figure of a window is finite and
non-negative.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Reading", "StageInfo", "StageReading", "StageWindow", "Window", "in_per_out"]


@dataclass(frozen=True)
class StageInfo:
    """What the tuner knows about a stage before the run: its label, what it is, and
    how many input items make one output item when nothing is measured yet."""

    label: str
    """The stage's label, e.g. ``"map(fetch)"``."""
    kind: str
    """``"source"``, ``"map"``, ``"filter"``, ``"shuffle"``, ``"batch"``,
    ``"prefetch"`` or ``"to_queue"``."""
    executor: str = ""
    """For a map: ``"task"``, ``"thread"`` or ``"process"``; ``""`` otherwise."""
    in_per_out: float = 1.0
    """Input items per output item expected (a batch stage's batch size), until the
    stage's own counts say (a filter's)."""


@dataclass(frozen=True)
class StageReading:
    """One stage's cumulative counters since its run started."""

    items_in: int
    """Items taken from the previous stage's queue."""
    items_out: int
    """Items put into the stage's output queue."""
    busy_s: float
    """Seconds its workers spent in the stage's own work (the function), summed over
    workers; for a task, awaits inside the function included. Counted when a burst is
    done."""
    starved_s: float
    """Seconds its workers waited for input, summed over workers."""
    blocked_s: float
    """Seconds its workers waited to hand their output on (a full queue), summed."""
    workers: int
    """Workers allowed to work now (the concurrency in force that is ready: a process
    worker being spawned does not count yet)."""
    worked: int | None = None
    """Items whose work was done, counted with ``busy_s`` (an item done may wait to be
    put out while the output queue is full); None: taken as ``items_out``."""
    cpu_s: float | None = None
    """CPU seconds its workers used (thread CPU time for threads, the worker processes'
    for a process map); None where it cannot be measured (tasks share the event loop's
    thread)."""
    occupancy_s: float = 0.0
    """Integral over time of the output queue's fill fraction (seconds x fraction)."""
    capacity: int = 0
    """Output queue capacity in force."""
    item_bytes: float = 0.0
    """Estimated bytes per output item (0: not known)."""
    empty_s: float = 0.0
    """Seconds during which a reader waited on the output queue (it was empty)."""
    full_s: float = 0.0
    """Seconds during which a writer waited on the output queue (it was full)."""


@dataclass(frozen=True)
class Reading:
    """A snapshot of a running pipeline, for the tuner."""

    t: float
    """When, in seconds of a monotonic clock."""
    stages: tuple[StageReading, ...]
    """One per stage, source first."""
    taken: int
    """Items the consumer took from the last stage's queue."""
    waited_s: float
    """Seconds the consumer waited on that queue while it was empty."""
    gaps: int = 0
    """Completed gaps between the consumer's calls for items."""
    gaps_s: float | None = None
    """Their seconds: the consumer's own time per item, its step, however long it
    waited for each item (the gap between a ``get`` returning and the next call).
    None: not measured (the tuner then takes the time it did not wait)."""
    cpu_s: float = 0.0
    """CPU seconds of the main process (all its threads)."""
    loop_cpu_s: float | None = None
    """CPU seconds of the event loop's thread (None: not measured)."""


def _grew(a: float, b: float, what: str) -> float:
    if b < a - 1e-9:
        raise ValueError(f"tuner readings out of order: {what} went from {a} to {b}")
    return max(0.0, b - a)


@dataclass(frozen=True)
class StageWindow:
    """One stage over a window."""

    items: int
    """Items put out in the window."""
    items_in: int
    """Items taken in the window."""
    rate: float
    """Items put out per second."""
    service_s: float
    """Seconds of work per item done (0.0: none done)."""
    worked: int
    """Items done in the window (the items ``service_s`` is over)."""
    busy: float
    """Share of the workers' time in the stage's work."""
    starved: float
    """Share of the workers' time waiting for input."""
    blocked: float
    """Share of the workers' time waiting to hand output on."""
    cpu_per_busy: float | None
    """CPU seconds per second of work (1.0: all CPU; None: not measured)."""
    cores: float | None
    """Cores the stage used on average (None: not measured)."""
    occupancy: float
    """Mean fill fraction of its output queue."""
    workers: int
    """Workers in force at the window's end."""
    workers_before: int
    """Workers in force at its start (fewer while process workers start)."""
    empty: float = 0.0
    """Share of the window a reader waited on its output queue (it was empty)."""
    full: float = 0.0
    """Share of the window a writer waited on its output queue (it was full)."""

    @property
    def saturated(self) -> bool:
        """Whether the workers were mostly at work, their input there and their output
        short (its queue less than half full on average: what comes after keeps up).
        A stage that limits the pipeline is saturated."""
        return (
            self.busy >= 0.6
            and self.starved <= 0.3
            and self.blocked <= 0.3
            and self.occupancy < 0.5
        )


@dataclass(frozen=True)
class Window:
    """The interval between two readings, as the tuner's rule uses it."""

    t0: float
    t1: float
    stages: tuple[StageWindow, ...]
    taken: int
    """Items the consumer took in the window."""
    wait: float
    """Share of the window the consumer waited for input."""
    own_s: float
    """Seconds of the window the consumer did not wait (its own work)."""
    gaps: int
    """Completed gaps between the consumer's calls in the window."""
    gaps_s: float | None
    """Their seconds (None: not measured)."""
    cores: float
    """Cores the main process used on average."""
    loop: float | None
    """Share of one core the event loop's thread used (None: not measured)."""

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0

    @classmethod
    def between(cls, a: Reading, b: Reading) -> Window:
        """The window from reading ``a`` to the later reading ``b``.

        Raises:
            ValueError: ``b`` is not later than ``a``, or a counter shrank.
        """
        dt = b.t - a.t
        if dt <= 0 or len(a.stages) != len(b.stages):
            raise ValueError(f"tuner readings out of order: t {a.t} then {b.t}")
        stages = tuple(_stage_window(x, y, dt) for x, y in zip(a.stages, b.stages))
        waited = min(dt, _grew(a.waited_s, b.waited_s, "waited_s"))
        gaps_s = None
        if a.gaps_s is not None and b.gaps_s is not None:
            gaps_s = _grew(a.gaps_s, b.gaps_s, "gaps_s")
        loop = None
        if a.loop_cpu_s is not None and b.loop_cpu_s is not None:
            loop = _grew(a.loop_cpu_s, b.loop_cpu_s, "loop_cpu_s") / dt
        return cls(
            t0=a.t,
            t1=b.t,
            stages=stages,
            taken=int(_grew(a.taken, b.taken, "taken")),
            wait=waited / dt,
            own_s=dt - waited,
            gaps=int(_grew(a.gaps, b.gaps, "gaps")),
            gaps_s=gaps_s,
            cores=_grew(a.cpu_s, b.cpu_s, "cpu_s") / dt,
            loop=loop,
        )


def _stage_window(a: StageReading, b: StageReading, dt: float) -> StageWindow:
    items = int(_grew(a.items_out, b.items_out, "items_out"))
    if a.worked is not None and b.worked is not None:
        worked = int(_grew(a.worked, b.worked, "worked"))
    else:
        worked = items
    busy = _grew(a.busy_s, b.busy_s, "busy_s")
    # Workers changed at most once per window (at its start: the tuner re-opens its
    # window after a change), so the later count stands for the window.
    span = max(1, b.workers) * dt
    cpu_per_busy = cores = None
    if a.cpu_s is not None and b.cpu_s is not None:
        cpu = _grew(a.cpu_s, b.cpu_s, "cpu_s")
        cores = cpu / dt
        cpu_per_busy = min(1.0, cpu / busy) if busy > 0 else None
    return StageWindow(
        items=items,
        items_in=int(_grew(a.items_in, b.items_in, "items_in")),
        rate=items / dt,
        service_s=busy / worked if worked else 0.0,
        worked=worked,
        busy=min(1.0, busy / span),
        starved=min(1.0, _grew(a.starved_s, b.starved_s, "starved_s") / span),
        blocked=min(1.0, _grew(a.blocked_s, b.blocked_s, "blocked_s") / span),
        cpu_per_busy=cpu_per_busy,
        cores=cores,
        occupancy=min(1.0, _grew(a.occupancy_s, b.occupancy_s, "occupancy_s") / dt),
        workers=b.workers,
        workers_before=a.workers,
        empty=min(1.0, _grew(a.empty_s, b.empty_s, "empty_s") / dt),
        full=min(1.0, _grew(a.full_s, b.full_s, "full_s") / dt),
    )


def in_per_out(info: Sequence[StageInfo], readings: Sequence[StageReading]) -> list[float]:
    """Each stage's input items per output item: as its ``StageInfo`` says, except a
    filter's, measured once it has put out 32 items. (A map's is 1 by construction: its
    counts differ only by the items in its workers' hands, which would only blur it.)"""
    out = []
    for spec, r in zip(info, readings):
        if spec.kind == "filter" and r.items_out >= 32:
            out.append(r.items_in / r.items_out)
        else:
            out.append(spec.in_per_out)
    return out
