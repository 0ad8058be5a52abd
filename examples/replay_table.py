"""Prioritized experience replay: actor threads play a toy game and insert transitions
into a ReplayTable; an async learner samples prioritized batches, computes TD errors
and updates priorities, paced by a SampleToInsertRatio rate limiter.

The game is a random walk on a line of ``--states`` cells (a stand-in for an emulator:
stateful, blocking for ``--step-ms`` per step, bound to the thread that first used
it). Reaching the right end pays 1, the left end 0; both end the episode. The actors
are the producers of a ``QueueRunner`` whose sink is the table: each is a sync
callable, so it runs on a thread of its own (its game always sees the same thread),
plays ``--actor-batch`` steps and returns the transitions ``{"obs", "reward",
"next_obs", "done"}`` as one batch, which the runner inserts with the default priority
(``enqueue_many``: one trip across the thread boundary per burst, admitted as the
rate limiter allows).

The learner fits a value function (one weight per cell, by temporal differences) on
batches drawn with ``Prioritized(--exponent)``: transitions with a large TD error come
back more often; the importance weights ``sample.weights(beta)`` correct the bias, and
each batch's fresh |TD error| becomes its new priority. ``SampleToInsertRatio(
--samples-per-insert, --min-size, --error-buffer)`` keeps the learner from training on
the same few transitions (it waits for the actors) and the actors from racing ahead
(they wait for the learner).

At the end the learner leaves the coordinator's block, which stops the runner: the
table is closed, so an actor waiting on the rate limiter gets QueueClosedError and
every actor thread ends. The script prints the coordinator's report (the table's
size, inserts and samples per second, the share of the run each side was held back)
and, in plain words: how many transitions went in and out, the samples-per-insert
ratio reached against the target, the share of the run each side waited, how well
the value function matches the true one, and that prioritized sampling favoured the
transitions with large errors. With ``--plot PATH`` a Monitor samples the table
during the run and draws its fill and each side's held-back share over time.

Shared tables: with ``--redis`` (a private redis-server started here; it must be on
PATH) or ``--url redis://...`` the table is ``aqueue.redis``'s, shared through the
server, and the actors are *processes* (this script, run with ``--role actor``), each
opening the table by name and filling it with a QueueRunner of its game; the learner
is the same code. The rate limiter then counts the inserts and samples of every process on
the server. However the run ends (done, Ctrl-C, SIGTERM, an error), the learner closes
the shared table, which ends every actor process, waits for them and deletes the table
from the server (it first deletes one left under ``--name`` by a run that was killed);
``--redis`` checks that the ``redis`` extra is installed before it starts a server, and
stops that server at the end. Ctrl-C prints one line.

Run: python examples/replay_table.py [--steps 400] [--actors 4] [--batch 64]
     [--samples-per-insert 4] [--min-size 500] [--error-buffer 1000]
     [--exponent 0.6] [--beta 0.4] [--backend asyncio|trio] [--plot table.png]
     [--redis | --url redis://host:6379/0] [--name transitions]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np

from aqueue import (
    Coordinator,
    Monitor,
    Prioritized,
    QueueRunner,
    ReplayTable,
    SampleToInsertRatio,
)

GAMMA = 0.9  # discount of the value function


class RandomWalk:
    """A stand-in for a game: blocking, stateful, bound to one thread."""

    def __init__(self, states: int, step_seconds: float, seed: int) -> None:
        self.states = states
        self.pos = states // 2
        self._step_seconds = step_seconds
        self._rng = np.random.default_rng(seed)
        self._thread: int | None = None

    def step(self) -> tuple[int, float, int, bool]:
        """Move left or right: (state, reward, next state, episode over)."""
        me = threading.get_ident()
        if self._thread is None:
            self._thread = me
        elif self._thread != me:
            raise RuntimeError("a game used from a second thread")
        if self._step_seconds:
            time.sleep(self._step_seconds)
        state = self.pos
        nxt = state + (1 if self._rng.random() < 0.5 else -1)
        done = nxt in (0, self.states - 1)
        reward = 1.0 if nxt == self.states - 1 else 0.0
        self.pos = self.states // 2 if done else nxt
        return state, reward, nxt, done


def one_hot(states: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((len(states), n), dtype=np.float32)
    out[np.arange(len(states)), states] = 1.0
    return out


def true_values(n: int) -> np.ndarray:
    """The exact discounted values of the random walk (solved as a linear system)."""
    a = np.eye(n)
    b = np.zeros(n)
    for s in range(1, n - 1):
        for nxt in (s - 1, s + 1):
            b[s] += 0.5 * (1.0 if nxt == n - 1 else 0.0)
            if nxt not in (0, n - 1):
                a[s, nxt] -= 0.5 * GAMMA
    return np.linalg.solve(a, b)


class Actor:
    """One actor, a sync producer of the runner (so it runs on a thread of its own):
    each call plays ``burst`` steps of its game and returns them as one batch."""

    def __init__(self, game: RandomWalk, burst: int) -> None:
        self.game = game
        self.burst = burst
        self.produced = 0  # transitions handed to the runner

    def __call__(self) -> dict[str, np.ndarray]:
        n = self.game.states
        steps = [self.game.step() for _ in range(self.burst)]
        s, r, s2, d = (np.array(x) for x in zip(*steps))
        self.produced += self.burst
        return {
            "obs": one_hot(s, n),
            "reward": r.astype(np.float32),
            "next_obs": one_hot(s2, n),
            "done": d,
        }


def table_settings(args: argparse.Namespace) -> tuple[Any, ...]:
    """The table's element spec and options, the same in every process."""
    n = args.states
    limiter = SampleToInsertRatio(args.samples_per_insert, args.min_size, args.error_buffer)
    spec = (
        (np.float32, np.float32, np.float32, np.bool_),
        ((n,), (), (n,), ()),
        ("obs", "reward", "next_obs", "done"),
    )
    options = {"sampler": Prioritized(args.exponent), "rate_limiter": limiter}
    return spec, options


async def learn(args: argparse.Namespace) -> dict[str, Any]:
    """The in-process table: actor threads of a QueueRunner, and the learner."""
    (dtypes, shapes, names), options = table_settings(args)
    table: Any = ReplayTable(
        args.capacity, dtypes, shapes, names, seed=args.seed, name="transitions", **options
    )
    games = [
        RandomWalk(args.states, args.step_ms / 1000, args.seed + a) for a in range(args.actors)
    ]
    actors = [Actor(g, args.actor_batch) for g in games]

    def start(coord: Coordinator) -> Any:
        runner = QueueRunner(table, actors, enqueue_many=True, name="actors")
        coord.start(runner)
        return runner

    async def stop(runner: Any) -> tuple[int, list[int]]:
        # Leaving the coordinator's block stopped the runner: the table is closed.
        alive = sum(state != "done" for _, state in runner.producer_states())
        return alive, [a.produced for a in actors]

    return await train(args, table, start, stop)


async def learn_shared(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """The table shared through Redis: actor processes, and the same learner. However
    it ends (done, Ctrl-C, an error), the learner closes the table (which ends every
    actor process), waits for the actors and deletes the table from the server."""
    import aqueue.redis

    (dtypes, shapes, names), options = table_settings(args)
    procs: list[subprocess.Popen[str]] = []
    async with aqueue.redis.connect(url) as server:
        await server.delete_table(args.name)  # (one left by an earlier run that was killed)
        table = await server.replay_table(
            args.name, args.capacity, dtypes, shapes, names, seed=args.seed, **options
        )

        def start(coord: Coordinator) -> list[subprocess.Popen[str]]:
            coord.watch(table)  # (the report's row of the shared table)
            procs.extend(
                subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), *actor_argv(args, url, a)],
                    stdout=subprocess.PIPE,
                    text=True,
                    start_new_session=True,  # a Ctrl-C is for the learner, which stops them
                )
                for a in range(args.actors)
            )
            return procs

        async def stop(procs: list[subprocess.Popen[str]]) -> tuple[int, list[int]]:
            await table.aclose()  # every actor's next (or waiting) insert fails: it ends
            produced = []
            for p in procs:
                try:
                    out, _ = await anyio.to_thread.run_sync(p.communicate, None, 60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, _ = p.communicate()
                lines = out.strip().splitlines()
                produced.append(json.loads(lines[-1])["produced"] if lines else 0)
            alive = sum(p.returncode != 0 for p in procs)
            return alive, produced

        try:
            return await train(args, table, start, stop)
        finally:
            with anyio.CancelScope(shield=True):
                await table.aclose()  # (idempotent) the actors end by themselves ...
                await anyio.to_thread.run_sync(end_actors, procs)  # ... or are stopped
                await server.delete_table(args.name)


def end_actors(procs: list[subprocess.Popen[str]]) -> None:
    """Wait for actor processes to end (the table is closed), stopping any that has not
    within 10 s; close their output pipes."""
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.terminate()
            p.wait()
        if p.stdout is not None:
            p.stdout.close()


def actor_argv(args: argparse.Namespace, url: str, a: int) -> list[str]:
    """The command line of actor process ``a`` (the table's settings, its game's)."""
    keep = (
        "states", "step_ms", "capacity", "samples_per_insert", "min_size", "error_buffer",
        "exponent", "actor_batch", "seed", "name",
    )  # fmt: skip
    argv = ["--role", "actor", "--url", url, "--actor-id", str(a)]
    for key in keep:
        argv += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    return argv


def act(args: argparse.Namespace) -> int:
    """One actor process: a QueueRunner whose producer is this process's game (on a
    thread of its own), filling the shared table (``enqueue_many``: progressive, with
    the default priority) until the learner closes it; prints how many transitions it
    produced (JSON)."""
    import aqueue.redis

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the learner's process stops us
    (dtypes, shapes, names), options = table_settings(args)
    actor = Actor(
        RandomWalk(args.states, args.step_ms / 1000, args.seed + args.actor_id), args.actor_batch
    )

    async def main() -> None:
        async with aqueue.redis.connect(args.url) as server:
            table = await server.replay_table(
                args.name, args.capacity, dtypes, shapes, names, **options
            )
            async with Coordinator() as coord:
                runner = QueueRunner(table, [actor], enqueue_many=True, name="actor")
                coord.start(runner)
                await runner.join()  # (its producer ends when the learner closes the table)

    anyio.run(main)
    print(json.dumps({"produced": actor.produced}))
    return 0


async def train(args: argparse.Namespace, table: Any, start: Any, stop: Any) -> dict[str, Any]:
    """The learner: prioritized batches, TD errors, new priorities; then the counts."""
    n = args.states
    limiter = table.rate_limiter
    monitor = Monitor(interval=args.interval) if args.plot else None
    w = np.zeros(n, dtype=np.float32)
    sampled_errors: list[float] = []
    t0 = time.perf_counter()
    async with Coordinator(monitor=monitor) as coord:
        actors = start(coord)
        for _ in range(args.steps):
            s = await table.sample(args.batch)
            d = s.data
            v = d["obs"] @ w
            target = d["reward"] + GAMMA * (d["next_obs"] @ w) * ~d["done"]
            td = target - v
            sampled_errors.append(float(np.abs(td).mean()))
            grad = (s.weights(args.beta) * td) @ d["obs"]
            w += args.learning_rate * grad / args.batch
            await table.update_priorities(s.keys, np.abs(td) + 1e-3)
        at_end = await table.statistics()  # (the waits with the run's time, at one moment)
        seconds = time.perf_counter() - t0
    alive, per_actor = await stop(actors)
    stats = await table.statistics()  # (the counts once every actor has stopped)
    # the error over fresh transitions (what a uniform look at the table sees)
    fresh = Actor(RandomWalk(n, 0.0, args.seed + 1000), 2000)()
    obs, reward, nxt, done = (fresh[k] for k in ("obs", "reward", "next_obs", "done"))
    table_td = float(np.abs(reward + GAMMA * (nxt @ w) * ~done - obs @ w).mean())
    if monitor is not None:
        monitor.plot(args.plot, title="Replay table: actors against the learner")
    return {
        "seconds": seconds,
        "inserts": stats.inserts,
        "samples": stats.samples,
        "ratio": stats.samples / max(1, stats.inserts),
        "band": (limiter.min_diff, limiter.max_diff),
        "diff": stats.inserts * args.samples_per_insert - stats.samples,
        "actors_waited": at_end.insert_wait_s / seconds,
        "learner_waited": at_end.sample_wait_s / seconds,
        "value_error": float(np.abs(w[1:-1] - true_values(n)[1:-1]).max()),
        "sampled_td": float(np.mean(sampled_errors[-20:])),
        "table_td": table_td,
        "actors_alive": alive,
        "closed": stats.closed,
        "per_actor": per_actor,
        "report": coord.report(),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (small values make a quick smoke run)."""
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--steps", type=int, default=400, help="learner steps (prioritized batches)")
    add("--actors", type=int, default=4, help="actor threads, one game each")
    add("--batch", type=int, default=64, help="transitions per learner batch")
    add("--actor-batch", type=int, default=8, help="transitions an actor inserts at once")
    add("--states", type=int, default=9, help="cells of the random walk (both ends stop it)")
    add("--step-ms", type=float, default=0.0, help="milliseconds a game blocks per step")
    add("--capacity", type=int, default=20_000, help="the table's max_size (transitions)")
    add("--samples-per-insert", type=float, default=4.0, help="the rate limiter's target ratio")
    add("--min-size", type=int, default=500, help="transitions before the first sample")
    add("--error-buffer", type=float, default=1000.0, help="the limiter's slack, in samples")
    add("--exponent", type=float, default=0.6, help="prioritization exponent (0: uniform)")
    add("--beta", type=float, default=0.4, help="importance-weight correction (1: full)")
    add("--learning-rate", type=float, default=0.5, help="the value function's step size")
    add("--seed", type=int, default=0, help="seeds the table and the games")
    add("--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop")
    add("--plot", default=None, help="write a PNG of the table over time (needs matplotlib)")
    add("--interval", type=float, default=0.05, help="seconds between the plot's samples")
    add("--redis", action="store_true", help="share the table through a private redis-server")
    add("--url", default=None, help="share the table through this Redis server")
    add("--name", default="transitions", help="the shared table's name")
    add("--role", choices=["learner", "actor"], default="learner", help=argparse.SUPPRESS)
    add("--actor-id", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    """A private redis-server on a free port (as examples/distributed_replay.py)."""
    import redis

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


def say(text: str) -> None:
    print(textwrap.fill(text, 88, subsequent_indent="  ", break_on_hyphens=False))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The learner's run, in process or on a shared table (with its private
    redis-server for ``--redis``, stopped however the run ends)."""
    shared = bool(args.redis or args.url)
    if shared:
        try:
            import aqueue.redis  # noqa: F401 - checked before a server is started
        except ImportError as exc:
            sys.exit(f"replay_table.py: --redis and --url share the table through Redis: {exc}")
    proc, url = (None, args.url) if args.url or not args.redis else start_server()
    try:
        if shared:
            r: dict[str, Any] = anyio.run(learn_shared, args, url, backend=args.backend)
        else:
            r = anyio.run(learn, args, backend=args.backend)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(5)
    return r


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example and print what it showed; return the measurements. Ctrl-C (or
    SIGTERM) stops it with one line."""
    args = parse_args(None if argv is None else list(argv))
    if args.role == "actor":
        sys.exit(act(args))
    shared = bool(args.redis or args.url)
    stopped_by = ["Ctrl-C"]

    def on_sigterm(signum: int, frame: Any) -> None:
        stopped_by[0] = "SIGTERM"
        os.kill(os.getpid(), signal.SIGINT)  # stop as Ctrl-C does: the same way out

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        r = run(args)
    except (KeyboardInterrupt, asyncio.CancelledError):  # (3.10's asyncio.run: the latter)
        print(f"replay_table.py: interrupted ({stopped_by[0]}).", flush=True)
        raise SystemExit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    lo, hi = r["band"]
    print(r["report"])
    where = "processes, on a table shared through Redis," if shared else "threads"
    say(
        f"{args.actors} actor {where} inserted {r['inserts']:,} transitions and the learner "
        f"sampled {r['samples']:,} ({args.steps} batches of {args.batch}) in "
        f"{r['seconds']:.2f} s on {args.backend}."
    )
    held = lo <= r["diff"] <= hi
    say(
        f"Samples per insert: {r['ratio']:.2f} against a target of "
        f"{args.samples_per_insert:g}. The rate limiter kept inserts x "
        f"{args.samples_per_insert:g} - samples at {r['diff']:,.0f}, "
        f"{'inside' if held else 'OUTSIDE'} its band [{lo:,.0f}, {hi:,.0f}] (the first "
        f"{args.min_size} inserts fill the table before sampling starts, which is why the "
        "ratio approaches the target from below)."
    )
    if r["actors_waited"] > r["learner_waited"]:
        pace = "the learner set the pace (the actors were held back so that it kept up)"
    else:
        pace = "the actors set the pace (the learner was held back so that it did not overtrain)"
    say(
        f"The actors waited {r['actors_waited']:.0%} of the run and the learner "
        f"{r['learner_waited']:.0%}: {pace}."
    )
    say(
        f"The value function is within {r['value_error']:.3f} of the true values. "
        f"Prioritized sampling favoured the transitions with large errors: the last "
        f"batches' mean |TD error| was {r['sampled_td']:.4f}, against {r['table_td']:.4f} "
        "over fresh transitions (what a uniform draw would see)."
    )
    if args.plot:
        say(
            f"The plot in {args.plot} shows the table's fill over time and, per interval, "
            "the share the actors (orange) and the learner (purple) were held back."
        )
    if shared:
        say(
            "What this showed: actor processes fed a replay table shared through Redis "
            "while an async learner trained on prioritized batches, the rate limiter on the "
            "server held the ratio of samples to inserts of all processes in its band by "
            "making one side wait, and closing the table ended every actor process "
            f"({r['actors_alive']} still running)."
        )
    else:
        say(
            "What this showed: actor threads, run by a QueueRunner, fed a replay table "
            "while an async learner trained on prioritized batches, the rate limiter held "
            "the ratio of samples to inserts in its band by making one side wait, and "
            "leaving the coordinator's block closed the table and stopped every actor "
            f"({r['actors_alive']} still running)."
        )
    if r["actors_alive"] or not r["closed"] or not held:
        raise SystemExit(1)
    return r


if __name__ == "__main__":
    main()
