"""A discrete-event simulator of a pipeline, for the tuner's tests (test code only).

Stages in a chain, each with workers that take items from the queue before them, work
on them and put the results into their own bounded queue; a consumer takes one item
at a time from the last queue and then steps for ``step_s`` seconds (simulated). The
first stage reads an endless source. Everything happens on a simulated clock, so the
tests assert on decisions and simulated throughput, never on wall-clock time, and a
seed gives the same run every time.

A worker's item costs ``latency_s`` of waiting (I/O: no CPU), then ``cpu_s`` of CPU
work in a processor-sharing pool: ``"cores"`` (``cores`` of them: worker processes,
threads running C code that releases the GIL), ``"gil"`` (one: threads running Python
code) or ``"loop"`` (one: tasks on the event loop). With ``noise`` each cost is
multiplied by a log-normal factor of mean 1; with ``stalls`` a share of the items take
five times as long (a noisy shared machine). A stage of ``batch`` > 1 takes that many
items for one output item (a batch stage); one of ``burst`` > 1 puts that many out per
item of work (a producer that delivers in bursts). Each queue counts the seconds a
getter waited on it and a putter waited on it, as a real queue's ``time_empty_s`` and
``time_full_s``. Concurrency can change while it runs:
workers beyond the limit park at their next item (finishing the one in hand), new ones
start at once, or after ``spawn_s`` (worker processes).

``reading()`` gives the tuner's ``Reading`` with the same meaning as a real run's;
``run(until, tuner)`` drives a tuner the way the run's tuner task does (a tick at
``tuner.next_at``, each decision applied at once unless it is a recommendation).
"""

from __future__ import annotations

import collections
import heapq
import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aqueue._pipeline.tune._knobs import Decision, KnobSpec
from aqueue._pipeline.tune._readings import Reading, StageInfo, StageReading
from aqueue._pipeline.tune._tuner import Tuner


@dataclass
class Model:
    """One simulated stage."""

    label: str
    executor: str = "task"  # task | thread | process ("" for a batch stage)
    latency_s: float = 0.0
    cpu_s: float = 0.0
    pool: str = "cores"
    concurrency: int = 1
    capacity: int = 64
    batch: int = 1
    spawn_s: float = 0.0
    item_bytes: float = 1000.0
    burst: int = 1  # output items per item of work (a producer that delivers in bursts)


class _Queue:
    def __init__(self, sim: Sim, capacity: int) -> None:
        self.sim = sim
        self.capacity = capacity
        self.size = 0
        self.getters: collections.deque[tuple[Any, int]] = collections.deque()
        self.putters: collections.deque[Any] = collections.deque()
        self.occ = 0.0
        self.empty_s = 0.0  # seconds a getter waited (as a queue's time_empty_s)
        self.full_s = 0.0  # seconds a putter waited (time_full_s)
        self._t = 0.0

    def mark(self) -> None:
        """Account for the time since the last change (call before every change)."""
        now = self.sim.now
        dt = now - self._t
        self.occ += dt * min(1.0, self.size / self.capacity)
        self.empty_s += dt if self.getters else 0.0
        self.full_s += dt if self.putters else 0.0
        self._t = now

    def take(self, n: int) -> None:
        self.mark()
        self.size -= n
        room = self.capacity - self.size
        while self.putters and room > 0:
            self.sim.soon(self.putters.popleft().on_room)
            room -= 1

    def put(self) -> None:
        self.mark()
        self.size += 1
        have = self.size
        while self.getters and self.getters[0][1] <= have:
            who, n = self.getters.popleft()
            have -= n
            self.sim.soon(who.on_input)

    def resize(self, capacity: int) -> None:
        self.mark()
        self.capacity = capacity
        self.take(0)


class _Source:
    """The first stage's input: always enough items."""

    size = math.inf

    def take(self, n: int) -> None:
        pass


class _Pool:
    """Processor sharing: every job in the pool runs at ``min(1, capacity / jobs)``."""

    def __init__(self, sim: Sim, capacity: float) -> None:
        self.sim = sim
        self.capacity = capacity
        self.jobs: dict[_Worker, float] = {}
        self.used = 0.0
        self._t = 0.0
        self._version = 0

    def _rate(self) -> float:
        return min(1.0, self.capacity / len(self.jobs)) if self.jobs else 0.0

    def advance(self) -> None:
        now = self.sim.now
        rate, dt = self._rate(), now - self._t
        for w in self.jobs:
            self.jobs[w] -= dt * rate
            w.stage.cpu += dt * rate
        self.used += dt * rate * len(self.jobs)
        self._t = now

    def add(self, w: _Worker, work: float) -> None:
        self.advance()
        self.jobs[w] = work
        self._schedule()

    def _schedule(self) -> None:
        self._version += 1
        if self.jobs:
            version = self._version
            due = self.sim.now + min(self.jobs.values()) / self._rate()
            self.sim.at(due, lambda: self._fire(version))

    def _fire(self, version: int) -> None:
        if version != self._version:
            return
        self.advance()
        done = [w for w, left in self.jobs.items() if left <= 1e-7]
        for w in done:
            del self.jobs[w]
        self._schedule()
        for w in done:
            w.done()


class _Worker:
    def __init__(self, stage: _Stage, index: int, ready: bool) -> None:
        self.stage = stage
        self.index = index
        self.ready = ready
        self.state = "parked"
        self.since = 0.0
        self.left = 0  # items of its last work still to put out

    def go(self) -> None:
        st, sim = self.stage, self.stage.sim
        if not self.ready or self.index >= st.limit:
            self.state = "parked"
            return
        if st.input.size >= st.model.batch:
            st.input.take(st.model.batch)
            st.items_in += st.model.batch
            self.state, self.since = "busy", sim.now
            m = st.model
            sim.at(sim.now + m.latency_s * sim.factor(), self._compute)
        else:
            self.state, self.since = "starved", sim.now
            assert isinstance(st.input, _Queue)
            st.input.mark()
            st.input.getters.append((self, st.model.batch))

    def on_input(self) -> None:
        self.stage.starved += self.stage.sim.now - self.since
        self.go()

    def _compute(self) -> None:
        m = self.stage.model
        if m.cpu_s > 0:
            self.stage.sim.pools[m.pool].add(self, m.cpu_s * self.stage.sim.factor())
        else:
            self.done()

    def done(self) -> None:
        st = self.stage
        st.busy += st.sim.now - self.since
        st.worked += st.model.burst
        self.left = st.model.burst
        self._put()

    def _put(self) -> None:
        st = self.stage
        while self.left and st.output.size < st.output.capacity:
            st.output.put()
            st.items_out += 1
            self.left -= 1
        if not self.left:
            self.go()
        else:
            self.state, self.since = "blocked", st.sim.now
            st.output.mark()
            st.output.putters.append(self)

    def on_room(self) -> None:
        self.stage.blocked += self.stage.sim.now - self.since
        self._put()

    def start(self) -> None:
        self.ready = True
        self.go()


class _Stage:
    def __init__(self, sim: Sim, model: Model, source: _Queue | _Source, output: _Queue) -> None:
        self.sim = sim
        self.model = model
        self.input = source
        self.output = output
        self.limit = 0
        self.workers: list[_Worker] = []
        self.items_in = self.items_out = self.worked = 0
        self.busy = self.starved = self.blocked = self.cpu = 0.0
        self.set_limit(model.concurrency, spawn=model.spawn_s)

    def set_limit(self, n: int, spawn: float | None = None) -> None:
        self.limit = n
        delay = self.model.spawn_s if spawn is None else spawn
        while len(self.workers) < n:
            w = _Worker(self, len(self.workers), ready=False)
            self.workers.append(w)
            self.sim.at(self.sim.now + delay, w.start)
        for w in self.workers[:n]:
            if w.ready and w.state == "parked":
                self.sim.soon(w.go)

    def reading(self) -> StageReading:
        # As the run's meters: work is counted when an item is done, so busy seconds over
        # items put out is the time per item; waits are counted as they go on.
        now, busy, starved, blocked = self.sim.now, self.busy, self.starved, self.blocked
        for w in self.workers:
            if w.state == "starved":
                starved += now - w.since
            elif w.state == "blocked":
                blocked += now - w.since
        self.output.mark()
        measured = self.model.executor in ("thread", "process")
        return StageReading(
            items_in=self.items_in,
            items_out=self.items_out,
            busy_s=busy,
            worked=self.worked,
            starved_s=starved,
            blocked_s=blocked,
            workers=sum(1 for w in self.workers[: self.limit] if w.ready),
            cpu_s=self.cpu if measured else None,
            occupancy_s=self.output.occ,
            capacity=self.output.capacity,
            item_bytes=self.model.item_bytes,
            empty_s=self.output.empty_s,
            full_s=self.output.full_s,
        )


class Sim:
    """A simulated pipeline (see the module docstring)."""

    def __init__(
        self,
        models: list[Model],
        *,
        step_s: float,
        cores: float = 2.0,
        seed: int = 0,
        noise: float = 0.0,
        stalls: float = 0.0,
    ) -> None:
        self.now = 0.0
        self.step_s = step_s
        self.noise = noise
        self.stalls = stalls
        self.rng = random.Random(seed)
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.pools = {
            "cores": _Pool(self, cores),
            "gil": _Pool(self, 1.0),
            "loop": _Pool(self, 1.0),
        }
        self.stages: list[_Stage] = []
        source: _Queue | _Source = _Source()
        for m in models:
            out = _Queue(self, m.capacity)
            self.stages.append(_Stage(self, m, source, out))
            source = out
        self.last = source
        self.taken = 0
        self.takes: list[float] = []
        self.waited = 0.0
        self._waiting_since: float | None = None
        self._returned: float | None = None  # when the last take returned
        self.gaps, self.gaps_s = 0, 0.0
        self.measure_gaps = True
        self.decisions: list[Decision] = []
        self.trace: list[tuple[float, int, str, int]] = []  # (t, stage, knob, value)
        self.readings: list[Reading] = []
        self.on_apply: Callable[[Decision], None] | None = None  # a test's hook
        self.soon(self._consume)

    # -- the clock -----------------------------------------------------------------------

    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._events, (max(t, self.now), next(self._seq), fn))

    def soon(self, fn: Callable[[], None]) -> None:
        self.at(self.now, fn)

    def factor(self) -> float:
        """A cost's random factor: log-normal of mean 1, times 5 for a stall."""
        f = 1.0
        if self.noise:
            f = math.exp(self.rng.gauss(-(self.noise**2) / 2, self.noise))
        if self.stalls and self.rng.random() < self.stalls:
            f *= 5.0
        return f

    def run(self, until: float, tuner: Tuner | None = None) -> None:
        """Advance the clock to ``until``, ticking ``tuner`` as a run's task would."""
        if tuner is not None:
            self.soon(lambda: self._tick(tuner, until))
        while self._events and self._events[0][0] <= until:
            t, _, fn = heapq.heappop(self._events)
            self.now = t
            fn()
        self.now = until

    def _tick(self, tuner: Tuner, until: float) -> None:
        r = self.reading()
        self.readings.append(r)
        for d in tuner.observe(r):
            self.decisions.append(d)
            if d.applied:
                self.apply(d)
        if self.now < until:
            self.at(max(tuner.next_at, self.now + 0.001), lambda: self._tick(tuner, until))

    def apply(self, d: Decision) -> None:
        if d.knob == "concurrency":
            self.stages[d.stage].set_limit(d.new)
        else:
            self.stages[d.stage].output.resize(d.new)
        self.trace.append((self.now, d.stage, d.knob, d.new))
        if self.on_apply is not None:
            self.on_apply(d)

    # -- the consumer ----------------------------------------------------------------------

    def _consume(self) -> None:
        q = self.last
        assert isinstance(q, _Queue)
        if self._returned is not None:
            self.gaps += 1
            self.gaps_s += self.now - self._returned
            self._returned = None
        if q.size >= 1:
            q.take(1)
            self.taken += 1
            self.takes.append(self.now)
            self._returned = self.now
            self.at(self.now + self.step_s, self._consume)
        else:
            self._waiting_since = self.now
            q.mark()
            q.getters.append((self, 1))

    def on_input(self) -> None:
        assert self._waiting_since is not None
        self.waited += self.now - self._waiting_since
        self._waiting_since = None
        self._consume()

    # -- what the tuner reads --------------------------------------------------------------

    def reading(self) -> Reading:
        for pool in self.pools.values():
            pool.advance()
        waited = self.waited
        if self._waiting_since is not None:
            waited += self.now - self._waiting_since
        main = self.pools["loop"].used + self.pools["gil"].used
        main += sum(
            s.cpu for s in self.stages if s.model.executor == "thread" and s.model.pool == "cores"
        )
        return Reading(
            t=self.now,
            stages=tuple(s.reading() for s in self.stages),
            taken=self.taken,
            waited_s=waited,
            gaps=self.gaps if self.measure_gaps else 0,
            gaps_s=self.gaps_s if self.measure_gaps else None,
            cpu_s=main,
            loop_cpu_s=self.pools["loop"].used,
        )

    # -- for the tests -----------------------------------------------------------------------

    def infos(self) -> list[StageInfo]:
        return [
            StageInfo(m.label, "batch" if m.batch > 1 else "map", m.executor, float(m.batch))
            for m in (s.model for s in self.stages)
        ]

    def rate(self, t0: float, t1: float) -> float:
        """Consumer items per second between ``t0`` and ``t1``."""
        return sum(1 for t in self.takes if t0 <= t < t1) / (t1 - t0)

    def concurrency(self, stage: int) -> int:
        return self.stages[stage].limit

    def changes(self, stage: int, knob: str = "concurrency") -> list[Decision]:
        return [d for d in self.decisions if d.stage == stage and d.knob == knob]


def auto(
    sim: Sim, stage: int, *, low: int = 1, high: int = 256, what: str = "concurrency"
) -> KnobSpec:
    """A tuned knob of ``sim``'s stage at its current value."""
    st = sim.stages[stage]
    start = st.limit if what == "concurrency" else st.output.capacity
    return KnobSpec(stage, what, start, low, high)


def fixed(sim: Sim, stage: int) -> KnobSpec:
    """The user's concurrency of ``sim``'s stage (reported, never changed: the flag alone
    must keep the tuner off it, so its range is left wide)."""
    n = sim.stages[stage].limit
    return KnobSpec(stage, "concurrency", n, 1, 64, tunable=False, by="user")
