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

Without --url it starts a private redis-server (redis-server must be on PATH) and runs
the trainer and the actors on this host. With --url, the two roles can run on two
hosts that reach the same server; start the trainer first:

    host A:  python examples/distributed_replay.py --url "$URL" --role trainer --actors 4
    host B:  python examples/distributed_replay.py --url "$URL" --role actors --actors 4

Each actor announces itself on a second shared queue ('<name>-ready') once its own
registration is in, which is how the trainer knows when to drop its guard.
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


def actor(url: str, name: str, actor_id: int, screens: int) -> None:
    """One actor process: a QueueRunner of 2 game threads feeds the shared queue."""

    async def main() -> None:
        async with aqueue.redis.connect(url) as server:
            q = await server.random_shuffle_queue(name, 1000, 100, np.uint8, SHAPE)
            ready = await server.fifo_queue(f"{name}-ready", 64, np.int64, ())
            held = await q.register_producer()  # keeps the queue open while we run
            await ready.enqueue(actor_id)  # tell the trainer our registration is in
            games = [Game(actor_id, t, screens) for t in range(THREADS)]
            runner = aqueue.QueueRunner(q, [g.grab_screen for g in games], name=f"actor{actor_id}")
            async with aqueue.Coordinator() as coord:
                coord.start(runner)  # two dedicated game threads
                await runner.join()  # leaving the block earlier would stop them
            await q.producer_done(held)  # the last actor's end closes the queue

    asyncio.run(main())


def run_actors(url: str, name: str, first: int, count: int, screens: int) -> int:
    """Start ``count`` actor processes (ids ``first`` ...) and wait for them."""
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=actor, args=(url, name, a, screens)) for a in range(first, first + count)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        print(f"{len(failed)} of {count} actor processes failed (exit codes {failed}).")
        return 1
    print(f"{count} actor processes sent their screens and ended.")
    return 0


async def trainer(url: str, name: str, actors: int, screens: int, batch: int, spawn: bool) -> int:
    """Take shuffled batches until the queue closes; with ``spawn``, start the actor
    processes too (else they run elsewhere, with ``--role actors``)."""
    async with aqueue.redis.connect(url) as server:
        q = await server.random_shuffle_queue(name, 1000, 100, np.uint8, SHAPE, seed=0)
        ready = await server.fifo_queue(f"{name}-ready", 64, np.int64, ())
        # Registered before the actors start, so an actor that finishes first cannot
        # close the queue while others have not registered yet.
        guard = await q.register_producer()
        if not spawn:
            print(f"The trainer is ready: start {actors} actors on queue '{name}'.", flush=True)
        local = None
        if spawn:
            local = asyncio.ensure_future(
                asyncio.to_thread(run_actors, url, name, 0, actors, screens)
            )

        async def release_guard() -> None:
            for _ in range(actors):  # every actor has registered its own producer
                await ready.dequeue()
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
        actors_failed = (await local) if local is not None else 0
        await server.delete_queue(name)
        await server.delete_queue(f"{name}-ready")
    expected = actors * THREADS * screens
    ok = len(seen) == expected and duplicates == 0 and actors_failed == 0
    mb = expected * int(np.prod(SHAPE)) / 1e6
    print(
        f"The trainer received {len(seen)} distinct screens of {expected} sent by "
        f"{actors} actor processes x {THREADS} game threads, with {duplicates} duplicates: "
        f"{'every screen arrived exactly once' if ok else 'SCREENS WERE LOST OR REPEATED'}."
    )
    print(
        f"It took {elapsed:.2f} s: {len(seen) / elapsed:,.0f} screens/s ({mb / elapsed:.0f} MB/s) "
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
    ap = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--url", help="a Redis server's URL; None starts a private redis-server here")
    ap.add_argument(
        "--role",
        choices=["both", "trainer", "actors"],
        default="both",
        help="what runs here: the trainer and its actors, or one side of a two-host run "
        "(needs --url)",
    )
    ap.add_argument("--actors", type=int, default=ACTORS, help="actor processes")
    ap.add_argument("--first-actor", type=int, default=0, help="id of the first actor here")
    ap.add_argument(
        "--name",
        default=None,
        help="the shared queue's name; None means 'replay' (a private name without --url)",
    )
    ap.add_argument("--screens", type=int, default=200, help="screens per game thread")
    ap.add_argument("--batch", type=int, default=32, help="trainer batch size")
    args = ap.parse_args()
    if args.role != "both" and not args.url:
        ap.error(f"--role {args.role} runs one side of a two-host run: pass --url")
    if args.actors < 1 or args.screens < 1 or args.batch < 1:
        ap.error("--actors, --screens and --batch must be at least 1")
    proc, url = (None, args.url) if args.url else start_server()
    name = args.name or ("replay" if args.role != "both" else f"replay-{os.getpid()}")
    try:
        if args.role == "actors":
            return run_actors(url, name, args.first_actor, args.actors, args.screens)
        spawn = args.role == "both"
        return asyncio.run(trainer(url, name, args.actors, args.screens, args.batch, spawn))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(5)


if __name__ == "__main__":
    sys.exit(main())
