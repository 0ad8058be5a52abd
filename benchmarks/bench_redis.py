"""W5 on the Redis backend: 28,224-byte uint8 frames (84x84x4), 4 producer processes,
1 consumer doing dequeue_many(32); FIFO and RandomShuffle, beside the peers.

Rows (all in one run, same server, same frames):
- raw redis-py: pipelined LPUSH (32 per round trip) / ``LPOP key 32`` of the frames'
  bytes. No capacity, no exact-n, no lease, no format: the ceiling.
- floor: the leanest code doing only what the contract requires, with the payloads
  passing through Lua (aqueue's design before it stored them under their own keys):
  one FCALL per batch that checks the capacity and pushes; one that checks exact-n,
  moves the batch into a lease and returns it; one ack per batch; raw bytes, no
  header, no wait registry.
- floor, staged: the same contract over aqueue's storage: one MULTI (MSET of the
  payloads under fresh refs, an FCALL that checks the capacity, pushes the refs and
  deletes what does not fit); one round trip of an FCALL that checks exact-n, moves
  the refs into a lease and renames their payload keys, pipelined with MGET of them;
  one ack (deleting the payload keys) per batch; raw bytes, no header, no wait
  registry (a producer that finds the queue full sleeps 0.5 ms and retries).
- aqueue.redis FIFO and RandomShuffle (min_after_dequeue 0): the real thing.
- aqueue.redis FIFO into a pipeline: the same FIFO, read by
  ``Pipeline.from_queue(q).batch(32)`` instead of ``dequeue_many(32)``: the source
  takes what the queue holds in bursts (``dequeue_burst``, one take per burst), where
  before it took one element per server call.
- Ray: ``ray.util.queue.Queue(maxsize=2000)`` (an actor), 4 producer tasks each
  putting batches of 32 with ``put_nowait_batch`` (0.5 ms sleep when full), the driver
  taking ``get_nowait_batch(32)`` (0.5 ms sleep when short) and stacking each batch;
  run with the interpreter that imports ray (``--ray-python``, ``--peer-python`` or
  ``$AQUEUE_PEER_PYTHON``), skipped otherwise. Only wall time: Ray's own processes are
  not counted in the CPU columns.
- Reverb: a ``reverb.Table.queue("q", 2000)`` server in the consumer's process, 4
  producer processes writing one item per frame through a trajectory writer flushed
  every 32, the consumer taking ``client.sample("q", num_samples=32)`` and stacking each
  batch; run with the interpreter that imports reverb (``--reverb-python``; Reverb
  0.14 needs TensorFlow 2.15, so usually an environment of its own), skipped
  otherwise. Wall time only.

Each row runs 4 producer processes and 1 consumer process, all started and connected
before the clock starts. Besides elements/s it reports the CPU seconds per 1,000
elements of the server (INFO cpu), of the producers and of the consumer (their own
rusage while the clock runs): on this 2-core box they share the cores, so CPU, not
the network, bounds every row.

Usage: python benchmarks/bench_redis.py [--url redis://...] [--frames N] [--repeat R]
       [--rows raw,floor,...] [--baseline TREE] [--json PATH] [--peer-python PY]
       [--ray-python PY] [--reverb-python PY]
       python benchmarks/bench_redis.py --traj [--traj-steps N] [--traj-loops L] [--repeat R]
``--traj`` runs T-R instead (``_redis_traj_rows.py``): 4-frame stacks sampled with
``update_priorities`` from a Redis trajectory table (frames stored once) against the
Redis replay table storing the stacked frames.
Without --url it starts a private redis-server (from PATH or $AQUEUE_REDIS_SERVER).
``--repeat`` runs R rounds, rows interleaved, and reports each row's median.
``--baseline TREE`` also runs the aqueue rows with the aqueue package of another source
tree (``git worktree add /tmp/before <rev>``), interleaved with the current one, for a
before/after comparison in one run. ``--json PATH`` also writes each row's median
elements/s (of the current tree) to PATH (``compare_revisions.py --suites redis``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, NamedTuple

import numpy as np
from _peers import add_peer_arguments, find_python

SHAPE = (84, 84, 4)
FRAME = int(np.prod(SHAPE))
BATCH = 32
PRODUCERS = 4
CAPACITY = 2000

FLOOR_LUA = """#!lua name=aqfloor
redis.register_function('f_put', function(keys, args)
  local cap = tonumber(args[1])
  local free = cap - redis.call('LLEN', keys[1])
  local k = math.min(free, #args - 1)
  if k <= 0 then return 0 end
  redis.call('RPUSH', keys[1], unpack(args, 2, k + 1))
  return k
end)
redis.register_function('f_take', function(keys, args)
  local n = tonumber(args[1])
  if redis.call('LLEN', keys[1]) < n then return {} end
  local out = {}
  for i = 1, n do out[i] = redis.call('LMOVE', keys[1], keys[2], 'LEFT', 'RIGHT') end
  return out
end)
redis.register_function('f_ack', function(keys, args) return redis.call('DEL', keys[1]) end)
-- staged: KEYS[1] = the list of refs; payload keys are KEYS[1]..':e:'..ref
redis.register_function('s_put', function(keys, args)
  local free = tonumber(args[1]) - redis.call('LLEN', keys[1])
  local k = math.max(0, math.min(free, #args - 1))
  if k > 0 then redis.call('RPUSH', keys[1], unpack(args, 2, k + 1)) end
  for i = k + 2, #args do redis.call('DEL', keys[1] .. ':e:' .. args[i]) end
  return k
end)
redis.register_function('s_take', function(keys, args)
  local n, L = tonumber(args[1]), args[2]
  if redis.call('LLEN', keys[1]) < n then return 0 end
  local refs = redis.call('LRANGE', keys[1], 0, n - 1)
  redis.call('LTRIM', keys[1], n, -1)
  for j, ref in ipairs(refs) do
    redis.call('RENAME', keys[1] .. ':e:' .. ref, keys[1] .. ':e:' .. L .. '.' .. j)
  end
  redis.call('SET', keys[1] .. ':lease:' .. L, n)
  return n
end)
redis.register_function('s_ack', function(keys, args)
  local L = args[1]
  local n = tonumber(redis.call('GET', keys[1] .. ':lease:' .. L))
  local ks = {keys[1] .. ':lease:' .. L}
  for j = 1, n do ks[j + 1] = keys[1] .. ':e:' .. L .. '.' .. j end
  return redis.call('DEL', unpack(ks))
end)
"""


def frames(pid: int, count: int) -> np.ndarray[Any, Any]:
    """Distinct frames: producer id and counter in the first pixels."""
    out = np.random.default_rng(pid).integers(0, 255, (count, *SHAPE), dtype=np.uint8)
    out[:, 0, 0, 0] = pid
    out[:, 0, 0, 1:3] = np.stack([np.arange(count) // 256, np.arange(count) % 256], 1)
    return out


# -- producers and consumer (separate processes) ---------------------------------------------


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _use_tree(tree: str | None) -> None:
    """Import aqueue from ``tree`` (a checkout of another revision) instead."""
    if tree:
        sys.path.insert(0, tree)


def produce(
    kind: str, tree: str | None, url: str, name: str, pid: int, count: int, go: Any, out: Any
) -> None:
    """Say ready (connected, frames made), enqueue ``count`` frames once ``go`` is set;
    report the CPU seconds spent."""
    _use_tree(tree)
    data = frames(pid, count)
    if kind in ("raw", "floor", "staged"):
        import redis

        r = redis.Redis.from_url(url)
        r.ping()
        out.put(("ready", pid))
        go.wait()
        c0 = _cpu()
        if kind == "staged":
            i = 0
            while i < count:
                chunk = [f.tobytes() for f in data[i : i + BATCH]]
                refs = [f"{pid}.{i}.{j}.{time.monotonic_ns()}" for j in range(len(chunk))]
                pipe = r.pipeline(transaction=True)
                pipe.mset({f"{name}:e:{ref}": b for ref, b in zip(refs, chunk)})
                pipe.fcall("s_put", 1, name, CAPACITY, *refs)
                k = int(pipe.execute()[1])
                i += k
                if k < len(chunk):
                    time.sleep(0.0005)
        elif kind == "raw":
            for i in range(0, count, BATCH):
                pipe = r.pipeline(transaction=False)
                for f in data[i : i + BATCH]:
                    pipe.rpush(name, f.tobytes())
                pipe.execute()
        else:
            i = 0
            while i < count:
                chunk = [f.tobytes() for f in data[i : i + BATCH]]
                k = r.fcall("f_put", 1, name, CAPACITY, *chunk)
                i += int(k)
                if not k:
                    time.sleep(0.0005)
        out.put(("producer", _cpu() - c0))
        return

    async def main() -> None:
        import aqueue.redis

        async with aqueue.redis.connect(url) as srv:
            q = await _open(srv, kind, name)
            out.put(("ready", pid))
            go.wait()
            c0 = _cpu()
            for i in range(0, count, BATCH):
                await q.enqueue_many(data[i : i + BATCH])
            out.put(("producer", _cpu() - c0))

    asyncio.run(main())


async def _open(srv: Any, kind: str, name: str) -> Any:
    if kind in ("fifo", "pipeline"):
        return await srv.fifo_queue(name, CAPACITY, np.uint8, SHAPE)
    return await srv.random_shuffle_queue(name, CAPACITY, 0, np.uint8, SHAPE, seed=0)


def consume(
    kind: str, tree: str | None, url: str, name: str, total: int, ready: Any, go: Any, out: Any
) -> None:
    """Take ``total`` frames in batches of BATCH once ``go`` is set; report the wall
    and CPU seconds."""
    _use_tree(tree)
    if kind in ("raw", "floor", "staged"):
        ready.set()
        go.wait()
        t0, c0 = time.perf_counter(), _cpu()
        consumer = {"raw": consume_raw, "floor": consume_floor, "staged": consume_staged}
        consumer[kind](url, name, total)
        out.put(("consumer", time.perf_counter() - t0, _cpu() - c0))
        return

    async def main() -> None:
        import aqueue.redis

        async with aqueue.redis.connect(url) as srv:
            q = await _open(srv, kind, name)
            ready.set()
            go.wait()
            t0, c0 = time.perf_counter(), _cpu()
            got = 0
            if kind == "pipeline":
                async with aqueue.Pipeline.from_queue(q).batch(BATCH).open() as batches:
                    async for batch in batches:
                        got += len(batch)
                        if got >= total:
                            break
            while got < total:
                got += len(await q.dequeue_many(BATCH))
            out.put(("consumer", time.perf_counter() - t0, _cpu() - c0))
            await srv.delete_queue(name)

    asyncio.run(main())


def consume_raw(url: str, name: str, total: int) -> None:
    import redis

    r = redis.Redis.from_url(url)
    got = 0
    while got < total:
        batch = r.lpop(name, BATCH)
        if not batch:
            time.sleep(0.0002)
            continue
        np.frombuffer(b"".join(batch), np.uint8).reshape(len(batch), *SHAPE)
        got += len(batch)


def consume_floor(url: str, name: str, total: int) -> None:
    import redis

    r = redis.Redis.from_url(url)
    got = 0
    i = 0
    while got < total:
        lease = f"{name}:lease:{i}"
        batch = r.fcall("f_take", 2, name, lease, BATCH)
        if not batch:
            time.sleep(0.0002)
            continue
        r.fcall("f_ack", 1, lease)
        i += 1
        np.frombuffer(b"".join(batch), np.uint8).reshape(len(batch), *SHAPE)
        got += len(batch)


def consume_staged(url: str, name: str, total: int) -> None:
    import redis

    r = redis.Redis.from_url(url)
    got = 0
    i = 0
    while got < total:
        lease = f"c{i}"
        pipe = r.pipeline(transaction=False)
        pipe.fcall("s_take", 1, name, BATCH, lease)
        pipe.mget([f"{name}:e:{lease}.{j}" for j in range(1, BATCH + 1)])
        k, batch = pipe.execute()
        if not k:
            time.sleep(0.0002)
            continue
        r.fcall("s_ack", 1, name, lease)
        i += 1
        np.frombuffer(b"".join(batch), np.uint8).reshape(len(batch), *SHAPE)
        got += len(batch)


class Row(NamedTuple):
    """One run of one row: wall seconds, and CPU seconds of each party meanwhile."""

    seconds: float
    server_cpu: float
    producers_cpu: float
    consumer_cpu: float


def server_cpu(url: str) -> float:
    """CPU seconds the server has used so far (INFO cpu)."""
    import redis

    info = redis.Redis.from_url(url).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run_row(kind: str, tree: str | None, url: str, per_producer: int) -> Row:
    """One run: PRODUCERS producer processes and one consumer process, started and
    connected before the clock starts."""
    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    name = f"bench-{kind}-{os.getpid()}-{time.monotonic_ns()}"
    total = per_producer * PRODUCERS
    consumer = ctx.Process(target=consume, args=(kind, tree, url, name, total, ready, go, out))
    consumer.start()
    ready.wait(60)  # the consumer creates the queue
    procs = [
        ctx.Process(target=produce, args=(kind, tree, url, name, p, per_producer, go, out))
        for p in range(PRODUCERS)
    ]
    for p in procs:
        p.start()
    for _ in range(PRODUCERS):  # every producer imported, connected, its frames made
        if out.get(timeout=300)[0] != "ready":
            raise RuntimeError("a producer reported before it was ready")
    time.sleep(0.2)
    srv0 = server_cpu(url)
    go.set()
    seconds = cons_cpu = prod_cpu = 0.0
    srv = 0.0
    for _ in range(PRODUCERS + 1):
        msg = out.get(timeout=300)
        if msg[0] == "consumer":
            seconds, cons_cpu = msg[1], msg[2]
            srv = server_cpu(url) - srv0
        else:
            prod_cpu += msg[1]
    for p in [*procs, consumer]:
        p.join(60)
    return Row(seconds, srv, prod_cpu, cons_cpu)


def ray_worker(per_producer: int) -> None:
    """The Ray row, in an interpreter that imports ray: prints its wall seconds (JSON)."""
    import ray
    from ray.util.queue import Empty, Full, Queue

    ray.init(
        num_cpus=PRODUCERS + 1,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    q, ready, go = Queue(maxsize=CAPACITY), Queue(), Queue()

    @ray.remote
    def producer(q: Any, ready: Any, go: Any, pid: int, count: int) -> int:
        data = frames(pid, count)
        ready.put(pid)
        go.get()
        for i in range(0, count, BATCH):
            chunk = list(data[i : i + BATCH])
            while True:
                try:
                    q.put_nowait_batch(chunk)
                    break
                except Full:
                    time.sleep(0.0005)
        return count

    tasks = [producer.remote(q, ready, go, p, per_producer) for p in range(PRODUCERS)]
    for _ in range(PRODUCERS):
        ready.get(timeout=300)  # every producer started, its frames made
    total = per_producer * PRODUCERS
    go.put_nowait_batch([True] * PRODUCERS)
    t0 = time.perf_counter()
    got = 0
    while got < total:
        try:
            batch = np.stack(q.get_nowait_batch(BATCH))
        except Empty:
            time.sleep(0.0005)
            continue
        if batch.shape != (BATCH, *SHAPE):
            raise AssertionError(f"bad batch {batch.shape}")
        got += len(batch)
    seconds = time.perf_counter() - t0
    if sum(ray.get(tasks)) != total:
        raise AssertionError("producers did not put every frame")
    ray.shutdown()
    print(json.dumps({"seconds": seconds, "ray": ray.__version__}))


def _reverb_produce(addr: str, pid: int, count: int, ready: Any, go: Any) -> None:
    """A Reverb producer process: one item per frame, flushed every BATCH frames."""
    import reverb

    client = reverb.Client(addr)
    data = frames(pid, count)
    ready.put(pid)
    go.wait()
    with client.trajectory_writer(num_keep_alive_refs=1) as w:
        for i in range(count):
            w.append({"f": data[i]})
            w.create_item("q", 1.0, {"f": w.history["f"][-1]})
            if (i + 1) % BATCH == 0:
                w.flush()
        w.flush()


def reverb_worker(per_producer: int) -> None:
    """The Reverb row, in an interpreter that imports reverb: prints its wall seconds."""
    import reverb

    server = reverb.Server(tables=[reverb.Table.queue("q", CAPACITY)], port=None)
    addr = f"localhost:{server.port}"
    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_reverb_produce, args=(addr, p, per_producer, ready, go))
        for p in range(PRODUCERS)
    ]
    for p in procs:
        p.start()
    for _ in range(PRODUCERS):
        ready.get(timeout=300)  # every producer connected, its frames made
    client = reverb.Client(addr)
    total = per_producer * PRODUCERS
    go.set()
    t0 = time.perf_counter()
    got = 0
    while got < total:
        samples = client.sample("q", num_samples=BATCH, emit_timesteps=False)
        batch = np.stack([s.data[0] for s in samples])
        if batch.shape != (BATCH, *SHAPE):
            raise AssertionError(f"bad batch {batch.shape}")
        got += len(batch)
    seconds = time.perf_counter() - t0
    for p in procs:
        p.join(60)
    server.stop()
    print(json.dumps({"seconds": seconds}))


def run_peer_row(peer: str, python: str, per_producer: int) -> Row | None:
    """One run of ``peer`` ("ray", "reverb") in a subprocess of ``python``; None (with a
    message) if it failed."""
    done = subprocess.run(
        [python, os.path.abspath(__file__), "--peer-worker", peer, "--frames", str(per_producer)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        print(f"({peer} row failed: {done.stderr.strip()[-500:]})", file=sys.stderr)
        return None
    seconds = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
    nan = float("nan")
    return Row(seconds, nan, nan, nan)


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    binary = os.environ.get("AQUEUE_REDIS_SERVER") or shutil.which("redis-server")
    if binary is None:
        raise SystemExit("no redis-server on PATH: pass --url or set AQUEUE_REDIS_SERVER")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory",
            "2gb",
            "--maxmemory-policy",
            "noeviction",
            "--dir",
            tempfile.mkdtemp(),
        ],
        stdout=subprocess.DEVNULL,
    )
    import redis

    for _ in range(200):
        try:
            redis.Redis(port=port).ping()
            break
        except redis.ConnectionError:
            time.sleep(0.01)
    return proc, f"redis://127.0.0.1:{port}/0"


ROWS = {
    "raw": "raw redis-py LPUSH/LPOP (ceiling)",
    "floor": "floor: 1 FCALL put, 1 take+lease, 1 ack",
    "staged": "floor, staged: MULTI put, take+MGET, ack",
    "fifo": "aqueue.redis FIFO",
    "shuffle": "aqueue.redis RandomShuffle",
    "pipeline": "aqueue.redis FIFO -> Pipeline(q).batch(32)",
    "ray": "Ray util.queue.Queue (wall time only)",
    "reverb": "Reverb Table.queue (wall time only)",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="an existing server (default: start a private one)")
    ap.add_argument("--frames", type=int, default=1600, help="frames per producer")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds (rows interleaved); the median of each row is reported",
    )
    ap.add_argument(
        "--rows", default=",".join(ROWS), help="comma-separated subset of " + ", ".join(ROWS)
    )
    ap.add_argument(
        "--baseline",
        metavar="TREE",
        help="also run the aqueue rows with the package of this source tree "
        "(e.g. a git worktree of another revision), interleaved",
    )
    ap.add_argument("--json", metavar="PATH", help="write each row's median elements/s here")
    ap.add_argument(
        "--traj",
        action="store_true",
        help="run T-R instead (_redis_traj_rows.py): 4-frame stacks from a Redis trajectory "
        "table against the Redis replay table storing stacked frames",
    )
    ap.add_argument("--traj-steps", type=int, default=8_000, help="T-R: frames in all")
    ap.add_argument("--traj-loops", type=int, default=50, help="T-R: loops per timed block")
    add_peer_arguments(ap, ["ray", "reverb"])
    ap.add_argument("--peer-worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer_worker == "ray":
        ray_worker(args.frames)
        return
    if args.peer_worker == "reverb":
        reverb_worker(args.frames)
        return
    if args.traj:
        traj(args)
        return
    kinds = [k.strip() for k in args.rows.split(",") if k.strip()]
    if unknown := set(kinds) - set(ROWS):
        raise SystemExit(f"unknown rows: {sorted(unknown)}")
    peer_python: dict[str, str] = {}
    for peer in ("ray", "reverb"):
        if peer in kinds:
            python = find_python(peer, args)
            if python is None:
                kinds.remove(peer)
            else:
                peer_python[peer] = python
    runs: list[tuple[str, str | None]] = []
    for kind in kinds:
        if args.baseline and kind in ("fifo", "shuffle", "pipeline"):
            runs.append((kind, os.path.abspath(args.baseline)))
        runs.append((kind, None))
    proc = None
    url = args.url
    if url is None:
        proc, url = start_server()
    try:
        import redis

        redis.Redis.from_url(url).function_load(FLOOR_LUA, replace=True)
        results: dict[tuple[str, str | None], list[Row]] = {r: [] for r in runs}
        for _ in range(args.repeat):
            for kind, tree in runs:
                if kind in peer_python:
                    row = run_peer_row(kind, peer_python[kind], args.frames)
                    if row is not None:
                        results[(kind, tree)].append(row)
                else:
                    results[(kind, tree)].append(run_row(kind, tree, url, args.frames))
        results = {key: rs for key, rs in results.items() if rs}
        total = args.frames * PRODUCERS
        print(
            f"\nW5: {total} frames of {FRAME} B, {PRODUCERS} producer processes, "
            f"1 consumer dequeue_many({BATCH}); median of {args.repeat} "
            "(CPU: seconds per 1,000 elements)"
        )
        print(
            f"| {'row':46} | {'elements/s':>10} | {'MB/s':>6} | "
            f"{'server CPU':>10} | {'producers':>9} | {'consumer':>8} |"
        )
        print(f"|{'-' * 48}|{'-' * 12}|{'-' * 8}|{'-' * 12}|{'-' * 11}|{'-' * 10}|")
        med: dict[tuple[str, str | None], float] = {}
        for (kind, tree), rs in results.items():
            sec = statistics.median(r.seconds for r in rs)
            med[(kind, tree)] = sec
            k = 1000 / total

            def per(field: str, rs: list[Row] = rs, k: float = k) -> float:
                return statistics.median(getattr(r, field) for r in rs) * k

            label = ROWS[kind] + (" (baseline)" if tree else "")
            eps = total / sec
            if kind in ("ray", "reverb"):  # the peers' own processes are not measured
                cpu = f"{'-':>10} | {'-':>9} | {'-':>8}"
            else:
                cpu = (
                    f"{per('server_cpu'):10.3f} | {per('producers_cpu'):9.3f} | "
                    f"{per('consumer_cpu'):8.3f}"
                )
            print(f"| {label:46} | {eps:10,.0f} | {eps * FRAME / 1e6:6.1f} | {cpu} |")
        print()
        if args.json:
            rates = {kind: total / sec for (kind, tree), sec in med.items() if tree is None}
            with open(args.json, "w") as f:
                json.dump({"frames": total, "elements_per_s": rates}, f)
        for tree in ([os.path.abspath(args.baseline)] if args.baseline else []) + [None]:
            tag = " (baseline)" if tree else ""
            parts = []
            if ("fifo", tree) in med and ("raw", None) in med:
                parts.append(
                    f"FIFO{tag} vs raw: {med[('raw', None)] / med[('fifo', tree)]:.2f}x "
                    "(target >= 0.6x)"
                )
            for floor in ("floor", "staged"):
                if ("fifo", tree) in med and (floor, None) in med:
                    parts.append(
                        f"vs {ROWS[floor].split(':')[0]}: "
                        f"{med[(floor, None)] / med[('fifo', tree)]:.2f}x"
                    )
            for peer in ("ray", "reverb"):
                if ("fifo", tree) in med and (peer, None) in med:
                    ratio = med[(peer, None)] / med[("fifo", tree)]
                    parts.append(f"FIFO{tag} vs {peer}: {ratio:.2f}x")
            if ("fifo", tree) in med and ("pipeline", tree) in med:
                parts.append(
                    f"Pipeline{tag} vs FIFO{tag} dequeue_many: "
                    f"{med[('fifo', tree)] / med[('pipeline', tree)]:.2f}x"
                )
            if ("fifo", tree) in med and ("shuffle", tree) in med:
                parts.append(
                    f"RandomShuffle{tag} vs FIFO{tag}: "
                    f"{med[('fifo', tree)] / med[('shuffle', tree)]:.2f}x "
                    "(target >= 0.8x)"
                )
            if parts:
                print("; ".join(parts))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(5)


def traj(args: argparse.Namespace) -> None:
    """T-R (``_redis_traj_rows.py``) on ``--url`` or a private server."""
    import _redis_traj_rows

    proc, url = (None, args.url) if args.url else start_server()
    try:
        asyncio.run(_redis_traj_rows.run(url, args.traj_steps, args.traj_loops, args.repeat))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(5)


if __name__ == "__main__":
    main()
