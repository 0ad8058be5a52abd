"""Prioritized sample(256) of a replay table over 3 shards on a local 3-primary Redis
Cluster, against the same table (one shard) on one redis-server, ratio side by side.

Each run starts a private redis-server and a private cluster (``tests/redis_cluster_util``),
fills a table of ``--items`` items of 28 KB (an Atari frame stack) with random
priorities, then times ``--samples`` calls of ``sample(256)`` from one asyncio client
(median of ``--repeats`` runs). A sharded sample costs three rounds (the shards' totals,
the holds, the commits), each sent to the three primaries at once; the one-shard table
samples in one call. The machine's cores are shared by the nodes, so no gain from the
extra nodes is expected here: the row measures what the extra rounds cost.

Beside the rates, each node's server CPU over the timed samples (``INFO cpu``:
``used_cpu_sys + used_cpu_user``, the delta around the timed loop, summed over the
repeats), its cost per ``sample(256)`` call, and the cluster's max/mean ratio of the
nodes' CPU (1.0 when the shards share the work evenly; target within 1.5). The
client's own CPU per call is printed too: with the probe round touching every shard,
it is what a single learner runs out of first on many nodes (benchmarks/README.md).

Last, the same 3-node cluster holds tables of ``--more-shards`` shards (several per
node): the server CPU of all nodes and the client's CPU per call against the shard
count, and a least-squares line through them, server = D + f * shards and client =
a + b * shards (D: the draws' own work, f: what each shard's rounds cost a node, a and
b the same for the client). benchmarks/README.md projects 8 and 32 nodes from them.

First of all, a FIFO queue: 4 producer tasks ``enqueue_many(32)`` of the same 28 KB
frames and one consumer task ``dequeue_many(32)``, capacity 2,000, in one asyncio
client, MB/s through a queue of 3 shards on the 3-node cluster against one shard on one
server (target >= 0.9), with each node's server CPU and the max/mean ratio as above.

    python benchmarks/bench_shards.py [--items 3000] [--samples 60] [--repeats 3]
        [--more-shards 6,12,24] [--queue-batches 40]
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


def _cpu(clients: list[Any]) -> list[float]:
    """Each node's server CPU seconds so far (``INFO cpu``: sys + user)."""
    out = []
    for c in clients:
        info = c.info("cpu")
        out.append(float(info["used_cpu_sys"]) + float(info["used_cpu_user"]))
    return out


async def _rate(
    url: str, cluster: bool, shards: int, items: int, samples: int, nodes: list[Any]
) -> tuple[float, list[float], float]:
    """Calls/s of ``sample(256)``, each node's server CPU seconds over the timed calls,
    and the client process's CPU seconds over them."""
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
        cpu0, client0 = _cpu(nodes), time.process_time()
        start = time.perf_counter()
        for _ in range(samples):
            await t.sample(256)
        rate = samples / (time.perf_counter() - start)
        client = time.process_time() - client0
        return rate, [b - a for a, b in zip(cpu0, _cpu(nodes))], client


async def _queue_rate(
    url: str, cluster: bool, shards: int, batches: int, nodes: list[Any]
) -> tuple[float, list[float]]:
    """MB/s through a FIFO queue of ``shards`` shards (4 producers of ``batches``
    batches of 32 frames, one consumer), and each node's server CPU seconds."""
    import anyio

    frames = np.random.default_rng(0).integers(0, 255, (32, *SHAPE), dtype=np.uint8)
    total = 4 * batches * 32
    async with connect(url, cluster=cluster, max_call_bytes=64 << 20) as srv:
        q = await srv.fifo_queue(
            f"bq-{shards}-{time.monotonic_ns()}", 2000, np.uint8, SHAPE, shards=shards
        )
        await q.enqueue_many(frames)  # (warm: connections to every node)
        await q.dequeue_many(32)

        async def produce() -> None:
            for _ in range(batches):
                await q.enqueue_many(frames)

        async def consume() -> None:
            left = total
            while left:
                left -= len(await q.dequeue_many(32))

        cpu0 = _cpu(nodes)
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(produce)
            tg.start_soon(consume)
        seconds = time.perf_counter() - start
        return total * frames[0].nbytes / seconds / 1e6, [b - a for a, b in zip(cpu0, _cpu(nodes))]


def _queue_rows(
    one: list[float], c1: list[float], three: list[float], cpu3: list[float], ports: list[int]
) -> None:
    m1, m3 = statistics.median(one), statistics.median(three)
    print("FIFO queue, 4 producers enqueue_many(32) / 1 consumer dequeue_many(32), MB/s (median)")
    print(f"{'one server, 1 shard':<32}{m1:>10.1f}")
    print(f"{'3-node cluster, 1 shard':<32}{statistics.median(c1):>10.1f}")
    print(f"{'3-node cluster, 3 shards':<32}{m3:>10.1f}")
    print(f"{'ratio (3 shards / 1)':<32}{m3 / m1:>10.2f}   (target >= 0.9)")
    total = sum(cpu3)
    for port, c in zip(ports, cpu3):
        print(f"{'cluster node :' + str(port) + ' cpu s':<32}{c:>10.3f}")
    mean = total / len(cpu3)
    ratio = max(cpu3) / mean if mean > 0 else float("nan")
    print(f"{'cluster max/mean node CPU':<32}{ratio:>10.2f}   (target <= 1.5)")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--more-shards", default="6,12,24", help="shard counts on 3 nodes, or ''")
    ap.add_argument("--queue-batches", type=int, default=40, help="per producer; 0: no queue")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-shards-"))
    (tmp / "one").mkdir()
    (tmp / "cluster").mkdir()
    server = start_redis(tmp / "one")
    cluster = start_cluster(tmp / "cluster", primaries=3)
    one_node = [server.client()]
    ports = cluster.primaries()
    three_nodes = [cluster.client(p) for p in ports]
    one: list[float] = []
    three: list[float] = []
    cpu1, cpu3 = [0.0], [0.0] * len(ports)
    client1 = client3 = 0.0
    more = [int(x) for x in a.more_shards.split(",") if x.strip()]
    scaling: list[tuple[int, float, float, float]] = []  # shards, calls/s, server, client
    try:
        if a.queue_batches:
            q1: list[float] = []
            qc1: list[float] = []
            q3: list[float] = []
            qcpu = [0.0] * len(ports)
            for _ in range(a.repeats):
                q1.append(
                    asyncio.run(_queue_rate(server.url, False, 1, a.queue_batches, one_node))[0]
                )
                qc1.append(
                    asyncio.run(_queue_rate(cluster.url, True, 1, a.queue_batches, three_nodes))[0]
                )
                r, cpu = asyncio.run(
                    _queue_rate(cluster.url, True, 3, a.queue_batches, three_nodes)
                )
                q3.append(r)
                qcpu = [x + y for x, y in zip(qcpu, cpu)]
            _queue_rows(q1, qc1, q3, qcpu, ports)
        for _ in range(a.repeats):
            r, cpu, cl = asyncio.run(_rate(server.url, False, 1, a.items, a.samples, one_node))
            one.append(r)
            cpu1 = [x + y for x, y in zip(cpu1, cpu)]
            client1 += cl
            r, cpu, cl = asyncio.run(_rate(cluster.url, True, 3, a.items, a.samples, three_nodes))
            three.append(r)
            cpu3 = [x + y for x, y in zip(cpu3, cpu)]
            client3 += cl
        for k in more:
            r, cpu, cl = asyncio.run(_rate(cluster.url, True, k, a.items, a.samples, three_nodes))
            scaling.append((k, r, sum(cpu) / a.samples, cl / a.samples))
    finally:
        for c in [*one_node, *three_nodes]:
            c.close()
        stop_cluster(cluster)
        stop_redis(server)
        shutil.rmtree(tmp, ignore_errors=True)
    calls = a.samples * a.repeats
    m1, m3 = statistics.median(one), statistics.median(three)
    print(f"prioritized sample(256) of {a.items} items of {np.prod(SHAPE)} B, calls/s (median)")
    print(f"{'one server, 1 shard':<32}{m1:>10.1f}")
    print(f"{'3-node cluster, 3 shards':<32}{m3:>10.1f}")
    print(f"{'ratio (3 shards / 1)':<32}{m3 / m1:>10.2f}   (target >= 0.8)")
    print()
    print(f"server CPU over {calls} timed calls: seconds, and ms per sample(256) call")
    print(f"{'node':<32}{'cpu s':>10}{'ms/call':>10}")
    print(f"{'one server':<32}{cpu1[0]:>10.3f}{1e3 * cpu1[0] / calls:>10.3f}")
    for port, c in zip(ports, cpu3):
        print(f"{'cluster node :' + str(port):<32}{c:>10.3f}{1e3 * c / calls:>10.3f}")
    total = sum(cpu3)
    print(f"{'cluster, all nodes':<32}{total:>10.3f}{1e3 * total / calls:>10.3f}")
    mean = total / len(cpu3)
    ratio = max(cpu3) / mean if mean > 0 else float("nan")
    print(f"{'cluster max/mean node CPU':<32}{ratio:>10.2f}   (target <= 1.5)")
    print()
    print("client CPU (this process), ms per sample(256) call")
    print(f"{'one server':<32}{1e3 * client1 / calls:>10.3f}")
    print(f"{'3-node cluster':<32}{1e3 * client3 / calls:>10.3f}")
    if more:
        _scaling([(3, m3, total / calls, client3 / calls), *scaling])


def _scaling(rows: list[tuple[int, float, float, float]]) -> None:
    """The shard-count rows and the lines through them."""
    print()
    print("more shards than nodes (3 nodes), per sample(256) call")
    print(f"{'shards':<10}{'calls/s':>10}{'server ms (all nodes)':>24}{'client ms':>12}")
    for k, r, srv, cl in rows:
        print(f"{k:<10}{r:>10.1f}{1e3 * srv:>24.3f}{1e3 * cl:>12.3f}")
    ks = np.array([r[0] for r in rows], dtype=float)
    f, d = np.polyfit(ks, [1e3 * r[2] for r in rows], 1)
    b, c = np.polyfit(ks, [1e3 * r[3] for r in rows], 1)
    print(f"server ms per call = {d:.2f} + {f:.3f} * shards   (D, f)")
    print(f"client ms per call = {c:.2f} + {b:.3f} * shards   (a, b)")


if __name__ == "__main__":
    main()
