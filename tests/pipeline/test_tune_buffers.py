"""The buffer rule (``capacity="auto"``, ``prefetch("auto")``) on simulated pipelines
(``tune_sim.py``): a buffer between a producer that delivers in bursts and a steady
consumer grows until the consumer stops running dry, within the memory budget, then
holds without oscillating; one that never runs empty shrinks back; a user's capacity
is never changed. Asserts on decisions and simulated throughput, never on wall time.

The workload: a producer that puts out 32 items at once after 0.32 s of work (100
items/s on average) feeding a consumer that takes one item per 12.5 ms (80 items/s).
With the default 8 items of room the consumer runs dry after every burst; 32 carry it
over the gaps.
"""

from __future__ import annotations

import math
import re

import pytest
from tune_sim import Model, Sim, auto

from aqueue._pipeline.tune._buffers import CALM_S, FLOOR_S
from aqueue._pipeline.tune._knobs import KnobSpec
from aqueue._pipeline.tune._settings import Budget
from aqueue._pipeline.tune._tuner import Tuner

STEP_S = 0.0125  # the consumer: 80 items/s at most
BURST = 32
BUDGET = Budget(cpu=2.0, memory=math.inf)


def bursty(capacity: int = 8, item_bytes: float = 1000.0) -> list[Model]:
    return [
        Model(
            "producer",
            "thread",
            latency_s=BURST / 100,
            burst=BURST,
            capacity=capacity,
            item_bytes=item_bytes,
        )
    ]


def buffer_tuner(sim: Sim, budget: Budget = BUDGET, *, acts: bool = True) -> Tuner:
    knob = auto(sim, 0, what="capacity", low=8, high=1024)
    return Tuner(sim.infos(), [knob], budget, acts=acts)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_buffer_behind_a_bursty_producer_grows_until_the_consumer_keeps_up(seed: int) -> None:
    fixed = Sim(bursty(), step_s=STEP_S, seed=seed, noise=0.1)
    fixed.run(20.0)
    sim = Sim(bursty(), step_s=STEP_S, seed=seed, noise=0.1)
    sim.run(20.0, buffer_tuner(sim))
    grows = [d for d in sim.changes(0, "capacity") if d.new > d.old]
    assert grows
    assert grows[0].t < 2.0
    assert "bursts" in grows[0].verdict
    assert re.search(r"the buffer ran empty \d+% of the time and was full \d+%", grows[0].reason)
    assert 32 <= sim.stages[0].output.capacity <= 128
    # the consumer keeps up once grown: within 5% of its own pace, far above the default
    assert sim.rate(5.0, 20.0) >= 0.95 / STEP_S
    assert fixed.rate(5.0, 20.0) < 0.8 / STEP_S


def test_it_does_not_oscillate() -> None:
    """A cut that makes the consumer run dry is grown back, and the value it was cut
    from is kept as a floor: over a minute, a handful of changes, not a cycle."""
    sim = Sim(bursty(), step_s=STEP_S, seed=3, noise=0.1)
    sim.run(FLOOR_S, buffer_tuner(sim))
    changes = sim.changes(0, "capacity")
    assert 2 <= len(changes) <= 8
    late = [d for d in changes if d.t > 15.0]
    assert len(late) <= 1


def test_room_is_not_grown_for_a_producer_slower_on_average() -> None:
    """A steady producer slower than the consumer: the consumer waits, but the producer
    never waits for room, so room would not help and it is not grown."""
    models = [Model("producer", "thread", latency_s=1 / 60, capacity=8)]
    sim = Sim(models, step_s=STEP_S, seed=0, noise=0.3)
    sim.run(10.0, buffer_tuner(sim))
    # (at most once during the first burst, when the consumer had waited from the start)
    assert [d for d in sim.changes(0, "capacity") if d.t > 5.0] == []
    assert sim.stages[0].output.capacity <= 16


def test_room_is_not_grown_while_the_consumer_does_not_wait() -> None:
    """The bursts reach a buffer in the middle, but a large buffer after it (the user's)
    keeps the consumer fed: growing the one in the middle would gain nothing."""
    models = [
        Model("producer", "thread", latency_s=2.56, burst=256, capacity=8),  # 100 items/s
        Model("prefetch", "thread", latency_s=0.0005, capacity=512),  # 2,000 items/s
    ]
    sim = Sim(models, step_s=STEP_S, seed=0, noise=0.1)
    tuner = Tuner(sim.infos(), [auto(sim, 0, what="capacity", low=8, high=1024)], BUDGET)
    sim.run(30.0, tuner)
    assert sim.rate(5.0, 30.0) >= 0.99 / STEP_S  # fed all along after the first burst
    late = sim.readings[-1].stages[0]
    assert late.full_s > 1.0  # (the bursts did fill the buffer in the middle, often)
    # (at most once during the first burst, when the consumer had waited from the start)
    assert [d for d in sim.changes(0, "capacity") if d.t > 5.0] == []
    assert sim.stages[0].output.capacity <= 16


def test_a_buffer_that_never_runs_empty_shrinks_back() -> None:
    """A steady producer twice as fast as the consumer: the buffer it was given is
    never empty, so it is halved (no faster than every ``CALM_S``) down to its least."""
    models = [Model("producer", "thread", latency_s=0.005, capacity=256)]
    sim = Sim(models, step_s=STEP_S, seed=0)
    tuner = Tuner(sim.infos(), [KnobSpec(0, "capacity", 256, 8, 1024)], BUDGET)
    sim.run(30.0, tuner)
    cuts = sim.changes(0, "capacity")
    assert cuts
    assert all(d.new < d.old for d in cuts)
    assert all("never ran empty" in d.verdict for d in cuts)
    assert cuts[0].t >= CALM_S
    assert sim.stages[0].output.capacity == 8
    assert sim.rate(1.0, 30.0) >= 0.99 / STEP_S


def test_the_memory_budget_is_never_exceeded() -> None:
    """Items of 1 MB and a budget of 20 MB: the buffer grows to what fits (20 MB less
    the item in the producer's hands) and no further, and says why."""
    budget = Budget(cpu=2.0, memory=20e6)
    sim = Sim(bursty(item_bytes=1e6), step_s=STEP_S, seed=0, noise=0.1)
    tuner = buffer_tuner(sim, budget)
    sim.run(20.0, tuner)
    held = [sum((s.capacity + s.workers) * s.item_bytes for s in r.stages) for r in sim.readings]
    assert max(held) <= budget.memory
    assert sim.stages[0].output.capacity == 19
    assert any(d.new > d.old for d in sim.changes(0, "capacity"))
    assert tuner.knobs[0].note == "at the memory budget"


def test_a_buffer_above_the_budget_is_cut_back_to_it() -> None:
    budget = Budget(cpu=2.0, memory=20e6)
    sim = Sim(bursty(capacity=64, item_bytes=1e6), step_s=STEP_S, seed=0)
    tuner = Tuner(sim.infos(), [KnobSpec(0, "capacity", 64, 8, 1024)], budget)
    sim.run(2.0, tuner)
    first = sim.changes(0, "capacity")[0]
    assert (first.old, first.new, first.verdict) == (64, 19, "at the memory budget")


def test_a_users_capacity_is_never_changed() -> None:
    sim = Sim(bursty(), step_s=STEP_S, seed=0)
    knob = KnobSpec(0, "capacity", 8, 8, 8, tunable=False, by="user")
    sim.run(10.0, Tuner(sim.infos(), [knob], BUDGET))
    # (at most once during the first burst, when the consumer had waited from the start)
    assert [d for d in sim.changes(0, "capacity") if d.t > 5.0] == []
    assert sim.stages[0].output.capacity <= 16
    assert sim.stages[0].output.capacity == 8


def test_recommend_mode_says_once_and_changes_nothing() -> None:
    sim = Sim(bursty(), step_s=STEP_S, seed=0)
    sim.run(10.0, buffer_tuner(sim, acts=False))
    said = sim.changes(0, "capacity")
    assert len(said) == 1
    assert not said[0].applied
    assert (said[0].old, said[0].new) == (8, 16)
    assert sim.stages[0].output.capacity == 8
