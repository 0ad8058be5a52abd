"""A run's side of the tuner: ``Tuning``, what ``concurrency="auto"`` maps are driven by.

A run with a tuned map (``map(fn, concurrency="auto")``) holds one ``Tuning``: a
``Gate`` per tuned map, the ``Tuner`` (``tune/_tuner.py``) and what it reads and does
(the ``Tunable`` protocol of ``tune/_drive.py``). The tuner is driven as one task in
the run's own task group, on the event loop (no thread), from the moment every stage
has started until the run ends; its sleeps end as soon as the run does.

- ``reading`` turns the run's counters into a ``Reading``: items from the queues'
  totals, busy seconds from the meters, starved and blocked seconds from their
  cumulative waits, the workers a gate admits (for a process map, those whose process,
  the first or a new one after a retirement, answered a burst), the consumer's wait on
  the last queue.
- ``apply`` puts a decision into force: the map's gate takes the new limit (a cut parks
  the workers above it at their next burst; a process map's pool retires the worker
  processes whose drivers stay parked, and a raise gives the retired ones of the slots
  it admits new processes: ``WorkerPool.resize``); a raise above the workers started
  so far has the run add workers with the next slots (``PipelineRun.add_workers``).
- A resume (``open(state=...)``) starts each tuned map at the concurrency recorded in
  the state (``settings``: what a checkpoint records), within its range today; who set
  it is then ``"checkpoint"`` until the tuner changes it.
- ``notes`` are describe()'s lines: each tuned map's concurrency in force and the
  reason of its last decision, then each tuned buffer's (``_buffers.py``: the
  capacity knobs of ``capacity="auto"`` and ``prefetch("auto")``, the bytes per item
  sampled from the queues, ``StageQueue.set_capacity``).

Invariants: a map given a number is never changed (its knob is not tunable); the gates
are closed when the run stops, so no worker stays parked; decisions are logged at DEBUG
on the ``aqueue`` logger (by ``drive``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import anyio

from ..._queues._fifo import StageQueue
from ..._running._samples import SET_BY, StageDecision, last_decision
from ..defs._stage_spec import StageSpec
from ..process._workers import WorkerPool
from ..tune._budget import resolve
from ..tune._drive import drive
from ..tune._gate import Gate
from ..tune._knobs import Decision, KnobSpec
from ..tune._readings import Reading, StageInfo, StageReading
from ..tune._settings import Autotune, concurrency_range
from ..tune._tuner import Tuner
from ._buffers import TunedBuffers

__all__ = ["Tuning"]


class _Run(Protocol):
    """What ``Tuning`` reads from the run (``PipelineRun``)."""

    specs: tuple[StageSpec, ...]
    workers: list[int]
    queues: list[StageQueue]
    pools: dict[int, WorkerPool]

    def add_workers(self, i: int, slots: range) -> None: ...

    def counters(self, i: int) -> tuple[int, int, float, float, float, float, int]: ...

    def cpu(self, i: int) -> float | None: ...

    def consumer(self) -> tuple[int, float]: ...


class Tuning:
    """The tuner of one run (see the module docstring).

    Args:
        specs: The run's stages.
        autotune: The run's settings (budgets, mode, cap).
    """

    def __init__(
        self,
        specs: Sequence[StageSpec],
        autotune: Autotune,
        resumed: Mapping[int, Mapping[str, int]] | None = None,
    ) -> None:
        budget = resolve(autotune)
        resumed = resumed or {}
        self.gates: dict[int, Gate] = {}
        self.started: dict[int, int] = {}  # workers created so far, per tuned map
        self.last: dict[int, Decision] = {}
        self.ranges: dict[int, tuple[int, int]] = {}
        self._done = anyio.Event()
        infos: list[StageInfo] = []
        knobs: list[KnobSpec] = []
        for i, spec in enumerate(specs):
            executor = spec.executor if spec.kind == "map" else ""
            per = float(spec.size) if spec.kind == "batch" else 1.0
            infos.append(StageInfo(spec.label, spec.kind, executor, per))
            if spec.kind != "map":
                continue
            if spec.auto is None:
                n = spec.concurrency
                knobs.append(KnobSpec(i, "concurrency", n, n, n, tunable=False, by="user"))
                continue
            start, low, high = concurrency_range(
                spec.auto, spec.executor, budget.cpu, autotune.max_concurrency
            )
            by = "default"
            at = resumed.get(i, {}).get("concurrency")
            if at is not None:  # a resume: where the checkpointed run was, in today's range
                start, by = min(max(at, low), high), "checkpoint"
            knobs.append(KnobSpec(i, "concurrency", start, low, high, by=by))
            self.gates[i] = Gate(start)
            self.started[i] = start
            self.ranges[i] = (low, high)
        self.buffers = TunedBuffers(specs, knobs)
        self.tuner = Tuner(infos, knobs, budget, acts=autotune.acts)
        self._run: _Run | None = None

    def start(self, run: _Run) -> None:
        """Bind to ``run`` (before its first tick)."""
        self._run = run

    async def drive(self, started: anyio.Event) -> None:
        """The tuner's task: from when every stage has started until ``close()``."""
        await started.wait()
        await drive(self, self.tuner, self._done.is_set, sleep=self._sleep)

    async def _sleep(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self._done.wait()

    def close(self, through: int | None = None) -> None:
        """Open the gates of stages ``0..through`` (every stage: None), and end the
        tuner's task when every stage stops."""
        for i, gate in self.gates.items():
            if through is None or i <= through:
                gate.close()
        if through is None:
            self._done.set()

    # -- Tunable -------------------------------------------------------------------------

    def reading(self, now: float) -> Reading:
        """The run's counters now (see the module docstring)."""
        run = self._run
        assert run is not None
        stages = []
        for i in range(len(run.specs)):
            items_in, items_out, busy, starved, blocked, occ, cap = run.counters(i)
            gate = self.gates.get(i)
            workers = min(gate.limit, self.started[i]) if gate is not None else run.workers[i]
            pool = run.pools.get(i)
            if pool is not None and gate is not None:  # (one starting: once it answered)
                workers = sum(1 for w in pool.workers[: gate.limit] if w.answered)
            empty_s, full_s, size = self.buffers.read(run.queues, i)
            stages.append(
                StageReading(
                    items_in,
                    items_out,
                    busy,
                    starved,
                    blocked,
                    max(workers, 1),
                    cpu_s=run.cpu(i),
                    occupancy_s=occ,
                    capacity=cap,
                    item_bytes=size,
                    empty_s=empty_s,
                    full_s=full_s,
                )
            )
        taken, waited = run.consumer()
        return Reading(
            now,
            tuple(stages),
            taken,
            waited,
            cpu_s=time.process_time(),
            loop_cpu_s=time.thread_time(),
        )

    def apply(self, decision: Decision) -> None:
        """Put ``decision`` into force (event loop's thread)."""
        if self._done.is_set():
            return
        if decision.knob == "capacity":
            if self._run is not None:
                self.buffers.apply(self._run.queues, decision)
            return
        gate = self.gates.get(decision.stage)
        if gate is None:
            return
        i = decision.stage
        self.last[i] = decision
        gate.resize(decision.new)
        pool = self._run.pools.get(i) if self._run is not None else None
        if pool is not None:  # worker processes: a cut that holds retires the parked ones
            pool.resize(decision.new, gate.parked_for)
        if decision.new > self.started[i] and self._run is not None:
            self._run.add_workers(i, range(self.started[i], decision.new))
            self.started[i] = decision.new

    # -- reports -------------------------------------------------------------------------

    def settings(self) -> dict[int, dict[str, int]]:
        """The settings in force of each tuned map (what a checkpoint records)."""
        return {i: {"concurrency": gate.limit} for i, gate in self.gates.items()}

    def concurrency(self, i: int) -> int | None:
        """The concurrency in force of tuned map ``i`` (None: not tuned)."""
        gate = self.gates.get(i)
        return None if gate is None else gate.limit

    def set_by(self, i: int) -> str | None:
        """Who set stage ``i``'s concurrency: ``"user"``, ``"default"``, ``"tuner"`` or
        ``"checkpoint"`` (None: not a map)."""
        for k in self.tuner.knobs:
            if k.stage == i and k.spec.what == "concurrency":
                return k.by
        return None

    def decisions(self, i: int, t0: float) -> tuple[StageDecision, ...]:
        """The tuner's latest decisions on stage ``i`` (applied or recommended), dated in
        seconds since ``t0`` (the run's start, on the tuner's clock)."""
        return tuple(
            StageDecision(d.t - t0, d.knob, d.old, d.new, d.applied, d.reason)
            for d in self.tuner.decisions
            if d.stage == i
        )

    def notes(self, labels: Callable[[int], str], t0: float) -> list[str]:
        """describe()'s lines: each tuned map's concurrency, who set it, and its last
        decision (a recommendation, in ``recommend`` mode), as the Monitor shows them."""
        out = []

        def last(i: int, setting: str = "concurrency") -> str:
            return last_decision(tuple(d for d in self.decisions(i, t0) if d.setting == setting))

        for i, gate in self.gates.items():
            low, high = self.ranges[i]
            out.append(
                f"{i} {labels(i)}: concurrency {gate.limit} (auto {low}..{high}, set by "
                f"{SET_BY[self.set_by(i) or 'default']}); {last(i)}"
            )
        queues = self._run.queues if self._run is not None else []
        return out + self.buffers.notes(queues, labels, lambda i: last(i, "capacity"))
