"""What a ``Monitor`` records: one sample per tick, and the history built from them.

A ``MonitorReading`` is one reading of every queue and replay table a coordinator
watches (and of every attached pipeline stage), taken every ``interval`` seconds and
once more when the coordinator's block is left. ``MonitorHistory`` turns the retained
samples into numpy arrays, one entry per sample, oldest first; ``write_csv`` writes
the same table.

Invariants:

- ``times_s`` is strictly increasing, in seconds since the monitor first started (a
  monitor reused for a second block continues its clock and its history).
- Rates are averages over the ``interval_s`` that ends at their sample: for a queue,
  ``enqueue_rate[i] * interval_s[i]`` is the number of elements enqueued during that
  interval, so summed over the samples since the queue was first seen it equals
  ``enqueued_total[-1]`` minus the total when it was first seen (up to float rounding;
  the same for dequeues, and for a table's inserts and samples). A shared queue's
  first reading only sets its baseline (rates NaN); its reading after samples it
  missed (no answer in time) averages over the time since its previous reading, so the
  sum holds only where it answered every time.
- ``fraction_full``, ``input_bound``, ``busy_fraction``, and a table's
  ``insert_blocked`` and ``sample_blocked`` lie in [0, 1].
- History arrays are float64, NaN where a value was not available: before a queue or
  stage was first seen, after it was gone, or when a shared queue's server did not
  answer in time.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "SET_BY",
    "last_decision",
    "MonitorHistory",
    "MonitorReading",
    "QueueHistory",
    "QueueReading",
    "StageDecision",
    "StageHistory",
    "StageReading",
    "TableHistory",
    "TableReading",
    "build_history",
    "csv_rows",
    "write_rows",
]

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class QueueReading:
    """One queue at one sample. Counts are in elements, rates in elements per second."""

    name: str
    """The queue's key in the monitor: its name, with ``#2``, ``#3``... appended when
    another watched queue already has that name."""
    size: int
    """Elements stored at the sample."""
    capacity: int
    """The queue's capacity, in elements."""
    fraction_full: float
    """``size / capacity``, in [0, 1] (TF's ``fraction_of_<capacity>_full``)."""
    enqueue_rate: float
    """Elements enqueued per second over the interval ending at this sample (NaN at the
    first reading of a shared queue)."""
    dequeue_rate: float
    """Elements dequeued per second over the same interval (NaN as above)."""
    enqueued_total: int
    """Elements enqueued since the queue was created."""
    dequeued_total: int
    """Elements dequeued since the queue was created."""
    waiting_enqueue: int
    """Producers (tasks and threads) blocked in an enqueue at the sample."""
    waiting_dequeue: int
    """Consumers blocked in a dequeue at the sample."""
    closed: bool
    """Whether the queue was closed."""
    shared: bool
    """Whether it is a shared (Redis) queue, read with ``await q.statistics()``."""
    is_input: bool
    """Whether it counts as an input queue of the coordinator's body (the queues
    passed to ``coord.watch``, else the ends of the runner chains, as ``report()``)."""


@dataclass(frozen=True)
class TableReading:
    """One replay table at one sample. Counts are in items, rates in items per second."""

    name: str
    """The table's key in the monitor: its name, with ``#2``, ``#3``... appended when
    another watched queue or table already has that name."""
    size: int
    """Items held at the sample."""
    max_size: int
    """The most items the table holds."""
    fraction_full: float
    """``size / max_size``, in [0, 1]."""
    insert_rate: float
    """Items inserted per second over the interval ending at this sample (NaN at the
    first reading of a shared table)."""
    sample_rate: float
    """Items sampled per second over the same interval (a ``sample(n)`` counts n)."""
    insert_blocked: float
    """Fraction of the interval during which at least one insert waited: the rate
    limiter held the actors back (NaN as above)."""
    sample_blocked: float
    """Fraction of the interval during which at least one sample waited: the limiter
    held the learner back, or too few items were held (NaN as above)."""
    inserts: int
    """Items inserted since the table was created."""
    samples: int
    """Items sampled since the table was created."""
    inserts_waiting: int
    """Inserts (tasks and threads) waiting at the sample."""
    samples_waiting: int
    """Samples waiting at the sample."""
    closed: bool
    """Whether the table was closed."""
    shared: bool
    """Whether it is a shared table, read with ``await table.statistics()``."""
    is_input: bool
    """Whether it counts as an input of the coordinator's body (passed to
    ``coord.watch``, else the end of a runner chain): then its ``sample_blocked`` is
    time the body waited for input."""


SET_BY = {
    "user": "the user",
    "tuner": "the tuner",
    "default": "default: the tuner's start",
    "checkpoint": "the checkpoint resumed",
}
"""Who set a stage's setting (``StageReading.set_by``), in the words of ``describe()``
and ``coord.report()``."""


@dataclass(frozen=True)
class StageDecision:
    """One change the pipeline's tuner made to a stage's setting (or, in
    ``Autotune(mode="recommend")``, one it would make), with its reason."""

    time_s: float
    """When it was made: in ``StageStatistics.decisions``, seconds since the run
    started; in a ``StageReading`` or ``StageHistory``, seconds since the monitor first
    started (the clock of ``MonitorReading.time_s``)."""
    setting: str
    """Which setting: ``"concurrency"`` (a map's workers) or ``"capacity"``."""
    old: int
    new: int
    applied: bool
    """False for a recommendation (``mode="recommend"``): nothing changed."""
    reason: str
    """The whole line, e.g. ``"map(fetch): 8 -> 16, consumer waited 41%, stage starved
    2%, busy 97%: latency-bound (...)"``."""


def last_decision(decisions: Sequence[StageDecision]) -> str:
    """The last of ``decisions`` in words (``describe()``, ``coord.report()``)."""
    if not decisions:
        return "no change yet"
    d = decisions[-1]
    what = "last change" if d.applied else "last recommendation"
    return f"{what} at {d.time_s:.2f} s: {d.reason}"


@dataclass(frozen=True)
class StageReading:
    """One pipeline stage at one sample."""

    name: str
    """``"<pipeline>/<stage>"``: the name given to ``attach_stages``, then the stage's
    label (``#2``... appended to repeated labels)."""
    items_out: int
    """Items the stage has put out since its run started."""
    items_per_s: float
    """Items put out per second over the interval ending at this sample."""
    busy_fraction: float
    """Fraction of its workers' time the stage spent working over that interval, in [0, 1]."""
    concurrency: int
    """Number of workers of the stage (for a tuned map, the number in force)."""
    set_by: str | None = None
    """Who set ``concurrency``, for a map of a pipeline with ``concurrency="auto"``
    maps: ``"user"`` (a number given to ``map``), ``"tuner"``, ``"default"`` (the
    tuner's start value, not changed yet) or ``"checkpoint"`` (the value a resumed run
    started from); None for other stages and pipelines."""
    decisions: tuple[StageDecision, ...] = ()
    """The tuner's decisions on this stage since the previous sample, oldest first."""
    worker_processes: int = 0
    """For a process map: its worker processes that exist at this sample (a tuned map's
    follow its cuts once they hold; ``StageStatistics.worker_processes``); 0 otherwise."""


@dataclass(frozen=True)
class MonitorReading:
    """One sample: every watched queue and attached stage, and the input-bound fraction.

    Passed to the ``callback`` of a Monitor, one per sample, in order.
    """

    index: int
    """Sample number since the monitor was created (0 first; dropped samples count)."""
    time_s: float
    """Seconds since the monitor first started."""
    interval_s: float
    """Seconds covered by the rates of this sample (since the previous sample, or since
    the coordinator's block was entered, for the first sample of a block)."""
    final: bool
    """Whether this is the sample taken when the coordinator's block was left."""
    queues: Mapping[str, QueueReading]
    """The watched queues read for this sample, by name, in the order first seen."""
    stages: Mapping[str, StageReading]
    """The attached pipeline stages, by name."""
    input_bound: float | None
    """Fraction of the interval during which the body waited on an empty input queue
    (the most-waited input queue; for an input table, the time its samples waited), in
    [0, 1]; None when no input queue was read."""
    items_per_s: float | None
    """Elements per second the body took from its input queues (and items sampled from
    its input tables) over the interval; None when no input queue was read."""
    missing: tuple[str, ...] = ()
    """Shared queues and tables whose statistics could not be read in time for this
    sample."""
    tables: Mapping[str, TableReading] = field(default_factory=lambda: MappingProxyType({}))
    """The watched replay tables read for this sample, by name, in the order first seen."""


@dataclass(frozen=True)
class QueueHistory:
    """One queue's samples as arrays (float64, NaN where not available)."""

    size: Floats
    capacity: Floats
    fraction_full: Floats
    enqueue_rate: Floats
    """Elements per second."""
    dequeue_rate: Floats
    """Elements per second."""
    enqueued_total: Floats
    dequeued_total: Floats
    waiting_enqueue: Floats
    waiting_dequeue: Floats
    is_input: bool
    """Whether the queue was an input queue of the body at its last sample."""
    shared: bool
    min_after_dequeue: int
    """The queue's ``min_after_dequeue`` (0 for queues without one): while the queue is
    open, consumers cannot take it below this size."""


@dataclass(frozen=True)
class TableHistory:
    """One replay table's samples as arrays (float64, NaN where not available); the
    fields of ``TableReading``."""

    size: Floats
    max_size: Floats
    fraction_full: Floats
    insert_rate: Floats
    """Items per second."""
    sample_rate: Floats
    """Items per second."""
    insert_blocked: Floats
    """Fraction of each interval the rate limiter held inserts back, in [0, 1]."""
    sample_blocked: Floats
    """Fraction of each interval samples waited, in [0, 1]."""
    inserts: Floats
    samples: Floats
    inserts_waiting: Floats
    samples_waiting: Floats
    is_input: bool
    """Whether the table was an input of the body at its last sample."""
    shared: bool


@dataclass(frozen=True)
class StageHistory:
    """One pipeline stage's samples as arrays (float64, NaN where not available)."""

    items_out: Floats
    items_per_s: Floats
    busy_fraction: Floats
    concurrency: Floats
    """Workers at each sample (for a tuned map, the number in force)."""
    decisions: tuple[StageDecision, ...] = ()
    """The tuner's decisions on this stage over the retained samples, oldest first."""


@dataclass(frozen=True)
class MonitorHistory:
    """The retained samples as numpy arrays, one entry per sample, oldest first.

    ``times_s``, ``interval_s``, ``input_bound`` and ``items_per_s`` have one entry
    per sample; so has every array of ``queues[name]`` and ``stages[name]``.
    """

    times_s: Floats
    """Seconds since the monitor first started, strictly increasing."""
    interval_s: Floats
    """Seconds covered by each sample's rates."""
    final: npt.NDArray[np.bool_]
    """Whether each sample was taken when a coordinator's block was left."""
    input_bound: Floats
    """Fraction of each interval the body waited for input, in [0, 1] (NaN: no input
    queue read)."""
    items_per_s: Floats
    """Elements per second the body took from its input queues (NaN: none read)."""
    queues: Mapping[str, QueueHistory] = field(default_factory=dict)
    """Every queue seen in the retained samples, in the order first seen."""
    stages: Mapping[str, StageHistory] = field(default_factory=dict)
    """Every pipeline stage seen in the retained samples."""
    tables: Mapping[str, TableHistory] = field(default_factory=dict)
    """Every replay table seen in the retained samples, in the order first seen."""

    def __len__(self) -> int:
        return len(self.times_s)


_QUEUE_ARRAYS = tuple(
    f.name
    for f in fields(QueueHistory)
    if f.name not in ("is_input", "shared", "min_after_dequeue")
)
_STAGE_ARRAYS = tuple(f.name for f in fields(StageHistory) if f.name != "decisions")
_TABLE_ARRAYS = tuple(f.name for f in fields(TableHistory) if f.name not in ("is_input", "shared"))


def _nan_or(value: float | None) -> float:
    return math.nan if value is None else float(value)


def build_history(samples: Sequence[MonitorReading], floors: Mapping[str, int]) -> MonitorHistory:
    """Arrays from ``samples``; ``floors`` gives each queue's ``min_after_dequeue``."""
    n = len(samples)
    qcols: dict[str, dict[str, Floats]] = {}
    qlast: dict[str, QueueReading] = {}
    scols: dict[str, dict[str, Floats]] = {}
    sdecisions: dict[str, list[StageDecision]] = {}
    tcols: dict[str, dict[str, Floats]] = {}
    tlast: dict[str, TableReading] = {}
    for i, s in enumerate(samples):
        for name, q in s.queues.items():
            cols = qcols.get(name)
            if cols is None:
                cols = qcols[name] = {k: np.full(n, np.nan) for k in _QUEUE_ARRAYS}
            for k in _QUEUE_ARRAYS:
                cols[k][i] = getattr(q, k)
            qlast[name] = q
        for name, st in s.stages.items():
            scols_ = scols.get(name)
            if scols_ is None:
                scols_ = scols[name] = {k: np.full(n, np.nan) for k in _STAGE_ARRAYS}
            for k in _STAGE_ARRAYS:
                scols_[k][i] = getattr(st, k)
            sdecisions.setdefault(name, []).extend(st.decisions)
        for name, t in s.tables.items():
            tc = tcols.get(name)
            if tc is None:
                tc = tcols[name] = {k: np.full(n, np.nan) for k in _TABLE_ARRAYS}
            for k in _TABLE_ARRAYS:
                tc[k][i] = getattr(t, k)
            tlast[name] = t
    queues = {
        name: QueueHistory(
            size=c["size"],
            capacity=c["capacity"],
            fraction_full=c["fraction_full"],
            enqueue_rate=c["enqueue_rate"],
            dequeue_rate=c["dequeue_rate"],
            enqueued_total=c["enqueued_total"],
            dequeued_total=c["dequeued_total"],
            waiting_enqueue=c["waiting_enqueue"],
            waiting_dequeue=c["waiting_dequeue"],
            is_input=qlast[name].is_input,
            shared=qlast[name].shared,
            min_after_dequeue=floors.get(name, 0),
        )
        for name, c in qcols.items()
    }
    stages = {
        name: StageHistory(**c, decisions=tuple(sdecisions[name])) for name, c in scols.items()
    }
    tables = {
        name: TableHistory(**c, is_input=tlast[name].is_input, shared=tlast[name].shared)
        for name, c in tcols.items()
    }
    return MonitorHistory(
        times_s=np.array([s.time_s for s in samples], dtype=np.float64),
        interval_s=np.array([s.interval_s for s in samples], dtype=np.float64),
        final=np.array([s.final for s in samples], dtype=np.bool_),
        input_bound=np.array([_nan_or(s.input_bound) for s in samples], dtype=np.float64),
        items_per_s=np.array([_nan_or(s.items_per_s) for s in samples], dtype=np.float64),
        queues=MappingProxyType(queues),
        stages=MappingProxyType(stages),
        tables=MappingProxyType(tables),
    )


def _cell(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    v = float(value)
    if math.isnan(v):
        return ""
    if v.is_integer() and abs(v) < 2**53:
        return str(int(v))
    return repr(v)


def csv_rows(h: MonitorHistory) -> Iterable[list[str]]:
    """The header, then one row per sample (see ``Monitor.write_csv``)."""
    head = ["time_s", "interval_s", "final", "input_bound", "items_per_s"]
    columns: list[npt.NDArray[Any]] = [
        h.times_s,
        h.interval_s,
        h.final,
        h.input_bound,
        h.items_per_s,
    ]
    for name, q in h.queues.items():
        for k in _QUEUE_ARRAYS:
            head.append(f"queue/{name}/{k}")
            columns.append(getattr(q, k))
    for name, t in h.tables.items():
        for k in _TABLE_ARRAYS:
            head.append(f"table/{name}/{k}")
            columns.append(getattr(t, k))
    for name, st in h.stages.items():
        for k in _STAGE_ARRAYS:
            head.append(f"stage/{name}/{k}")
            columns.append(getattr(st, k))
    yield head
    for i in range(len(h)):
        yield [_cell(c[i]) for c in columns]


def write_rows(path: str | os.PathLike[str], rows: Iterable[list[str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
