"""Checkpoints of tuned pipelines, through the public API.

A checkpoint records the settings in force of the maps the tuner holds
(``state.settings``); a resume starts them there instead of at the start value,
within the ``Auto`` range the resumed pipeline gives, and a map the resumed pipeline
gives a number keeps its number. A state saved before aqueue recorded settings (a
version 1 file, ``data/pipeline_state_v1.npz``, written by the aqueue of that time)
still loads and resumes exactly, from the start values. An ordered, seeded pipeline
resumed with the tuner on delivers the same batches as with fixed numbers.

No test measures time. Every test runs on asyncio and on trio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

import aqueue
from aqueue import Pipeline, PipelineState

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

N = 1500
CUT = 800
QUIET = aqueue.Autotune(mode="recommend")  # a resumed run that changes nothing after


async def fetch(x: int) -> int:
    """A latency-bound async call: 6 ms of waiting, no CPU."""
    await anyio.sleep(0.006)
    return x


async def same(x: int) -> int:
    return x


def _pipe(get: Any = None, after: Any = 2) -> Pipeline[int]:
    return (
        Pipeline(range(N))
        .map(fetch, concurrency=get or aqueue.Auto(start=1), ordered=True, name="get")
        .map(same, concurrency=after, ordered=True, name="after")
    )


async def _cut(pipe: Pipeline[int]) -> tuple[list[int], PipelineState]:
    with anyio.fail_after(90):  # a hang fails the test (not a speed threshold)
        async with pipe.open() as items:
            got = [await items.get() for _ in range(CUT)]
            return got, await items.checkpoint()


async def _resume(
    pipe: Pipeline[int], state: PipelineState, autotune: Any = QUIET
) -> tuple[list[int], aqueue.StageStatistics]:
    with anyio.fail_after(90):
        async with pipe.open(state=state, autotune=autotune) as items:
            first = pipe.statistics()[1]  # before the tuner's first decision
            return [x async for x in items], first


async def test_a_resume_starts_the_tuned_map_where_the_checkpoint_was(tmp_path: Path) -> None:
    got, state = await _cut(_pipe())
    n = state.settings[1]["concurrency"]
    assert n > 4  # the tuner grew the latency-bound map before the cut
    assert state.settings == {1: {"concurrency": n}}  # the user's map is not recorded
    path = tmp_path / "state.npz"
    state.save(path)
    loaded = PipelineState.load(path)
    assert loaded.settings == state.settings

    for st in (state, loaded):
        rest, first = await _resume(_pipe(), st)
        assert got + rest == list(range(N))
        assert (first.concurrency, first.set_by) == (n, "checkpoint")
        pipe = _pipe()
        rest, _ = await _resume(pipe, st, autotune=aqueue.Autotune())
        assert got + rest == list(range(N))  # (and the tuner, acting, went on from there)
        assert pipe.statistics()[1].set_by in ("checkpoint", "tuner")


async def test_the_resumed_pipelines_numbers_and_range_win() -> None:
    got, state = await _cut(_pipe())
    assert state.settings[1]["concurrency"] > 4
    # the resumed pipeline fixes the map at 3: it runs at 3, the user's number
    rest, first = await _resume(_pipe(get=3, after="auto"), state)
    assert got + rest == list(range(N))
    assert (first.concurrency, first.set_by) == (3, "user")
    # ... or tunes it within 1..4: it starts at the top of that range
    rest, first = await _resume(_pipe(get=aqueue.Auto(max=4)), state)
    assert got + rest == list(range(N))
    assert (first.concurrency, first.set_by) == (4, "checkpoint")


async def slow(x: int) -> int:
    await anyio.sleep(0.002)
    return x


def _old_pipe() -> Pipeline[Any]:
    """The pipeline that wrote ``data/pipeline_state_v1.npz`` (5 batches taken)."""
    return Pipeline(range(300)).map(slow, concurrency=aqueue.Auto(start=2), ordered=True).batch(10)


async def test_a_state_saved_before_settings_were_recorded_resumes_from_the_start() -> None:
    state = PipelineState.load(Path(__file__).parent / "data" / "pipeline_state_v1.npz")
    assert state.settings == {}
    with anyio.fail_after(90):
        async with _old_pipe().open(state=state, autotune=QUIET) as batches:
            rest = [b.tolist() async for b in batches]
    assert rest == [list(range(10 * k, 10 * k + 10)) for k in range(5, 30)]
    pipe = _old_pipe()
    with anyio.fail_after(90):
        async with pipe.open(state=state) as batches:
            first = pipe.statistics()[1]
            assert (first.concurrency, first.set_by) == (2, "default")
            assert len([b async for b in batches]) == 25


def _seeded(concurrency: Any) -> Pipeline[Any]:
    return (
        Pipeline(range(6_000))
        .map(fetch, concurrency=concurrency, ordered=True)
        .shuffle(capacity=1_100, min_after_dequeue=1_000, seed=7)
        .batch(32)
    )


async def test_an_ordered_seeded_pipeline_resumes_the_same_with_the_tuner_on() -> None:
    runs = []
    for concurrency in (32, aqueue.Auto(start=1)):
        with anyio.fail_after(90):
            async with _seeded(concurrency).open() as batches:
                before = [await batches.get() for _ in range(40)]
                state = await batches.checkpoint()
                after = [await batches.get() for _ in range(60)]
            assert state.exact
            async with _seeded(concurrency).open(state=state) as batches:
                resumed = [await batches.get() for _ in range(60)]
        assert all(np.array_equal(a, b) for a, b in zip(after, resumed, strict=True))
        runs.append(before + resumed)
    fixed, tuned = runs
    assert all(np.array_equal(a, b) for a, b in zip(fixed, tuned, strict=True))
