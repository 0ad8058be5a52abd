"""The gate that changes a stage's concurrency live, and the tuner's task.

The gate is exercised by real worker threads and tasks, on both anyio backends: never
more workers past it than its limit, parked ones let in at once when it rises, a stop
ends parked workers cleanly. The tuner's task (``drive``) runs over a simulated
pipeline with a simulated clock (no wall-clock waits): it applies what the tuner
decides, logs each decision at DEBUG on the ``aqueue`` logger, and in ``recommend``
mode applies nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import anyio
import anyio.lowlevel
import pytest
from tune_sim import Model, Sim, auto

from aqueue import QueueClosedError
from aqueue._pipeline.tune._drive import drive
from aqueue._pipeline.tune._gate import Gate
from aqueue._pipeline.tune._knobs import Decision
from aqueue._pipeline.tune._readings import Reading
from aqueue._pipeline.tune._settings import Budget
from aqueue._pipeline.tune._tuner import Tuner

pytestmark = pytest.mark.anyio


class Stop:
    """A run's stop test: raises QueueClosedError once set."""

    def __init__(self) -> None:
        self.set = False

    def __call__(self) -> None:
        if self.set:
            raise QueueClosedError("the pipeline is stopping")


async def wait_until(predicate: Callable[[], bool], what: str) -> None:
    """Poll ``predicate`` (threads change what it reads) for up to 10 s."""
    for _ in range(10_000):
        if predicate():
            return
        await anyio.sleep(0.001)
    raise AssertionError(f"still not {what} after 10 s")


async def test_tasks_past_the_limit_park_and_come_back() -> None:
    gate, stop = Gate(2), Stop()
    inside, most, bursts = 0, 0, [0] * 5
    release = anyio.Event()

    async def worker(slot: int) -> None:
        nonlocal inside, most
        try:
            while True:
                await gate.pass_task(slot, stop)
                inside += 1
                most = max(most, inside)
                bursts[slot] += 1
                await release.wait()
                inside -= 1
                await anyio.lowlevel.checkpoint()
        except QueueClosedError:
            pass

    async with anyio.create_task_group() as tg:
        for slot in range(5):
            tg.start_soon(worker, slot)
        await wait_until(lambda: gate.parked == 3, "three parked")
        assert bursts == [1, 1, 0, 0, 0]
        assert most == 2
        gate.resize(4)
        await wait_until(lambda: gate.parked == 1, "one parked")
        assert bursts == [1, 1, 1, 1, 0]
        assert inside == 4
        gate.resize(1)  # each finishes its burst, then parks
        release.set()
        await wait_until(lambda: gate.parked == 4, "four parked")
        assert bursts[0] > 1
        assert bursts[1:] == [1, 1, 1, 0]
        stop.set = True
        gate.close()
    assert gate.parked == 0
    assert most == 4


async def test_cancelling_a_parked_task_leaves_nothing_behind() -> None:
    gate, stop = Gate(0), Stop()
    with anyio.move_on_after(0.05):
        await gate.pass_task(0, stop)
    assert gate.parked == 0
    gate.resize(1)
    await gate.pass_task(0, stop)  # admitted: returns at once


async def test_threads_past_the_limit_park_and_a_stop_ends_them() -> None:
    gate, stop = Gate(1), Stop()
    lock = threading.Lock()
    inside, most, ended = [0], [0], []

    def worker(slot: int) -> None:
        try:
            for _ in range(200):
                gate.pass_thread(slot, stop)
                with lock:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.0005)
                with lock:
                    inside[0] -= 1
        except QueueClosedError:
            ended.append(slot)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()
    await wait_until(lambda: gate.parked == 3, "three threads parked")
    assert most[0] == 1
    gate.resize(3)
    await wait_until(lambda: gate.parked == 1 or not threads[0].is_alive(), "two let in")
    stop.set = True  # the parked one sees it within its poll, without a notify
    for t in threads:
        await anyio.to_thread.run_sync(t.join, 10)
    assert not any(t.is_alive() for t in threads)
    assert 3 in ended
    assert most[0] <= 3
    assert gate.parked == 0


def test_a_bad_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="limit must be >= 0, got -1"):
        Gate(-1)
    with pytest.raises(ValueError, match="limit must be >= 0, got -2"):
        Gate(1).resize(-2)


class Target:
    """A simulated pipeline as the tuner's task sees a run."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.applied: list[Decision] = []

    def reading(self, now: float) -> Reading:
        assert now == self.sim.now
        return self.sim.reading()

    def apply(self, decision: Decision) -> None:
        self.applied.append(decision)
        self.sim.apply(decision)


def _chain() -> list[Model]:
    return [
        Model("map(fetch)", "task", latency_s=0.006, concurrency=4, capacity=64),
        Model("batch(32)", "", batch=32, capacity=8),
    ]


@pytest.mark.parametrize("acts", [True, False])
async def test_the_tuners_task_applies_and_logs(
    acts: bool, caplog: pytest.LogCaptureFixture
) -> None:
    sim = Sim(_chain(), step_s=0.008, seed=0)
    tuner = Tuner(sim.infos(), [auto(sim, 0)], Budget(2.0, 1e9), acts=acts)
    target = Target(sim)

    async def sleep(seconds: float) -> None:
        sim.run(sim.now + seconds)
        await anyio.lowlevel.checkpoint()

    caplog.set_level(logging.DEBUG, logger="aqueue")
    await drive(target, tuner, lambda: sim.now >= 2.0, clock=lambda: sim.now, sleep=sleep)
    assert tuner.decisions
    logged = [r.getMessage() for r in caplog.records if r.name == "aqueue"]
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "aqueue")
    if acts:
        assert target.applied == list(tuner.decisions)
        assert sim.concurrency(0) >= 24
        assert logged == [f"pipeline tuner: {d.reason}" for d in tuner.decisions]
    else:
        assert target.applied == []
        assert sim.concurrency(0) == 4
        assert logged == [f"pipeline tuner recommends: {d.reason}" for d in tuner.decisions]
