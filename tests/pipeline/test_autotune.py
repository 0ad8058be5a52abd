"""``map(fn, concurrency="auto")``, through the public API: the tuner grows a map that
waits on latency, on tasks and on threads, and every item still arrives exactly once
(in order when ordered); a number given by the user is never changed; closing or
cancelling the pipeline while the tuner resizes loses nothing and leaves no thread;
a failing tuned stage raises at the consumer; describe() names each tuned map's
concurrency and its last decision; bad settings are refused when the map is built.

No test measures time: they assert on the concurrency in force, the decisions, and
the items delivered. Every test runs on asyncio and on trio.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from typing import Any

import anyio
import pytest

import aqueue
from aqueue import ElementSpecError, Pipeline

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

N = 1500
# Recommend mode runs at concurrency 1 (6 ms an item): its first recommendation comes
# within the first hundred items, and a longer run adds none (measured: still one at
# 1500), so 300 items give it three times that and save 7 s of waiting.
N_RECOMMEND = 300
_STEP_S = 0.0002  # a consumer's own time per item, far above "as fast as it comes"


class InFlight:
    """The most calls of a function in progress at once (workers really running)."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


flight = InFlight()


async def fetch(x: int) -> int:
    """A latency-bound async call: 6 ms of waiting, no CPU."""
    flight.enter()
    try:
        await anyio.sleep(0.006)
    finally:
        flight.leave()
    return x


def fetch_blocking(x: int) -> int:
    """The same on a thread: 6 ms in a blocking call that releases the GIL."""
    flight.enter()
    try:
        time.sleep(0.006)
    finally:
        flight.leave()
    return x


@pytest.fixture(autouse=True)
def _fresh_flight() -> None:
    flight.most = flight.now = 0


def _runner_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("QueueRunnerThread")]


async def _read(pipe: Pipeline[Any], limit: int | None = None) -> list[Any]:
    got: list[Any] = []
    with anyio.fail_after(90):  # a hang fails the test (not a speed threshold)
        async with pipe.open() as items:
            async for x in items:
                got.append(x)
                if limit is not None and len(got) >= limit:
                    break
    return got


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_latency_bound_task_map_grows_and_delivers_every_item_once(
    ordered: bool, caplog: pytest.LogCaptureFixture
) -> None:
    pipe = Pipeline(range(N)).map(fetch, concurrency=aqueue.Auto(start=1), ordered=ordered)
    with caplog.at_level(logging.DEBUG, logger="aqueue"):
        got = await _read(pipe)
    if ordered:
        assert got == list(range(N))
    else:
        assert sorted(got) == list(range(N))
    n = pipe.statistics()[1].concurrency
    assert n > 1
    assert 1 < flight.most <= 256  # workers were added, and ran at once
    log = [r.getMessage() for r in caplog.records]
    raised = [m for m in log if "pipeline tuner: map(fetch): 1 ->" in m]
    assert raised, "the tuner's first raise is logged at DEBUG on the aqueue logger"


class Ramp:
    """When a map's workers first ran more than ``start`` calls at once: how many
    calls had finished by then (a raise needs the tuner's decision first)."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.done = 0
        self.done_at_raise: int | None = None
        self._now = 0
        self._lock = threading.Lock()

    def call(self, x: int, seconds: float) -> int:
        with self._lock:
            self._now += 1
            if self._now > self.start and self.done_at_raise is None:
                self.done_at_raise = self.done
        time.sleep(seconds)
        with self._lock:
            self._now -= 1
            self.done += 1
        return x


async def test_a_slow_stage_is_raised_after_its_first_items(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A thread map of 50 ms calls on its default 2 threads, and a consumer that takes
    whatever comes: while the consumer waits, the tuner judges the map on a round of a
    few items instead of sixteen (which these calls take 0.4 s to give), so more than 2
    calls run at once well before 16 have finished. The decision says what it saw."""
    ramp = Ramp(start=2)
    pipe = Pipeline(range(120)).map(
        functools.partial(ramp.call, seconds=0.05), concurrency="auto", name="slow"
    )
    with caplog.at_level(logging.DEBUG, logger="aqueue"):
        got = await _read(pipe)
    assert sorted(got) == list(range(120))
    assert ramp.done_at_raise is not None, "the map was never raised"
    assert ramp.done_at_raise < 16
    first = next(m for r in caplog.records if "slow: 2 ->" in (m := r.getMessage()))
    assert re.search(r"slow: 2 -> \d+, consumer waited \d+%, stage starved \d+%", first)
    line = next(x for x in pipe.describe().splitlines() if x.startswith("1 slow: concurrency"))
    assert "(auto 1..256, set by the tuner)" in line


@pytest.mark.parametrize("ordered", [True, False])
async def test_a_latency_bound_thread_map_grows_and_delivers_every_item_once(
    ordered: bool,
) -> None:
    pipe = Pipeline(range(N)).map(
        fetch_blocking, concurrency=aqueue.Auto(start=1, max=32), ordered=ordered
    )
    got = await _read(pipe)
    if ordered:
        assert got == list(range(N))
    else:
        assert sorted(got) == list(range(N))
    assert 1 < pipe.statistics()[1].concurrency <= 32
    assert 1 < flight.most <= 32  # threads were added, and ran at once
    assert _runner_threads() == []


async def test_a_number_given_is_never_changed() -> None:
    pipe = (
        Pipeline(range(N))
        .map(fetch, concurrency=2, name="fixed")
        .map(fetch, concurrency="auto", name="tuned")
    )
    got = await _read(pipe)
    assert sorted(got) == list(range(N))
    fixed = pipe.statistics()[1]
    assert fixed.concurrency == 2
    text = pipe.describe()
    assert "fixed: concurrency" not in text
    assert "2 tuned: concurrency" in text


async def test_describe_names_the_concurrency_and_the_last_decision() -> None:
    pipe = Pipeline(range(N)).map(fetch, concurrency=aqueue.Auto(start=1), name="get")
    await _read(pipe)
    n = pipe.statistics()[1].concurrency
    line = next(x for x in pipe.describe().splitlines() if x.startswith("1 get: concurrency"))
    assert line.startswith(f"1 get: concurrency {n} (auto 1..256, set by the tuner); last change")
    assert ": get: " in line
    assert " -> " in line


@pytest.mark.parametrize("executor", ["task", "thread"])
@pytest.mark.parametrize("stop_after", [1, 50, 400])
async def test_leaving_while_the_tuner_resizes_loses_and_duplicates_nothing(
    executor: str, stop_after: int
) -> None:
    fn: Any = fetch if executor == "task" else fetch_blocking
    pipe = Pipeline(range(N)).map(fn, concurrency=aqueue.Auto(start=1), ordered=True)
    got = await _read(pipe, limit=stop_after)
    assert got == list(range(stop_after))
    assert _runner_threads() == []


@pytest.mark.parametrize("executor", ["task", "thread"])
async def test_cancelling_the_consumer_while_the_tuner_resizes_leaves_nothing(
    executor: str,
) -> None:
    fn: Any = fetch if executor == "task" else fetch_blocking
    pipe = Pipeline(range(N)).map(fn, concurrency=aqueue.Auto(start=1))
    got: list[int] = []
    with anyio.CancelScope() as scope:
        async with pipe.open() as items:
            async for x in items:
                got.append(x)
                if len(got) == 300:
                    scope.cancel()
    assert scope.cancelled_caught
    assert len(got) == len(set(got)) == 300
    assert set(got) <= set(range(N))
    assert _runner_threads() == []


@pytest.mark.parametrize("executor", ["task", "thread"])
async def test_a_failing_tuned_map_raises_its_error_at_the_consumer(executor: str) -> None:
    def boom(x: int) -> int:
        if x == 700:
            raise ValueError("item 700 is bad")
        time.sleep(0.006)
        return x

    async def aboom(x: int) -> int:
        await anyio.sleep(0.006)
        if x == 700:
            raise ValueError("item 700 is bad")
        return x

    fn: Any = aboom if executor == "task" else boom
    pipe = Pipeline(range(N)).map(fn, concurrency=aqueue.Auto(start=1), ordered=True)
    got: list[int] = []
    with pytest.raises(ValueError, match="item 700 is bad"):
        await _read_into(pipe, got)
    assert got == list(range(700))
    assert _runner_threads() == []


async def _read_into(pipe: Pipeline[Any], got: list[Any]) -> None:
    with anyio.fail_after(90):
        async with pipe.open() as items:
            async for x in items:
                got.append(x)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("fast", "concurrency must be an int >= 1, 'auto' or aqueue.Auto"),
        (0, "concurrency must be >= 1"),
        (-3, "concurrency must be >= 1"),
        (2.5, "concurrency must be an int >= 1, 'auto' or aqueue.Auto"),
    ],
)
def test_bad_concurrency_is_refused(value: Any, message: str) -> None:
    with pytest.raises(ElementSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Pipeline(range(3)).map(fetch, concurrency=value)


def test_bad_auto_ranges_and_autotune_are_refused() -> None:
    with pytest.raises(ElementSpecError, match=r"max \(2\) must be >= min \(3\)"):
        aqueue.Auto(min=3, max=2)
    with pytest.raises(ElementSpecError, match="min must be >= 1"):
        aqueue.Auto(min=0)
    with pytest.raises(ElementSpecError, match="start"):
        aqueue.Auto(min=2, max=4, start=9)
    with pytest.raises(ElementSpecError, match="mode must be 'act' or 'recommend'"):
        aqueue.Autotune(mode="fast")
    with pytest.raises(TypeError, match=r"autotune must be an aqueue\.Autotune, got dict"):
        Pipeline(range(3), autotune={"cpu": 1})
    with pytest.raises(TypeError, match=r"Pipeline\.open: autotune must be an aqueue\.Autotune"):
        Pipeline(range(3)).open(autotune="auto")


async def test_autotune_from_the_pipeline_and_from_open(caplog: pytest.LogCaptureFixture) -> None:
    """``Pipeline(..., autotune=...)`` is kept by the stages built from it; ``open``'s
    wins for its run. Recommend mode changes nothing and logs what it would do (for a
    consumer with a time of its own per item: one that takes whatever comes has no
    demand to recommend for, and recommend mode makes no slow start)."""
    quiet = aqueue.Autotune(mode="recommend")
    pipe = Pipeline(range(N_RECOMMEND), autotune=quiet)
    pipe = pipe.map(fetch, concurrency=aqueue.Auto(start=1))
    got: list[int] = []
    with caplog.at_level(logging.DEBUG, logger="aqueue"), anyio.fail_after(90):
        async with pipe.open() as items:
            async for x in items:
                got.append(x)
                time.sleep(_STEP_S)  # noqa: ASYNC251 - a training step that blocks
    assert sorted(got) == list(range(N_RECOMMEND))
    assert pipe.statistics()[1].concurrency == 1
    assert flight.most == 1
    assert any("pipeline tuner recommends" in r.getMessage() for r in caplog.records)
    with anyio.fail_after(90):
        async with pipe.open(autotune=aqueue.Autotune()) as items:
            assert sorted([x async for x in items]) == list(range(N_RECOMMEND))
    assert pipe.statistics()[1].concurrency > 1


_CONSUMER_STEP_S = 0.003  # a consumer slower than 64 workers: the tuner cuts the map


def _cut_by_a_slow_consumer(executor: str) -> Pipeline[int]:
    fn: Any = fetch if executor == "task" else fetch_blocking
    return Pipeline(list(range(800))).map(fn, concurrency=aqueue.Auto(start=64), ordered=True)


@pytest.mark.parametrize("executor", ["task", "thread"])
async def test_the_input_ends_while_the_tuner_has_parked_workers(executor: str) -> None:
    """A slow consumer: the tuner cuts a map started at 64, and the workers above the
    cut park at its gate; when the input ends, they still end, so the output queue
    closes and the iteration ends with every item."""
    pipe = _cut_by_a_slow_consumer(executor)
    got: list[int] = []
    with anyio.fail_after(90):
        async with pipe.open() as items:
            async for x in items:
                got.append(x)
                await anyio.sleep(_CONSUMER_STEP_S)
    assert got == list(range(800))
    assert pipe.statistics()[1].concurrency < 64  # it was cut: workers were parked
    assert _runner_threads() == []


@pytest.mark.parametrize("executor", ["task", "thread"])
async def test_a_checkpoint_with_workers_added_and_parked_resumes_exactly(executor: str) -> None:
    """A checkpoint counts the workers parked at a tuned map's gate as at rest; the
    resumed run delivers exactly the items after the cut, in order."""
    pipe = _cut_by_a_slow_consumer(executor)
    got: list[int] = []
    with anyio.fail_after(90):
        async with pipe.open() as items:
            async for x in items:
                got.append(x)
                await anyio.sleep(_CONSUMER_STEP_S)
                if len(got) == 500:
                    state = await items.checkpoint()
                    break
        assert pipe.statistics()[1].concurrency < 64  # cut before the checkpoint
        async with pipe.open(state=state) as items:
            got += [x async for x in items]
    assert got == list(range(800))
    assert _runner_threads() == []
