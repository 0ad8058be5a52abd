"""What the tuner decided, as a Monitor sees it, through the public API.

A pipeline with a ``concurrency="auto"`` map, opened with a Monitor: each stage's
reading says who set its concurrency (the user, the tuner, or the tuner's start value
not changed yet) and carries the tuner's decisions made since the previous reading,
each exactly once, with its reason, dated on the monitor's clock; the history keeps
them, ``Monitor.plot`` draws them on a panel of their own, and ``describe()`` tells
the same story. A provider of made-up statistics checks the once-only rule and the
dating without a tuner.

No test measures time: they assert on decisions, settings and counts. Every test runs
on asyncio and on trio.
"""

from __future__ import annotations

import itertools
import struct
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import poll, stage_statistics

import aqueue
from aqueue import Monitor, MonitorReading, Pipeline, StageDecision

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

N = 1500
# Recommend mode runs at concurrency 1 (6 ms an item): its first recommendation comes
# within the first hundred items, and a longer run adds none (measured: still one at
# 1500), so 300 items give it three times that and save 7 s of waiting.
N_RECOMMEND = 300


async def fetch(x: int) -> int:
    """A latency-bound async call: 6 ms of waiting, no CPU."""
    await anyio.sleep(0.006)
    return x


async def same(x: int) -> int:
    return x


def _pipe(n: int = N, **auto: Any) -> Pipeline[int]:
    return (
        Pipeline(range(n), **auto)
        .map(fetch, concurrency=aqueue.Auto(start=1), name="get")
        .map(same, concurrency=2, name="fixed")
    )


async def _watch(pipe: Pipeline[int], monitor: Monitor) -> list[int]:
    with anyio.fail_after(90):  # a hang fails the test (not a speed threshold)
        async with pipe.open(monitor=monitor) as items:
            return [x async for x in items]


def _key(d: StageDecision) -> tuple[str, int, int, bool, str]:
    return (d.setting, d.old, d.new, d.applied, d.reason)


async def test_each_decision_reaches_the_monitor_once_with_who_set_the_concurrency() -> None:
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.02, callback=seen.append)
    pipe = _pipe()
    assert sorted(await _watch(pipe, monitor)) == list(range(N))

    run_decisions = pipe.statistics()[1].decisions
    assert run_decisions, "the tuner grew the latency-bound map"
    got: list[StageDecision] = []
    for r in seen:
        st = r.stages["pipeline/get"]
        for d in st.decisions:
            assert d.time_s <= r.time_s + 1e-9  # made before the reading that shows it
        got += st.decisions
        # who set it agrees with the decisions shown so far: the tuner once it decided
        assert st.set_by == ("tuner" if got else "default")
        assert r.stages["pipeline/fixed"].set_by == "user"
        assert r.stages["pipeline/fixed"].decisions == ()
        assert r.stages["pipeline/from_iterable(range)"].set_by is None
    assert [_key(d) for d in got] == [_key(d) for d in run_decisions]
    assert [d.time_s for d in got] == sorted(d.time_s for d in got)
    for a, b in itertools.pairwise(got):
        assert b.old == a.new  # each change starts where the previous one left it
    assert all(d.applied and d.setting == "concurrency" for d in got)
    assert all(d.reason.startswith(f"get: {d.old} -> {d.new}, consumer waited") for d in got)
    assert seen[-1].stages["pipeline/get"].concurrency == got[-1].new

    h = monitor.history().stages["pipeline/get"]
    assert h.decisions == tuple(got)
    assert h.concurrency[-1] == got[-1].new
    assert h.concurrency[0] <= got[0].new

    line = next(x for x in pipe.describe().splitlines() if x.startswith("1 get: concurrency"))
    last = got[-1]
    assert line.startswith(
        f"1 get: concurrency {last.new} (auto 1..256, set by the tuner); last change at "
    )
    assert line.endswith(last.reason)


async def test_recommend_mode_shows_recommendations_and_changes_nothing() -> None:
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.02, callback=seen.append)
    pipe = _pipe(N_RECOMMEND, autotune=aqueue.Autotune(mode="recommend"))
    assert sorted(await _watch(pipe, monitor)) == list(range(N_RECOMMEND))
    got = [d for r in seen for d in r.stages["pipeline/get"].decisions]
    assert got, "the tuner recommended a larger concurrency"
    assert not any(d.applied for d in got)
    # each recommendation starts from the previous one; the first from the start value
    assert [d.old for d in got] == [1] + [d.new for d in got[:-1]]
    assert {r.stages["pipeline/get"].set_by for r in seen} == {"default"}
    assert {r.stages["pipeline/get"].concurrency for r in seen} == {1}
    line = next(x for x in pipe.describe().splitlines() if x.startswith("1 get: concurrency"))
    assert "set by default: the tuner's start); last recommendation at " in line


def _png_height(path: Path) -> int:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 0
    return int(height)


async def test_the_plot_gives_tuned_stages_a_panel_of_their_decisions(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    tuned, fixed = Monitor(interval=0.05), Monitor(interval=0.05)
    await _watch(_pipe(), tuned)
    await _watch(Pipeline(range(N)).map(fetch, concurrency=64).map(same, concurrency=2), fixed)
    assert tuned.history().stages["pipeline/get"].decisions
    tuned.plot(tmp_path / "tuned.png")
    fixed.plot(tmp_path / "fixed.png")
    # the same panels, and one more: the tuned stage's concurrency and its decisions
    assert _png_height(tmp_path / "tuned.png") > _png_height(tmp_path / "fixed.png")


class DecidingStages:
    """A stage provider whose run is ``k`` ms old at its ``k``-th call, with decisions
    made 1.5, 2.5 and 2.6 ms into the run (each listed once it was made)."""

    made = (0.0015, 0.0025, 0.0026)

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> list[aqueue.StageStatistics]:
        self.calls += 1
        k = 0.001 * self.calls
        decisions = tuple(
            StageDecision(t, "concurrency", n + 1, n + 2, True, f"step {n}")
            for n, t in enumerate(self.made)
            if t <= k
        )
        return [
            stage_statistics(
                "map(f)", items_out=10 * self.calls, elapsed_s=k, busy_s=k, concurrency=2,
                set_by="tuner" if decisions else "default", decisions=decisions,
            )
        ]  # fmt: skip


async def test_decisions_from_a_provider_appear_once_dated_on_the_monitor_clock() -> None:
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    provider = DecidingStages()
    monitor.attach_stages("p", provider)
    async with aqueue.Coordinator(monitor=monitor):
        await poll(lambda: provider.calls >= 5)
    per_reading = [[d.reason for d in r.stages["p/map(f)"].decisions] for r in seen]
    assert [x for xs in per_reading for x in xs] == ["step 0", "step 1", "step 2"]
    first = next(i for i, xs in enumerate(per_reading) if xs)
    assert per_reading[first] == ["step 0"]  # at the call 2 ms into the run
    assert per_reading[first + 1] == ["step 1", "step 2"]  # at 3 ms
    # dated back from the reading by their age in the run's clock
    later = seen[first + 1].stages["p/map(f)"].decisions
    assert later[1].time_s - later[0].time_s == pytest.approx(0.0001, abs=1e-9)
    assert seen[first + 1].time_s - later[1].time_s >= 0.0004 - 1e-9
    assert all(0.0 <= d.time_s <= r.time_s for r in seen for d in r.stages["p/map(f)"].decisions)
    assert [r.stages["p/map(f)"].set_by for r in seen][first:] == ["tuner"] * (len(seen) - first)


async def test_the_coordinator_report_names_the_tuned_stage_as_describe_does() -> None:
    monitor = Monitor(interval=0.02)
    pipe = _pipe()
    with anyio.fail_after(90):
        async with (
            aqueue.Coordinator(monitor=monitor) as coord,
            pipe.open(coord, monitor=monitor) as items,
        ):
            assert sorted([x async for x in items]) == list(range(N))
    lines = coord.report().splitlines()
    assert lines[-1].startswith("input-bound: ")
    tuned = [x for x in lines if x.startswith("tuned ")]
    last = monitor.history().stages["pipeline/get"].decisions[-1]
    assert tuned == [
        f"tuned pipeline/get: concurrency {last.new} (set by the tuner); last change at "
        f"{last.time_s:.2f} s: {last.reason}"
    ]  # the user's map and the other stages have no line
    described = next(x for x in pipe.describe().splitlines() if x.startswith("1 get: "))
    assert described.endswith(last.reason)
