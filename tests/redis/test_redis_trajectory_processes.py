"""A trajectory table shared by processes (multiprocessing, spawn): two actor processes,
each with its own connection to the test's server, write episodes of tagged steps with
writers (one awaited, one through the writer's thread view on a thread) while this
process, the learner, samples 4-step windows under a SampleToInsertRatio limiter that
counts every process's windows and samples on the server."""

from __future__ import annotations

import multiprocessing
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pytest
import redis_workers
from traj_util import check_trajectory

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

CTX = multiprocessing.get_context("spawn")
EPISODES = 12


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the processes are the point here; asyncio and trio are covered elsewhere


def written() -> dict[tuple[int, int], int]:
    """Each (actor, episode) the actors write, with its length (their seeded draws)."""
    return {
        (a, ep): sum(len(c) for c in chunks)
        for a in range(2)
        for ep, chunks in enumerate(redis_workers._episodes(a, EPISODES))
    }


def windows(length: int, size: int = 4, stride: int = 2) -> int:
    """The windows of an episode of ``length`` steps."""
    return 0 if length < size else (length - size) // stride + 1


async def test_two_actor_processes_write_episodes_while_the_learner_samples(
    url: str, qname: str, redis_server: Any
) -> None:
    """Every sampled window is 4 consecutive steps of one episode of one actor, starting
    on the stride and ending before the episode's end, and holds exactly the steps that
    actor wrote there (frame, tag and reward); every statistics snapshot (one server
    call) keeps ``inserts * 2 - samples`` in [0, 32]; in the end the windows, steps and
    samples add up and the table's invariants hold."""
    s = redis_workers.trajectory_settings()
    episodes = written()
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as srv:
        table = await srv.trajectory_table(qname, **s)
        guard = await table.register_producer()  # (open until every actor has started)
        actors = [
            CTX.Process(
                target=redis_workers.trajectory_actor,
                args=(url, qname, a, EPISODES, a == 1),
                daemon=True,
            )
            for a in range(2)
        ]
        for p in actors:
            p.start()

        async def end_when_actors_end() -> None:
            for p in actors:
                await anyio.to_thread.run_sync(p.join, 90, abandon_on_cancel=True)
            await table.producer_done(guard)

        seen: set[int] = set()
        diffs: list[int] = []
        drawn = 0
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(end_when_actors_end)
                async for sample in table.samples(8):
                    tags = sample.data["tag"]
                    for row, frames, rewards in zip(
                        tags, sample.data["frame"], sample.data["reward"]
                    ):
                        first = int(row[0])
                        actor, episode, pos = first // 10**6, first // 1000 % 1000, first % 1000
                        assert row.tolist() == list(range(first, first + 4)), row
                        assert pos % 2 == 0, row
                        assert pos + 4 <= episodes[actor, episode], (row, episodes[actor, episode])
                        want = redis_workers.trajectory_steps(row.tolist())
                        assert np.array_equal(frames, want["frame"])
                        assert np.array_equal(rewards, want["reward"])
                        seen.add(first)
                    drawn += 8
                    st = await table.statistics()
                    diffs.append(st.inserts * 2 - st.samples)
                    await anyio.sleep(0.01)  # (a learner slower than the actors: they wait)
        finally:
            for p in actors:  # (a failed check leaves the actors waiting for the limiter)
                if p.is_alive():
                    p.kill()
        assert [p.exitcode for p in actors] == [0, 0]
        st = await table.statistics()
    total = sum(windows(n) for n in episodes.values())
    assert (st.inserts, st.size, st.closed) == (total, total, True)
    assert st.steps_appended == sum(episodes.values())
    assert st.samples == drawn
    assert 2 * total - 8 < drawn <= 2 * total  # (drew until the closed table could serve no more)
    assert diffs
    assert all(0 <= d <= 32 for d in diffs), (min(diffs), max(diffs))
    assert st.insert_wait_s > 0  # (the limiter held the actors' windows back)
    assert {f // 10**6 for f in seen} == {0, 1}  # (both actors' windows were drawn)
    assert st.writers == 0
    with redis_server.client() as client:
        assert check_trajectory(client, qname) == []
