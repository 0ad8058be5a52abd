"""A 3-shard prioritized replay table while a primary is SIGKILLed: the failover
cluster's three primaries (a replica each) serve one shard each; an inserter and a
sampler run under a Coordinator, and a second sampler waits on another table's rate
limiter. Each original primary is killed in turn (one round each, a fresh table per
round). In every round each call either returns (before the kill, or once the replica
serves the slots) or raises ServerConnectionError, and none outlives the hang guard;
the inserter and the sampler both go on after the promotion; the waiting sampler
returns once items come or fails with ServerConnectionError; the Coordinator's block
ends cleanly.

What can be lost: Redis replicates asynchronously, so an insert the victim
acknowledged but had not yet sent to its replica is gone after the promotion. The
round counts the inserts acknowledged before the kill that are missing afterwards
(``update_priorities`` says which keys exist) and prints the count; only the victim's
shard may lose any (a key names its shard), which is asserted.
"""

from __future__ import annotations

import time

import anyio
import numpy as np
import pytest
from failover_util import FAILOVER_TIMEOUT, HANG_GUARD, Log, call, kill_and_promote, until
from redis_cluster_util import ClusterProc, cluster_server

import aqueue
import aqueue.redis
from aqueue.redis._core._shards import shard_of_tag

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]

BATCH = 16


def _shard_on(cluster: ClusterProc, name: str, port: int) -> int:
    """The shard of table ``name`` whose keys live on primary ``port``."""
    with cluster.client(port) as c:
        for key in c.scan_iter(match=f"aq:{{{name}*", count=1000):
            tag = key.decode().split("{", 1)[1].split("}", 1)[0]
            if tag == name:
                return 0
            found = shard_of_tag(tag)
            if found is not None and found[0] == name:
                return found[1]
    raise LookupError(f"no shard of {name} on {port}")


async def _round(cluster: ClusterProc, victim: int, n: int) -> int:
    """Kill ``victim`` while the workers run; the acknowledged inserts lost."""
    ins, smp, wait = Log(), Log(), Log()
    server = cluster_server(cluster.url, failover_timeout=FAILOVER_TIMEOUT, wait_timeout=0.5)
    async with server as srv:
        table = await srv.replay_table(
            f"fo{n}",
            1 << 20,
            np.int64,
            (),
            sampler=aqueue.Prioritized(0.6),
            remover=aqueue.Fifo(),
            rate_limiter=aqueue.SampleToInsertRatio(1.0, 3, 1e9),
            shards=3,
            seed=n,
        )
        starved = await srv.replay_table(
            f"st{n}",
            64,
            np.int64,
            (),
            sampler=aqueue.Prioritized(0.6),
            remover=aqueue.Fifo(),
            rate_limiter=aqueue.MinSize(30),
            shards=3,
        )
        assert sorted(_shard_on(cluster, table.name, p) for p in cluster.primaries()) == [0, 1, 2]
        victim_shard = _shard_on(cluster, table.name, victim)
        # One item, in the victim's shard (inserts rotate over the shards; the others
        # are deleted): the waiting sample draws from that shard, whose limiter (10 of
        # the table's 30) holds it back, on the victim, until nine more come there.
        starved_shard = _shard_on(cluster, starved.name, victim)
        for i in range(30):
            key = await starved.insert(np.int64(-1 - i))
            if key % 3 == starved_shard:
                break
            assert (await starved.delete([key])).all()
        assert key % 3 == starved_shard
        assert await starved.size() == 1

        async def inserter(coord: aqueue.Coordinator) -> None:
            v = 0
            while not coord.should_stop():
                values = np.arange(v, v + BATCH, dtype=np.int64)
                keys = await call(ins, table.insert_many, values, priorities=np.ones(BATCH))
                if keys is not None:
                    ins.acked.append((time.monotonic(), np.asarray(keys)))
                v += BATCH

        async def sampler(coord: aqueue.Coordinator) -> None:
            while not coord.should_stop():
                await call(smp, table.sample, 8)

        async def waiter() -> None:
            got = await call(wait, starved.sample, 1, guard=False)
            if got is not None:
                assert got.data.shape == (1,)

        with anyio.fail_after(4 * HANG_GUARD):
            async with aqueue.Coordinator(stop_grace_period=HANG_GUARD) as coord:
                coord.start_soon(inserter, coord)
                coord.start_soon(sampler, coord)
                coord.start_soon(waiter)
                await until(lambda: len(ins.returned) >= 20 and len(smp.returned) >= 5)
                while (await starved.statistics()).samples_waiting < 1:  # noqa: ASYNC110
                    await anyio.sleep(0.02)  # (the state lives on the server)
                kill_at, promoted_at = await kill_and_promote(cluster, victim, [ins, smp])
                with anyio.fail_after(HANG_GUARD):
                    for i in range(200):  # (until that shard has ten)
                        if wait.returned or wait.errors:
                            break
                        await starved.insert(np.int64(i))
                        await anyio.sleep(0.01)
                    await until(lambda: bool(wait.returned or wait.errors))
                coord.request_stop()
        assert coord.exceptions == ()

        before = [keys for t, keys in ins.acked if t < kill_at]
        acked = np.concatenate(before)
        found = await table.update_priorities(acked, np.ones(len(acked)))
        lost = acked[~found]
    assert set((lost % 3).tolist()) <= {victim_shard}, (lost, victim_shard)
    for log in (ins, smp, wait):
        assert all(t > kill_at for t, _ in log.errors)
    print(
        f"failover round {n}: {len(acked)} inserts acknowledged before the kill, "
        f"{len(lost)} lost; errors: inserter {len(ins.errors)}, sampler {len(smp.errors)}, "
        f"waiting sampler {len(wait.errors)} (returned: {len(wait.returned)}); kill to promotion "
        f"{promoted_at - kill_at:.1f} s"
    )
    return len(lost)


async def test_sharded_table_survives_each_primary_killed(failover_cluster: ClusterProc) -> None:
    cluster = failover_cluster
    victims = cluster.primaries()
    for n, victim in enumerate(victims):
        await _round(cluster, victim, n)
