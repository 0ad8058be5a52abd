"""The Redis Cluster client side, measured on a local cluster (three primaries on
loopback, Debian's redis-server; ``tests/redis_cluster_util.py`` starts them).

Rows (``--rows``, all by default):

- ``routing``: FCALL_RO throughput, sequential (one call awaited at a time) and
  pipelined (64 calls per pipeline, spread over three hash tags, so over the three
  primaries), with redis-py's asyncio cluster client as it comes (it asks a node
  ``COMMAND GETKEYS`` to find an FCALL's keys), with aqueue's routing (the slot from
  the hash tag), with ``target_nodes=`` (the node looked up by hand: no lookup, but
  no retries either), and beside them one server with ``redis.asyncio.Redis``. Also
  the sync clients, sequential. The ``getkeys/call`` column counts the servers'
  ``COMMAND GETKEYS`` calls per FCALL.
- ``shapes``: one enqueue's round trip, 32 payloads of 28,224 bytes staged with MSET
  and one FCALL, on one server (in MULTI/EXEC as aqueue does there, and as a plain
  pipeline) and on the cluster: a plain pipeline to the slot's primary (what the
  cluster transport sends), two ways to stage without MULTI that still clean up
  after a killed producer (a function call that registers the batch before the
  MSET; or ``SET ... PX`` per payload and a function that PERSISTs them),
  redis-py's async cluster transaction (MULTI pinned to the slot: it works with
  aqueue's routing, each queued command in a thread of its own), the sync cluster
  transaction; and a dequeue's FCALL + MGET pipeline.
- ``spread``: three FIFO queues of 28,224-byte frames, one producer task
  (enqueue_many of 32) and one consumer task (dequeue_many(32)) each, in this
  process, over the cluster transport: queue names that land on three different
  primaries, then three plain names (``q0``, ``q1``, ``q2``: their tags fall where
  CRC16 puts them), then the same three queues on one server. Elements/s, MB/s and
  each node's server CPU (INFO cpu) per 1,000 elements, and the busiest node's CPU
  over the mean.
- ``failover``: three primaries with a replica each, ``--node-timeout-ms``; clients
  on the cluster transport keep calling on every shard, 4 writers keep enqueueing
  small elements on the victim shard and a waiter blocks on it; an FCALL that spins
  on the server for 3 s is in flight on the victim when its primary is SIGKILLed.
  Reported: seconds until a replica serves the slots, until the victim shard's first
  call sent after the kill returns, the errors each kind of caller saw, and the
  acknowledged enqueues that the promoted replica does not have. Then redis-py's
  cluster client on the same kill, with its default 10 retries and with 200: whether
  it sent the in-flight spin again (and ran it on the promoted replica), and how its
  calls fail during the outage.
  ``--trials`` clusters in a row.

Usage: python benchmarks/bench_cluster.py [--rows routing,shapes,spread,failover]
       [--calls N] [--repeat R] [--seconds S] [--node-timeout-ms MS] [--trials T]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis_cluster_util import (
    SPIN_LIBRARY,
    ClusterProc,
    cluster_server,
    start_cluster,
    stop_cluster,
)
from redis_util import RedisProc, start_redis, stop_redis

import aqueue.redis
from aqueue.redis._core._cluster import ClusterSync
from aqueue.redis._core._cluster._routing import AsyncClusterClient, SyncClusterClient
from aqueue.redis._core._library import LIBRARY_SOURCE
from aqueue.redis._core._transport import Call

FRAME = 84 * 84 * 4
BATCH = 32


def _tags_on(cluster: ClusterProc) -> dict[int, str]:
    """One fresh hash tag per primary."""
    out: dict[int, str] = {}
    while len(out) < len(cluster.primaries()):
        tag = uuid.uuid4().hex[:6]
        out.setdefault(cluster.owner(f"{{{tag}}}"), tag)
    return out


def _names_on(cluster: ClusterProc) -> list[str]:
    """Queue names (each its own hash tag) served by the primaries, one each."""
    out: dict[int, str] = {}
    while len(out) < len(cluster.primaries()):
        name = f"q-{uuid.uuid4().hex[:6]}"
        out.setdefault(cluster.owner(f"{{{name}}}"), name)
    return list(out.values())


def _name_on(cluster: ClusterProc, port: int, prefix: str) -> str:
    """A queue name (its own hash tag) served by the primary at ``port``."""
    while True:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        if cluster.owner(f"{{{name}}}") == port:
            return name


def _getkeys(ports: list[int], client: Callable[[int], redis.Redis]) -> int:
    total = 0
    for port in ports:
        with client(port) as c:
            total += int(c.info("commandstats").get("cmdstat_command|getkeys", {}).get("calls", 0))
    return total


# -- routing ----------------------------------------------------------------------------------


async def _seq(call: Callable[[int], Awaitable[Any]], n: int) -> float:
    t = time.perf_counter()
    for i in range(n):
        await call(i)
    return n / (time.perf_counter() - t)


async def _piped(pipe: Callable[[], Any], keys: list[str], n: int, target: Any = None) -> float:
    t = time.perf_counter()
    for start in range(0, n, 64):
        p = pipe()
        for i in range(start, min(n, start + 64)):
            key = keys[i % len(keys)]
            if target is None:
                p.execute_command("FCALL_RO", "aq_version", 1, key)
            else:
                p.execute_command("FCALL_RO", "aq_version", 1, key, target_nodes=target(key))
        await p.execute()
    return n / (time.perf_counter() - t)


def routing(cluster: ClusterProc, single: RedisProc, n: int, repeat: int) -> None:
    keys = [f"aq:{{{t}}}:meta" for t in _tags_on(cluster).values()]
    ports = cluster.primaries()
    rows: dict[str, list[tuple[float, float, float]]] = {}

    async def run_async() -> None:
        one = redis.asyncio.Redis(port=single.port, password=single.password)
        await one.function_load(LIBRARY_SOURCE, replace=True)
        default = redis.asyncio.cluster.RedisCluster.from_url(cluster.url)
        ours = AsyncClusterClient.from_url(cluster.url)
        await default.initialize()
        await ours.initialize()
        await ours.function_load(LIBRARY_SOURCE, replace=True)

        def by_hand(key: str) -> Any:
            return ours.get_node_from_key(key)

        variants: list[tuple[str, Any, Any]] = [
            ("one server, redis.asyncio.Redis", one, None),
            ("cluster, redis-py as it comes", default, None),
            ("cluster, aqueue's routing", ours, None),
            ("cluster, target_nodes= by hand", ours, by_hand),
        ]
        for _ in range(repeat):
            for name, client, target in variants:
                g0 = _getkeys(ports, cluster.client)

                async def call(i: int, client: Any = client, target: Any = target) -> Any:
                    key = keys[i % len(keys)]
                    if target is None:
                        return await client.execute_command("FCALL_RO", "aq_version", 1, key)
                    return await client.execute_command(
                        "FCALL_RO", "aq_version", 1, key, target_nodes=target(key)
                    )

                seq = await _seq(call, n)
                make = client.pipeline
                piped = await _piped(lambda make=make: make(transaction=False), keys, n, target)
                per = (_getkeys(ports, cluster.client) - g0) / (2 * n)
                rows.setdefault(name, []).append((seq, piped, per))
        await one.aclose()
        await default.aclose()
        await ours.close_all()

    asyncio.run(run_async())
    sync_default = redis.cluster.RedisCluster.from_url(cluster.url)
    sync_ours = SyncClusterClient.from_url(cluster.url)
    for _ in range(repeat):
        for name, client in (("sync cluster, redis-py", sync_default), ("sync, aqueue", sync_ours)):
            g0 = _getkeys(ports, cluster.client)
            t = time.perf_counter()
            for i in range(n):
                client.execute_command("FCALL_RO", "aq_version", 1, keys[i % len(keys)])
            seq = n / (time.perf_counter() - t)
            per = (_getkeys(ports, cluster.client) - g0) / n
            rows.setdefault(name, []).append((seq, float("nan"), per))
    sync_default.close()
    sync_ours.close()
    print(f"\nrouting: FCALL_RO calls/s, median of {repeat} x {n} calls")
    print(f"{'client':36} {'sequential':>11} {'pipelined':>11} {'getkeys/call':>13}")
    for name, vals in rows.items():
        seq = statistics.median(v[0] for v in vals)
        piped = statistics.median(v[1] for v in vals)
        per = statistics.median(v[2] for v in vals)
        print(f"{name:36} {seq:11,.0f} {piped:11,.0f} {per:13.2f}")


# -- shapes -----------------------------------------------------------------------------------


PERSIST_LIBRARY = """#!lua name=aqpersist
redis.register_function('persist', function(keys, args)
  for i = 1, #keys do redis.call('PERSIST', keys[i]) end
  return #keys
end)
"""


def shapes(cluster: ClusterProc, single: RedisProc, n: int, repeat: int) -> None:
    tag = next(iter(_tags_on(cluster).values()))
    key = f"aq:{{{tag}}}:meta"
    payload = np.random.default_rng(0).integers(0, 255, FRAME, dtype=np.uint8).tobytes()
    staged = [x for j in range(BATCH) for x in (f"aq:{{{tag}}}:e:s.{j}", payload)]
    fetch = [f"aq:{{{tag}}}:e:s.{j}" for j in range(BATCH)]
    rows: dict[str, list[float]] = {}

    def stage(p: Any) -> Any:
        p.execute_command("MSET", *staged)
        p.execute_command("FCALL", "aq_version", 1, key)
        return p

    def take(p: Any) -> Any:
        p.execute_command("FCALL", "aq_version", 1, key)
        p.execute_command("MGET", *fetch)
        return p

    def registered(p: Any) -> Any:
        """Staging without MULTI that cleans up after a killed producer: a function
        call registers the batch (a later call reaps it if it was never admitted)."""
        p.execute_command("FCALL", "aq_version", 1, key)
        return stage(p)

    def expiring(p: Any) -> Any:
        """Staging without MULTI that cleans up after a killed producer: each payload
        set to expire, the function makes the admitted ones permanent."""
        for j in range(BATCH):
            p.execute_command("SET", fetch[j], payload, "PX", 30_000)
        p.execute_command("FCALL", "persist", BATCH, *fetch)
        return p

    async def run_async() -> None:
        one = redis.asyncio.Redis(port=single.port, password=single.password)
        ours = AsyncClusterClient.from_url(cluster.url)
        await ours.initialize()
        await ours.function_load(PERSIST_LIBRARY, replace=True)
        variants: list[tuple[str, Callable[[], Any]]] = [
            ("one server: MULTI MSET FCALL EXEC", lambda: stage(one.pipeline(True))),
            ("one server: pipeline MSET, FCALL", lambda: stage(one.pipeline(False))),
            ("one server: pipeline FCALL, MGET", lambda: take(one.pipeline(False))),
            ("cluster: pipeline MSET, FCALL", lambda: stage(ours.pipeline(False))),
            ("cluster: pipeline FCALL, MSET, FCALL", lambda: registered(ours.pipeline(False))),
            ("cluster: pipeline SET PX x32, FCALL PERSIST x32", lambda: expiring(ours.pipeline(0))),
            ("cluster: async MULTI MSET FCALL EXEC", lambda: stage(ours.pipeline(True))),
            ("cluster: pipeline FCALL, MGET", lambda: take(ours.pipeline(False))),
        ]
        for _ in range(repeat):
            for name, make in variants:
                t = time.perf_counter()
                for _i in range(n):
                    await make().execute()
                rows.setdefault(name, []).append((time.perf_counter() - t) / n * 1e6)
        await one.aclose()
        await ours.close_all()

    asyncio.run(run_async())
    sync_ours = SyncClusterClient.from_url(cluster.url)
    for _ in range(repeat):
        t = time.perf_counter()
        for _i in range(n):
            stage(sync_ours.pipeline(transaction=True)).execute()
        rows.setdefault("cluster: sync MULTI MSET FCALL EXEC", []).append(
            (time.perf_counter() - t) / n * 1e6
        )
    sync_ours.close()
    print(f"\nshapes: microseconds per round trip (32 x {FRAME:,} B), median of {repeat} x {n}")
    for name, vals in rows.items():
        print(f"{name:40} {statistics.median(vals):9,.0f}")


# -- spread -----------------------------------------------------------------------------------


def _server_cpu(port: int, password: str) -> float:
    with redis.Redis(port=port, password=password) as c:
        info = c.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def _workload(srv: Any, names: list[str], seconds: float) -> int:
    frames = np.random.default_rng(1).integers(0, 255, (BATCH, FRAME), dtype=np.uint8)
    queues = [await srv.fifo_queue(n, 20 * BATCH, np.uint8, (FRAME,)) for n in names]
    done = 0
    stop = time.monotonic() + seconds

    async def produce(q: Any) -> None:
        while time.monotonic() < stop:
            await q.enqueue_many(frames)

    async def consume(q: Any) -> None:
        nonlocal done
        while time.monotonic() < stop:
            await q.dequeue_many(BATCH)
            done += BATCH

    tasks = [asyncio.create_task(f(q)) for q in queues for f in (produce, consume)]
    await asyncio.sleep(seconds + 0.5)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for name in names:
        await srv.delete_queue(name)
    return done


def spread(cluster: ClusterProc, single: RedisProc, seconds: float, repeat: int) -> None:
    chosen = _names_on(cluster)
    plain = ["q0", "q1", "q2"]
    placements = [
        (f"cluster, names on {len({cluster.owner(f'{{{n}}}') for n in chosen})} nodes", chosen),
        (f"cluster, q0 q1 q2 on {len({cluster.owner(f'{{{n}}}') for n in plain})} nodes", plain),
    ]
    rows: dict[str, list[tuple[float, list[float]]]] = {}

    async def over_cluster(label: str, names: list[str]) -> None:
        async with cluster_server(cluster.url) as srv:
            ports = cluster.primaries()
            before = {p: _server_cpu(p, cluster.password) for p in ports}
            t = time.perf_counter()
            done = await _workload(srv, names, seconds)
            wall = time.perf_counter() - t
            cpu = [(_server_cpu(p, cluster.password) - before[p]) / done * 1000 for p in ports]
        rows.setdefault(label, []).append((done / wall, cpu))

    async def on_one() -> None:
        async with aqueue.redis.connect(single.url, wait_timeout=0.2) as srv:
            before = _server_cpu(single.port, single.password)
            t = time.perf_counter()
            done = await _workload(srv, plain, seconds)
            wall = time.perf_counter() - t
            cpu = [(_server_cpu(single.port, single.password) - before) / done * 1000]
            rows.setdefault("one server", []).append((done / wall, cpu))

    for _ in range(repeat):
        for label, names in placements:
            asyncio.run(over_cluster(label, names))
        asyncio.run(on_one())
    print(
        f"\nspread: 3 FIFO queues of {FRAME:,} B frames, 1 producer + 1 consumer task each, "
        f"{seconds:g} s, median of {repeat}"
    )
    print(f"{'where':30} {'el/s':>7} {'MB/s':>6}  server CPU s per 1000 el, by node; max/mean")
    for label, vals in rows.items():
        rate = statistics.median(v[0] for v in vals)
        per = [statistics.median(v[1][i] for v in vals) for i in range(len(vals[0][1]))]
        mean = sum(per) / len(per)
        cells = " ".join(f"{p:.4f}" for p in per)
        print(f"{label:30} {rate:7,.0f} {rate * FRAME / 1e6:6,.0f}  {cells}; {max(per) / mean:.2f}")


# -- failover ---------------------------------------------------------------------------------


def _kind(exc: BaseException) -> str:
    text = str(exc)
    for word in ("did not recover", "Connection reset", "Connection closed", "CLUSTERDOWN"):
        if word in text:
            return f"{type(exc).__name__} ({word})"
    return f"{type(exc).__name__} ({text[:60]})"


async def _failover_trial(cluster: ClusterProc, spin_first: bool) -> dict[str, Any]:
    with cluster.client(cluster.primaries()[0]) as c:
        c.function_load(SPIN_LIBRARY, replace=True)
    async with cluster_server(cluster.url) as srv:
        return await _failover_steps(cluster, srv, spin_first)


async def _failover_steps(cluster: ClusterProc, srv: Any, spin_first: bool) -> dict[str, Any]:
    tags = _tags_on(cluster)
    victim_port = cluster.primaries()[0]
    victim = tags[victim_port]
    transport = srv._conn.live()
    q = await srv.fifo_queue(_name_on(cluster, victim_port, "w"), 1_000_000, np.int64, ())
    empty = _name_on(cluster, victim_port, "e")
    out: dict[str, Any] = {"errors": {}, "acked": set()}
    t0 = time.monotonic()
    kill_at: list[float] = []
    stop = asyncio.Event()

    def note(who: str, exc: BaseException) -> None:
        out["errors"].setdefault(who, []).append(_kind(exc))

    async def caller(tag: str, who: str) -> None:
        while not stop.is_set():
            started_after_kill = bool(kill_at)
            try:
                await transport.call(Call("aq_version", f"aq:{{{tag}}}:meta", [], ro=True))
                if who == "victim calls" and started_after_kill and "first_ok" not in out:
                    out["first_ok"] = time.monotonic() - kill_at[0]
            except aqueue.redis.ServerError as exc:
                note(who, exc)
            await asyncio.sleep(0.005)

    async def writer(w: int) -> None:
        i = 0
        while not stop.is_set():
            value = w * 10_000_000 + i
            try:
                await q.enqueue(value)
                out["acked"].add(value)
            except aqueue.redis.ServerError as exc:
                note("victim writers", exc)
            i += 1

    async def waiter() -> None:
        wq = await srv.fifo_queue(empty, 10, np.int64, ())
        try:
            await wq.dequeue()
            out["waiter"] = "got an element"
        except aqueue.redis.ServerError as exc:
            note("victim waiter (dequeue on an empty queue)", exc)

    async def spin() -> None:
        try:
            await transport.call(Call("spin", f"aq:{{{victim}}}:spins", [3000]))
            out["spin"] = "returned"
        except aqueue.redis.ServerError as exc:
            note("FCALL in flight on the victim", exc)

    others = [tag for port, tag in tags.items() if port != victim_port]
    tasks = [asyncio.create_task(caller(victim, "victim calls")), asyncio.create_task(waiter())]
    tasks += [asyncio.create_task(caller(t, "other shards' calls")) for t in others]
    tasks += [asyncio.create_task(writer(w)) for w in range(4)]
    await asyncio.sleep(1.0)
    spinning = asyncio.create_task(spin() if spin_first else asyncio.sleep(0))
    if spin_first:
        await asyncio.sleep(0.3)
    cluster.kill(victim_port)  # (returns once the process is gone)
    kill_at.append(time.monotonic())
    new = await asyncio.to_thread(cluster.wait_promoted, victim_port)
    out["promoted"] = time.monotonic() - kill_at[0]
    await asyncio.sleep(1.0)
    stop.set()
    wq = await srv.fifo_queue(empty, 10, np.int64, ())
    await wq.enqueue(1)  # (the waiter, if still waiting, takes it)
    await asyncio.gather(*tasks, spinning)
    await q.aclose()
    held = set()
    while True:
        batch = await q.dequeue_up_to(10_000)
        held.update(int(v) for v in batch)
        if len(batch) < 10_000:
            break
    out["lost"] = len(out["acked"] - held)
    out["acked_n"] = len(out["acked"])
    with cluster.client(new) as c:
        out["spin runs on the promoted replica"] = int(c.get(f"aq:{{{victim}}}:spins") or 0)
    out["t0"] = t0
    return out


async def _default_client_trial(cluster: ClusterProc, retries: int) -> dict[str, Any]:
    """redis-py's cluster client with its defaults but ``retries``, on the same kill."""
    tags = _tags_on(cluster)
    victim_port = cluster.primaries()[0]
    victim = tags[victim_port]
    with cluster.client(victim_port) as c:
        c.function_load(SPIN_LIBRARY, replace=True)
    client = redis.asyncio.cluster.RedisCluster.from_url(
        cluster.url, cluster_error_retry_attempts=retries
    )
    await client.initialize()
    await client.function_load(LIBRARY_SOURCE, replace=True)
    out: dict[str, Any] = {"errors": []}

    async def spin() -> None:
        t = time.monotonic()
        try:
            await client.execute_command("FCALL", "spin", 1, f"aq:{{{victim}}}:spins", 3000)
            out["spin"] = f"returned after {time.monotonic() - t:.1f} s"
        except redis.RedisError as exc:
            out["spin"] = f"{_kind(exc)} after {time.monotonic() - t:.1f} s"

    async def calls() -> None:
        end = time.monotonic() + 8
        while time.monotonic() < end:
            t = time.monotonic()
            try:
                await client.execute_command("FCALL_RO", "aq_version", 1, f"aq:{{{victim}}}:m")
            except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
                out["errors"].append(f"{_kind(exc)} after {time.monotonic() - t:.2f} s")
            await asyncio.sleep(0.01)

    spinning = asyncio.create_task(spin())
    calling = asyncio.create_task(calls())
    await asyncio.sleep(0.3)
    cluster.kill(victim_port)
    new = await asyncio.to_thread(cluster.wait_promoted, victim_port)
    await asyncio.gather(spinning, calling)
    with cluster.client(new) as c:
        out["spin runs on the promoted replica"] = int(c.get(f"aq:{{{victim}}}:spins") or 0)
    await client.aclose()
    return out


def failover(tmp: Path, node_timeout_ms: int, trials: int) -> None:
    print(f"\nfailover: 3 primaries + 3 replicas, cluster-node-timeout {node_timeout_ms} ms")
    for trial in range(trials + 1):
        spin_first = trial == trials  # (the last: with an FCALL in flight, which stalls
        # the node for 0.3 s before the kill, so writes are not streaming then)
        cluster = start_cluster(tmp / f"fo{trial}", replicas=1, node_timeout_ms=node_timeout_ms)
        try:
            r = asyncio.run(_failover_trial(cluster, spin_first))
        finally:
            stop_cluster(cluster)
        spun = "; in-flight spin run again on the replica: " + str(
            r["spin runs on the promoted replica"]
        )
        print(
            f"trial {trial}: replica serving after {r['promoted']:.2f} s; the victim shard's "
            f"first call sent after the kill returned {r.get('first_ok', float('nan')):.2f} s "
            "after it; "
            f"acknowledged enqueues lost {r['lost']} of {r['acked_n']}"
            f"{spun if spin_first else ''}; waiter: {r.get('waiter', '-')}"
        )
        for who, kinds in sorted(r["errors"].items()):
            counts: dict[str, int] = {}
            for k in kinds:
                counts[k] = counts.get(k, 0) + 1
            print(f"    {who}: " + ", ".join(f"{v} x {k}" for k, v in counts.items()))
    for retries in (10, 200):  # (10: redis-py's default)
        cluster = start_cluster(
            tmp / f"fo-default{retries}", replicas=1, node_timeout_ms=node_timeout_ms
        )
        try:
            d = asyncio.run(_default_client_trial(cluster, retries))
        finally:
            stop_cluster(cluster)
        print(
            f"redis-py's cluster client, {retries} retries: in-flight spin {d['spin']}; run "
            f"again on the promoted replica: {d['spin runs on the promoted replica']}; calls "
            f"during the outage failed {len(d['errors'])} times: {d['errors'][:3]}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="routing,shapes,spread,failover")
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--node-timeout-ms", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    rows = args.rows.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        if {"routing", "shapes", "spread"} & set(rows):
            cluster = start_cluster(base / "cluster")
            single = start_redis(base)
            with single.client() as c:
                c.function_load(LIBRARY_SOURCE, replace=True)
            loader = ClusterSync(cluster.url)
            loader.start()  # (aqueue's library on every primary)
            loader.close()
            try:
                if "routing" in rows:
                    routing(cluster, single, args.calls, args.repeat)
                if "shapes" in rows:
                    shapes(cluster, single, args.calls // 10, args.repeat)
                if "spread" in rows:
                    spread(cluster, single, args.seconds, args.repeat)
            finally:
                stop_cluster(cluster)
                stop_redis(single)
        if "failover" in rows:
            failover(base, args.node_timeout_ms, args.trials)


if __name__ == "__main__":
    main()
