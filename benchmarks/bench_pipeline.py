"""SPDL-style pipeline simulation: aqueue's Pipeline against its peers.

The job: a source of integers, a map stage whose items take 25 ms (async sleep), a map
stage whose items take 35 ms (blocking sleep, on threads), both at concurrency C, feeding

  (a) a consumer that takes 30 ms per item (100 items), and
  (b) a consumer that takes 0 ms (200 items): stage-bound.

For every C in 1, 2, 4, 8, 16 and every installed peer it prints items/s against the
analytic ceiling min(C/0.025, C/0.035, consumer rate), the consumer's total wait and the
mean occupancy of each stage's output queue, then the JSON of all rows.

Peers (each measured the same way: wall time from building the pipeline to the last
item consumed, after one small warm-up run in the same process):

- aqueue ``Pipeline`` with default settings;
- plain asyncio tasks + ``asyncio.Queue`` + ``asyncio.to_thread``, with the default
  executor and with an executor of C threads;
- a *floor*, not a peer: the leanest hand-written asyncio + threads version of the job
  (``run_floor``: tasks, a ``queue.SimpleQueue`` to the threads, one
  ``call_soon_threadsafe`` per result), which shows what Python's event loop and threads
  cost on the machine at hand;
- tf.data (``map(py_function, num_parallel_calls=C)``), default options and with a
  private thread pool of 2C + 2 threads, and SPDL (``pipe(fn, concurrency=C)``,
  ``build(num_threads=C)``). They run in a subprocess of the interpreter named by
  ``--tf-python`` / ``$AQUEUE_TF_PYTHON`` and ``--spdl-python`` / ``$AQUEUE_SPDL_PYTHON``,
  or ``--peer-python`` / ``$AQUEUE_PEER_PYTHON`` for both (see ``_peers.py``), else of
  this one if it imports them; a peer that no interpreter imports is skipped with a
  message.

Not a timed test: the machine is shared; run it alone. ``--quick`` runs C = 4 only;
``--repeat N`` measures every row N times and reports the run of median wall time (the
percent-of-ceiling figures at C = 16 move by about half a point from run to run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _peers import add_peer_arguments, find_python

S1 = 0.025  # seconds per item, stage 1 (async sleep)
S2 = 0.035  # seconds per item, stage 2 (blocking sleep on a thread)
RUNS = {"a": (100, 0.030), "b": (200, 0.0)}  # items, consumer seconds per item


def ceiling(c: int, consumer_s: float) -> float:
    """The analytic throughput ceiling, in items per second."""
    rates = [c / S1, c / S2]
    if consumer_s > 0:
        rates.append(1 / consumer_s)
    return min(rates)


def row(peer: str, run: str, c: int, n: int, wall: float, wait: float, occ: str) -> dict[str, Any]:
    consumer_s = RUNS[run][1]
    rate = n / wall
    ceil = ceiling(c, consumer_s)
    return {
        "peer": peer,
        "run": run,
        "C": c,
        "items": n,
        "wall_s": round(wall, 4),
        "items_per_s": round(rate, 2),
        "ceiling": round(ceil, 2),
        "pct_ceiling": round(100 * rate / ceil, 1),
        "consumer_wait_s": round(wait, 4),
        "occupancy": occ,
    }


def median_run(
    repeat: int, measure: Callable[..., tuple[float, float, str]], *args: Any
) -> tuple[float, float, str]:
    """Run ``measure(*args)`` ``repeat`` times; return the run of median wall time."""
    runs = sorted((measure(*args) for _ in range(repeat)), key=lambda r: r[0])
    return runs[(len(runs) - 1) // 2]


# -- aqueue -----------------------------------------------------------------------------


async def run_aqueue(n: int, c: int, consumer_s: float) -> tuple[float, float, str]:
    import anyio

    from aqueue import Pipeline

    async def stage1(x: int) -> int:
        await anyio.sleep(S1)
        return x

    def stage2(x: int) -> int:
        time.sleep(S2)
        return x

    t0 = time.perf_counter()
    pipe = Pipeline.from_iterable(range(n)).map(stage1, concurrency=c).map(stage2, concurrency=c)
    wait = 0.0
    got = 0
    async with pipe.open() as items:
        while True:
            t = time.perf_counter()
            try:
                await items.get()
            except Exception:  # OutOfRangeError: the end
                break
            wait += time.perf_counter() - t
            got += 1
            if consumer_s:
                await anyio.sleep(consumer_s)
            if got == n:
                break
        t1 = time.perf_counter()
    assert got == n, (got, n)
    occ = "/".join(f"{s.occupancy_mean:.2f}" for s in pipe.statistics())
    return t1 - t0, wait, occ


# -- plain asyncio ------------------------------------------------------------------------


async def run_asyncio(n: int, c: int, consumer_s: float, pool: bool) -> tuple[float, float, str]:
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(c) if pool else None
    if executor is not None:
        loop.set_default_executor(executor)
    t0 = time.perf_counter()
    cap = max(8, 2 * c)
    q0: asyncio.Queue[int | None] = asyncio.Queue(cap)
    q1: asyncio.Queue[int | None] = asyncio.Queue(cap)
    q2: asyncio.Queue[int | None] = asyncio.Queue(cap)
    occ_sum = [0.0, 0.0, 0.0]
    samples = 0
    done = False
    left = [c, c]

    async def source() -> None:
        for i in range(n):
            await q0.put(i)
        for _ in range(c):
            await q0.put(None)

    async def stage1() -> None:
        while (x := await q0.get()) is not None:
            await asyncio.sleep(S1)
            await q1.put(x)
        left[0] -= 1
        if left[0] == 0:
            for _ in range(c):
                await q1.put(None)

    async def stage2() -> None:
        while (x := await q1.get()) is not None:
            await asyncio.to_thread(time.sleep, S2)
            await q2.put(x)
        left[1] -= 1
        if left[1] == 0:
            await q2.put(None)

    async def sampler() -> None:
        nonlocal samples
        while not done:
            for i, q in enumerate((q0, q1, q2)):
                occ_sum[i] += q.qsize() / q.maxsize
            samples += 1
            await asyncio.sleep(0.005)

    tasks = [asyncio.create_task(source()), asyncio.create_task(sampler())]
    tasks += [asyncio.create_task(stage1()) for _ in range(c)]
    tasks += [asyncio.create_task(stage2()) for _ in range(c)]
    wait = 0.0
    got = 0
    while True:
        t = time.perf_counter()
        x = await q2.get()
        wait += time.perf_counter() - t
        if x is None:
            break
        got += 1
        if consumer_s:
            await asyncio.sleep(consumer_s)
    t1 = time.perf_counter()
    done = True
    await asyncio.gather(*tasks)
    if executor is not None:
        executor.shutdown()
    assert got == n
    occ = "/".join(f"{s / max(samples, 1):.2f}" for s in occ_sum)
    return t1 - t0, wait, occ


async def run_floor(n: int, c: int, consumer_s: float) -> tuple[float, float, str]:
    """The leanest hand-written asyncio + threads version of the job: a floor, not a peer.

    Stage-1 tasks read one shared iterator, hand items to the stage-2 threads through an
    unbounded ``queue.SimpleQueue``, and the threads hand results to the consumer with
    one ``call_soon_threadsafe`` each. No bounded queues, statistics, failure handling
    or clean stop: only the work any implementation of this job must do.
    """
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    items = iter(range(n))
    mid: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    out: asyncio.Queue[int] = asyncio.Queue()

    async def stage1() -> None:
        for x in items:
            await asyncio.sleep(S1)
            mid.put(x)

    def stage2() -> None:
        while (x := mid.get()) is not None:
            time.sleep(S2)
            loop.call_soon_threadsafe(out.put_nowait, x)

    tasks = [asyncio.create_task(stage1()) for _ in range(c)]
    threads = [threading.Thread(target=stage2, daemon=True) for _ in range(c)]
    for t in threads:
        t.start()
    wait = 0.0
    for _ in range(n):
        t = time.perf_counter()
        await out.get()
        wait += time.perf_counter() - t
        if consumer_s:
            await asyncio.sleep(consumer_s)
    t1 = time.perf_counter()
    for _ in range(c):
        mid.put(None)
    await asyncio.gather(*tasks)
    for t in threads:
        t.join()
    return t1 - t0, wait, "-"


# -- peers in another interpreter -----------------------------------------------------------


def _consume(it: Any, n: int, consumer_s: float) -> float:
    """The sync consumer of the peers run in a subprocess: take every item of ``it``
    (sleeping ``consumer_s`` after each), check there were ``n``; return the total wait."""
    wait = 0.0
    got = 0
    while True:
        t = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        wait += time.perf_counter() - t
        got += 1
        if consumer_s:
            time.sleep(consumer_s)
    assert got == n, (got, n)
    return wait


def run_tfdata(n: int, c: int, consumer_s: float, tuned: bool) -> tuple[float, float, str]:
    import tensorflow as tf  # type: ignore[import-untyped,unused-ignore]

    def s1(x: Any) -> Any:
        time.sleep(S1)
        return x

    def s2(x: Any) -> Any:
        time.sleep(S2)
        return x

    t0 = time.perf_counter()
    ds = (
        tf.data.Dataset.range(n)
        .map(lambda x: tf.py_function(s1, [x], tf.int64), num_parallel_calls=c)
        .map(lambda x: tf.py_function(s2, [x], tf.int64), num_parallel_calls=c)
    )
    if tuned:
        options = tf.data.Options()
        options.threading.private_threadpool_size = 2 * c + 2
        ds = ds.with_options(options)
    wait = _consume(iter(ds), n, consumer_s)
    return time.perf_counter() - t0, wait, "-"


def run_spdl(n: int, c: int, consumer_s: float) -> tuple[float, float, str]:
    from spdl.pipeline import PipelineBuilder  # type: ignore[import-not-found,unused-ignore]

    async def s1(x: int) -> int:
        await asyncio.sleep(S1)
        return x

    def s2(x: int) -> int:
        time.sleep(S2)
        return x

    t0 = time.perf_counter()
    pipeline = (
        PipelineBuilder()
        .add_source(range(n))
        .pipe(s1, concurrency=c)
        .pipe(s2, concurrency=c)
        .add_sink(3)
        .build(num_threads=c)
    )
    with pipeline.auto_stop():
        wait = _consume(iter(pipeline), n, consumer_s)
    return time.perf_counter() - t0, wait, "-"


def peer_worker(peer: str, cs: list[int], runs: list[str], repeat: int) -> list[dict[str, Any]]:
    """Measure one peer that lives in this interpreter (called in the subprocess)."""
    out = []
    fns: dict[str, Callable[[int, int, float], tuple[float, float, str]]]
    if peer == "spdl":
        fns = {"SPDL (num_threads=C)": lambda n, c, s: run_spdl(n, c, s)}
    else:
        fns = {
            "tf.data (default pool)": lambda n, c, s: run_tfdata(n, c, s, False),
            "tf.data (pool 2C+2)": lambda n, c, s: run_tfdata(n, c, s, True),
        }
    for label, fn in fns.items():
        fn(4, 2, 0.0)  # warm-up: imports, runtime start
        for run in runs:
            for c in cs:
                n, consumer_s = RUNS[run]
                wall, wait, occ = median_run(repeat, fn, n, c, consumer_s)
                out.append(row(label, run, c, n, wall, wait, occ))
    return out


def run_peer_subprocess(
    python: str, peer: str, cs: list[int], runs: list[str], repeat: int
) -> list[Any]:
    cmd = [
        python,
        os.path.abspath(__file__),
        "--peer-worker",
        peer,
        "--concurrency",
        ",".join(map(str, cs)),
        "--runs",
        ",".join(runs),
        "--repeat",
        str(repeat),
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    timeout = 900 * repeat
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    if done.returncode != 0:
        print(f"# {peer} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return []
    result: list[Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- main -----------------------------------------------------------------------------------


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'run':<3} {'C':>3} {'peer':<30} {'items/s':>8} {'ceiling':>8} {'% ceil':>7} "
        f"{'wall s':>7} {'cons. wait s':>12}  occupancy (per stage)"
    )
    lines = [head, "-" * len(head)]
    for r in sorted(rows, key=lambda r: (r["run"], r["C"])):
        lines.append(
            f"{r['run']:<3} {r['C']:>3} {r['peer']:<30} {r['items_per_s']:>8.1f} "
            f"{r['ceiling']:>8.1f} {r['pct_ceiling']:>6.1f}% {r['wall_s']:>7.3f} "
            f"{r['consumer_wait_s']:>12.3f}  {r['occupancy']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,2,4,8,16", help="comma-separated C values")
    parser.add_argument("--runs", default="a,b", help="which runs: a, b or a,b")
    parser.add_argument("--quick", action="store_true", help="C=4, run b only")
    parser.add_argument("--no-peers", action="store_true", help="aqueue only")
    parser.add_argument(
        "--repeat", type=int, default=1, help="measure each row N times, report the median"
    )
    add_peer_arguments(parser, ["tf", "spdl"])
    parser.add_argument("--peer-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    cs = [4] if args.quick else [int(x) for x in args.concurrency.split(",")]
    runs = ["b"] if args.quick else args.runs.split(",")
    repeat = max(1, args.repeat)
    if args.peer_worker:
        print(json.dumps(peer_worker(args.peer_worker, cs, runs, repeat)))
        return

    import anyio

    rows: list[dict[str, Any]] = []
    anyio.run(run_aqueue, 4, 2, 0.0)  # warm-up
    for run in runs:
        for c in cs:
            n, consumer_s = RUNS[run]
            wall, wait, occ = median_run(repeat, anyio.run, run_aqueue, n, c, consumer_s)
            rows.append(row("aqueue Pipeline (defaults)", run, c, n, wall, wait, occ))
            if not args.no_peers:
                for pool, label in ((False, "default executor"), (True, "executor of C")):
                    wall, wait, occ = median_run(
                        repeat, lambda *a: asyncio.run(run_asyncio(*a)), n, c, consumer_s, pool
                    )
                    rows.append(row(f"asyncio+to_thread ({label})", run, c, n, wall, wait, occ))
                wall, wait, occ = median_run(
                    repeat, lambda *a: asyncio.run(run_floor(*a)), n, c, consumer_s
                )
                rows.append(row("floor: asyncio+SimpleQueue+threads", run, c, n, wall, wait, occ))
    if not args.no_peers:
        for peer, name in (("tfdata", "tf"), ("spdl", "spdl")):
            python = find_python(name, args)
            if python is not None:
                rows += run_peer_subprocess(python, peer, cs, runs, repeat)
    print(table(rows))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
