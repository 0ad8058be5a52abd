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

Last, the same 3-node cluster holds queues (two processes, as below) and tables of
``--more-shards`` shards (several per node): the server CPU of all nodes and the
clients' CPU per MB (queues) or per call (tables) against the shard count, and a
least-squares line through them, server = D + f * shards and client = a + b * shards
(D: the data's own work, f: what each shard's calls cost the nodes, a and b the same
for the clients). benchmarks/README.md projects 8 and 32 nodes from them.

First of all, a FIFO queue: 4 producer tasks ``enqueue_many(32)`` of the same 28 KB
frames and one consumer task ``dequeue_many(32)``, capacity 2,000, MB/s through a
queue of 3 shards on the 3-node cluster against one shard on one server (target >=
0.9), with each node's server CPU and the max/mean ratio as above. Two shapes:

- *one process*: the producers and the consumer in one asyncio client, whose CPU sets
  the rate: every call of either side counts;
- *two processes*: the producers in one process (spawned), the consumer in this one,
  as a deployment runs them: the rate is the consumer's, timed from its first batch.

The queue stays full (the producers are faster), so a producer's enqueue mostly waits
for room. Over shards it waits registered on every shard and withdraws the
registrations it did not use: calls the producers' process makes, which the one-process
shape charges to the consumer too.

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


def _frames() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 255, (32, *SHAPE), dtype=np.uint8)


async def _produce(q: Any, batches: int) -> None:
    """4 producer tasks, each ``batches`` times ``enqueue_many(32)``."""
    import anyio

    frames = _frames()

    async def produce() -> None:
        for _ in range(batches):
            await q.enqueue_many(frames)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(produce)


def _producers(url: str, cluster: bool, name: str, batches: int, out: Any) -> None:
    """The producers' process of the two-process shape (the queue exists); it sends
    its CPU seconds over the enqueues to ``out``."""

    async def main() -> float:
        async with connect(url, cluster=cluster, max_call_bytes=64 << 20) as srv:
            q = await srv.fifo_queue(name, 2000, np.uint8, SHAPE)
            cpu0 = time.process_time()
            await _produce(q, batches)
            return time.process_time() - cpu0

    out.send(asyncio.run(main()))


async def _queue_rate(
    url: str, cluster: bool, shards: int, batches: int, nodes: list[Any], procs: bool = False
) -> tuple[float, list[float], float, float, float]:
    """MB/s through a FIFO queue of ``shards`` shards (4 producers of ``batches``
    batches of 32 frames, one consumer; ``procs``: the producers in a process of their
    own), each node's server CPU seconds, the MB moved, and the clients' CPU ms per MB
    (with ``procs``, the consumer's process and the producers' summed), and the
    consumer's process's alone (without: the same)."""
    import multiprocessing

    import anyio

    total = 4 * batches * 32
    nbytes = _frames()[0].nbytes
    name = f"bq-{shards}-{time.monotonic_ns()}"
    async with connect(url, cluster=cluster, max_call_bytes=64 << 20) as srv:
        q = await srv.fifo_queue(name, 2000, np.uint8, SHAPE, shards=shards)
        await q.enqueue_many(_frames())  # (warm: connections to every node)
        await q.dequeue_many(32)

        async def consume() -> None:
            left = total
            while left:
                left -= len(await q.dequeue_many(32))

        if procs:
            ctx = multiprocessing.get_context("spawn")
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_producers, args=(url, cluster, name, batches, send))
            proc.start()
            try:
                await q.dequeue_many(32)  # (the producers are connected and going)
                total -= 32
                cpu0 = _cpu(nodes)
                start = time.perf_counter()
                mine = time.process_time()
                await consume()
                seconds = time.perf_counter() - start
                consumer = time.process_time() - mine
                clients = consumer + await anyio.to_thread.run_sync(recv.recv)
            finally:
                await anyio.to_thread.run_sync(proc.join)
        else:
            cpu0 = _cpu(nodes)
            start = time.perf_counter()
            mine = time.process_time()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_produce, q, batches)
                tg.start_soon(consume)
            seconds = time.perf_counter() - start
            clients = consumer = time.process_time() - mine
        mb = total * nbytes / 1e6
        cpu = [b - a for a, b in zip(cpu0, _cpu(nodes))]
        return mb / seconds, cpu, mb, 1e3 * clients / mb, 1e3 * consumer / mb


def _queue_rows(
    shape: str,
    one: list[float],
    c1: list[float],
    three: list[float],
    cpu3: list[float],
    ports: list[int],
    costs: list[tuple[str, float, float, float]],
) -> None:
    m1, m3 = statistics.median(one), statistics.median(three)
    print("FIFO queue, 4 producers enqueue_many(32) / 1 consumer dequeue_many(32), MB/s (median)")
    print(shape)
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
    print(f"{'CPU ms per MB moved':<32}{'server':>10}{'clients':>10}{'consumer':>10}")
    for label, server, client, consumer in costs:
        print(f"{label:<32}{server:>10.3f}{client:>10.3f}{consumer:>10.3f}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--samples", type=int, default=60, help="per run; 0: no table")
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
        shapes = [
            (False, "one process: the producers and the consumer in one asyncio client"),
            (True, "two processes: the producers in one, the consumer in another"),
        ]
        for procs, shape in shapes if a.queue_batches else []:
            q1: list[float] = []
            qc1: list[float] = []
            q3: list[float] = []
            qcpu = [0.0] * len(ports)
            # server CPU s, MB, clients' and consumer's CPU ms per MB: one server, 3 shards
            cost = [[0.0] * 4, [0.0] * 4]
            for _ in range(a.repeats):
                batches = a.queue_batches
                r, cpu, mb, cl, co = asyncio.run(
                    _queue_rate(server.url, False, 1, batches, one_node, procs)
                )
                q1.append(r)
                cost[0] = [x + y for x, y in zip(cost[0], (sum(cpu), mb, cl, co))]
                qc1.append(
                    asyncio.run(_queue_rate(cluster.url, True, 1, batches, three_nodes, procs))[0]
                )
                r, cpu, mb, cl, co = asyncio.run(
                    _queue_rate(cluster.url, True, 3, batches, three_nodes, procs)
                )
                q3.append(r)
                qcpu = [x + y for x, y in zip(qcpu, cpu)]
                cost[1] = [x + y for x, y in zip(cost[1], (sum(cpu), mb, cl, co))]
            costs = [
                (label, 1e3 * c[0] / c[1], c[2] / a.repeats, c[3] / a.repeats)
                for label, c in zip(("one server, 1 shard", "3 shards (all nodes)"), cost)
            ]
            _queue_rows(shape, q1, qc1, q3, qcpu, ports, costs)
        if a.queue_batches and more:
            _queue_scaling(
                [
                    (
                        k,
                        *asyncio.run(
                            _queue_rate(cluster.url, True, k, a.queue_batches, three_nodes, True)
                        ),
                    )
                    for k in [3, *more]
                ]
            )
        for _ in range(a.repeats if a.samples else 0):
            r, cpu, cl = asyncio.run(_rate(server.url, False, 1, a.items, a.samples, one_node))
            one.append(r)
            cpu1 = [x + y for x, y in zip(cpu1, cpu)]
            client1 += cl
            r, cpu, cl = asyncio.run(_rate(cluster.url, True, 3, a.items, a.samples, three_nodes))
            three.append(r)
            cpu3 = [x + y for x, y in zip(cpu3, cpu)]
            client3 += cl
        for k in more if a.samples else []:
            r, cpu, cl = asyncio.run(_rate(cluster.url, True, k, a.items, a.samples, three_nodes))
            scaling.append((k, r, sum(cpu) / a.samples, cl / a.samples))
    finally:
        for c in [*one_node, *three_nodes]:
            c.close()
        stop_cluster(cluster)
        stop_redis(server)
        shutil.rmtree(tmp, ignore_errors=True)
    if not a.samples:
        return
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


def _queue_scaling(rows: list[tuple[int, float, list[float], float, float, float]]) -> None:
    """The queue's shard-count rows (two processes) and the lines through them."""
    print("FIFO queue, two processes, more shards than nodes (3 nodes), per MB moved")
    print(f"{'shards':<10}{'MB/s':>10}{'server CPU ms (all nodes)':>28}{'clients ms':>12}")
    pts = []
    for k, rate, cpu, mb, client, _ in rows:
        pts.append((k, 1e3 * sum(cpu) / mb, client))
        print(f"{k:<10}{rate:>10.1f}{pts[-1][1]:>28.3f}{client:>12.3f}")
    ks = np.array([p[0] for p in pts], dtype=float)
    f, d = np.polyfit(ks, [p[1] for p in pts], 1)
    b, c = np.polyfit(ks, [p[2] for p in pts], 1)
    print(f"server ms per MB = {d:.3f} + {f:.4f} * shards")
    print(f"clients ms per MB = {c:.3f} + {b:.4f} * shards")
    print()


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
