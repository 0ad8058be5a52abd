"""Trajectory tables on Redis (``server.trajectory_table``) behave as the in-process
``aqueue.TrajectoryTable``: random histories run on both side by side (appends of one
step and of batches by interleaved writers, episode ends, writers closed and new ones
opened, samples with ``max_times_sampled`` retiring windows, deletes, priority
updates) give the same keys, the same samples and the same counters after every
operation, and the server's keys keep the steps' invariants (``traj_util``). Then what
only a shared table has: a writer and a sampler on two connections, and the shared-name
rule on reopen."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis_util import RedisProc
from traj_util import check_trajectory, steps_of, tag, whole_windows

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.timeout(300)]

Op = tuple[Any, ...]


def same_stats(a: Any, b: Any) -> None:
    """The counters agree but the wait clocks and ``writers``: a Redis writer is opened
    on the server by its first append, so it counts from then on."""
    da, db = asdict(a), asdict(b)
    for d in (da, db):
        d.pop("insert_wait_s")
        d.pop("sample_wait_s")
    assert db.pop("writers") <= da.pop("writers")
    assert da == db


class Pair:
    """The same operations on an in-process table and a Redis one, compared."""

    def __init__(self, local: Any, shared: Any, writers: int, client: Any) -> None:
        self.local, self.shared, self.client = local, shared, client
        self.lw = [local.writer() for _ in range(writers)]
        self.rw = [shared.writer() for _ in range(writers)]
        self.episode = [0] * writers
        self.pos = [0] * writers

    async def run(self, op: Op) -> None:
        kind = op[0]
        if kind == "append":
            _, i, k, many = op
            tags = [tag(i, self.episode[i], self.pos[i] + j) for j in range(k)]
            self.pos[i] += k
            fields = steps_of(tags)
            prios = [(t % 97) * 0.5 + 0.25 for t in tags]
            if many:
                a = await self.lw[i].append_many(fields, prios)
                b = await self.rw[i].append_many(fields, prios)
                assert a.tolist() == b.tolist()
            else:
                for j in range(k):
                    step = (fields[0][j], fields[1][j])
                    a = await self.lw[i].append(step, prios[j])
                    b = await self.rw[i].append(step, prios[j])
                    assert a.tolist() == b.tolist()
        elif kind in ("end", "reopen"):
            i = op[1]
            if kind == "end":
                await self.lw[i].end_episode()
                await self.rw[i].end_episode()
            else:
                self.lw[i].close()
                await self.rw[i].aclose()
                self.lw[i], self.rw[i] = self.local.writer(), self.shared.writer()
            self.episode[i] += 1
            self.pos[i] = 0
        elif kind == "sample":
            n = op[1]
            if (await self.shared.statistics()).size == 0:
                return
            try:
                with anyio.move_on_after(0.02) as scope:  # (max_times_sampled may run dry)
                    a = await self.local.sample(n)
            except aqueue.ElementSpecError:  # (more than max_times_sampled allows)
                with pytest.raises(aqueue.ElementSpecError, match="could never be served"):
                    await self.shared.sample(n)
                return
            if scope.cancelled_caught:
                return
            b = await self.shared.sample(n)
            assert a.keys.tolist() == b.keys.tolist()
            assert a.times_sampled.tolist() == b.times_sampled.tolist()
            assert a.priorities.tolist() == b.priorities.tolist()
            assert a.probabilities.tolist() == b.probabilities.tolist()
            for x, y in zip(a.data, b.data):
                assert x.dtype == y.dtype
                assert np.array_equal(x, y)
            whole_windows(b.data[0], self.shared.length, self.shared.stride)
        else:  # delete or update: keys picked among the held and one never given
            held = sorted((await self.shared.statistics()).inserts + np.arange(-3, 1))
            keys = [k for k in held if k >= 0] + [10**9]
            if kind == "delete":
                a, b = await self.local.delete(keys), await self.shared.delete(keys)
            else:
                p = [1.5] * len(keys)
                a = await self.local.update_priorities(keys, p)
                b = await self.shared.update_priorities(keys, p)
            assert a.tolist() == b.tolist()
        same_stats(self.local.statistics(), await self.shared.statistics())
        assert check_trajectory(self.client, self.shared.name) == []


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, Any], int, list[Op]]:
    max_steps = draw(st.integers(1, 10))
    length = draw(st.integers(1, max_steps))
    stride = draw(st.integers(1, 2 * length + 1))
    writers = draw(st.integers(1, 3))
    kw = {
        "max_steps": max_steps,
        "length": length,
        "stride": stride,
        "max_times_sampled": draw(st.sampled_from([0, 0, 1, 2])),
        "sampler": draw(st.sampled_from(["fifo", "lifo", "minheap"])),
    }
    w = st.integers(0, writers - 1)
    op = st.one_of(
        st.tuples(st.just("append"), w, st.integers(0, max_steps + 2), st.booleans()),
        st.tuples(st.just("append"), w, st.just(1), st.just(False)),
        st.tuples(st.just("end"), w),
        st.tuples(st.just("reopen"), w),
        st.tuples(st.just("sample"), st.sampled_from([1, 2, 5])),
        st.tuples(st.sampled_from(["delete", "update"])),
    )
    return kw, writers, draw(st.lists(op, max_size=20))


SAMPLERS = {"fifo": aqueue.Fifo, "lifo": aqueue.Lifo, "minheap": aqueue.MinHeap}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(h=histories())
def test_random_histories_agree_with_the_in_process_table(
    redis_server: RedisProc, h: tuple[dict[str, Any], int, list[Op]]
) -> None:
    kw, writers, ops = h
    kw = {**kw, "sampler": SAMPLERS[kw["sampler"]]()}
    dtypes, shapes = (np.int64, np.float32), ((), (2,))

    async def main() -> None:
        local = aqueue.TrajectoryTable(dtypes=dtypes, shapes=shapes, **kw)
        name = f"tr-{uuid.uuid4().hex[:12]}"
        async with aqueue.redis.connect(redis_server.url, wait_timeout=0.1) as srv:
            shared = await srv.trajectory_table(name, dtypes=dtypes, shapes=shapes, **kw)
            with redis_server.client() as client:
                pair = Pair(local, shared, writers, client)
                for op in ops:
                    await pair.run(op)
            await srv.delete_table(name)

    anyio.run(main)


# -- sharing --------------------------------------------------------------------------


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.1) as server:
        yield server


@pytest.mark.anyio
async def test_a_writer_and_a_sampler_on_two_connections(
    srv: aqueue.redis.RedisServer, url: str, redis_server: RedisProc
) -> None:
    """Frame stacks written by one client are sampled by another, which waits for the
    rate limiter: every window whole, of one episode, never across an end."""
    name = f"tr-{uuid.uuid4().hex[:12]}"
    limiter = aqueue.SampleToInsertRatio(1.0, 4, 8.0)
    kw: dict[str, Any] = {"length": 4, "stride": 1, "rate_limiter": limiter}
    writer_table = await srv.trajectory_table(name, 64, (np.int64, np.float32), ((), (2,)), **kw)
    seen: list[np.ndarray] = []
    async with aqueue.redis.connect(url, wait_timeout=0.1) as other:
        reader = await other.trajectory_table(name, 64, (np.int64, np.float32), ((), (2,)), **kw)

        async def write() -> None:
            async with writer_table.writer() as w:
                for ep in range(6):
                    for pos in range(7):
                        t = tag(0, ep, pos)
                        await w.append(steps_of([t]) and (np.int64(t), np.float32([t, -t])))
                    await w.end_episode()

        async def read() -> None:
            for _ in range(20):
                s = await reader.sample(1)
                seen.append(s.data[0])

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                tg.start_soon(read)
        stats = await reader.statistics()
    tags = np.concatenate(seen)
    whole_windows(tags, 4, 1)
    assert stats.inserts == 6 * 4  # 7 steps: windows at 0..3 per episode
    assert stats.samples == 20
    assert stats.steps_appended == 42
    assert stats.writers == 0
    with redis_server.client() as c:
        assert check_trajectory(c, name) == []


REOPEN = [
    ("max_steps", {"max_steps": 32}, "max_steps 16, but 32"),
    ("dtypes", {"dtypes": np.float64}, "dtypes float32, but float64"),
    ("shapes", {"shapes": (3,)}, r"shapes \(2,\), but \(3,\)"),
    ("names", {"names": "obs"}, "names None, but 'obs'"),
    ("length", {"length": 3}, "length 4, but 3"),
    ("stride", {"stride": 2}, "stride 1, but 2"),
    ("sampler", {"sampler": aqueue.Fifo()}, "sampler Uniform"),
    ("max_times_sampled", {"max_times_sampled": 2}, "max_times_sampled 0, but 2"),
    ("rate_limiter", {"rate_limiter": aqueue.MinSize(2)}, "rate_limiter MinSize"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("field", "change", "match"), REOPEN, ids=[r[0] for r in REOPEN])
async def test_reopening_with_other_settings_names_the_field(
    srv: aqueue.redis.RedisServer, field: str, change: dict[str, Any], match: str
) -> None:
    name = f"tr-{uuid.uuid4().hex[:12]}"
    base: dict[str, Any] = {"max_steps": 16, "dtypes": np.float32, "shapes": (2,), "length": 4}
    t = await srv.trajectory_table(name, **base)
    assert (await srv.trajectory_table(name, **base)).length == 4  # the same: shared
    with pytest.raises(aqueue.ElementSpecError, match=match):
        await srv.trajectory_table(name, **{**base, **change})
    with pytest.raises(aqueue.ElementSpecError, match="kind RedisTrajectoryTable"):
        await srv.replay_table(name, 16, np.float32, (2,))
    other = f"tr-{uuid.uuid4().hex[:12]}"
    await srv.replay_table(other, 16, np.float32, (2,))
    with pytest.raises(aqueue.ElementSpecError, match="kind RedisReplayTable"):
        await srv.trajectory_table(other, **base)
    assert (await t.statistics()).size == 0
