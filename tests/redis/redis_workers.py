"""Entry points of the worker processes that test_redis_processes spawns.

Each runs its own event loop and connection, as a separate host would.
"""

from __future__ import annotations

import asyncio
import fcntl
import socket
import termios
import time
from typing import Any

import numpy as np

import aqueue
import aqueue.redis
from aqueue.redis._core._transport import Call


def _spec(kind: str) -> tuple[Any, ...]:
    return (kind,)


async def _open(srv: Any, kind: str, name: str, cap: int) -> Any:
    if kind == "fifo":
        return await srv.fifo_queue(name, cap, np.int64, (2,))
    return await srv.random_shuffle_queue(name, cap, 3, np.int64, (2,), seed=None)


def producer(url: str, kind: str, name: str, first: int, count: int, register: bool) -> None:
    """Enqueue values first..first+count-1 in batches of 1..5 (as [v, v] rows)."""

    async def main() -> None:
        async with aqueue.redis.connect(url, lease_time=1.0, wait_timeout=0.05) as srv:
            q = await _open(srv, kind, name, 16)
            pid = await q.register_producer() if register else None
            v = first
            rng = np.random.default_rng(first)
            while v < first + count:
                k = min(int(rng.integers(1, 6)), first + count - v)
                vals = np.arange(v, v + k)
                await q.enqueue_many(np.stack([vals, vals], axis=1))
                v += k
            if pid is not None:
                await q.producer_done(pid)

    asyncio.run(main())


def consumer(url: str, kind: str, name: str, out: Any) -> None:
    """Dequeue batches until OutOfRange; send the values to the parent."""

    async def main() -> None:
        got: list[int] = []
        async with aqueue.redis.connect(url, lease_time=1.0, wait_timeout=0.05) as srv:
            q = await _open(srv, kind, name, 16)
            async for batch in q.batches(4, allow_smaller_final_batch=True):
                got.extend(int(v) for v in batch[:, 0])
        out.put(got)

    asyncio.run(main())


def lease_holder(url: str, name: str, ready: Any) -> None:
    """Take a batch with a raw take (no ack) and then hang, holding the lease."""

    async def main() -> None:
        async with aqueue.redis.connect(url, lease_time=1.0, wait_timeout=0.05) as srv:
            q = await srv.fifo_queue(name, 16, np.int64, (2,))
            h = q._h  # the lease protocol's first step only
            args = [h.gen, "crash", "crash", "many", 3, h.lease_ms, h.reg_ms, "0"]
            await q._t.call(Call("aq_take", h.key, args))
            ready.put("taken")
            await asyncio.sleep(3600)

    asyncio.run(main())


def registered_idler(url: str, name: str, ready: Any) -> None:
    """Register a producer, then idle (the heartbeat keeps it alive) until killed."""

    async def main() -> None:
        async with aqueue.redis.connect(url, lease_time=1.0, wait_timeout=0.05) as srv:
            q = await srv.fifo_queue(name, 16, np.int64, (2,))
            await q.register_producer()
            ready.put("registered")
            await asyncio.sleep(3600)

    asyncio.run(main())


def registered_producer(url: str, name: str, start: float) -> None:
    """Register, enqueue a few rows over ~1.5 s (longer than the lease: the heartbeat
    must keep the registration), then end cleanly."""

    async def main() -> None:
        async with aqueue.redis.connect(url, lease_time=1.0, wait_timeout=0.05) as srv:
            q = await srv.fifo_queue(name, 16, np.int64, (2,))
            pid = await q.register_producer()
            for i in range(3):
                await asyncio.sleep(0.5)
                await q.enqueue([int(start) + i, int(start) + i])
            await q.producer_done(pid)

    time.sleep(0)
    asyncio.run(main())


def runner_actor(url: str, name: str, actor: int, count: int, guard: Any) -> None:
    """An actor host: a Coordinator runs a QueueRunner feeding the shared queue from one
    game thread (a sync iterator) and one async producer; each sends distinct values
    ``actor * 1_000_000 + i``. ``guard`` (a multiprocessing Event) is set once the
    runner's producers have registered with the queue."""
    import threading

    async def main() -> None:
        async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as srv:
            q = await srv.fifo_queue(name, 8, np.int64, ())
            base = actor * 1_000_000
            lock = threading.Lock()
            state = {"next": 0}

            def game() -> int:  # a blocking producer, run on its own thread
                with lock:
                    i = state["next"]
                    if i >= count:
                        raise StopIteration
                    state["next"] = i + 1
                time.sleep(0.0005)
                return base + i

            async def agent() -> int:
                with lock:
                    i = state["next"]
                    if i >= count:
                        raise StopAsyncIteration
                    state["next"] = i + 1
                return base + i

            async with aqueue.Coordinator() as coord:
                runner = aqueue.QueueRunner(q, [game, agent], name=f"actor{actor}")
                coord.start(runner)
                while not all(s != "idle" for _, s in runner.producer_states()):  # noqa: ASYNC110
                    await asyncio.sleep(0.001)  # (registered once they run)
                guard.set()
                await runner.join()  # leaving the block would stop the producers

    asyncio.run(main())


def big_producer(url: str, name: str) -> None:
    """Enqueue batches of 32 elements of 64 KB (2 MB a call) until killed."""

    async def main() -> None:
        async with aqueue.redis.connect(url, lease_time=1.0, wait_timeout=0.05) as srv:
            q = await srv.fifo_queue(name, 64, np.uint8, (64 << 10,))
            batch = np.ones((32, 64 << 10), np.uint8)
            while True:
                await q.enqueue_many(batch)

    asyncio.run(main())


def raw_producer(port: int, hello: bytes, head: bytes, tail: bytes, *events: Any) -> None:
    """A producer's connection, in bytes: send ``hello`` (AUTH, CLIENT SETNAME) and read
    its two replies, send ``head``, wait for the event ``go``, send ``tail``, set
    ``tail_sent`` once the server's side acknowledged every byte, then wait for the
    reply until killed (events: go, tail_sent). Linux only (TIOCOUTQ)."""
    go, tail_sent = events
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(hello)
    got = b""
    while got.count(b"\r\n") < 2:
        got += s.recv(1024)
    s.sendall(head)
    go.wait(10)
    s.sendall(tail)
    # Set once the server's kernel has it all (acknowledged): what a killed process
    # still had to send could be lost, not run late.
    while fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0" * 4) != b"\0" * 4:
        time.sleep(0.001)
    tail_sent.set()
    time.sleep(60)


# -- replay tables ----------------------------------------------------------------------


def replay_settings() -> dict[str, Any]:
    """The settings every process opens the shared table of test_redis_replay_processes
    with: float32[4] items, uniform draws, samples_per_insert 2 in the band [0, 64]."""
    return {
        "max_size": 10_000,
        "dtypes": np.float32,
        "shapes": (4,),
        "rate_limiter": aqueue.SampleToInsertRatio(2.0, 16, 32.0),
    }


def replay_actor(url: str, name: str, actor: int, count: int, progressive: bool) -> None:
    """Insert items actor*1000 .. actor*1000+count-1 (rows [v, v, v, v]) in batches of 8,
    as a registered producer: ``insert_many`` (all or nothing) or a sink's
    ``enqueue_many`` (progressive)."""

    async def main() -> None:
        async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as srv:
            s = replay_settings()
            table = await srv.replay_table(
                name, s["max_size"], s["dtypes"], s["shapes"], rate_limiter=s["rate_limiter"]
            )
            pid = await table.register_producer()
            first = actor * 1000
            for v in range(first, first + count, 8):
                batch = np.repeat(np.arange(v, v + 8, dtype=np.float32)[:, None], 4, axis=1)
                if progressive:
                    await table.enqueue_many(batch)
                else:
                    await table.insert_many(batch)
            await table.producer_done(pid)

    asyncio.run(main())


def replay_churner(url: str, name: str, ready: Any) -> None:
    """Insert batches of 1 KiB+ items (payloads under their own keys), sample them and
    update priorities, as fast as it can, until killed."""

    async def main() -> None:
        async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as srv:
            table = await srv.replay_table(
                name, 64, np.float32, (300,), sampler=aqueue.Prioritized(0.7)
            )
            ready.put("started")
            rng = np.random.default_rng(0)
            while True:
                await table.insert_many(np.ones((16, 300), np.float32))
                s = await table.sample(32)
                await table.update_priorities(s.keys, rng.random(32) + 0.1)

    asyncio.run(main())


# -- trajectory tables ------------------------------------------------------------------


def trajectory_settings() -> dict[str, Any]:
    """The settings every process opens the shared trajectory table of
    test_redis_trajectory_processes with: steps of a 4x4 uint8 frame, an int64 tag and a
    float32 reward; 4-step windows, one every 2 steps; 2 draws per window in [0, 32]."""
    return {
        "max_steps": 10_000,
        "dtypes": (np.uint8, np.int64, np.float32),
        "shapes": ((4, 4), (), ()),
        "names": ("frame", "tag", "reward"),
        "length": 4,
        "stride": 2,
        "rate_limiter": aqueue.SampleToInsertRatio(2.0, 8, 16.0),
    }


def trajectory_step(tag: int) -> dict[str, Any]:
    """The step an actor writes at ``tag`` (``traj_util.tag(actor, episode, pos)``)."""
    return {
        "frame": ((tag + np.arange(16)) % 251).astype(np.uint8).reshape(4, 4),
        "tag": np.int64(tag),
        "reward": np.float32((tag % 97) / 7),
    }


def trajectory_steps(tags: list[int]) -> dict[str, Any]:
    """``trajectory_step`` of each tag, stacked (an ``append_many`` batch)."""
    steps = [trajectory_step(t) for t in tags]
    return {k: np.stack([s[k] for s in steps]) for k in steps[0]}


def _episodes(actor: int, episodes: int) -> list[list[list[int]]]:
    """Each episode of ``actor`` as its chunks of tags: one ``append`` per chunk of one,
    one ``append_many`` per longer chunk (random lengths, seeded by the actor)."""
    from traj_util import tag

    rng = np.random.default_rng(actor)
    out = []
    for ep in range(episodes):
        length, pos, chunks = int(rng.integers(1, 30)), 0, []
        while pos < length:
            k = min(int(rng.integers(1, 6)), length - pos)
            chunks.append([tag(actor, ep, p) for p in range(pos, pos + k)])
            pos += k
        out.append(chunks)
    return out


def trajectory_actor(url: str, name: str, actor: int, episodes: int, threaded: bool) -> None:
    """Write ``episodes`` episodes of tagged steps with one writer, as a registered
    producer: through the writer's thread view on a thread of its own (``threaded``)
    or awaited; each episode ended by ``end_episode``, the writer closed at the end."""

    def write_blocking(w: Any) -> None:
        for chunks in _episodes(actor, episodes):
            for chunk in chunks:
                if len(chunk) == 1:
                    w.append(trajectory_step(chunk[0]), timeout=60)
                else:
                    w.append_many(trajectory_steps(chunk), timeout=60)
            w.end_episode()
        w.close()

    async def main() -> None:
        async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as srv:
            table = await srv.trajectory_table(name, **trajectory_settings())
            pid = await table.register_producer()
            w = table.writer()
            if threaded:
                await asyncio.to_thread(write_blocking, w.blocking())
            else:
                for chunks in _episodes(actor, episodes):
                    for chunk in chunks:
                        if len(chunk) == 1:
                            await w.append(trajectory_step(chunk[0]))
                        else:
                            await w.append_many(trajectory_steps(chunk))
                    await w.end_episode()
                await w.aclose()
            await table.producer_done(pid)

    asyncio.run(main())


def sharded_settings(ratio: bool) -> dict[str, Any]:
    """The settings every process opens the sharded table of
    test_redis_sharded_processes with: float32[4] items, prioritized draws (alpha 0.8),
    3 shards; with ``ratio`` a SampleToInsertRatio(2, 6, 30) limiter (per shard:
    min size 2, buffer 10), else MinSize(1)."""
    limiter = aqueue.SampleToInsertRatio(2.0, 6, 30.0) if ratio else aqueue.MinSize(1)
    return {
        "max_size": 10_000,
        "dtypes": np.float32,
        "shapes": (4,),
        "sampler": aqueue.Prioritized(0.8),
        "rate_limiter": limiter,
        "shards": 3,
    }


def sharded_actor(url: str, cluster: bool, name: str, actor: int, count: int, ratio: bool) -> None:
    """Insert items actor*1000 .. actor*1000+count-1 (rows [v, v, v, v], priority
    1 + v % 5) in batches of 4 into a 3-shard table, as a registered producer."""

    async def main() -> None:
        async with aqueue.redis.connect(
            url, cluster=cluster, lease_time=2.0, wait_timeout=0.05
        ) as srv:
            s = sharded_settings(ratio)
            table = await srv.replay_table(name, s.pop("max_size"), s.pop("dtypes"), **s)
            pid = await table.register_producer()
            first = actor * 1000
            for v in range(first, first + count, 4):
                vs = np.arange(v, v + 4)
                batch = np.repeat(vs.astype(np.float32)[:, None], 4, axis=1)
                await table.insert_many(batch, priorities=1.0 + vs % 5)
            await table.producer_done(pid)

    asyncio.run(main())


def sharded_producer(url: str, name: str, first: int, count: int) -> None:
    """Enqueue values first..first+count-1 into a sharded queue on the cluster, in
    batches of 1..5 rows [v, first of its batch], as a registered producer."""

    async def main() -> None:
        async with aqueue.redis.connect(
            url, cluster=True, lease_time=2.0, wait_timeout=0.05
        ) as srv:
            q = await srv.fifo_queue(name, 24, np.int64, (2,))
            pid = await q.register_producer()
            v = first
            rng = np.random.default_rng(first)
            while v < first + count:
                k = min(int(rng.integers(1, 6)), first + count - v)
                vals = np.arange(v, v + k)
                await q.enqueue_many(np.stack([vals, np.full(k, v)], axis=1))
                v += k
            await q.producer_done(pid)

    asyncio.run(main())


def sharded_consumer(url: str, name: str, out: Any) -> None:
    """Dequeue batches of 3 from a sharded queue on the cluster until the end of data;
    send the rows to the parent."""

    async def main() -> None:
        got: list[tuple[int, int]] = []
        async with aqueue.redis.connect(
            url, cluster=True, lease_time=2.0, wait_timeout=0.05
        ) as srv:
            q = await srv.fifo_queue(name, 24, np.int64, (2,))
            async for batch in q.batches(3, allow_smaller_final_batch=True):
                got.extend((int(r[0]), int(r[1])) for r in batch)
        out.put(got)

    asyncio.run(main())
