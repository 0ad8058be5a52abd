"""W7, per-item overhead: what the pipeline itself costs for each item.

The chain: a source of N ints (default 100,000) -> ``map(fn)`` at concurrency C ->
``batch(32)`` -> a consumer that takes every batch. ``fn`` is the identity (a plain
function, or a trivial coroutine for the async map), so nearly all the time is the
pipeline's own: taking an item, handing it to a worker, handing the result on,
collating batches. With ``--work-us W`` the sync function also sleeps W µs
(``time.sleep``, which releases the GIL, as a decode or a read does); the async rows are
then left out (asyncio's timers round sleeps up to 1 ms, which would measure the timer).

Rows, each at every C (default 1, 4, 16), all with the same function, item count and
batch size:

- ``aqueue thread map``: ``Pipeline.from_iterable(range(N)).map(fn, concurrency=C)
  .batch(32)`` with a sync ``fn`` (C long-lived threads), an async consumer;
- ``aqueue async map``: the same with an ``async def`` fn (C tasks);
- ``floor (thread)``: not a peer but the leanest hand-written code doing the job: C
  threads pull items from a ``queue.SimpleQueue`` (filled with the N items inside the
  timed region), apply fn, and hand each result to an asyncio consumer with one
  ``loop.call_soon_threadsafe``; the consumer batches 32 (``np.asarray`` of a list);
- ``floor (async)``: C tasks between two ``asyncio.Queue``s (the input one filled up
  front, the output one bounded at max(8, 2C) like aqueue's default), the consumer
  batches 32 the same way;
- ``ThreadPoolExecutor(C).map`` with a synchronous consumer that batches 32;
- peers, each run by its own interpreter in a subprocess (see ``_peers.py``) when it can
  import them: tf.data (``map(tf.numpy_function(fn), num_parallel_calls=C)``,
  ``deterministic=False``, ``batch(32)``), SPDL (``pipe(fn, concurrency=C)``,
  ``aggregate(32)``, ``build(num_threads=C)``; with the sync fn, and with the async fn),
  Grain (``MapDataset.source(range(N)).map(fn).to_iter_dataset(ReadOptions(num_threads=C))
  .batch(32)``: threads, no multiprocessing; and the variant that batches before the
  thread prefetch).

Each timed run goes from building the pipeline to the last batch consumed (teardown
excluded), and checks that the batches held exactly the N items (count and sum). Every
case has one warm-up run of 2,000 items in its process first, not timed. Repetitions
are interleaved: each round runs every case once (the peers in one fresh subprocess per
round, which warms up again), ``--repeat`` rounds, and the table shows the median.

This is a script, not a test; nothing is asserted. Targets are printed with the ratios:
aqueue >= 0.7x the floor at every C; C = 4 and C = 16 >= 0.95x C = 1; aqueue ahead of
every peer at every C.

Run: python benchmarks/bench_items.py [--items 100000] [--concurrency 1,4,16]
     [--repeat 3] [--work-us 0] [--quick] [--no-peers] [--json PATH]
     [--peer-python PY] [--tf-python PY] [--spdl-python PY] [--grain-python PY]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from _peers import add_peer_arguments, find_python

BATCH = 32
WARMUP_ITEMS = 2_048


def make_fns(work_us: float) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """The sync and the async function every row applies to each item."""
    if work_us > 0:
        seconds = work_us / 1e6

        def fn(x: Any) -> Any:
            time.sleep(seconds)
            return x

    else:

        def fn(x: Any) -> Any:
            return x

    async def afn(x: Any) -> Any:
        return x

    return fn, afn


class Batches:
    """The consumer's side of every row: counts items and sums them (the check)."""

    __slots__ = ("items", "total")

    def __init__(self) -> None:
        self.items = 0
        self.total = 0

    def take(self, batch: Any) -> None:
        arr = np.asarray(batch)
        self.items += len(arr)
        self.total += int(arr.sum())

    def check(self, n: int) -> None:
        want = n // BATCH * BATCH  # the last partial batch is dropped everywhere
        if self.items != want or self.total != want * (want - 1) // 2:
            raise AssertionError(f"got {self.items} items summing to {self.total}, want {want}")


# -- aqueue ------------------------------------------------------------------------------


async def aqueue_run(n: int, c: int, fn: Callable[[Any], Any]) -> float:
    from aqueue import Pipeline

    got = Batches()
    t0 = time.perf_counter()
    pipe = Pipeline.from_iterable(range(n)).map(fn, concurrency=c).batch(BATCH)
    async with pipe.open() as batches:
        async for b in batches:
            got.take(b)
        t1 = time.perf_counter()
    got.check(n)
    return t1 - t0


# -- floors and plain Python ---------------------------------------------------------------


async def floor_thread(n: int, c: int, fn: Callable[[Any], Any]) -> float:
    """C threads, a SimpleQueue in, one call_soon_threadsafe per result out."""
    loop = asyncio.get_running_loop()
    got = Batches()
    t0 = time.perf_counter()
    src: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    for i in range(n):
        src.put(i)
    for _ in range(c):
        src.put(None)
    out: asyncio.Queue[Any] = asyncio.Queue()

    def work() -> None:
        while (x := src.get()) is not None:
            loop.call_soon_threadsafe(out.put_nowait, fn(x))

    threads = [threading.Thread(target=work, daemon=True) for _ in range(c)]
    for t in threads:
        t.start()
    for _ in range(n // BATCH):
        got.take([await out.get() for _ in range(BATCH)])
    t1 = time.perf_counter()
    for t in threads:
        t.join()
    got.check(n)
    return t1 - t0


async def floor_async(n: int, c: int, afn: Callable[[Any], Any]) -> float:
    """C tasks between two asyncio.Queues (the output one bounded)."""
    got = Batches()
    t0 = time.perf_counter()
    q_in: asyncio.Queue[int | None] = asyncio.Queue()
    for i in range(n):
        q_in.put_nowait(i)
    for _ in range(c):
        q_in.put_nowait(None)
    q_out: asyncio.Queue[Any] = asyncio.Queue(max(8, 2 * c))

    async def work() -> None:
        while (x := await q_in.get()) is not None:
            await q_out.put(await afn(x))

    tasks = [asyncio.create_task(work()) for _ in range(c)]
    for _ in range(n // BATCH):
        got.take([await q_out.get() for _ in range(BATCH)])
    t1 = time.perf_counter()
    for task in tasks:  # a partial last batch may still be waiting for room
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    got.check(n)
    return t1 - t0


def executor_map(n: int, c: int, fn: Callable[[Any], Any]) -> float:
    """ThreadPoolExecutor(C).map, a synchronous consumer batching 32."""
    got = Batches()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(c) as pool:
        buf: list[Any] = []
        for x in pool.map(fn, range(n)):
            buf.append(x)
            if len(buf) == BATCH:
                got.take(buf)
                buf = []
        t1 = time.perf_counter()
    got.check(n)
    return t1 - t0


# -- peers (run in their own interpreter) ----------------------------------------------------


def tfdata_run(n: int, c: int, fn: Callable[[Any], Any]) -> float:
    import tensorflow as tf

    got = Batches()
    t0 = time.perf_counter()
    options = tf.data.Options()
    options.deterministic = False
    ds = (
        tf.data.Dataset.range(n)
        .map(lambda x: tf.numpy_function(fn, [x], tf.int64), num_parallel_calls=c)
        .batch(BATCH, drop_remainder=True)
        .with_options(options)
    )
    for b in ds:
        got.take(b.numpy())
    t1 = time.perf_counter()
    got.check(n)
    return t1 - t0


def spdl_run(n: int, c: int, fn: Callable[[Any], Any]) -> float:
    from spdl.pipeline import PipelineBuilder

    got = Batches()
    t0 = time.perf_counter()
    pipeline = (
        PipelineBuilder()
        .add_source(range(n))
        .pipe(fn, concurrency=c)
        .aggregate(BATCH, drop_last=True)
        .add_sink(3)
        .build(num_threads=c)
    )
    with pipeline.auto_stop():
        for b in pipeline:
            got.take(b)
        t1 = time.perf_counter()
    got.check(n)
    return t1 - t0


def grain_run(n: int, c: int, fn: Callable[[Any], Any], batch_first: bool) -> float:
    import grain

    got = Batches()
    t0 = time.perf_counter()
    options = grain.ReadOptions(num_threads=c)
    ds = grain.MapDataset.source(range(n)).map(fn)
    if batch_first:
        it_ds = ds.batch(BATCH, drop_remainder=True).to_iter_dataset(options)
    else:
        it_ds = ds.to_iter_dataset(options).batch(BATCH, drop_remainder=True)
    for b in it_ds:
        got.take(b)
    t1 = time.perf_counter()
    got.check(n)
    return t1 - t0


# -- cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One row of the table."""

    key: str
    label: str
    kind: str  # "thread" (sync fn) or "async" (async fn)
    role: str  # "aqueue", "floor" or "peer"
    run: Callable[[int, int], float]  # (items, C) -> seconds


def local_cases(work_us: float) -> list[Case]:
    fn, afn = make_fns(work_us)
    cases = [
        Case(
            "aqueue/thread",
            "aqueue map (sync fn, threads)",
            "thread",
            "aqueue",
            lambda n, c: asyncio.run(aqueue_run(n, c, fn)),
        ),
        Case(
            "floor/thread",
            "floor: threads + SimpleQueue + call_soon_threadsafe",
            "thread",
            "floor",
            lambda n, c: asyncio.run(floor_thread(n, c, fn)),
        ),
        Case(
            "executor/thread",
            "ThreadPoolExecutor(C).map",
            "thread",
            "peer",
            lambda n, c: executor_map(n, c, fn),
        ),
    ]
    if work_us <= 0:
        cases += [
            Case(
                "aqueue/async",
                "aqueue map (async fn, tasks)",
                "async",
                "aqueue",
                lambda n, c: asyncio.run(aqueue_run(n, c, afn)),
            ),
            Case(
                "floor/async",
                "floor: tasks + two asyncio.Queues",
                "async",
                "floor",
                lambda n, c: asyncio.run(floor_async(n, c, afn)),
            ),
        ]
    return cases


def peer_cases(peer: str, work_us: float) -> list[Case]:
    fn, afn = make_fns(work_us)
    if peer == "tf":
        return [
            Case(
                "tfdata/thread",
                "tf.data map(numpy_function)",
                "thread",
                "peer",
                lambda n, c: tfdata_run(n, c, fn),
            )
        ]
    if peer == "spdl":
        cases = [
            Case(
                "spdl/thread",
                "SPDL pipe (sync fn)",
                "thread",
                "peer",
                lambda n, c: spdl_run(n, c, fn),
            )
        ]
        if work_us <= 0:
            cases.append(
                Case(
                    "spdl/async",
                    "SPDL pipe (async fn)",
                    "async",
                    "peer",
                    lambda n, c: spdl_run(n, c, afn),
                )
            )
        return cases
    assert peer == "grain"
    return [
        Case(
            "grain/thread",
            "Grain map -> thread prefetch -> batch",
            "thread",
            "peer",
            lambda n, c: grain_run(n, c, fn, False),
        ),
        Case(
            "grain-batched/thread",
            "Grain map -> batch -> thread prefetch",
            "thread",
            "peer",
            lambda n, c: grain_run(n, c, fn, True),
        ),
    ]


def run_round(cases: list[Case], n: int, cs: list[int], warm: bool) -> dict[str, dict[int, float]]:
    """One round: every case at every C once; items/s by case key and C."""
    out: dict[str, dict[int, float]] = {}
    for case in cases:
        if warm:
            case.run(min(n, WARMUP_ITEMS), cs[0])
        for c in cs:
            print(f"  {case.key} C={c} ...", file=sys.stderr, flush=True)
            out.setdefault(case.key, {})[c] = n / case.run(n, c)
    return out


def peer_round(
    python: str, peer: str, n: int, cs: list[int], work_us: float, seen: dict[str, Any]
) -> dict[str, dict[int, float]] | str:
    """One round of ``peer``'s cases in a fresh subprocess (or why it failed); the
    versions it reports go into ``seen``."""
    cmd = [
        python,
        os.path.abspath(__file__),
        "--peer-worker",
        peer,
        f"--items={n}",
        f"--concurrency={','.join(map(str, cs))}",
        f"--work-us={work_us}",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    except subprocess.TimeoutExpired:
        return "timed out after 1800 s"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["no output"])[-1]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    seen[peer] = doc["versions"]
    raw: dict[str, dict[str, float]] = doc["rates"]
    return {k: {int(c): v for c, v in by_c.items()} for k, by_c in raw.items()}


# -- report --------------------------------------------------------------------------------


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def report(
    cases: list[Case],
    med: dict[str, dict[int, float]],
    spread: dict[str, dict[int, str]],
    cs: list[int],
) -> tuple[str, list[dict[str, Any]]]:
    """The markdown tables (rates, ratios with targets) and the ratio records."""
    head = "| row | fn runs on | " + " | ".join(f"C={c}" for c in cs) + " |"
    lines = [
        "items/s, median of the rounds (min-max of the rounds below)",
        "",
        head,
        "|---|---|" + "---|" * len(cs),
    ]
    for case in cases:
        if case.key not in med:
            continue
        where = "threads" if case.kind == "thread" else "tasks"
        cells = [f"{fmt_rate(med[case.key].get(c))} ({spread[case.key].get(c, '')})" for c in cs]
        lines.append(f"| {case.label} | {where} | " + " | ".join(cells) + " |")

    ratios: list[dict[str, Any]] = []

    def ratio(name: str, num: str, den: str, target: float, per_c: Callable[[int], int]) -> None:
        if num not in med or den not in med:
            return
        values = {}
        for c in cs:
            a, b = med[num].get(c), med[den].get(per_c(c))
            values[c] = a / b if a is not None and b else None
        met = all(v is not None and v >= target for v in values.values())
        ratios.append({"ratio": name, "target": target, "met": met, "values": values})

    for kind in ("thread", "async"):
        ratio(f"aqueue {kind} / floor {kind}", f"aqueue/{kind}", f"floor/{kind}", 0.7, lambda c: c)
    for kind in ("thread", "async"):
        ratio(
            f"aqueue {kind}: C / C={cs[0]}",
            f"aqueue/{kind}",
            f"aqueue/{kind}",
            0.95,
            lambda c: cs[0],
        )
    for case in cases:
        if case.role == "peer":
            ratio(
                f"aqueue {case.kind} / {case.label}",
                f"aqueue/{case.kind}",
                case.key,
                1.0,
                lambda c: c,
            )
    lines += [
        "",
        "| ratio | " + " | ".join(f"C={c}" for c in cs) + " | target | met |",
        "|---|" + "---|" * (len(cs) + 2),
    ]
    for r in ratios:
        cells = " | ".join(fmt_ratio(r["values"][c]) for c in cs)
        lines.append(
            f"| {r['ratio']} | {cells} | >= {r['target']}x | {'yes' if r['met'] else 'no'} |"
        )
    return "\n".join(lines), ratios


PEER_DISTRIBUTIONS = {"tf": "tensorflow-cpu", "spdl": "spdl", "grain": "grain"}


def versions(*dists: str) -> dict[str, str]:
    """Versions of this interpreter, numpy and the given distributions."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "numpy": np.__version__}
    for d in dists:
        try:
            out[d] = version(d)
        except PackageNotFoundError:
            out[d] = "not installed"
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--concurrency", default="1,4,16", help="comma-separated C values")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--work-us", type=float, default=0.0, help="sync fn sleeps this long")
    parser.add_argument("--quick", action="store_true", help="smoke run: 6,400 items, 1 round")
    parser.add_argument("--no-peers", action="store_true", help="no subprocess peers")
    parser.add_argument("--json", default=None, help="also write the JSON report here")
    parser.add_argument("--peer-worker", default=None, help=argparse.SUPPRESS)
    add_peer_arguments(parser, ["tf", "spdl", "grain"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    n, cs, repeat = args.items, [int(x) for x in args.concurrency.split(",")], args.repeat
    if args.quick:
        n, repeat = 6_400, 1
    if args.peer_worker:  # in a peer's interpreter: one round, JSON on stdout
        result = run_round(peer_cases(args.peer_worker, args.work_us), n, cs, warm=True)
        dist = PEER_DISTRIBUTIONS[args.peer_worker]
        print(json.dumps({"rates": result, "versions": versions(dist)}))
        return 0

    cases = local_cases(args.work_us)
    peers: dict[str, str] = {}
    if not args.no_peers:
        for peer in ("tf", "spdl", "grain"):
            python = find_python(peer, args)
            if python is not None:
                peers[peer] = python
                cases += peer_cases(peer, args.work_us)
    rounds: dict[str, dict[int, list[float]]] = {}
    failures: dict[str, str] = {}
    peer_versions: dict[str, Any] = {}
    for r in range(repeat):
        print(f"round {r + 1}/{repeat}", file=sys.stderr, flush=True)
        results = [run_round(local_cases(args.work_us), n, cs, warm=r == 0)]
        for peer, python in peers.items():
            got = peer_round(python, peer, n, cs, args.work_us, peer_versions)
            if isinstance(got, str):
                failures[peer] = got
                print(f"# {peer} failed: {got}", file=sys.stderr)
            else:
                results.append(got)
        for res in results:
            for key, by_c in res.items():
                for c, rate in by_c.items():
                    rounds.setdefault(key, {}).setdefault(c, []).append(rate)
    med = {k: {c: statistics.median(v) for c, v in by_c.items()} for k, by_c in rounds.items()}
    spread = {
        k: {c: f"{fmt_rate(min(v))}-{fmt_rate(max(v))}" for c, v in by_c.items()}
        for k, by_c in rounds.items()
    }
    text, ratios = report(cases, med, spread, cs)
    title = (
        f"W7: {n:,} ints -> map(identity{f' + sleep {args.work_us:g} us' if args.work_us else ''})"
        f" -> batch({BATCH}); {repeat} round(s)"
    )
    print(f"{title}\n\n{text}")
    print("\nversions: " + ", ".join(f"{k} {v}" for k, v in versions("aqueue", "anyio").items()))
    for peer, v in peer_versions.items():
        print(f"  {peer} ({peers[peer]}): " + ", ".join(f"{k} {x}" for k, x in v.items()))
    doc = {
        "workload": {"items": n, "batch": BATCH, "work_us": args.work_us, "rounds": repeat},
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "versions": versions("aqueue", "anyio"),
        "peers": {p: {"python": py, **peer_versions.get(p, {})} for p, py in peers.items()},
        "failures": failures,
        "rows": [
            {
                "key": c.key,
                "label": c.label,
                "kind": c.kind,
                "role": c.role,
                "items_per_s": rounds.get(c.key, {}),
            }
            for c in cases
        ],
        "ratios": ratios,
    }
    print(json.dumps(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
