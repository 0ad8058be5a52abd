"""A tuned process map (``map(fn, executor="process", concurrency="auto")``) whose cut
holds gives its worker processes back, through the public API: the processes of the
drivers parked by the cut exit and are reaped (their pids are gone from /proc), the
items still arrive once and in order, ``statistics()`` counts the processes that exist,
a later raise spawns new ones, and a close, a cancellation or a worker dying while
workers are being retired ends cleanly with nothing left. A number given by the user
never retires anything.

The tuner's process clocks (30 s of calm before a process map is cut, a few seconds
before it grows) and the grace period before a parked worker is retired are shortened
for these tests (``quick`` below): the rule is the same, only its waits are shorter.
The functions and how slow each item is come from the source (``(i, seconds)``), so a
test moves the pipeline from a slow consumer (the tuner cuts) to a slow stage (it
raises). Asserts on pids, counts and items, never on time. The retirement's own
tasks and waits are anyio's: the test of the whole cycle and the cancellations run on
both backends, the others on asyncio (each spawns processes: a second each).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import proc_fns
import pytest
from test_procs import alive, assert_nothing_left

import aqueue
from aqueue import Pipeline
from aqueue._pipeline.process import _proc, _workers
from aqueue._pipeline.tune import _tuner

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

N = 2000
FAST_S = 0.001  # a worker's item while the consumer is the slow side (the tuner cuts)
SLOW_S = 0.006  # a worker's item while the stage is the slow side (the tuner raises)
CONSUMER_S = 0.004  # the consumer's step while it is the slow side


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tuner's process clocks and the retirement's grace period, shortened."""
    for name, seconds in {
        "CALM_S": 0.2,
        "DWELL_S": 0.2,
        "PROCESS_CALM_S": 0.2,
        "PROCESS_SUSTAIN_S": 0.1,
        "PROCESS_DWELL_S": 0.2,
    }.items():
        monkeypatch.setattr(_tuner, name, seconds)
    monkeypatch.setattr(_workers, "RETIRE_AFTER_S", 0.2)


class Source:
    """Items ``(i, seconds)``: ``seconds`` is what the test says when the item is read."""

    def __init__(self, n: int = N) -> None:
        self.n = n
        self.item_s = FAST_S

    def __iter__(self) -> Iterator[tuple[int, float]]:
        for i in range(self.n):
            yield i, self.item_s


def tuned(source: Source, concurrency: Any = None, start: int = 2) -> Pipeline[tuple[int, int]]:
    auto = aqueue.Auto(start=start, max=start) if concurrency is None else concurrency
    return Pipeline(source).map(proc_fns.sleepy, executor="process", concurrency=auto, ordered=True)


def mapped(pipe: Pipeline[Any]) -> aqueue.StageStatistics:
    return pipe.statistics()[1]


async def test_a_cut_that_holds_retires_its_processes_and_a_raise_spawns_new_ones(
    quick: None,
) -> None:
    source = Source()
    pipe = tuned(source, start=3)
    got: list[int] = []
    first: set[int] = set()  # the pids before the cut held
    later: set[int] = set()  # the pids after a raise
    phase = "cut"
    with anyio.fail_after(100):
        async with pipe.open() as items:
            async for i, pid in items:
                got.append(i)
                st = mapped(pipe)
                if phase == "cut":
                    first.add(pid)
                    await anyio.sleep(CONSUMER_S)  # the consumer is the slow side
                    if st.concurrency == 1 and st.worker_processes == 1:
                        # Cut from 3 to 1 and held: two processes ended and reaped.
                        assert len(first) == 3  # (all three worked before the cut)
                        assert sum(alive(p) for p in first) == 1
                        source.item_s = SLOW_S  # now the stage is: the tuner raises
                        phase = "raise"
                elif phase == "raise":
                    if pid not in first:
                        later.add(pid)
                    if st.worker_processes >= 2 and later:
                        assert sum(alive(p) for p in first | later) == st.worker_processes
                        source.item_s = 0.0  # (the rest, quickly)
                        phase = "done"
            describe = pipe.describe()
    assert phase == "done"
    assert got == list(range(N))  # every item once, in order, across every retire and spawn
    cuts = [d for d in mapped(pipe).decisions if d.new < d.old]
    assert cuts  # (the decisions say what the processes did)
    assert "retired after the tuner's cuts" in describe
    assert mapped(pipe).worker_processes == 0  # (the run is over: every one reaped)
    assert_nothing_left(first | later)
    assert multiprocessing.active_children() == []


async def _same(x: tuple[int, int]) -> tuple[int, int]:
    return x


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_number_given_by_the_user_never_retires(quick: None) -> None:
    """The same slow consumer with ``concurrency=3`` on the process map (and a tuned map
    after it, so the tuner runs): its three processes work until the input ends."""
    pipe = tuned(Source(), concurrency=3).map(_same, concurrency="auto", ordered=True)
    pids: set[int] = set()
    counts = set()
    with anyio.fail_after(100):
        async with pipe.open() as items:
            async for i, pid in items:
                pids.add(pid)
                counts.add(mapped(pipe).worker_processes)
                await anyio.sleep(CONSUMER_S)
                if i == 250:  # (the quick tuner would have cut a tuned map twice by now)
                    assert len(pids) == 3
                    assert all(alive(p) for p in pids)
                    break
    assert counts == {3}
    assert mapped(pipe).set_by == "user"
    assert_nothing_left(pids)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("when", ["at the cut", "after a retire"])
async def test_leaving_while_workers_retire_leaves_nothing(quick: None, when: str) -> None:
    """The consumer leaves as the tuner cuts (drivers draining, a retirement pending) or
    once a worker is retired (its driver parked, waiting for a new process): every
    process started is ended and reaped, nothing in shared memory is left."""
    pipe = tuned(Source())
    got: list[int] = []
    pids: set[int] = set()
    with anyio.fail_after(100):
        async with pipe.open() as items:
            async for i, pid in items:
                got.append(i)
                pids.add(pid)
                await anyio.sleep(CONSUMER_S)
                st = mapped(pipe)
                if when == "at the cut" and st.concurrency < 2:
                    break
                if st.worker_processes < 2:
                    break
    assert got == list(range(len(got)))
    assert_nothing_left(pids)
    assert multiprocessing.active_children() == []


async def test_cancelling_while_workers_retire_leaves_nothing(quick: None) -> None:
    pipe = tuned(Source())
    got: list[int] = []
    pids: set[int] = set()
    with anyio.fail_after(100):
        with anyio.CancelScope() as scope:
            async with pipe.open() as items:
                async for i, pid in items:
                    got.append(i)
                    pids.add(pid)
                    await anyio.sleep(CONSUMER_S)
                    if mapped(pipe).worker_processes < 2:
                        scope.cancel()  # (a worker retired, its driver parked: cancelled)
    assert scope.cancelled_caught
    assert got == list(range(len(got)))
    assert_nothing_left(pids)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_native_asyncio_cancellation_while_workers_retire_leaves_nothing(
    quick: None,
) -> None:
    """``task.cancel()`` (not anyio's scope) once a worker is retired: the same clean end."""
    pipe = tuned(Source())
    got: list[int] = []
    pids: set[int] = set()
    retired = asyncio.Event()

    async def consume() -> None:
        async with pipe.open() as items:
            async for i, pid in items:
                got.append(i)
                pids.add(pid)
                await asyncio.sleep(CONSUMER_S)
                if mapped(pipe).worker_processes < 2:
                    retired.set()

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(retired.wait(), 100)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert got == list(range(len(got)))
    assert_nothing_left(pids)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_worker_dying_while_it_retires_is_no_failure(
    quick: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed (SIGKILL) just as its retirement begins held nothing: the run goes
    on, every item arrives once and in order, and it is reaped with nothing left."""
    killed: list[int] = []
    end: Callable[[_proc.Worker, float], None] = _proc.Worker.end

    def dying(w: _proc.Worker, grace: float) -> None:
        if w.pid is not None:
            os.kill(w.pid, signal.SIGKILL)
            killed.append(w.pid)
        end(w, grace)

    monkeypatch.setattr(_proc.Worker, "end", dying)
    source = Source(1200)
    pipe = tuned(source)
    got: list[int] = []
    pids: set[int] = set()
    with anyio.fail_after(100):
        async with pipe.open() as items:
            async for i, pid in items:
                got.append(i)
                pids.add(pid)
                if not killed:
                    await anyio.sleep(CONSUMER_S)
    assert killed
    assert got == list(range(1200))
    assert_nothing_left(pids)
    assert multiprocessing.active_children() == []
