"""A 3-shard prioritized replay table on the session's cluster shared by processes
(multiprocessing, spawn): three actor processes inserting uneven amounts and this
process, the learner. The draws over the finished table fit ``p_i ∝ priority_i^alpha``
across shards (chi-square), and with a SampleToInsertRatio limiter (held per shard) the
global samples/inserts ratio is measured and kept within the shards' summed buffers."""

from __future__ import annotations

import multiprocessing
import uuid
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pytest
import redis_workers
from redis_cluster_util import ClusterProc, cluster_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

CTX = multiprocessing.get_context("spawn")
COUNTS = (16, 48, 96)  # uneven actors
CHI2_999_DF4 = 18.467


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the processes are the point here


async def _run(cluster: ClusterProc, ratio: bool, learn: Any) -> Any:
    name = f"shp-{uuid.uuid4().hex[:10]}"
    s = redis_workers.sharded_settings(ratio)
    async with cluster_server(cluster.url, lease_time=2.0, wait_timeout=0.05) as srv:
        table = await srv.replay_table(name, s.pop("max_size"), s.pop("dtypes"), **s)
        assert table.shards == 3
        guard = await table.register_producer()  # (open until every actor has started)
        actors = [
            CTX.Process(
                target=redis_workers.sharded_actor,
                args=(cluster.url, True, name, i, n, ratio),
                daemon=True,
            )
            for i, n in enumerate(COUNTS)
        ]
        for p in actors:
            p.start()

        ended = anyio.Event()

        async def end_when_actors_end() -> None:
            for p in actors:
                await anyio.to_thread.run_sync(p.join, 90)
            await table.producer_done(guard)
            ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(end_when_actors_end)
            out = await learn(table, ended)
        assert [p.exitcode for p in actors] == [0, 0, 0]
        return out, await table.statistics()


async def test_draws_across_shards_fit_the_priorities(redis_cluster: ClusterProc) -> None:
    async def learn(table: Any, ended: anyio.Event) -> Any:
        await ended.wait()  # (every actor has ended: the table is whole)
        assert await table.is_closed()
        counts = np.zeros(5, dtype=np.int64)
        for _ in range(25):
            s = await table.sample(160)
            v = s.data[:, 0].astype(np.int64)
            counts += np.bincount(v % 5, minlength=5)
            assert np.allclose(s.probabilities, p_of[v % 5])
        return counts

    per_class = np.zeros(5)
    for a, n in enumerate(COUNTS):
        per_class += np.bincount(np.arange(a * 1000, a * 1000 + n) % 5, minlength=5)
    mass = per_class * (1.0 + np.arange(5)) ** 0.8
    p_of = (1.0 + np.arange(5)) ** 0.8 / mass.sum()
    counts, st = await _run(redis_cluster, False, learn)
    assert st.inserts == sum(COUNTS)
    expected = counts.sum() * mass / mass.sum()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < CHI2_999_DF4, (chi2, counts.tolist())


async def test_global_ratio_with_uneven_actors(redis_cluster: ClusterProc) -> None:
    async def learn(table: Any, ended: anyio.Event) -> Any:
        ratios = []
        async for _ in table.samples(4):
            st = await table.statistics()
            if st.inserts:
                ratios.append(st.samples / st.inserts)
        return ratios

    ratios, st = await _run(redis_cluster, True, learn)
    assert st.inserts == sum(COUNTS)
    # each shard keeps inserts_s * 2 - samples_s - n >= min_diff / 3 = -6: the table's
    # samples never pass 2 * inserts + 18 (the shards' summed buffers)
    assert st.samples <= 2 * st.inserts + 18
    assert st.samples >= 1.5 * st.inserts, st  # (the learner drew most of its allowance)
    print(
        f"global samples/inserts: final {st.samples / st.inserts:.3f}, "
        f"during the run {min(ratios):.3f}..{max(ratios):.3f} (limiter: 2.0 per shard)"
    )
