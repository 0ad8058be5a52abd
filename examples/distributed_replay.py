"""Experience replay across processes: 4 actor processes feed one shared Redis
RandomShuffleQueue, each through a QueueRunner of 2 game threads; an async trainer
takes shuffled batches.

Every screen carries (actor, thread, counter) in its first pixels, so the trainer can
check that each screen arrived exactly once. A runner's producers register with the
shared queue, which closes after the last producer of all processes has ended, so the
trainer's batch iterator ends by itself. Two registrations guard the start: the trainer
holds one until every actor has registered its own, and each actor holds its own until
its runner has finished, so no actor that finishes early closes the queue for the
others.

    python examples/distributed_replay.py [--url redis://...] [--screens 200]

Without --url it starts a private redis-server (redis-server must be on PATH).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

import aqueue
import aqueue.redis

ACTORS, THREADS = 4, 2
SHAPE = (84, 84, 4)


def screen(actor: int, thread: int, i: int) -> np.ndarray[Any, Any]:
    """A distinct screen: noise, with actor, thread and counter in the first pixels."""
    s = np.random.default_rng((actor, thread, i)).integers(0, 255, SHAPE, dtype=np.uint8)
    s[0, 0, :] = (actor, thread, i // 256, i % 256)
    return s


class Game:
    """A game environment: blocking, and bound to the thread that first uses it."""

    def __init__(self, actor_id: int, thread_id: int, screens: int) -> None:
        self.actor_id, self.thread_id, self.screens = actor_id, thread_id, screens
        self.played = 0
        self.thread: int | None = None

    def grab_screen(self) -> np.ndarray[Any, Any]:
        here = threading.get_ident()
        assert self.thread in (None, here), "a game must stay on one thread"
        self.thread = here
        if self.played == self.screens:
            raise StopIteration  # this game is over: a clean end for its producer
        self.played += 1
        return screen(self.actor_id, self.thread_id, self.played - 1)


def actor(url: str, name: str, actor_id: int, screens: int, registered: Any) -> None:
    """One actor process: a QueueRunner of 2 game threads feeds the shared queue."""

    async def main() -> None:
        async with aqueue.redis.connect(url) as server:
            q = await server.random_shuffle_queue(name, 1000, 100, np.uint8, SHAPE)
            held = await q.register_producer()  # keeps the queue open while we run
            registered.put(actor_id)
            games = [Game(actor_id, t, screens) for t in range(THREADS)]
            runner = aqueue.QueueRunner(q, [g.grab_screen for g in games], name=f"actor{actor_id}")
            async with aqueue.Coordinator() as coord:
                coord.start(runner)  # two dedicated game threads
                await runner.join()  # leaving the block earlier would stop them
            await q.producer_done(held)  # the last actor's end closes the queue

    asyncio.run(main())


async def trainer(url: str, name: str, screens: int, batch: int) -> int:
    async with aqueue.redis.connect(url) as server:
        q = await server.random_shuffle_queue(name, 1000, 100, np.uint8, SHAPE, seed=0)
        # Registered before the actors start, so an actor that finishes first cannot
        # close the queue while others have not registered yet.
        guard = await q.register_producer()
        ctx = multiprocessing.get_context("spawn")
        registered = ctx.Queue()
        procs = [
            ctx.Process(target=actor, args=(url, name, a, screens, registered))
            for a in range(ACTORS)
        ]
        for p in procs:
            p.start()

        async def release_guard() -> None:
            for _ in procs:  # every actor has registered its own producer
                await asyncio.to_thread(registered.get)
            await q.producer_done(guard)

        releasing = asyncio.ensure_future(release_guard())
        seen: set[tuple[int, int, int]] = set()
        duplicates = 0
        t0 = time.perf_counter()
        async for b in q.batches(batch, allow_smaller_final_batch=True):
            for s in b:
                key = (int(s[0, 0, 0]), int(s[0, 0, 1]), int(s[0, 0, 2]) * 256 + int(s[0, 0, 3]))
                duplicates += key in seen
                seen.add(key)
        await releasing
        elapsed = time.perf_counter() - t0
        for p in procs:
            p.join()
        await server.delete_queue(name)
    expected = ACTORS * THREADS * screens
    ok = len(seen) == expected and duplicates == 0
    mb = expected * int(np.prod(SHAPE)) / 1e6
    print(
        f"The trainer received {len(seen)} distinct screens of {expected} sent by "
        f"{ACTORS} actor processes x {THREADS} game threads, with {duplicates} duplicates: "
        f"{'every screen arrived exactly once' if ok else 'SCREENS WERE LOST OR REPEATED'}."
    )
    print(
        f"It took {elapsed:.2f} s: {expected / elapsed:,.0f} screens/s ({mb / elapsed:.0f} MB/s) "
        f"in shuffled batches of {batch}; the queue closed itself after the last actor."
    )
    return 0 if ok else 1


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    binary = os.environ.get("AQUEUE_REDIS_SERVER") or shutil.which("redis-server")
    if binary is None:
        sys.exit(
            "No redis-server on PATH: install it (e.g. apt-get install redis-server) "
            "or pass --url redis://host:port/0."
        )
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
            "512mb",
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
            return proc, f"redis://127.0.0.1:{port}/0"
        except redis.ConnectionError:
            time.sleep(0.01)
    sys.exit("redis-server did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description="Distributed experience replay over Redis.")
    ap.add_argument("--url", help="a Redis server (default: start a private one)")
    ap.add_argument("--screens", type=int, default=200, help="screens per game thread")
    ap.add_argument("--batch", type=int, default=32, help="trainer batch size")
    args = ap.parse_args()
    proc, url = (None, args.url) if args.url else start_server()
    try:
        return asyncio.run(trainer(url, f"replay-{os.getpid()}", args.screens, args.batch))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(5)


if __name__ == "__main__":
    sys.exit(main())
