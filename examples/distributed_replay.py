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
registration is in, which is how the trainer knows when to drop its guard, and, before
it ends its registration, says on a third ('<name>-sent') how many screens it sent: the
count the trainer checks against (actors may run with another --screens than the
trainer), while its rates count what arrived.

Ctrl-C or SIGTERM: the actor processes ignore SIGINT; the process that started them
stops them, and every process says so in one line (no tracebacks). The trainer owns
the three queues ('<name>', '<name>-ready', '<name>-sent'): it deletes them when it
ends, however it ends (and, first, any left under those names by a killed run), so an
interrupted run leaves nothing on a shared server.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.connection
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
import redis

import aqueue
import aqueue.redis

ACTORS, THREADS = 4, 2
SHAPE = (84, 84, 4)
INTERRUPTED = 130  # exit status after Ctrl-C, as a shell reports it
TERMINATED = 143  # after SIGTERM


def say(line: str) -> None:
    """Print one line in one write, so lines of processes printing at once never mix."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


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
    """One actor process: a QueueRunner of 2 game threads feeds the shared queue; at the
    end it reports how many screens it sent. It ignores Ctrl-C (SIGINT, inherited from
    ``Actors.start``): the parent stops it with SIGTERM, and it says so in one line."""
    games = [Game(actor_id, t, screens) for t in range(THREADS)]
    running: list[asyncio.Task[None]] = []
    stop = threading.Event()

    def on_sigterm(signum: int, frame: Any) -> None:
        # Installed for the whole process (not the loop's handler, which the loop's end
        # would reset to the default): a SIGTERM before main() runs stops it as it
        # starts, one after its line is printed changes nothing.
        stop.set()
        for task in running:
            if not task.done():
                try:
                    task.get_loop().call_soon_threadsafe(task.cancel)
                except RuntimeError:  # (its loop has just closed)
                    pass

    signal.signal(signal.SIGTERM, on_sigterm)

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        running.append(task)
        if stop.is_set():
            raise asyncio.CancelledError
        async with aqueue.redis.connect(url) as server:
            q = await server.random_shuffle_queue(name, 1000, 100, np.uint8, SHAPE)
            ready = await server.fifo_queue(f"{name}-ready", 64, np.int64, ())
            sent = await server.fifo_queue(f"{name}-sent", 1024, np.int64, (2,))
            held = await q.register_producer()  # keeps the queue open while we run
            await ready.enqueue(actor_id)  # tell the trainer our registration is in
            runner = aqueue.QueueRunner(q, [g.grab_screen for g in games], name=f"actor{actor_id}")
            async with aqueue.Coordinator() as coord:
                coord.start(runner)  # two dedicated game threads
                await runner.join()  # leaving the block earlier would stop them
            # Say how many screens went in, before the queue can close.
            await sent.enqueue([actor_id, sum(g.played for g in games)])
            await q.producer_done(held)  # the last actor's end closes the queue

    try:
        asyncio.run(main())
    except (asyncio.CancelledError, KeyboardInterrupt):  # stopped: one line, no traceback
        played = sum(g.played for g in games)
        say(f"actor {actor_id}: stopped after {played} screens.")
        sys.exit(INTERRUPTED)
    except aqueue.QueueClosedError as exc:  # the trainer ended first and deleted the queues
        played = sum(g.played for g in games)
        say(f"actor {actor_id}: stopped after {played} screens: {exc}.")
        sys.exit(1)


class Actors:
    """Actor processes ``first`` .. ``first + count - 1``, started with Ctrl-C ignored so
    that a Ctrl-C in the terminal reaches this process only; ``stop()`` then ends them.
    ``wait()`` (in a thread of the trainer) and ``stop()`` may run at once: a process is
    reaped under a lock, so that one of them reaps it and both see its exit code (two
    threads joining one process could otherwise leave one of them without the code)."""

    def __init__(self, url: str, name: str, first: int, count: int, screens: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.procs = [
            ctx.Process(target=actor, args=(url, name, a, screens), name=f"actor {a}")
            for a in range(first, first + count)
        ]
        self._reaping = threading.Lock()

    def start(self) -> None:
        """Start them (from the main thread: it sets the signal disposition they inherit)."""
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for p in self.procs:
                p.start()
        finally:
            signal.signal(signal.SIGINT, previous)

    def _join(self, p: Any) -> int | None:
        multiprocessing.connection.wait([p.sentinel])  # until it ends (reaps nothing)
        with self._reaping:  # (one thread reaps it; both then read its code)
            p.join()
            code: int | None = p.exitcode
            return code

    def wait(self) -> int:
        """Wait for every actor to end; 0 if all sent their screens."""
        codes = [self._join(p) for p in self.procs]
        if any(c == INTERRUPTED or c == -signal.SIGTERM for c in codes):
            return INTERRUPTED
        failed = [c for c in codes if c != 0]
        if failed:
            say(f"{len(failed)} of {len(codes)} actor processes failed (exit codes {failed}).")
            return 1
        say(f"{len(codes)} actor processes sent their screens and ended.")
        return 0

    def stop(self) -> None:
        """End the actors still running (each prints one line; one stopped before it
        could start is named here), and wait for them."""
        started = [p for p in self.procs if p.pid is not None]
        for p in started:
            if not multiprocessing.connection.wait([p.sentinel], 0):  # still running
                p.terminate()  # SIGTERM
        for p in started:
            if self._join(p) == -signal.SIGTERM:  # before its handler was set: no line of its own
                say(f"{p.name}: stopped before it started.")


def run_actors(url: str, name: str, first: int, count: int, screens: int) -> int:
    """Start ``count`` actor processes (ids ``first`` ...) and wait for them."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops them as Ctrl-C
    actors = Actors(url, name, first, count, screens)
    try:
        actors.start()
        return actors.wait()
    except KeyboardInterrupt:
        actors.stop()
        return INTERRUPTED


async def trainer(url: str, name: str, actors: int, screens: int, batch: int, spawn: bool) -> int:
    """Take shuffled batches until the queue closes; with ``spawn``, start the actor
    processes too (else they run elsewhere, with ``--role actors``). The trainer owns
    the three shared queues: it deletes any left under these names by a run that was
    killed, and deletes them again however it ends (done, Ctrl-C, SIGTERM, an error),
    after its actor processes have stopped, so nothing stays on a shared server."""
    task = asyncio.current_task()
    assert task is not None
    stopped_by: list[int] = []

    def stop(code: int) -> None:
        if not stopped_by:  # (a second Ctrl-C does not cut the cleanup short)
            stopped_by.append(code)
            task.cancel()

    # Both signals cancel this task from the loop, between two steps. (A Ctrl-C left to
    # Python raises KeyboardInterrupt wherever the interpreter is, on Python 3.10 also
    # inside the loop's read of a Redis reply: that call's task then ends failed.)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop, INTERRUPTED)
    loop.add_signal_handler(signal.SIGTERM, stop, TERMINATED)
    names = [name, f"{name}-ready", f"{name}-sent"]
    try:
        async with aqueue.redis.connect(url) as server:
            for n in names:
                await server.delete_queue(n)
            procs: list[Actors] = []
            try:
                return await train(server, url, name, actors, screens, batch, spawn, procs)
            finally:
                for p in procs:
                    p.stop()  # before the deletes: a running actor may still open a queue
                for n in names:
                    await server.delete_queue(n)
    except asyncio.CancelledError:
        if not stopped_by:
            raise
        say(
            "trainer: interrupted (Ctrl-C)."
            if stopped_by[0] == INTERRUPTED
            else "trainer: stopped (SIGTERM)."
        )
        return stopped_by[0]


async def train(
    server: aqueue.redis.RedisServer,
    url: str,
    name: str,
    actors: int,
    screens: int,
    batch: int,
    spawn: bool,
    procs: list[Actors],
) -> int:
    """The trainer's work (see ``trainer``); the actor processes it starts go into
    ``procs``, which the caller stops on its way out."""
    q = await server.random_shuffle_queue(name, 1000, 100, np.uint8, SHAPE, seed=0)
    ready = await server.fifo_queue(f"{name}-ready", 64, np.int64, ())
    # Registered before the actors start, so an actor that finishes first cannot close
    # the queue while others have not registered yet.
    guard = await q.register_producer()
    if not spawn:
        print(f"The trainer is ready: start {actors} actors on queue '{name}'.", flush=True)
    local = None
    if spawn:
        procs.append(Actors(url, name, 0, actors, screens))
        procs[0].start()
        local = asyncio.ensure_future(asyncio.to_thread(procs[0].wait))

    async def release_guard() -> None:
        for _ in range(actors):  # every actor has registered its own producer
            await ready.dequeue()
        await q.producer_done(guard)

    seen: set[tuple[int, int, int]] = set()
    duplicates = 0
    releasing = asyncio.ensure_future(release_guard())
    try:
        t0 = time.perf_counter()
        async for b in q.batches(batch, allow_smaller_final_batch=True):
            for s in b:
                key = (int(s[0, 0, 0]), int(s[0, 0, 1]), int(s[0, 0, 2]) * 256 + int(s[0, 0, 3]))
                duplicates += key in seen
                seen.add(key)
        await releasing
        elapsed = time.perf_counter() - t0
        # Each actor said how many screens it sent before the queue could close: the
        # count to check against (actors may play another --screens than this one).
        sent_queue = await server.fifo_queue(f"{name}-sent", 1024, np.int64, (2,))
        await sent_queue.aclose()  # every actor that ended cleanly has reported by now
        reports = [report async for report in sent_queue]
        sent = sum(int(report[1]) for report in reports)
        actors_failed = (await local) if local is not None else 0
    finally:
        releasing.cancel()  # (if still waiting: the block it waits in is ending)
    received = len(seen) + duplicates
    ok = len(reports) == actors and len(seen) == sent and duplicates == 0 and actors_failed == 0
    mb = received * int(np.prod(SHAPE)) / 1e6  # what arrived
    missing = "" if len(reports) == actors else f" (of {actors} expected)"
    print(
        f"The trainer received {len(seen)} distinct screens of {sent} sent by "
        f"{len(reports)} actor processes{missing} x {THREADS} game threads, with "
        f"{duplicates} duplicates: "
        f"{'every screen arrived exactly once' if ok else 'SCREENS WERE LOST OR REPEATED'}."
    )
    print(
        f"It took {elapsed:.2f} s: {received / elapsed:,.0f} screens/s ({mb / elapsed:.0f} MB/s) "
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
        stderr=subprocess.DEVNULL,  # (it must not hold our output open)
        start_new_session=True,  # a Ctrl-C in the terminal is for us; we stop it at the end
    )
    try:
        for _ in range(200):
            try:
                redis.Redis(port=port).ping()
                return proc, f"redis://127.0.0.1:{port}/0"
            except redis.ConnectionError:
                time.sleep(0.01)
        sys.exit("redis-server did not start")
    except BaseException:  # (Ctrl-C while it starts, or it never answered)
        proc.terminate()
        proc.wait(5)
        raise


def main() -> int:
    ap = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument(
        "--url", help="a Redis server's URL; without it a private redis-server is started here"
    )
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
        help="the shared queue's name ('<name>-ready' and '<name>-sent' are its two helper "
        "queues); None means 'replay' with --role trainer or actors (both sides must use "
        "the same), else 'replay-<pid>', a name no other run on the server uses. The "
        "trainer deletes all three when it ends, however it ends",
    )
    ap.add_argument(
        "--screens", type=int, default=200, help="screens per game thread (the actors')"
    )
    ap.add_argument("--batch", type=int, default=32, help="trainer batch size")
    args = ap.parse_args()
    if args.role != "both" and not args.url:
        ap.error(f"--role {args.role} runs one side of a two-host run: pass --url")
    if args.actors < 1 or args.screens < 1 or args.batch < 1:
        ap.error("--actors, --screens and --batch must be at least 1")
    name = args.name or ("replay" if args.role != "both" else f"replay-{os.getpid()}")
    proc, url = (None, args.url) if args.url else start_server()
    try:
        if args.role == "actors":
            return run_actors(url, name, args.first_actor, args.actors, args.screens)
        spawn = args.role == "both"
        return asyncio.run(trainer(url, name, args.actors, args.screens, args.batch, spawn))
    except KeyboardInterrupt:  # one line for this process (each actor prints its own)
        say("trainer: interrupted (Ctrl-C).")  # (before the trainer's handlers were set)
        return INTERRUPTED
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(5)


if __name__ == "__main__":
    sys.exit(main())
