"""A1, autotuning: which concurrency keeps a training loop fed, and who finds it?

The workload (the defaults): 8,000 items; an async fetch that takes 6 ms per item (an
await, as a network read does), a thread map that decodes each item (a copy into a
``float32[32, 32]``: microseconds), ``batch(32)``, and a training loop whose step awaits
8 ms (as a step on an accelerator does). Its 250 steps take 2.0 s: the *ideal*, reached
only if the loop never waits for a batch. Keeping up takes 32 items per 8 ms, so about
24 fetches in flight (4,000 items/s x 6 ms), far more than the machine's cores.

Five workloads:

- ``steady``: every fetch takes 6 ms;
- ``regime``: the storage gets slower mid-run: the first half of the items are
  fetched in 2 ms, the second half in 12 ms (the same items for every row);
- ``w6a``, ``w6b``: W6 of ``bench_pipeline.py``, an async stage of 25 ms per item and a
  thread stage of 35 ms (a blocking sleep) at the same concurrency C, into a consumer
  of 30 ms per item (``w6a``, 100 items: 3.0 s if it never waits) or one that takes
  whatever comes (``w6b``, 1,000 items: the stages set the pace); C in 1..16 and 8..64;
- ``w8``: W8 of ``bench_images.py``, 2,000 JPEGs read and decoded with Pillow on C
  threads (1, 2, 4), batches of 64, a consumer that takes whatever comes (needs Pillow;
  the images are made once, where ``bench_images.py`` makes them).

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
- floor rows for ``auto``, to say where its gap to the best fixed row goes:
  ``auto from the best`` starts each tuned map at the best fixed row's numbers
  (``Auto(start=N)``): what the tuner costs once it has nothing to find (its ticks, a
  cut it tries; on ``w6b`` it still finds more threads past the grid's 64);
  ``auto, fetch from 4`` starts the fetch at 4 tasks (the default start before it
  became 16), so the distance from ``auto`` is what the ramp costs;
  ``auto, threads at most 64`` (``w6b``) holds the thread map to the grid's top (the
  default cap before it became 256): with 35 ms per item, its ramp from 2 threads
  costs more than 5% of a 0.6 s run, which ``auto`` makes up by going past 64;
- ``tf.data AUTOTUNE``: the same two functions (the fetch sleeps in a ``py_function``:
  tf.data cannot await) with ``num_parallel_calls=AUTOTUNE`` and ``prefetch(AUTOTUNE)``,
  and, for scale, with ``num_parallel_calls=64`` picked by hand (and a private pool of
  66 threads: TF's default pool has one thread per core). They run in a
  subprocess of the interpreter named by ``--tf-python`` / ``$AQUEUE_TF_PYTHON`` or
  ``--peer-python`` / ``$AQUEUE_PEER_PYTHON`` (see ``_peers.py``), else of this one if it
  imports tensorflow; without one they are skipped with a message.

Columns: wall seconds; ``x best`` = the best fixed row's wall time over this row's (1.00:
as fast as the best hand-picked setting; the target for ``auto`` is >= 0.95);
``of ideal`` = ideal over wall (the target for ``auto`` is >= 0.9; "-" where the stages
set the pace); the share of the run the loop waited for its next batch; ``settled``:
seconds from the start until the consumer stays fed, the end of the last whole 0.1 s
window in which it waited 5% or more (for a consumer that takes whatever comes: in
which it took items at less than 95% of the best fixed row's steady rate, its rate over
its second half); 0.0: from the first window on. Every row checks that it consumed each
item once.

Not a timed test: the machine is shared; run it alone. Run:
python benchmarks/bench_autotune.py [--items 8000] [--fetch-ms 6] [--step-ms 8]
[--batch 32] [--repeat 1] [--workloads steady,regime,w6a,w6b,w8] [--no-tf]
[--no-defaults] [--json PATH] [--peer-python PY] [--tf-python PY]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from _peers import add_peer_arguments, find_python
from bench_pipeline import S1, S2

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
    settled_s: float | None = None
    marks: list[tuple[float, float, int]] = field(default_factory=list, repr=False)
    """The consumer's batches: (seconds since the start when it got it, seconds it
    waited for it, items in it)."""

    def public(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "marks"}


Run = tuple[float, float, list[tuple[float, float, int]]]  # wall, waited share, marks


class Consumer:
    """The consumer's bookkeeping: its waits and when each batch came."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.waited = 0.0
        self.marks: list[tuple[float, float, int]] = []

    def got(self, since: float, items: int) -> None:
        """A batch of ``items`` came; the consumer asked for it at ``since``."""
        now = time.perf_counter()
        self.waited += now - since
        self.marks.append((now - self.t0, now - since, items))

    async def drain(self, items: Any, step_s: float, size: Callable[[Any], int]) -> list[Any]:
        """Take every item (batch) of ``items`` (an open pipeline), sleeping ``step_s``
        after each as a training step would; return them."""
        import anyio

        got = []
        while True:
            t = time.perf_counter()
            try:
                x = await items.get()
            except Exception:  # OutOfRangeError: the end
                return got
            self.got(t, size(x))
            got.append(x)
            if step_s:
                await anyio.sleep(step_s)

    def result(self) -> Run:
        wall = time.perf_counter() - self.t0
        return wall, self.waited / wall, self.marks


WINDOW_S = 0.1
FED = 0.05  # a window in which the consumer waited less than this share is fed
NEAR = 0.95  # ... or, for a consumer that takes whatever comes, took items at this share


def _windows(marks: list[tuple[float, float, int]], wall: float) -> tuple[Any, Any]:
    """Seconds waited and items taken in each whole window of the run."""
    n = max(0, int(wall / WINDOW_S) - 1)  # (the last window ends with the drain)
    waited, items = np.zeros(n), np.zeros(n)
    for t, w, k in marks:
        j = int(t / WINDOW_S)
        if j < n:
            items[j] += k
        a = t - w
        for i in range(max(0, int(a / WINDOW_S)), min(n, j + 1)):
            lo, hi = i * WINDOW_S, (i + 1) * WINDOW_S
            waited[i] += max(0.0, min(hi, t) - max(lo, a))
    return waited, items


def settled(row: Row, rate: float | None) -> float | None:
    """The ``settled`` column (see the module docstring); ``rate``: the best fixed row's
    steady items/s, for a consumer that takes whatever comes (None: judge by waits)."""
    if row.wall_s is None or not row.marks:
        return None
    waited, items = _windows(row.marks, row.wall_s)
    bad = waited / WINDOW_S >= FED if rate is None else items / WINDOW_S < NEAR * rate
    hit = np.flatnonzero(bad)
    return float((hit[-1] + 1) * WINDOW_S) if len(hit) else 0.0


def steady_rate(row: Row) -> float:
    """Items per second over the second half of a row's run."""
    half = row.marks[len(row.marks) // 2][0]
    later = sum(k for t, _, k in row.marks if t > half)
    return later / max(row.marks[-1][0] - half, 1e-9)


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

    async def main() -> Run:
        me = Consumer()
        pipe = (
            Pipeline(range(cfg.items))
            .map(fetch, concurrency=fetch_c)
            .map(decode, concurrency=thread_c)
            .batch(cfg.batch)
        )
        async with pipe.open() as batches:
            got = await me.drain(batches, cfg.step_s, len)
        result = me.result()
        _check([t for batch in got for t in batch[:, 0, 0].tolist()], cfg.items)
        return result

    result: Run = anyio.run(main, backend="asyncio")
    return result


W6 = {"w6a": (100, 0.030, (1, 2, 4, 8, 16)), "w6b": (1000, 0.0, (8, 16, 32, 64))}
W6_S1, W6_S2 = S1, S2  # seconds per item: the async stage, the thread stage


def run_w6(workload: str, c1: Any, c2: Any) -> Run:
    """W6 (see the module docstring) at concurrency ``c1`` / ``c2``."""
    import anyio

    from aqueue import Pipeline

    n, step_s, _ = W6[workload]

    async def stage1(x: int) -> int:
        await anyio.sleep(W6_S1)
        return x

    def stage2(x: int) -> int:
        time.sleep(W6_S2)
        return x

    async def main() -> Run:
        me = Consumer()
        pipe = (
            Pipeline(range(n))
            .map(stage1, concurrency=c1)
            .map(stage2, concurrency=c2, executor="thread")
        )
        async with pipe.open() as items:
            got = await me.drain(items, step_s, lambda _: 1)
        result = me.result()
        _check([float(x) for x in got], n)
        return result

    result: Run = anyio.run(main, backend="asyncio")
    return result


W8_IMAGES, W8_GRID = 2000, (1, 2, 4)


def w8_paths() -> list[str] | str:
    """The W8 images (made once, where bench_images.py makes them), or why not."""
    try:
        import PIL  # noqa: F401
    except ImportError:
        return "needs Pillow (pip install pillow)"
    import tempfile
    from pathlib import Path

    from bench_images import SIZE, make_images

    where = Path(tempfile.gettempdir()) / f"aqueue-bench-w8-jpeg{SIZE}"
    return make_images(where, W8_IMAGES)


def run_w8(paths: list[str], c: Any) -> Run:
    """W8 (see the module docstring) on ``c`` threads."""
    import anyio
    from bench_images import BATCH, load

    from aqueue import Pipeline

    async def main() -> Run:
        me = Consumer()
        pipe = (
            Pipeline.from_iterable(paths)
            .map(load, concurrency=c, executor="thread")
            .batch(BATCH, allow_smaller_final_batch=True)
        )
        async with pipe.open() as batches:
            await me.drain(batches, 0.0, len)
        result = me.result()
        if sum(k for _, _, k in result[2]) != len(paths):
            raise AssertionError(f"W8: got {sum(k for _, _, k in result[2])} images")
        return result

    result: Run = anyio.run(main, backend="asyncio")
    return result


def run_floor(steps: int, step_s: float) -> float:
    """The loop alone, every batch ready: what its awaits cost on this machine."""
    import anyio

    async def main() -> float:
        batch = np.zeros((32, *SHAPE), np.float32)
        t0 = time.perf_counter()
        for _ in range(steps):
            batch[0, 0, 0] += 1
            await anyio.sleep(step_s)
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
            runs = sorted(run_tf(cfg, workload, parallel) for _ in range(repeat))
            wall, waited = runs[(len(runs) - 1) // 2]
            rows.append(Row(workload, case, wall, waited).public())
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


def _median(repeat: int, fn: Callable[[], Run]) -> Run:
    runs = sorted((fn() for _ in range(repeat)), key=lambda r: r[0])
    return runs[(len(runs) - 1) // 2]


def _best(rows: list[Row], workload: str) -> Row | None:
    fixed = [r for r in rows if r.workload == workload and r.case.startswith("fixed") and r.wall_s]
    return min(fixed, key=lambda r: r.wall_s or math.inf) if fixed else None


def table(rows: list[Row], ideal: dict[str, float]) -> str:
    head = (
        f"{'workload':<8} {'case':<34} {'wall s':>7} {'x best':>7} {'of ideal':>8} "
        f"{'waited':>7} {'settled':>7}"
    )
    lines = [head, "-" * len(head)]
    for workload in dict.fromkeys(r.workload for r in rows):
        best = _best(rows, workload)
        for r in (r for r in rows if r.workload == workload):
            if r.wall_s is None:
                lines.append(f"{workload:<8} {r.case:<34} {'-':>7}  {r.note}")
                continue
            measured = not r.case.startswith(("ideal", "floor"))
            vs = f"{best.wall_s / r.wall_s:.2f}" if best and best.wall_s and measured else "-"
            of = f"{ideal[workload] / r.wall_s:.2f}" if workload in ideal else "-"
            waited = "-" if r.waited is None else f"{r.waited:.0%}"
            calm = "-" if r.settled_s is None else f"{r.settled_s:.1f}"
            lines.append(
                f"{workload:<8} {r.case:<34} {r.wall_s:>7.2f} {vs:>7} {of:>8} {waited:>7} "
                f"{calm:>7}  {r.note}".rstrip()
            )
    return "\n".join(lines)


def ratios(rows: list[Row]) -> str:
    """One line per workload: auto and its floor rows over the best fixed row."""
    out = []
    for workload in dict.fromkeys(r.workload for r in rows):
        best = _best(rows, workload)
        if best is None or not best.wall_s:
            continue
        parts = [
            f"{r.case} {best.wall_s / r.wall_s:.2f}x"
            for r in rows
            if r.workload == workload and r.case.startswith("auto") and r.wall_s
        ]
        out.append(
            f"{workload}: best fixed = {best.case} ({best.wall_s:.2f} s); " + ", ".join(parts)
        )
    return "\n".join(out)


def _grid(workload: str) -> list[tuple[Any, Any]]:
    if workload in ("steady", "regime"):
        return [(f, t) for f in FETCH_GRID for t in THREAD_GRID]
    if workload in W6:
        return [(c, c) for c in W6[workload][2]]
    return [(c, c) for c in W8_GRID]


def _runner(workload: str, cfg: Config, w8: list[str] | str) -> Callable[[Any, Any], Run]:
    if workload in ("steady", "regime"):
        return functools.partial(run_aqueue, cfg, workload)
    if workload in W6:
        return functools.partial(run_w6, workload)
    assert isinstance(w8, list)
    return lambda c, _: run_w8(w8, c)


def _autos(workload: str, best: Row | None) -> list[tuple[str, Any, Any]]:
    """The auto rows: auto, auto from the best fixed row's numbers, (for the fetch
    workloads) auto with the fetch started at 4 and (for ``w6b``) auto with the
    threads held to 64."""
    from aqueue import Auto

    out: list[tuple[str, Any, Any]] = [("auto", "auto", "auto")]
    if best is not None:
        first, second = (int(x) for x in best.case.split()[1].split("/"))
        out.append(
            (f"auto from the best ({first}/{second})", Auto(start=first), Auto(start=second))
        )
    if workload in ("steady", "regime"):
        out.append(("auto, fetch from 4", Auto(start=4), "auto"))
    if workload == "w6b":
        out.append(("auto, threads at most 64", "auto", Auto(max=64)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=Config.items)
    parser.add_argument("--fetch-ms", type=float, default=Config.fetch_s * 1e3)
    parser.add_argument("--step-ms", type=float, default=Config.step_s * 1e3)
    parser.add_argument("--batch", type=int, default=Config.batch)
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; the median is shown")
    parser.add_argument("--workloads", default="steady,regime,w6a,w6b,w8")
    parser.add_argument("--no-tf", action="store_true", help="skip tf.data")
    parser.add_argument("--no-defaults", action="store_true", help="skip concurrency 1")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    add_peer_arguments(parser, ["tf"])
    parser.add_argument("--peer-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    workloads = args.workloads.split(",")
    unknown = set(workloads) - {"steady", "regime", "w8", *W6}
    if unknown:
        parser.error(f"--workloads: unknown {sorted(unknown)}")
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
    w8 = w8_paths() if "w8" in workloads else "not asked for"
    ideal = {"steady": cfg.ideal_s, "regime": cfg.ideal_s, "w6a": W6["w6a"][0] * W6["w6a"][1]}
    rows: list[Row] = []
    for workload in workloads:
        if workload == "w8" and isinstance(w8, str):
            rows.append(Row(workload, "(all rows)", None, None, w8))
            continue
        if workload in ideal:
            note = "computed"
            rows.append(
                Row(workload, "ideal (the consumer never waits)", ideal[workload], 0.0, note)
            )
        if workload in ideal:  # the consumer's own steps, with nothing to wait for
            steps, step_s = (
                (W6[workload][0], W6[workload][1]) if workload in W6 else (cfg.steps, cfg.step_s)
            )
            wall = statistics.median(run_floor(steps, step_s) for _ in range(repeat))
            rows.append(Row(workload, "floor: the loop alone, batches ready", wall, 0.0))
        run = _runner(workload, cfg, w8)
        for a, b in _grid(workload):
            wall, waited, marks = _median(repeat, functools.partial(run, a, b))
            rows.append(Row(workload, f"fixed {a}/{b}", wall, waited, marks=marks))
        if workload == "steady" and not args.no_defaults:
            n = cfg.items // 4 // cfg.batch * cfg.batch  # (whole batches: none dropped)
            quarter = Config(n, cfg.fetch_s, cfg.step_s, cfg.batch)
            wall, waited, _ = _median(
                repeat, functools.partial(run_aqueue, quarter, workload, 1, 1)
            )
            note = f"a quarter of the items: x4 is {4 * wall:.1f} s"
            rows.append(Row(workload, "defaults 1/1 (quarter)", wall, waited, note))
        if why_not is not None:
            rows.append(Row(workload, "auto", None, None, why_not))
            continue
        for case, a, b in _autos(workload, _best(rows, workload)):
            wall, waited, marks = _median(repeat, functools.partial(run, a, b))
            rows.append(Row(workload, case, wall, waited, marks=marks))
    for workload in workloads:
        best = _best(rows, workload)
        takes_all = workload in ("w6b", "w8")
        rate = steady_rate(best) if takes_all and best is not None else None
        for r in rows:
            if r.workload == workload and r.marks:
                r.settled_s = settled(r, rate)
    tf_workloads = [w for w in workloads if w in ("steady", "regime")]
    if not args.no_tf and tf_workloads:
        python = find_python("tf", args)
        if python is not None:
            rows += run_peer(python, cfg, tf_workloads, repeat)
    rows.sort(key=lambda r: workloads.index(r.workload))
    print(table(rows, ideal))
    print()
    print(ratios(rows))
    print(json.dumps([r.public() for r in rows]))
    if args.json:
        with open(args.json, "w") as out:
            json.dump([r.public() for r in rows], out, indent=1)


if __name__ == "__main__":
    main()
