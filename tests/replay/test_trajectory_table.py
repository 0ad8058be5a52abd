"""``aqueue.TrajectoryTable`` through its public API: frame stacks stored once, R2D2
sequences, strides past the length, episode ends, priorities, the rate limiter pacing
writers by the windows they complete, bad input (refused by name, nothing written),
writers used wrongly or after their table closed, statistics, snapshots and their files,
the thread view, and the coordinator's report and Monitor."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from support import poll, settle, spawn

import aqueue
from aqueue import ElementSpecError, TrajectoryTable

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def frame(t: int) -> np.ndarray:
    return np.full((3, 3), t % 251, dtype=np.uint8)


def named(t: int) -> dict[str, Any]:
    return {"obs": frame(t), "reward": np.float32(t), "discount": np.float32(1.0)}


def frames_table(max_steps: int = 10, **kw: Any) -> TrajectoryTable[dict[str, np.ndarray]]:
    return TrajectoryTable(
        max_steps,
        (np.uint8, np.float32, np.float32),
        ((3, 3), (), ()),
        ("obs", "reward", "discount"),
        length=kw.pop("length", 4),
        seed=0,
        **kw,
    )


def contents(t: TrajectoryTable[Any]) -> tuple[Any, ...]:
    snap = t.snapshot()
    st = snap.items.statistics
    return (
        snap.items.keys.tolist(),
        snap.items.items[0].tolist(),
        [f.tobytes() for f in snap.fields],
        snap.slots.tolist(),
        snap.free.tolist(),
        sorted(snap.counters.items()),
        [(w[0], w[1], w[2], w[3].tolist()) for w in snap.writers],
        (st.inserts, st.samples, st.deletes, st.evictions),
    )


async def test_frame_stacks_are_stored_once_and_sampled_whole() -> None:
    """length=4, stride 1: a window per step from the 4th on, each the 4 last frames;
    the frames are stored once (steps_held, not 4x); a sample's fields are (n, 4, ...);
    a window never crosses an episode's end."""
    t = frames_table(max_steps=20)
    w = t.writer()
    keys = [await w.append(named(i)) for i in range(6)]
    assert [k.tolist() for k in keys] == [[], [], [], [0], [1], [2]]
    await w.end_episode()
    batch = {k: np.stack([named(i)[k] for i in range(10, 15)]) for k in named(0)}
    assert (await w.append_many(batch)).tolist() == [3, 4]
    st = t.statistics()
    assert (st.size, st.steps_held, st.steps_appended, st.windows_dropped) == (5, 11, 11, 3)
    s = await t.sample(16)
    assert s.data["obs"].shape == (16, 4, 3, 3)
    assert s.data["reward"].shape == (16, 4)
    for key, rewards, obs in zip(s.keys, s.data["reward"], s.data["obs"]):
        first = {0: 0, 1: 1, 2: 2, 3: 10, 4: 11}[int(key)]
        assert rewards.tolist() == list(range(first, first + 4))  # within one episode
        assert np.array_equal(obs, np.stack([frame(i) for i in range(first, first + 4)]))
    assert np.allclose(s.probabilities, 1 / 5)
    assert s.times_sampled.min() >= 1


async def test_sequences_overlap_and_strides_past_the_length_skip_steps() -> None:
    """R2D2's length 4, stride 2: overlapping windows share their steps; stride 5 past
    length 2: the steps between windows are never stored."""
    t = TrajectoryTable(16, np.int64, (), length=4, stride=2, seed=1)
    w = t.writer()
    keys = await w.append_many(np.arange(9))
    assert keys.tolist() == [0, 1, 2]
    s = await t.sample(8)
    assert {tuple(r) for r in s.data.tolist()} <= {(0, 1, 2, 3), (2, 3, 4, 5), (4, 5, 6, 7)}
    assert t.statistics().steps_held == 9  # 8 in windows, the 9th pending
    gaps = TrajectoryTable(16, np.int64, (), length=2, stride=5)
    gw = gaps.writer()
    assert (await gw.append_many(np.arange(12))).tolist() == [0, 1, 2]
    st = gaps.statistics()
    assert (st.steps_appended, st.steps_stored, st.steps_held) == (12, 6, 6)
    assert gaps.max_size == 16 // 2


async def test_a_full_table_evicts_the_oldest_steps_with_their_windows() -> None:
    """max_steps 6, length 3: storing a 7th step evicts the oldest and the window that
    starts there; no window ever has a hole, and every sampled window is consecutive."""
    t = TrajectoryTable(6, np.int64, (), length=3)
    w = t.writer()
    await w.append_many(np.arange(20))
    st = t.statistics()
    assert (st.steps_held, st.size, st.steps_evicted) == (6, 4, 14)
    assert st.evictions == st.deletes == 14
    s = await t.sample(32)
    assert sorted({tuple(r) for r in s.data.tolist()}) == [
        (14, 15, 16), (15, 16, 17), (16, 17, 18), (17, 18, 19)]  # fmt: skip


async def test_priorities_go_with_the_window_their_step_completes() -> None:
    """append(step, priority): the priority of the window ending at that step; a
    Prioritized table samples by it, and update_priorities/delete work by key."""
    t = TrajectoryTable(8, np.int64, (), length=2, sampler=aqueue.Prioritized(1.0), seed=2)
    w = t.writer()
    await w.append(0)
    await w.append(1, priority=0.0)
    await w.append(2, priority=5.0)
    s = await t.sample(20)
    assert s.data.tolist() == [[1, 2]] * 20
    assert (await t.update_priorities([0, 1, 9], [1.0, 0.0, 1.0])).tolist() == [True, True, False]
    s = await t.sample(20)
    assert s.data.tolist() == [[0, 1]] * 20
    assert (await t.delete([0, 0])).tolist() == [True, False]
    assert t.statistics().steps_freed == 1  # step 0: no window needs it any more


async def test_the_rate_limiter_paces_writers_by_the_windows_they_complete() -> None:
    """A writer's append waits while the limiter holds back its window; an append that
    completes none never waits; a sample lets it through."""
    t = TrajectoryTable(16, np.int64, (), length=2, rate_limiter=aqueue.RateLimiter(1.0, 1, -8, 1))
    w = t.writer()
    await w.append_many(np.arange(2))  # one window: the limiter admits no second
    other = t.writer()
    await other.append(100)  # (completes no window: goes ahead)
    async with anyio.create_task_group() as tg:
        op = spawn(tg, w.append, 2)
        await settle()
        assert op.pending
        assert t.statistics().inserts_waiting == 1
        await t.sample(1)
        await settle()
        assert op.returned
        assert op.value.tolist() == [1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"length": 0}, "length must be >= 1, got 0"),
        ({"length": 3, "stride": 0}, "stride must be >= 1, got 0"),
        ({"length": 11}, r"length must be <= max_steps = 10 .* got 11"),
        ({"length": 2, "max_size": 0}, "max_size must be >= 1, got 0"),
        ({"length": 2, "max_times_sampled": -1}, "max_times_sampled"),
        ({"length": 2, "sampler": "uniform"}, "sampler"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs: dict[str, Any], match: str) -> None:
    """Each bad setting: ElementSpecError naming the table, the argument, what was
    expected and what was given."""
    with pytest.raises(ElementSpecError, match=f"^TrajectoryTable 'trajectory_table': .*{match}"):
        TrajectoryTable(10, np.float32, (2,), **kwargs)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"obs": np.zeros((3, 2), np.uint8), "reward": 0.0, "discount": 1.0},
         r"expected shape \(3, 3\), got \(3, 2\)"),
        ({"obs": np.zeros((3, 3), np.float64), "reward": 0.0, "discount": 1.0},
         "expected dtype uint8 .* got float64"),
        ({"obs": np.zeros((3, 3), np.uint8)}, "keys must be exactly"),
        ((np.zeros((3, 3), np.uint8), 0.0, 1.0), "must be a dict with keys"),
    ],
)  # fmt: skip
async def test_a_bad_step_is_refused_by_name_and_writes_nothing(bad: Any, match: str) -> None:
    """A step of the wrong shape, dtype or form: ElementSpecError naming what was
    expected and what was given; nothing written (steps, windows, the writer's place)."""
    t = frames_table()
    w = t.writer()
    await w.append_many({k: np.stack([named(i)[k] for i in range(5)]) for k in named(0)})
    before = contents(t)
    with pytest.raises(ElementSpecError, match=f"TrajectoryTable 'trajectory_table': .*{match}"):
        await w.append(bad)
    with pytest.raises(ElementSpecError, match="priority"):
        await w.append(named(5), priority=-1.0)
    batch = {k: np.stack([named(i)[k] for i in range(3)]) for k in named(0)}
    with pytest.raises(ElementSpecError, match="priorities must be a 1-d sequence of 3"):
        await w.append_many(batch, priorities=[1.0])
    with pytest.raises(ElementSpecError, match="n must be"):
        await t.sample(0)
    assert contents(t) == before
    assert (await w.append(named(5))).tolist() == [2]  # the writer goes on where it was


async def test_a_batch_the_limiter_could_never_admit_is_refused() -> None:
    """append_many completing more windows than the limiter ever admits at once:
    refused by name at once (it would wait for ever), nothing written."""
    t = TrajectoryTable(64, np.int64, (), length=2, rate_limiter=aqueue.RateLimiter(1.0, 1, 0, 3))
    w = t.writer()
    before = contents(t)
    with pytest.raises(ElementSpecError, match=r"an append of 10 steps.*9 items could never"):
        await w.append_many(np.arange(10))
    assert contents(t) == before


async def test_writers_refuse_use_after_closing_and_concurrent_calls() -> None:
    """A closed writer refuses every call by name; a writer's second call while one is
    in flight raises RuntimeError (one stream, one call at a time); after the table
    closed, appends raise QueueClosedError and write nothing."""
    t = TrajectoryTable(8, np.int64, (), length=2, rate_limiter=aqueue.RateLimiter(1.0, 1, -8, 1))
    w = t.writer()
    await w.append_many(np.arange(2))
    async with anyio.create_task_group() as tg:
        spawn(tg, w.append, 2)
        await settle()
        with pytest.raises(RuntimeError, match="another call of this writer is in flight"):
            await w.append(3)
        with pytest.raises(RuntimeError, match="in flight"):
            w.close()
        await t.sample(1)
    w.close()
    w.close()  # (idempotent)
    with pytest.raises(aqueue.QueueClosedError, match=r"writer 0 of trajectory table .* is closed"):
        await w.append(4)
    with pytest.raises(aqueue.QueueClosedError, match="closed"):
        await w.end_episode()
    w2 = t.writer()
    await t.aclose()
    before = contents(t)
    with pytest.raises(aqueue.QueueClosedError, match="trajectory table 'trajectory_table' is"):
        await w2.append(5)
    assert contents(t) == before
    assert len(await t.sample(1)) == 1  # (a sample that can be served still is)


async def test_snapshots_restore_a_table_that_goes_on_as_the_original(tmp_path: Path) -> None:
    """snapshot -> save -> load -> from_snapshot: the same windows, samples, counters;
    a writer resumed by id goes on in the middle of its episode; a damaged file is
    refused by name."""
    t = frames_table(max_steps=12, sampler=aqueue.Prioritized(0.7))
    a, b = t.writer(), t.writer()
    for i in range(9):
        await a.append(named(i), priority=float(i))
        if i % 2:
            await b.append(named(100 + i))
    path = tmp_path / "traj.npz"
    t.snapshot().save(path)
    snap = aqueue.TrajectorySnapshot.load(path)
    assert len(snap) == t.size()
    u = TrajectoryTable.from_snapshot(snap)
    assert contents(u) == contents(t)
    assert u.statistics() == t.statistics()
    ua = u.writer(resume=a.id)
    with pytest.raises(ElementSpecError, match=r"one of \[1\]"):
        u.writer(resume=a.id)
    for i in range(9, 14):
        ka = await a.append(named(i))
        assert (await ua.append(named(i))).tolist() == ka.tolist()
    x, y = await t.sample(8), await u.sample(8)
    assert x.keys.tolist() == y.keys.tolist()
    assert np.array_equal(x.data["obs"], y.data["obs"])
    with pytest.raises(ElementSpecError, match="TrajectorySnapshot"):
        TrajectoryTable.from_snapshot(t)  # type: ignore[arg-type]  # (the wrong object)
    np.savez(tmp_path / "other.npz", x=np.zeros(2))
    with pytest.raises(aqueue.CheckpointError, match=r"other\.npz"):
        aqueue.TrajectorySnapshot.load(tmp_path / "other.npz")


async def test_a_snapshot_whose_steps_do_not_add_up_is_refused(tmp_path: Path) -> None:
    """Rows naming steps out of order, or a counter that does not add up: CheckpointError
    naming the problem, no table built."""
    t = TrajectoryTable(8, np.int64, (), length=3)
    w = t.writer()
    await w.append_many(np.arange(5))
    snap = t.snapshot()
    import dataclasses

    bad = dataclasses.replace(snap, counters={**snap.counters, "stored": 99})
    with pytest.raises(aqueue.CheckpointError, match="do not add up"):
        TrajectoryTable.from_snapshot(bad)
    rows = snap.items.items[0][:, ::-1].copy()
    items = dataclasses.replace(snap.items, items=(rows,))
    with pytest.raises(aqueue.CheckpointError, match="increasing order"):
        TrajectoryTable.from_snapshot(dataclasses.replace(snap, items=items))


def test_the_thread_view_appends_from_threads() -> None:
    """Two game threads append through their writers' thread views while the loop
    samples; every sampled window is one thread's consecutive steps."""
    t = TrajectoryTable(200, np.int64, (), length=3, seed=4)

    def game(base: int) -> None:
        view = t.writer().blocking()
        for i in range(40):
            view.append(base + i, timeout=20)
        view.end_episode()
        view.close()

    threads = [threading.Thread(target=game, args=(b,)) for b in (0, 1000)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(20)

    async def check() -> None:
        s = await t.sample(64)
        for row in s.data.tolist():
            assert row == list(range(row[0], row[0] + 3))
        assert t.statistics().size == 2 * 38
        with pytest.raises(RuntimeError, match="event-loop thread"):
            t.writer().blocking().append(1)

    anyio.run(check)


async def test_the_coordinator_reports_and_monitors_a_trajectory_table() -> None:
    """coord.watch(table): its row in report(), and the Monitor's history holds it."""
    seen: list[aqueue.MonitorReading] = []
    monitor = aqueue.Monitor(interval=0.003, callback=seen.append)
    t = TrajectoryTable(64, np.int64, (), length=2, name="frames")
    async with aqueue.Coordinator(monitor=monitor) as coord:
        coord.watch(t)
        w = t.writer()
        await w.append_many(np.arange(10))
        await t.sample(4)
        await poll(lambda: len(seen) >= 2)
    row = [line.split() for line in coord.report().splitlines() if "'frames'" in line]
    assert row[0][:4] == ["'frames'", "9/64", "9", "4"]
    h = monitor.history()
    assert list(h.tables) == ["frames"]
    assert h.tables["frames"].samples[-1] == 4
