"""``prefetch("auto")`` and ``capacity="auto"``, through the public API: a prefetch
buffer behind a producer that delivers in bursts grows, within the memory budget, and
says why in describe() and the log; every item still arrives once, in order; an
ordered, seeded pipeline gives the same items in the same order with its buffers
tuned; a number given is never tuned; bad settings are refused when the stage is
built, naming what was expected.

No test measures time: they assert on the decisions, the capacities in force and the
items delivered. Every test runs on asyncio and on trio.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import anyio
import numpy as np
import pytest

import aqueue
from aqueue import ElementSpecError, Pipeline

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

N = 1200
BURST = 32
ITEM = np.zeros(100_000, dtype=np.uint8)  # 100 kB


class Ahead:
    """How far the producer got ahead of the consumer: the most items made and not yet
    taken (what the buffers really held)."""

    def __init__(self) -> None:
        self.made = self.taken = self.most = 0

    def make(self) -> None:
        self.made += 1  # (one producer thread: no race on it)

    def take(self) -> None:
        self.taken += 1
        self.most = max(self.most, self.made - self.taken)


ahead = Ahead()


def bursty(x: int) -> int:
    """A producer that delivers in bursts: a pause every 32 items (100 ms, then 32 at
    once: 320 items/s on average, more than the consumer takes)."""
    if x % BURST == 0:
        time.sleep(0.1)
    ahead.make()
    return x


def bursty_arrays(x: int) -> np.ndarray:
    bursty(x)
    return ITEM + (x % 200)


async def _read(pipe: Pipeline[Any], step_s: float = 0.0) -> list[Any]:
    global ahead
    ahead = Ahead()
    got: list[Any] = []
    with anyio.fail_after(90):  # a hang fails the test (not a speed threshold)
        async with pipe.open() as items:
            async for x in items:
                ahead.take()
                got.append(x)
                if step_s:
                    await anyio.sleep(step_s)  # the consumer's step: 250 items/s at most
    return got


def _buffer_line(pipe: Pipeline[Any], stage: int) -> str:
    return next(x for x in pipe.describe().splitlines() if re.match(rf"{stage} \S+: capacity", x))


def _grows(caplog: pytest.LogCaptureFixture) -> list[tuple[int, int]]:
    found = []
    line = re.compile(r"pipeline tuner: prefetch\(auto\): (\d+) -> (\d+), .*: bursts")
    for r in caplog.records:
        m = line.match(r.getMessage())
        if m:
            found.append((int(m[1]), int(m[2])))
    return found


async def test_a_prefetch_buffer_behind_a_bursty_producer_grows(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipe = (
        Pipeline(range(N))
        .map(bursty, executor="thread", capacity=1)  # (no room of its own: the prefetch's)
        .prefetch("auto")
    )
    with caplog.at_level(logging.DEBUG, logger="aqueue"):
        got = await _read(pipe, step_s=0.004)
    assert got == list(range(N))
    grows = _grows(caplog)
    assert grows, "the buffer grows, and the decision is logged at DEBUG"
    assert grows[0] == (8, 16)
    line = _buffer_line(pipe, 2)
    m = re.match(
        r"2 prefetch\(auto\): capacity (\d+) \(auto 8\.\.1024, set by the tuner\); "
        r"last change at [\d.]+ s: ",
        line,
    )
    assert m, line
    last = re.search(r"last change at [\d.]+ s: prefetch\(auto\): \d+ -> (\d+), ", line)
    assert last
    assert int(m[1]) == int(last[1])  # the queue's capacity in force is the last decision


async def test_the_memory_budget_bounds_a_tuned_buffer(caplog: pytest.LogCaptureFixture) -> None:
    """Items of 100 kB and a budget of 2 MB: no capacity the tuner sets holds more."""
    global ahead
    ahead = Ahead()
    budget = 2_000_000
    pipe = (
        Pipeline(range(N // 2)).map(bursty_arrays, executor="thread", capacity=1).prefetch("auto")
    )
    with caplog.at_level(logging.DEBUG, logger="aqueue"):
        async with pipe.open(autotune=aqueue.Autotune(memory=budget)) as items:
            with anyio.fail_after(90):
                n = 0
                async for x in items:
                    ahead.take()
                    assert int(x[0]) == n % 200
                    n += 1
                    await anyio.sleep(0.004)
    assert n == N // 2
    # what the queues and the stages' hands held, all told (the item the map is making
    # and the one the consumer holds are outside the buffers)
    assert (ahead.most - 2) * ITEM.nbytes <= budget
    sizes = [new for _, new in _grows(caplog)]
    assert sizes, "the buffer grows"
    assert all((size + 1) * ITEM.nbytes <= budget for size in sizes)
    m = re.search(r"capacity (\d+) ", _buffer_line(pipe, 2))
    assert m
    assert (int(m[1]) + 1) * ITEM.nbytes <= budget


def _seeded(tuned: bool) -> Pipeline[Any]:
    auto: Any = "auto"
    return (
        Pipeline(range(600))
        .shuffle(64, 16, seed=7)
        .map(bursty, executor="thread", ordered=True, concurrency=auto if tuned else 2,
             capacity=auto if tuned else None)
        .filter(lambda x: x % 3 != 0, capacity=auto if tuned else None)
        .batch(4, capacity=auto if tuned else None)
        .prefetch(auto if tuned else 8)
    )  # fmt: skip


async def test_an_ordered_seeded_pipeline_gives_the_same_items_with_its_buffers_tuned() -> None:
    fixed = await _read(_seeded(False))
    tuned_pipe = _seeded(True)
    tuned = await _read(tuned_pipe, step_s=0.002)
    assert [b.tolist() for b in tuned] == [b.tolist() for b in fixed]
    assert len(fixed) == 100  # (400 items kept, in batches of 4)
    assert "capacity" in _buffer_line(tuned_pipe, 5)


async def test_a_number_given_is_never_tuned() -> None:
    pipe = (
        Pipeline(range(300))
        .map(bursty, executor="thread", capacity=1)
        .prefetch(8, name="fixed")
        .map(lambda x: x, concurrency="auto", executor="thread", capacity=4, name="auto map")
    )
    got = await _read(pipe, step_s=0.002)
    assert sorted(got) == list(range(300))  # (an unordered map: in completion order)
    text = pipe.describe()
    assert "auto map: concurrency" in text
    assert not re.search(r"^\d \S+: capacity", text, re.M)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda p: p.prefetch("big"), "buffer_size must be an int >= 1, 'auto' or aqueue.Auto"),
        (lambda p: p.prefetch(0), "buffer_size must be >= 1, got 0"),
        (lambda p: p.prefetch(-2), "buffer_size must be >= 1, got -2"),
        (lambda p: p.prefetch(None), "buffer_size must be an int >= 1, 'auto' or aqueue.Auto"),
        (lambda p: p.map(abs, capacity="big"), "capacity must be an int >= 1, 'auto' or"),
        (lambda p: p.map(abs, capacity=0), "capacity must be >= 1, got 0"),
        (lambda p: p.filter(bool, capacity=-1), "capacity must be >= 1, got -1"),
        (lambda p: p.batch(4, capacity="big"), "capacity must be an int >= 1, 'auto' or"),
        (lambda p: p.prefetch(aqueue.Auto(min=4, max=2)), "max \\(2\\) must be >= min \\(4\\)"),
    ],
)
def test_bad_buffer_settings_are_refused(build: Any, message: str) -> None:
    pipe = Pipeline(range(3))
    before = pipe.describe()
    with pytest.raises(ElementSpecError, match=message):
        build(pipe)
    assert pipe.describe() == before  # nothing was built on it
