"""Prioritized sample(256) of a replay table over 3 shards on a local 3-primary Redis
Cluster, against the same table (one shard) on one redis-server, ratio side by side.

Each run starts a private redis-server and a private cluster (``tests/redis_cluster_util``),
fills a table of ``--items`` items of 28 KB (an Atari frame stack) with random
priorities, then times ``--samples`` calls of ``sample(256)`` from one asyncio client
(median of ``--repeats`` runs). A sharded sample costs three rounds (the shards' totals,
the holds, the commits), each sent to the three primaries at once; the one-shard table
samples in one call. The machine's cores are shared by the nodes, so no gain from the
extra nodes is expected here: the row measures what the extra rounds cost.

    python benchmarks/bench_shards.py [--items 3000] [--samples 60] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from redis_cluster_util import start_cluster, stop_cluster
from redis_util import start_redis, stop_redis

import aqueue
from aqueue.redis import connect

SHAPE = (84, 84, 4)


async def _fill(table: Any, items: int, rng: np.random.Generator) -> None:
    frames = rng.integers(0, 255, (64, *SHAPE), dtype=np.uint8)
    left = items
    while left:
        k = min(64, left)
        await table.insert_many(frames[:k], priorities=rng.uniform(0.1, 10.0, k))
        left -= k


async def _rate(url: str, cluster: bool, shards: int, items: int, samples: int) -> float:
    rng = np.random.default_rng(0)
    async with connect(url, cluster=cluster, max_call_bytes=64 << 20) as srv:
        t = await srv.replay_table(
            f"bench-{shards}-{time.monotonic_ns()}",
            items,
            np.uint8,
            SHAPE,
            sampler=aqueue.Prioritized(0.6),
            remover=aqueue.Fifo(),
            shards=shards,
            seed=1,
        )
        await _fill(t, items, rng)
        await t.sample(256)  # (warm: connections to every node)
        start = time.perf_counter()
        for _ in range(samples):
            await t.sample(256)
        return samples / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-shards-"))
    (tmp / "one").mkdir()
    (tmp / "cluster").mkdir()
    server = start_redis(tmp / "one")
    cluster = start_cluster(tmp / "cluster", primaries=3)
    try:
        one, three = [], []
        for _ in range(a.repeats):
            one.append(asyncio.run(_rate(server.url, False, 1, a.items, a.samples)))
            three.append(asyncio.run(_rate(cluster.url, True, 3, a.items, a.samples)))
    finally:
        stop_cluster(cluster)
        stop_redis(server)
        shutil.rmtree(tmp, ignore_errors=True)
    m1, m3 = statistics.median(one), statistics.median(three)
    print(f"prioritized sample(256) of {a.items} items of {np.prod(SHAPE)} B, calls/s (median)")
    print(f"{'one server, 1 shard':<32}{m1:>10.1f}")
    print(f"{'3-node cluster, 3 shards':<32}{m3:>10.1f}")
    print(f"{'ratio (3 shards / 1)':<32}{m3 / m1:>10.2f}")


if __name__ == "__main__":
    main()
