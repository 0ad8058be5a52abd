"""A replay table shared by processes (multiprocessing, spawn): actor processes insert
while this process, the learner, samples under a SampleToInsertRatio limiter that
counts every process's inserts and samples on the server; a client SIGKILLed in the
middle of its calls leaves the table consistent."""

from __future__ import annotations

import multiprocessing
import os
import signal
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pytest
import redis_workers
from redis_util import check_table

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

CTX = multiprocessing.get_context("spawn")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the processes are the point here; asyncio and trio are covered elsewhere


async def test_actor_processes_and_a_learner_share_one_limiter(
    url: str, qname: str, redis_server: Any
) -> None:
    """Three actor processes insert 160 items each (two in all-or-nothing batches, one
    progressively) while the learner samples 16 at a time. Every statistics snapshot
    (one server call) keeps ``inserts * 2 - samples`` in the band [0, 64]; in the end
    the counts match (480 inserts, 960 samples: the learner drew until the closed table
    could serve no more), every sampled item is one an actor inserted, intact, and the
    table's invariants hold."""
    s = redis_workers.replay_settings()
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as srv:
        table = await srv.replay_table(
            qname, s["max_size"], s["dtypes"], s["shapes"], rate_limiter=s["rate_limiter"]
        )
        guard = await table.register_producer()  # (open until every actor has started)
        actors = [
            CTX.Process(
                target=redis_workers.replay_actor, args=(url, qname, i, 160, i == 2), daemon=True
            )
            for i in range(3)
        ]
        for p in actors:
            p.start()

        async def end_when_actors_end() -> None:
            for p in actors:
                await anyio.to_thread.run_sync(p.join, 60)
            await table.producer_done(guard)

        got: list[int] = []
        diffs: list[int] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(end_when_actors_end)
            async for sample in table.samples(16):
                assert np.array_equal(sample.data, np.repeat(sample.data[:, :1], 4, axis=1))
                got.extend(int(v) for v in sample.data[:, 0])
                st = await table.statistics()
                diffs.append(st.inserts * 2 - st.samples)
        assert [p.exitcode for p in actors] == [0, 0, 0]
        st = await table.statistics()
    assert diffs
    assert all(0 <= d <= 64 for d in diffs), (min(diffs), max(diffs))
    assert (st.inserts, st.samples, st.size, st.closed) == (480, 960, 480, True)
    assert len(got) == st.samples
    assert set(got) <= {a * 1000 + i for a in range(3) for i in range(160)}
    with redis_server.client() as client:
        assert check_table(client, qname) == []


async def test_a_client_killed_mid_call_leaves_the_table_consistent(
    url: str, qname: str, redis_server: Any
) -> None:
    """A process inserting, sampling and updating priorities in a loop (staged payloads,
    copies for its samples, a sum tree) is SIGKILLed at several moments: each time the
    table's invariants hold (nothing staged or copied left behind, the tree exact), and
    another client goes on using it."""
    ready = CTX.Queue()
    for delay in (0.3, 0.55, 0.8):
        p = CTX.Process(target=redis_workers.replay_churner, args=(url, qname, ready), daemon=True)
        p.start()
        assert await anyio.to_thread.run_sync(ready.get, True, 30) == "started"
        await anyio.sleep(delay)
        os.kill(p.pid, signal.SIGKILL)
        await anyio.to_thread.run_sync(p.join, 10)
        with redis_server.client() as client:
            assert check_table(client, qname) == []
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as srv:
        table = await srv.replay_table(
            qname, 64, np.float32, (300,), sampler=aqueue.Prioritized(0.7)
        )
        before = await table.statistics()
        assert before.inserts > 0
        await table.insert_many(np.zeros((4, 300), np.float32))
        s = await table.sample(8)
        assert s.data.shape == (8, 300)
        st = await table.statistics()
        assert (st.inserts, st.samples) == (before.inserts + 4, before.samples + 8)
