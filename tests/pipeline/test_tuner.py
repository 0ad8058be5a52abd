"""The pipeline tuner's rule, on simulated pipelines (``tune_sim.py``).

Every test runs a seeded simulation on a simulated clock and asserts on the tuner's
decisions and on the simulated consumer's throughput, compared with the best fixed
setting found by running the same simulation over a grid of settings: never on
wall-clock time.

The workload of most tests is the one that motivated the tuner: an async fetch of
6 ms per item (latency: no CPU), a thread map of 50 µs of Python per item, batch(32),
and a consumer whose step takes 8 ms: 125 batches per second at best, which takes
about 30 fetches in flight, far past the 2 cores.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from tune_sim import Model, Sim, auto, fixed

from aqueue._pipeline.tune._estimates import Estimates
from aqueue._pipeline.tune._knobs import Decision
from aqueue._pipeline.tune._readings import Reading, StageInfo, StageReading, Window
from aqueue._pipeline.tune._settings import Budget
from aqueue._pipeline.tune._tuner import (
    CUT_TRIAL_S,
    MIN_ITEMS,
    PROCESS_DWELL_S,
    PROCESS_SUSTAIN_S,
    REGIME,
    Tuner,
)

BUDGET = Budget(cpu=2.0, memory=math.inf)
STEP_S = 0.008
CONSUMER_MAX = 1 / STEP_S  # batches per second the consumer takes at most


def fetch_chain(fetch: int = 4, threads: int = 2, latency: float = 0.006) -> list[Model]:
    return [
        Model(
            "map(fetch)",
            "task",
            latency_s=latency,
            cpu_s=20e-6,
            pool="loop",
            concurrency=fetch,
            capacity=max(8, 2 * fetch),
        ),
        Model("map(decode)", "thread", cpu_s=50e-6, pool="gil", concurrency=threads, capacity=64),
        Model("batch(32)", "", batch=32, capacity=8),
    ]


def best_of(
    make: Callable[[int], list[Model]], grid: Iterable[int], until: float, since: float, **kw: Any
) -> float:
    """The best consumer rate between ``since`` and ``until`` over the settings of
    ``grid`` (``make(setting)`` builds each pipeline)."""
    rates = []
    for setting in grid:
        sim = Sim(make(setting), **kw)
        sim.run(until)
        rates.append(sim.rate(since, until))
    return max(rates)


@functools.cache
def best_fetch(latency: float, seed: int, noise: float, until: float, since: float) -> float:
    """The best fixed setting of ``fetch_chain`` (fetch concurrency around the need;
    the thread map's does not matter here: it needs a fraction of one worker)."""
    need = 4000 * latency  # items/s x seconds per item
    grid = sorted({max(1, round(need * k)) for k in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 4.0)})
    kw = dict(step_s=STEP_S, seed=seed, noise=noise)
    return best_of(lambda f: fetch_chain(f, 2, latency), grid, until, since, **kw)


def tuned(sim: Sim, *, acts: bool = True, budget: Budget = BUDGET, fetch_high: int = 256) -> Tuner:
    return Tuner(
        sim.infos(),
        [
            auto(sim, 0, high=fetch_high),
            auto(sim, 1, high=64),
            auto(sim, 0, what="capacity", high=4096),
        ],
        budget,
        acts=acts,
    )


def reversals(decisions: list[Decision]) -> int:
    """How many times a knob's changes went one way and then the other."""
    signs = [1 if d.new > d.old else -1 for d in decisions]
    return sum(1 for a, b in itertools.pairwise(signs) if a != b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_latency_bound_stage_gets_its_requests_in_flight(seed: int) -> None:
    best = best_fetch(0.006, seed, 0.2, 3.0, 0.5)
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=seed, noise=0.2)
    sim.run(3.0, tuned(sim))
    assert sim.rate(0.5, 3.0) >= 0.95 * best
    # far past the 2 cores, not far past what keeps up (4,000 items/s x 6 ms = 24)
    assert 24 <= sim.concurrency(0) <= 48
    raises = [d for d in sim.changes(0) if d.new > d.old]
    assert raises
    assert raises[0].t < 0.2
    assert any("latency-bound" in d.verdict for d in raises)
    # the thread map needs a fraction of one worker: it is cut, never raised
    assert all(d.new < d.old for d in sim.changes(1))


@pytest.mark.parametrize("seed", range(6))
def test_the_first_raise_lands_on_littles_law(seed: int) -> None:
    """Measured from the consumer's gaps, the demand is exact from the first items:
    the first informed raise lands on 1.25 x 4,000 items/s x 6.2 ms (the fetch and its
    share of the loop), not past it."""
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=seed, noise=0.2)
    sim.run(0.5, tuned(sim))
    first = next(d for d in sim.changes(0) if "latency-bound" in d.verdict)
    assert 28 <= first.new <= 33


def w6_chain(c1: int, c2: int) -> list[Model]:
    """W6 (bench_pipeline.py): 25 ms async stage, 35 ms blocking stage on threads."""
    return [
        Model("map(stage1)", "task", latency_s=0.025, cpu_s=20e-6, pool="loop",
              concurrency=c1, capacity=max(8, 2 * max(c1, c2))),
        Model("map(stage2)", "thread", latency_s=0.035, cpu_s=30e-6, pool="gil",
              concurrency=c2, capacity=max(8, 2 * c2)),
    ]  # fmt: skip


@pytest.mark.parametrize("step_s", [0.030, 0.0])
def test_w6_within_5_percent_of_its_best_fixed_setting(step_s: float) -> None:
    """A 30 ms consumer (33 items/s: two of each worker keep up), and one that takes
    whatever comes (then the 64 threads' cap sets the pace, 1,830 items/s)."""
    kw: dict[str, Any] = dict(step_s=step_s, seed=1, noise=0.1)
    best = best_of(lambda c: w6_chain(c, c), (1, 2, 4, 8, 16, 32, 64), 5.0, 1.0, **kw)
    sim = Sim(w6_chain(4, 2), **kw)
    knobs = [auto(sim, 0), auto(sim, 1, high=64)]
    knobs += [auto(sim, i, what="capacity", low=8, high=4096) for i in (0, 1)]
    sim.run(5.0, Tuner(sim.infos(), knobs, BUDGET))
    assert sim.rate(1.0, 5.0) >= 0.95 * best
    # the async stage feeds the threads and no more: 1,830 items/s x 25 ms x 1.25 = 57
    assert sim.concurrency(0) <= 64


def test_a_slow_stage_is_judged_on_its_first_round() -> None:
    """W6's thread stage (35 ms per item) on 2 threads, and a consumer that takes
    whatever comes: it waits, so a window of a few items at each tuned stage is enough;
    the thread map is raised before it has done 16 items (0.28 s on 2 threads)."""
    sim = Sim(w6_chain(16, 2), step_s=0.0, seed=1, noise=0.1)
    sim.run(1.0, Tuner(sim.infos(), [auto(sim, 0), auto(sim, 1)], BUDGET))
    first = sim.changes(1)[0]
    assert first.old == 2
    assert first.new > 2
    assert sum(1 for t in sim.takes if t <= first.t) < MIN_ITEMS
    assert first.reason.startswith("map(stage2): 2 -> ")


def test_a_consumer_that_mostly_waits_shows_no_new_regime() -> None:
    """Its own time per item is then the residue of its waits (microseconds, off by
    any factor from one window to the next): the demand estimate keeps learning
    instead of restarting, and so skipping, window after window. A consumer that
    mostly works and slows down by 3x does show one."""
    info = [StageInfo("map(f)", "map", "task")]

    def reading(t: float, taken: int, waited: float) -> Reading:
        return Reading(t, (StageReading(taken, taken, 0.0, 0.0, 0.0, 4),), taken, waited)

    est = Estimates(info, REGIME, MIN_ITEMS)
    own = [2e-4, 1e-3, 3e-4, 2e-3, 2e-4]  # seconds of own time per 50 ms window
    t, taken, waited = 0.0, 0, 0.0
    prev = reading(t, taken, waited)
    for seconds in own:
        t, taken, waited = t + 0.05, taken + 20, waited + 0.05 - seconds
        now = reading(t, taken, waited)
        assert not est.learn(Window.between(prev, now), set()).consumer
        prev = now
    assert est.demand() is not None
    busy = Estimates(info, REGIME, MIN_ITEMS)
    for step_s in (0.002, 0.002, 0.006):  # a consumer at work 80% of each window
        t, taken, waited = t + 0.05, taken + round(0.04 / step_s), waited + 0.01
        now = reading(t, taken, waited)
        changed = busy.learn(Window.between(prev, now), set()).consumer
        prev = now
    assert changed


def test_the_reason_names_the_figures() -> None:
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=0)
    sim.run(1.0, tuned(sim))
    first = next(d for d in sim.changes(0) if "latency-bound" in d.verdict)
    assert first.reason.startswith(f"map(fetch): {first.old} -> {first.new}, consumer waited ")
    assert re.search(r", stage starved 0%, busy (9\d|100)%: latency-bound \(", first.reason)
    assert "ms per item" in first.reason
    assert str(first) == first.reason
    # the capacity follows the concurrency, and says so
    follow = [d for d in sim.changes(0, "capacity") if d.t == first.t]
    assert len(follow) == 1
    assert follow[0].new == 2 * first.new
    assert follow[0].verdict == "follows the concurrency"


def test_a_cpu_bound_stage_stays_within_the_cpu_budget() -> None:
    def chain(c: int) -> list[Model]:
        return [
            Model("map(parse)", "process", cpu_s=0.001, concurrency=c, capacity=64, spawn_s=0.25),
            Model("batch(16)", "", batch=16, capacity=8),
        ]

    kw: dict[str, Any] = dict(step_s=0.0001, seed=1, noise=0.2, cores=2.0)
    best = best_of(chain, (1, 2, 3, 4), 9.0, 4.5, **kw)
    sim = Sim(chain(1), **kw)
    tuner = Tuner(sim.infos(), [auto(sim, 0, high=8)], BUDGET)
    sim.run(9.0, tuner)
    # worker processes grow only once the consumer has waited for a while (a spawn
    # costs a fraction of a second): then, within 5% of the best
    first = sim.changes(0)[0]
    assert first.new > first.old
    assert first.t >= PROCESS_SUSTAIN_S
    assert sim.rate(4.5, 9.0) >= 0.95 * best
    assert max(v for _, stage, _, v in sim.trace if stage == 0) <= 2  # the budget, not the cap
    assert any("CPU budget" in d.reason for d in sim.changes(0)) or tuner.knobs[0].note


def test_threads_sharing_the_gil_find_the_knee() -> None:
    def chain(c: int) -> list[Model]:
        return [
            Model("map(parse)", "thread", cpu_s=0.001, pool="gil", concurrency=c, capacity=64),
            Model("batch(16)", "", batch=16, capacity=8),
        ]

    kw: dict[str, Any] = dict(step_s=0.0001, seed=1, noise=0.2)
    best = best_of(chain, (1, 2, 4, 8), 4.0, 1.0, **kw)
    sim = Sim(chain(2), **kw)
    tuner = Tuner(sim.infos(), [auto(sim, 0, high=64)], BUDGET)
    sim.run(4.0, tuner)
    assert sim.rate(1.0, 4.0) >= 0.95 * best
    changes = sim.changes(0)
    assert [d.verdict for d in changes][-1] == "no gain"
    assert sim.concurrency(0) == 2
    assert len(changes) == 2  # tried once, undone once: the ceiling holds after that
    assert tuner.knobs[0].note == "at 2: no gain above it"


@pytest.mark.parametrize("change", [3.0, 3.15])
def test_it_follows_a_regime_change(change: float) -> None:
    best_fast = best_fetch(0.002, 2, 0.3, 3.0, 0.5)
    best_slow = best_fetch(0.012, 2, 0.3, 5.0, 1.0)
    sim = Sim(fetch_chain(latency=0.002), step_s=STEP_S, seed=2, noise=0.3)
    sim.at(change, lambda: setattr(sim.stages[0].model, "latency_s", 0.012))
    sim.run(change + 5.0, tuned(sim))
    assert sim.rate(0.5, 3.0) >= 0.95 * best_fast
    # 4,000 items/s x 12 ms = 48 in flight, reached within 0.4 s of the change, in one
    # step: the window that straddles the change is not decided on
    after = [d for d in sim.changes(0) if d.t > change]
    assert after[0].new >= 48
    assert after[0].t < change + 0.4
    assert not any(d.verdict == "no gain" for d in after)
    assert sim.rate(change + 1.0, change + 5.0) >= 0.95 * best_slow


def test_a_latency_rise_during_a_trial_is_no_knee() -> None:
    """A raise whose trial window sees the latency rise looks like a knee (its output
    fell); at the old concurrency the new latency stays, so the ceiling goes."""
    sim = Sim(fetch_chain(latency=0.002), step_s=STEP_S, seed=1, noise=0.2)
    sim.at(3.0, lambda: setattr(sim, "step_s", 0.004))  # twice the demand: a raise
    slower: list[float] = []

    def latency_rises(d: Decision) -> None:
        if d.t > 3.0 and d.knob == "concurrency" and d.new > d.old and not slower:
            slower.append(d.t)
            sim.stages[0].model.latency_s = 0.012  # during the raise's trial

    sim.on_apply = latency_rises
    tuner = tuned(sim)
    sim.run(6.0, tuner)
    after = [d for d in sim.changes(0) if d.t > slower[0]]
    assert after[0].verdict == "no gain"  # (what the trial saw)
    assert after[1].new > after[0].old  # past the ceiling it set: gone
    assert after[1].t < slower[0] + 0.5
    # 8,000 items/s x 12 ms = 96 in flight (at most 8x per step)
    assert max(d.new for d in after if d.t < slower[0] + 1.0) >= 96
    assert sim.rate(slower[0] + 1.0, 6.0) >= 0.95 / 0.004


def test_it_backs_off_when_the_consumer_stops_waiting() -> None:
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=3, noise=0.3)
    sim.at(3.0, lambda: setattr(sim, "step_s", 0.040))  # a longer step: 800 items/s
    sim.run(12.0, tuned(sim))
    peak = max(v for t, stage, knob, v in sim.trace if stage == 0 and knob == "concurrency")
    assert peak >= 24
    # 800 items/s x 6 ms = 4.8 in flight: cut to at most 1.6 times that, by halves
    assert sim.concurrency(0) <= 8
    cuts = [d for d in sim.changes(0) if d.new < d.old]
    assert cuts
    assert all(d.new >= math.ceil(d.old / 2) for d in cuts)
    assert all("backing off" in d.verdict for d in cuts)
    waited = sim.readings[-1].waited_s - next(r for r in sim.readings if r.t >= 4.0).waited_s
    assert waited / 8.0 < 0.01  # and the consumer did not wait for it


def test_a_cut_that_made_the_consumer_wait_is_undone_and_not_repeated() -> None:
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=5, noise=0.2)
    sim.at(3.0, lambda: setattr(sim, "step_s", 0.040))  # calm: the fetches get cut
    cut_at: list[float] = []

    def demand_returns(d: Decision) -> None:
        if d.stage == 0 and d.knob == "concurrency" and d.new < d.old and not cut_at:
            cut_at.append(sim.now)
            sim.step_s = STEP_S  # right after the first cut, the old demand is back
            sim.at(sim.now + 0.5, lambda: setattr(sim, "step_s", 0.040))  # and gone again

    sim.on_apply = demand_returns
    sim.run(15.0, tuned(sim))
    changes = [d for d in sim.changes(0) if d.t >= cut_at[0]]
    cut, undone = changes[0], changes[1]
    assert undone.verdict == "cut undone"
    assert (undone.old, undone.new) == (cut.new, cut.old)
    assert undone.t - cut.t < CUT_TRIAL_S
    # the demand went away again, but the value that made it wait is not cut again
    assert all(d.new >= cut.old for d in changes[2:])
    assert sim.concurrency(0) >= cut.old


@pytest.mark.parametrize("seed", range(5))
def test_noise_does_not_make_it_oscillate(seed: int) -> None:
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=seed, noise=0.5, stalls=0.05)
    sim.run(20.0, tuned(sim))
    for stage in (0, 1):
        late = [d for d in sim.changes(stage) if d.t > 1.0]
        assert len(late) <= 3, late
        assert reversals(sim.changes(stage)) <= 1, sim.changes(stage)
    assert sim.rate(1.0, 20.0) >= 0.95 * CONSUMER_MAX


def test_the_memory_budget_holds() -> None:
    models = [
        Model("map(fetch)", "task", latency_s=0.006, concurrency=4, capacity=64, item_bytes=1e6),
        Model("batch(32)", "", batch=32, capacity=4, item_bytes=32e6),
    ]
    budget = Budget(cpu=2.0, memory=250e6)  # the defaults hold 196 MB; 30 fetches want 90 more
    sim = Sim(models, step_s=STEP_S, seed=1)
    tuner = Tuner(
        sim.infos(), [auto(sim, 0), auto(sim, 0, what="capacity", low=64, high=4096)], budget
    )
    sim.run(3.0, tuner)
    held = [sum((s.capacity + s.workers) * s.item_bytes for s in r.stages) for r in sim.readings]
    assert max(held) <= budget.memory
    assert sim.concurrency(0) > 4
    assert "memory budget" in tuner.knobs[0].note + "".join(d.reason for d in sim.changes(0))


def test_the_users_numbers_win() -> None:
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=1)
    tuner = Tuner(sim.infos(), [auto(sim, 0, high=8), fixed(sim, 1)], BUDGET)
    sim.run(3.0, tuner)
    assert sim.changes(1) == []
    assert sim.concurrency(1) == 2
    assert max(d.new for d in sim.changes(0)) == 8 == sim.concurrency(0)
    assert tuner.knobs[0].note == "at its cap 8"
    by = {(s.stage, s.knob): s.by for s in tuner.settings()}
    assert by == {(0, "concurrency"): "tuner", (1, "concurrency"): "user"}


def test_a_fixed_stage_stays_fixed_even_when_it_limits() -> None:
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=1)  # the user's 4 fetches: 1 in 6 needed
    tuner = Tuner(sim.infos(), [fixed(sim, 0), auto(sim, 1, high=64)], BUDGET)
    sim.run(3.0, tuner)
    assert sim.changes(0) == []
    assert sim.concurrency(0) == 4
    assert sim.rate(0.5, 3.0) < 0.25 * CONSUMER_MAX  # (it did limit the consumer)
    assert [s.by for s in tuner.settings()] == ["user", "default"]


def test_recommend_mode_only_reports() -> None:
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=1, noise=0.2)
    tuner = tuned(sim, acts=False)
    sim.run(3.0, tuner)
    assert sim.concurrency(0) == 4
    assert sim.trace == []
    recommended = sim.changes(0)
    assert recommended
    assert not any(d.applied for d in sim.decisions)
    assert all(a.new != b.new for a, b in itertools.pairwise(recommended))  # no repeats
    assert 24 <= recommended[-1].new <= 48
    setting = tuner.settings()[0]
    assert (setting.value, setting.recommended) == (4, recommended[-1].new)


def test_process_workers_change_rarely() -> None:
    models = [
        Model("map(parse)", "process", cpu_s=0.002, concurrency=1, capacity=64, spawn_s=0.25),
        Model("batch(16)", "", batch=16, capacity=8),
    ]
    sim = Sim(models, step_s=0.0001, seed=4, noise=0.4, stalls=0.05, cores=4.0)
    sim.run(20.0, Tuner(sim.infos(), [auto(sim, 0, high=4)], Budget(cpu=4.0, memory=math.inf)))
    changes = sim.changes(0)
    assert changes
    assert sim.concurrency(0) >= 3
    gaps = [b.t - a.t for a, b in itertools.pairwise(changes)]
    assert all(g >= PROCESS_DWELL_S for g in gaps if g > 0.2)  # (an undone raise is at once)
    assert all(d.new > d.old or d.verdict == "no gain" for d in changes)


def test_without_gap_measurements_it_still_converges() -> None:
    best = best_fetch(0.006, 0, 0.2, 3.0, 0.5)
    sim = Sim(fetch_chain(), step_s=STEP_S, seed=0, noise=0.2)
    sim.measure_gaps = False
    sim.run(3.0, tuned(sim))
    assert sim.rate(0.5, 3.0) >= 0.95 * best


def test_the_same_readings_give_the_same_decisions() -> None:
    runs = []
    for _ in range(2):
        sim = Sim(fetch_chain(), step_s=STEP_S, seed=7, noise=0.4, stalls=0.02)
        sim.run(5.0, tuned(sim))
        runs.append(sim.decisions)
    assert runs[0] == runs[1]
    assert runs[0]
