"""How pipeline stages are measured: per-worker bookkeeping and StageStatistics.

Each stage has one ``Meter``, shared by its workers; each worker (task or thread) has
one ``Worker`` of its own, so threads never share a counter. A step records, around
each item: how long it waited for its input (``got``), how long it worked
(``Worker.worked``) and, when it starts the next item, how long its previous output
waited to be enqueued (``began``). Wait samples go to bounded deques (append is
atomic); ``percentiles`` reads them. Queue occupancy is sampled by the run.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._running._samples import StageDecision

__all__ = ["Meter", "StageStatistics", "Worker", "percentiles"]

_WAIT_SAMPLES = 10_000  # wait percentiles are computed over the last this many items

_perf = time.perf_counter


@dataclass(frozen=True)
class StageStatistics:
    """A snapshot of one pipeline stage, from ``Pipeline.statistics()``."""

    name: str
    """The stage's label, e.g. ``"map(load)"``."""
    items_in: int
    """Items taken from the previous stage (for a source: items read from it)."""
    items_out: int
    """Items put into this stage's output queue (batches, for a batch stage)."""
    items_dropped: int
    """Items a filter stage dropped, or the final items a batch stage dropped because
    they were fewer than its batch size (without ``allow_smaller_final_batch``); 0 for
    other stages."""
    items_per_s: float
    """``items_out`` divided by the run's duration so far, in items per second."""
    busy_s: float
    """Seconds spent in the stage's own work (the function, the source), summed over
    its workers; for a process map, the seconds its worker processes spent in the
    function."""
    concurrency: int
    """Number of workers (tasks, threads or process slots)."""
    occupancy_mean: float
    """Mean fraction of the output queue's capacity in use (sampled every 5 ms)."""
    starved_fraction: float
    """Fraction of the run during which a consumer waited on the empty output queue."""
    put_wait_p50_s: float
    """Median seconds between finishing an item and its output being enqueued."""
    put_wait_p99_s: float
    """99th percentile of the put wait, in seconds."""
    get_wait_p50_s: float
    """Median seconds a worker waited for an input item."""
    get_wait_p99_s: float
    """99th percentile of the get wait, in seconds."""

    elapsed_s: float
    """Seconds since the run started (until it ended, for a finished run)."""

    handoff_s: float = 0.0
    """For a process map (``executor="process"``): seconds of main-process CPU its
    driver threads spent handing bursts to the worker processes and building the
    results from shared memory, summed over its workers (0.0 for other stages). Over
    ``items_out`` it is the hand-off's cost per item; over ``elapsed_s``, the share of
    one core it takes."""

    cpu_s: float | None = None
    """For a thread or process map: CPU seconds its work used, summed over its workers
    (a thread map's worker threads in the function; a process map's worker processes,
    their own threads included). Over ``busy_s`` it tells computing from waiting: near
    1.0 the function holds a core, near 0.0 it waits (on I/O, a service, the GIL).
    None for other stages (tasks share the event loop's thread)."""

    set_by: str | None = None
    """Who set ``concurrency``, for a map of a run with ``concurrency="auto"`` maps:
    ``"user"``, ``"tuner"``, ``"default"`` (the tuner's start, not changed yet) or
    ``"checkpoint"`` (the value a resumed run started from); None otherwise."""
    decisions: tuple[StageDecision, ...] = ()
    """The tuner's latest decisions on this stage (up to 64 over all stages), oldest
    first, each dated in seconds since the run started."""
    worker_processes: int = 0
    """For a process map: its worker processes that exist now (spawned and not yet
    reaped; 0 for other stages and once the run has ended). With
    ``concurrency="auto"`` it follows the tuner's cuts once they hold: a process whose
    driver stays parked past a grace period is ended and reaped, and a later raise
    spawns new ones."""

    @property
    def busy_fraction(self) -> float:
        """``busy_s`` over (concurrency x elapsed_s): 1.0 means always working."""
        return self.busy_s / (self.concurrency * self.elapsed_s) if self.elapsed_s > 0 else 0.0


class Worker:
    """Per-step bookkeeping: busy time, seconds per item, and when the last burst was
    handed back."""

    __slots__ = ("busy", "cpu", "handoff", "held", "item_s", "returned", "turn")

    def __init__(self) -> None:
        self.busy = 0.0
        # CPU seconds of that work (thread and process maps: the tuner's CPU budget;
        # tasks share the event loop's thread, which is measured instead)
        self.cpu = 0.0
        self.handoff = 0.0  # process maps: the driver thread's CPU seconds
        self.item_s = 0.0  # moving average of seconds per item (0: none worked on yet)
        self.returned = 0.0  # perf_counter() when the step last returned a burst
        self.turn = -1  # ordered maps: the sequence number this worker holds
        # Inputs taken and not worked on yet (an async map's burst that did not fit in
        # one slice); a checkpoint puts them back in front of the input queue's items.
        self.held: list[Any] = []

    def worked(self, since: float, items: int = 0) -> float:
        """The step worked from ``since`` until now, on ``items`` items (0: not counted
        towards ``item_s``); return now."""
        now = _perf()
        spent = now - since
        self.busy += spent
        if items:
            per = spent / items
            self.item_s = per if self.item_s == 0.0 else 0.75 * self.item_s + 0.25 * per
        return now


class Meter:
    """One stage's measurements (shared by its workers)."""

    __slots__ = (
        "dropped",
        "get_wait_s",
        "get_waits",
        "occ_n",
        "occ_sum",
        "put_wait_s",
        "put_waits",
        "workers",
    )

    def __init__(self) -> None:
        self.workers: list[Worker] = []
        self.get_waits: collections.deque[float] = collections.deque(maxlen=_WAIT_SAMPLES)
        self.put_waits: collections.deque[float] = collections.deque(maxlen=_WAIT_SAMPLES)
        self.dropped = 0
        self.get_wait_s = 0.0  # seconds waited for input, summed (the tuner's "starved")
        self.put_wait_s = 0.0  # seconds waited to hand output on, summed ("blocked")
        self.occ_sum = 0.0
        self.occ_n = 0.0  # seconds the occupancy samples stand for

    def worker(self) -> Worker:
        w = Worker()
        self.workers.append(w)
        return w

    def began(self, w: Worker) -> float:
        """A step starts: record the put wait of the previous item; return now."""
        now = _perf()
        if w.returned:
            self.put_waits.append(now - w.returned)
            self.put_wait_s += now - w.returned
            w.returned = 0.0
        return now

    def got(self, since: float) -> float:
        """A step waited for its input from ``since`` until now; return now."""
        now = _perf()
        self.get_waits.append(now - since)
        self.get_wait_s += now - since
        return now

    @property
    def busy(self) -> float:
        return sum(w.busy for w in self.workers)

    @property
    def cpu(self) -> float:
        return sum(w.cpu for w in self.workers)

    @property
    def handoff(self) -> float:
        return sum(w.handoff for w in self.workers)


def percentiles(samples: collections.deque[float]) -> tuple[float, float]:
    if not samples:
        return 0.0, 0.0
    p50, p99 = np.percentile(np.fromiter(list(samples), dtype=np.float64), [50, 99])
    return float(p50), float(p99)
