"""A1, autotuning: which concurrency keeps a training loop fed, and who finds it?

The workload (the defaults): 8,000 items; an async fetch that takes 6 ms per item (an
await, as a network read does), a thread map that decodes each item (a copy into a
``float32[32, 32]``: microseconds), ``batch(32)``, and a training loop whose step awaits
8 ms (as a step on an accelerator does). Its 250 steps take 2.0 s: the *ideal*, reached
only if the loop never waits for a batch. Keeping up takes 32 items per 8 ms, so about
24 fetches in flight (4,000 items/s x 6 ms), far more than the machine's cores.

Two workloads:

- ``steady``: every fetch takes 6 ms;
- ``regime``: the storage gets slower mid-run: the first half of the items are
  fetched in 2 ms, the second half in 12 ms (the same items for every row).

Rows, per workload:

- ``ideal``: steps x step, computed; ``floor``: the loop alone with its batches ready,
  measured (what the 8 ms awaits cost here: the best any loader can give);
- ``fixed F/T``: aqueue's Pipeline with today's API, ``map(fetch, concurrency=F)`` for
  F in 16, 32, 64, 128 and ``map(decode, concurrency=T)`` for T in 1, 2 (capacities by
  the default rule): the grid a user would have to search by hand;
- ``defaults 1/1``: concurrency 1 (the default), measured on a quarter of the items (it
  takes a quarter of the time per item) and shown as is;
- ``auto``: ``concurrency="auto"`` on both maps (the row says why not if the Pipeline
  refuses ``"auto"``);
- ``tf.data AUTOTUNE``: the same two functions (the fetch sleeps in a ``py_function``:
  tf.data cannot await) with ``num_parallel_calls=AUTOTUNE`` and ``prefetch(AUTOTUNE)``,
  and, for scale, with ``num_parallel_calls=64`` picked by hand (and a private pool of
  66 threads: TF's default pool has one thread per core). They run in a
  subprocess of the interpreter named by ``--tf-python`` / ``$AQUEUE_TF_PYTHON`` or
  ``--peer-python`` / ``$AQUEUE_PEER_PYTHON`` (see ``_peers.py``), else of this one if it
  imports tensorflow; without one they are skipped with a message.

Columns: wall seconds; ``x best`` = the best fixed row's wall time over this row's (1.00:
as fast as the best hand-picked setting; the target for ``auto`` is >= 0.95);
``of ideal`` = ideal over wall (the target for ``auto`` is >= 0.9); the share of the run
the loop waited for its next batch. Every row checks that it consumed each item once.

Not a timed test: the machine is shared; run it alone. Run:
python benchmarks/bench_autotune.py [--items 8000] [--fetch-ms 6] [--step-ms 8]
[--batch 32] [--repeat 1] [--workloads steady,regime] [--no-tf] [--no-defaults]
[--json PATH] [--peer-python PY] [--tf-python PY]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from _peers import add_peer_arguments, find_python

SHAPE = (32, 32)
PAYLOAD = np.arange(SHAPE[0] * SHAPE[1], dtype=np.float32).tobytes()
FETCH_GRID = (16, 32, 64, 128)
THREAD_GRID = (1, 2)


@dataclass(frozen=True)
class Config:
    """The workload (the defaults are the issue's numbers)."""

    items: int = 8000
    fetch_s: float = 0.006
    step_s: float = 0.008
    batch: int = 32
    fast_s: float = 0.002  # regime: the first half's fetch
    slow_s: float = 0.012  # regime: the second half's

    @property
    def steps(self) -> int:
        return self.items // self.batch

    @property
    def ideal_s(self) -> float:
        return self.steps * self.step_s

    def latency(self, workload: str) -> Callable[[int], float]:
        """Seconds the fetch of item ``i`` takes in ``workload``."""
        if workload == "steady":
            fetch_s = self.fetch_s
            return lambda i: fetch_s
        half, fast, slow = self.items // 2, self.fast_s, self.slow_s
        return lambda i: fast if i < half else slow


@dataclass
class Row:
    workload: str
    case: str
    wall_s: float | None
    waited: float | None = None
    note: str = ""


def decode(item: tuple[int, bytes]) -> np.ndarray:
    """The thread map: the fetched bytes as a float32[32, 32], tagged with the index."""
    i, raw = item
    x: np.ndarray = np.frombuffer(raw, dtype=np.float32).reshape(SHAPE).copy()
    x[0, 0] = i  # exact in float32 below 2**24
    return x


def _check(tags: list[float], n: int) -> None:
    got = sorted(int(t) for t in tags)
    if got != list(range(n)):
        raise AssertionError(f"consumed {len(got)} items, {len(set(got))} distinct, expected {n}")


# -- aqueue ------------------------------------------------------------------------------


def run_aqueue(cfg: Config, workload: str, fetch_c: Any, thread_c: Any) -> tuple[float, float]:
    """One run of the Pipeline; (wall seconds, share of it the loop waited)."""
    import anyio

    from aqueue import Pipeline

    latency = cfg.latency(workload)

    async def fetch(i: int) -> tuple[int, bytes]:
        await anyio.sleep(latency(i))
        return i, PAYLOAD

    async def main() -> tuple[float, float]:
        tags: list[float] = []
        waited = 0.0
        t0 = time.perf_counter()
        pipe = (
            Pipeline(range(cfg.items))
            .map(fetch, concurrency=fetch_c)
            .map(decode, concurrency=thread_c)
            .batch(cfg.batch)
        )
        async with pipe.open() as batches:
            while True:
                t = time.perf_counter()
                try:
                    batch = await batches.get()
                except Exception:  # OutOfRangeError: the end
                    break
                waited += time.perf_counter() - t
                tags.extend(batch[:, 0, 0].tolist())
                await anyio.sleep(cfg.step_s)
        wall = time.perf_counter() - t0
        _check(tags, cfg.items)
        return wall, waited / wall

    result: tuple[float, float] = anyio.run(main, backend="asyncio")
    return result


def run_floor(cfg: Config) -> float:
    """The loop alone, every batch ready: what its awaits cost on this machine."""
    import anyio

    async def main() -> float:
        batch = np.zeros((cfg.batch, *SHAPE), np.float32)
        t0 = time.perf_counter()
        for _ in range(cfg.steps):
            batch[0, 0, 0] += 1
            await anyio.sleep(cfg.step_s)
        return time.perf_counter() - t0

    result: float = anyio.run(main, backend="asyncio")
    return result


def auto_available() -> str | None:
    """None if the Pipeline takes ``concurrency="auto"``, else why not."""
    from aqueue import ElementSpecError, Pipeline

    async def fetch(i: int) -> int:
        return i

    try:
        Pipeline(range(1)).map(fetch, concurrency="auto")
    except (ElementSpecError, TypeError) as exc:
        return f"not available yet ({exc})"
    return None


# -- tf.data (in the peer's interpreter) -------------------------------------------------------


def run_tf(cfg: Config, workload: str, parallel: int | None) -> tuple[float, float]:
    """tf.data on the same two functions; ``parallel`` None: AUTOTUNE everywhere."""
    import tensorflow as tf  # type: ignore[import-untyped,unused-ignore]

    latency = cfg.latency(workload)
    auto = tf.data.AUTOTUNE

    def fetch(i: Any) -> int:
        time.sleep(latency(int(i)))
        return int(i)

    def py_decode(i: Any) -> np.ndarray:
        return decode((int(i), PAYLOAD))

    calls = auto if parallel is None else parallel
    ds = (
        tf.data.Dataset.range(cfg.items)
        .map(lambda i: tf.py_function(fetch, [i], tf.int64), num_parallel_calls=calls)
        .map(lambda i: tf.py_function(py_decode, [i], tf.float32), num_parallel_calls=auto)
        .batch(cfg.batch)
        .prefetch(auto)
    )
    if parallel is not None:  # (TF's default pool has one thread per core)
        options = tf.data.Options()
        options.threading.private_threadpool_size = parallel + 2
        ds = ds.with_options(options)
    tags: list[float] = []
    waited = 0.0
    t0 = time.perf_counter()
    it = iter(ds)
    while True:
        t = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        waited += time.perf_counter() - t
        tags.extend(batch.numpy()[:, 0, 0].tolist())
        time.sleep(cfg.step_s)
    wall = time.perf_counter() - t0
    _check(tags, cfg.items)
    return wall, waited / wall


def peer_worker(cfg: Config, workloads: list[str], repeat: int) -> list[dict[str, Any]]:
    rows = []
    run_tf(Config(items=64, batch=8), "steady", None)  # warm-up: imports, runtime start
    for workload in workloads:
        for parallel, case in ((None, "tf.data AUTOTUNE"), (64, "tf.data 64 calls, pool of 66")):
            wall, waited = _median(repeat, functools.partial(run_tf, cfg, workload, parallel))
            rows.append(asdict(Row(workload, case, wall, waited)))
    return rows


def run_peer(python: str, cfg: Config, workloads: list[str], repeat: int) -> list[Row]:
    cmd = [python, os.path.abspath(__file__), "--peer-worker", "--repeat", str(repeat)]
    cmd += ["--workloads", ",".join(workloads), "--config", json.dumps(asdict(cfg))]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600, check=False)
    if done.returncode != 0:
        print(f"# tf.data failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return []
    return [Row(**r) for r in json.loads(done.stdout.strip().splitlines()[-1])]


# -- the table ---------------------------------------------------------------------------------


def _median(repeat: int, fn: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    runs = sorted((fn() for _ in range(repeat)), key=lambda r: r[0])
    return runs[(len(runs) - 1) // 2]


def table(rows: list[Row], cfg: Config) -> str:
    head = f"{'workload':<8} {'case':<34} {'wall s':>7} {'x best':>7} {'of ideal':>8} {'waited':>7}"
    lines = [head, "-" * len(head)]
    for workload in dict.fromkeys(r.workload for r in rows):
        mine = [r for r in rows if r.workload == workload]
        fixed = [r.wall_s for r in mine if r.case.startswith("fixed") and r.wall_s]
        best = min(fixed) if fixed else None
        for r in mine:
            if r.wall_s is None:
                lines.append(f"{workload:<8} {r.case:<34} {'-':>7}  {r.note}")
                continue
            vs = f"{best / r.wall_s:.2f}" if best else "-"
            waited = "-" if r.waited is None else f"{r.waited:.0%}"
            lines.append(
                f"{workload:<8} {r.case:<34} {r.wall_s:>7.2f} {vs:>7} "
                f"{cfg.ideal_s / r.wall_s:>8.2f} {waited:>7}  {r.note}".rstrip()
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=Config.items)
    parser.add_argument("--fetch-ms", type=float, default=Config.fetch_s * 1e3)
    parser.add_argument("--step-ms", type=float, default=Config.step_s * 1e3)
    parser.add_argument("--batch", type=int, default=Config.batch)
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; the median is shown")
    parser.add_argument("--workloads", default="steady,regime")
    parser.add_argument("--no-tf", action="store_true", help="skip tf.data")
    parser.add_argument("--no-defaults", action="store_true", help="skip concurrency 1")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    add_peer_arguments(parser, ["tf"])
    parser.add_argument("--peer-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    workloads = args.workloads.split(",")
    repeat = max(1, args.repeat)
    if args.items % args.batch:
        parser.error(f"--items must be a multiple of --batch ({args.batch}), got {args.items}")
    if args.config:
        cfg = Config(**json.loads(args.config))
    else:
        cfg = Config(args.items, args.fetch_ms / 1e3, args.step_ms / 1e3, args.batch)
    if args.peer_worker:
        print(json.dumps(peer_worker(cfg, workloads, repeat)))
        return

    run_aqueue(Config(items=64, batch=8), "steady", 8, 1)  # warm-up: imports, first run
    why_not = auto_available()
    rows: list[Row] = []
    for workload in workloads:
        rows.append(Row(workload, "ideal (the loop never waits)", cfg.ideal_s, 0.0, "computed"))
        wall = statistics.median(run_floor(cfg) for _ in range(repeat))
        rows.append(Row(workload, "floor: the loop alone, batches ready", wall, 0.0))
        for f in FETCH_GRID:
            for t in THREAD_GRID:
                wall, waited = _median(repeat, functools.partial(run_aqueue, cfg, workload, f, t))
                rows.append(Row(workload, f"fixed {f}/{t}", wall, waited))
        if workload == "steady" and not args.no_defaults:
            n = cfg.items // 4 // cfg.batch * cfg.batch  # (whole batches: none dropped)
            quarter = Config(n, cfg.fetch_s, cfg.step_s, cfg.batch)
            wall, waited = _median(repeat, functools.partial(run_aqueue, quarter, workload, 1, 1))
            note = f"a quarter of the items: x4 is {4 * wall:.1f} s"
            rows.append(Row(workload, "defaults 1/1 (quarter)", wall, waited, note))
        if why_not is None:
            wall, waited = _median(
                repeat, functools.partial(run_aqueue, cfg, workload, "auto", "auto")
            )
            rows.append(Row(workload, "auto", wall, waited))
        else:
            rows.append(Row(workload, "auto", None, None, why_not))
    if not args.no_tf:
        python = find_python("tf", args)
        if python is not None:
            rows += run_peer(python, cfg, workloads, repeat)
    rows.sort(key=lambda r: workloads.index(r.workload))
    print(table(rows, cfg))
    print(json.dumps([asdict(r) for r in rows]))
    if args.json:
        with open(args.json, "w") as out:
            json.dump([asdict(r) for r in rows], out, indent=1)


if __name__ == "__main__":
    main()
