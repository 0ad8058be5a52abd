"""W4, the overlap benchmark: do loaders hide behind training steps?

Eight producers each load one ``float32[32, 32]`` element with a blocking 5 ms call
(``time.sleep`` in a thread, standing in for a file read or a decode); a trainer takes
batches of 32 and spends 20 ms per step; 100 steps. Loading all 3,200 elements takes
3,200 x 5 ms / 8 = 2.0 s of wall time and training 100 x 20 ms = 2.0 s, so a perfect
pipeline finishes in max(2.0, 2.0) = 2.0 s (the *ideal*) and a pipeline without prefetch
in about their sum. Efficiency = ideal / measured wall time.

Two kinds of training step:

- ``sleep``: the step waits without holding the interpreter (``await anyio.sleep`` in
  async trainers, ``time.sleep`` in synchronous ones), like a step that waits for an
  accelerator;
- ``numpy``: the step computes (256 x 256 float32 matmuls until 20 ms have passed) and,
  in async trainers, blocks the event loop for the whole step.

Cases: aqueue (QueueRunner with ``[load] * 8`` under a Coordinator: eight dedicated
threads enqueueing through the queue's blocking view; asyncio and trio); the sequential
pipeline (the same eight threads load each batch only when the trainer asks for it: no
prefetch); 8 threads + ``queue.Queue``; asyncio tasks + ``asyncio.to_thread`` (with an
8-thread default executor); torch ``DataLoader(num_workers=8, batch_size=32)``;
``tf.data`` (``map(py_function, num_parallel_calls=8).batch(32).prefetch``, with an
8-thread private pool and with TF's default pool) and ``tf.queue.FIFOQueue`` fed by 8
threads. The torch and TF cases run in a subprocess: of the interpreter named by
``--torch-python`` / ``$AQUEUE_TORCH_PYTHON``, ``--tf-python`` / ``$AQUEUE_TF_PYTHON``, or
``--peer-python`` / ``$AQUEUE_PEER_PYTHON`` (see ``_peers.py``), else of this one if it
imports them; without one they are skipped with a message. Every case checks that
it consumed 3,200 distinct elements.

This is a script, not a test. Run: python benchmarks/bench_overlap.py [--steps 100]
[--producers 8] [--load-ms 5] [--step-ms 20] [--batch 32] [--capacity 256] [--reps 1]
[--only REGEX] [--no-tf] [--no-torch] [--json PATH] [--peer-python PY] [--tf-python PY]
[--torch-python PY]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import itertools
import json
import os
import queue
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from _peers import add_peer_arguments, find_python

SHAPE = (32, 32)


@dataclass(frozen=True)
class Config:
    """The workload (the defaults are W4's)."""

    producers: int = 8
    load_s: float = 0.005
    step_s: float = 0.020
    batch: int = 32
    steps: int = 100
    capacity: int = 256

    @property
    def elements(self) -> int:
        """Elements the trainer consumes."""
        return self.batch * self.steps

    @property
    def ideal_s(self) -> float:
        """max(total train time, total load time / producers)."""
        return max(self.steps * self.step_s, self.elements * self.load_s / self.producers)


class Loader:
    """The blocking per-element load: sleeps, then returns a tagged element."""

    def __init__(self, cfg: Config) -> None:
        self._seconds = cfg.load_s
        self._tags = itertools.count()
        self._lock = threading.Lock()

    def __call__(self) -> np.ndarray:
        time.sleep(self._seconds)
        with self._lock:
            tag = next(self._tags)
        x = np.empty(SHAPE, np.float32)
        x[0, 0] = tag  # exact in float32 below 2**24
        return x


class Step:
    """The trainer's step: ``sleep`` (does not hold the interpreter) or ``numpy``."""

    def __init__(self, kind: str, seconds: float) -> None:
        self.kind = kind
        self.seconds = seconds
        rng = np.random.default_rng(0)
        self._a = rng.random((256, 256), dtype=np.float32)
        self._b = rng.random((256, 256), dtype=np.float32)

    def compute(self, batch: np.ndarray) -> None:
        """The numpy step: matmuls until ``seconds`` have passed (blocks the caller)."""
        end = time.perf_counter() + self.seconds
        acc = float(batch[:, 1:, 1:].sum())
        while time.perf_counter() < end:
            acc += float((self._a @ self._b)[0, 0])

    def sync(self, batch: np.ndarray) -> None:
        """The step in a synchronous trainer."""
        if self.kind == "sleep":
            time.sleep(self.seconds)
        else:
            self.compute(batch)


def check(tags: list[float], cfg: Config) -> str | None:
    """None if the trainer got ``cfg.elements`` distinct elements, else what went wrong."""
    if len(tags) != cfg.elements:
        return f"consumed {len(tags)} elements, expected {cfg.elements}"
    if len(set(tags)) != len(tags):
        return f"{len(tags) - len(set(tags))} duplicate elements"
    return None


# -- aqueue ----------------------------------------------------------------------------


def run_aqueue(cfg: Config, step: Step, backend: str) -> tuple[float, list[float]]:
    """QueueRunner([load] * producers) under a Coordinator; an async trainer."""
    import anyio

    from aqueue import Coordinator, FIFOQueue, QueueRunner

    async def main() -> tuple[float, list[float]]:
        load = Loader(cfg)
        q = FIFOQueue(cfg.capacity, np.float32, SHAPE, name="w4")
        tags: list[float] = []
        t0 = time.perf_counter()
        async with Coordinator() as coord:
            coord.start(QueueRunner(q, [load] * cfg.producers))
            for _ in range(cfg.steps):
                batch = await q.dequeue_many(cfg.batch)
                tags.extend(batch[:, 0, 0].tolist())
                if step.kind == "sleep":
                    await anyio.sleep(step.seconds)
                else:
                    step.compute(batch)  # blocks the event loop
            wall = time.perf_counter() - t0
        return wall, tags

    result: tuple[float, list[float]] = anyio.run(main, backend=backend)
    return result


# -- peers -----------------------------------------------------------------------------


def run_sequential(cfg: Config, step: Step) -> tuple[float, list[float]]:
    """No prefetch: the same producer threads load a batch only when the trainer asks."""
    load = Loader(cfg)
    tags: list[float] = []
    with concurrent.futures.ThreadPoolExecutor(cfg.producers) as pool:
        t0 = time.perf_counter()
        for _ in range(cfg.steps):
            batch = np.stack(list(pool.map(lambda _: load(), range(cfg.batch))))
            tags.extend(batch[:, 0, 0].tolist())
            step.sync(batch)
        wall = time.perf_counter() - t0
    return wall, tags


def run_threads_queue(cfg: Config, step: Step) -> tuple[float, list[float]]:
    """8 producer threads + queue.Queue; the trainer stacks each batch."""
    load = Loader(cfg)
    q: queue.Queue[np.ndarray] = queue.Queue(cfg.capacity)
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set():
            x = load()
            while not stop.is_set():
                try:
                    q.put(x, timeout=0.05)
                    break
                except queue.Full:
                    pass

    threads = [threading.Thread(target=produce, daemon=True) for _ in range(cfg.producers)]
    tags: list[float] = []
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for _ in range(cfg.steps):
        batch = np.stack([q.get() for _ in range(cfg.batch)])
        tags.extend(batch[:, 0, 0].tolist())
        step.sync(batch)
    wall = time.perf_counter() - t0
    stop.set()
    for t in threads:
        t.join()
    return wall, tags


def run_asyncio_to_thread(cfg: Config, step: Step) -> tuple[float, list[float]]:
    """asyncio producer tasks that offload each load with asyncio.to_thread."""

    async def main() -> tuple[float, list[float]]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(cfg.producers))
        load = Loader(cfg)
        q: asyncio.Queue[np.ndarray] = asyncio.Queue(cfg.capacity)

        async def produce() -> None:
            while True:
                await q.put(await asyncio.to_thread(load))

        tags: list[float] = []
        t0 = time.perf_counter()
        tasks = [asyncio.create_task(produce()) for _ in range(cfg.producers)]
        for _ in range(cfg.steps):
            batch = np.stack([await q.get() for _ in range(cfg.batch)])
            tags.extend(batch[:, 0, 0].tolist())
            if step.kind == "sleep":
                await asyncio.sleep(step.seconds)
            else:
                step.compute(batch)  # blocks the event loop
        wall = time.perf_counter() - t0
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return wall, tags

    return asyncio.run(main())


def run_torch(cfg: Config, step: Step) -> tuple[float, list[float]]:
    """torch DataLoader(num_workers=8, batch_size=32) over a map-style dataset."""
    import torch.utils.data as tud

    class Dataset(tud.Dataset[np.ndarray]):
        def __init__(self) -> None:
            self.load = Loader(cfg)

        def __len__(self) -> int:
            return cfg.elements

        def __getitem__(self, i: int) -> np.ndarray:
            x = self.load()
            x[0, 0] = i
            return x

    loader = tud.DataLoader(
        Dataset(),
        batch_size=cfg.batch,
        num_workers=cfg.producers,
        prefetch_factor=max(2, cfg.capacity // cfg.batch // cfg.producers),
    )
    tags: list[float] = []
    t0 = time.perf_counter()
    for batch in loader:
        arr = batch.numpy()
        tags.extend(arr[:, 0, 0].tolist())
        step.sync(arr)
    wall = time.perf_counter() - t0
    return wall, tags


def run_tf_data(cfg: Config, step: Step, pool: int | None) -> tuple[float, list[float]]:
    """tf.data: map(py_function, num_parallel_calls=8).batch(32).prefetch."""
    import tensorflow as tf

    load = Loader(cfg)

    def py_load(i: Any) -> np.ndarray:
        x = load()
        x[0, 0] = float(i.numpy())
        return x

    ds = tf.data.Dataset.range(cfg.elements).map(
        lambda i: tf.ensure_shape(tf.py_function(py_load, [i], tf.float32), SHAPE),
        num_parallel_calls=cfg.producers,
    )
    ds = ds.batch(cfg.batch).prefetch(max(1, cfg.capacity // cfg.batch))
    if pool is not None:
        options = tf.data.Options()
        options.threading.private_threadpool_size = pool
        ds = ds.with_options(options)
    tags: list[float] = []
    t0 = time.perf_counter()
    for batch in ds:
        arr = batch.numpy()
        tags.extend(arr[:, 0, 0].tolist())
        step.sync(arr)
    wall = time.perf_counter() - t0
    return wall, tags


def run_tf_queue(cfg: Config, step: Step) -> tuple[float, list[float]]:
    """tf.queue.FIFOQueue (eager) fed by 8 Python threads."""
    import tensorflow as tf

    load = Loader(cfg)
    q = tf.queue.FIFOQueue(cfg.capacity, tf.float32, shapes=[SHAPE])
    stop = threading.Event()

    def produce() -> None:
        try:
            while not stop.is_set():
                q.enqueue(load())
        except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
            pass

    threads = [threading.Thread(target=produce, daemon=True) for _ in range(cfg.producers)]
    tags: list[float] = []
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for _ in range(cfg.steps):
        arr = q.dequeue_many(cfg.batch).numpy()
        tags.extend(arr[:, 0, 0].tolist())
        step.sync(arr)
    wall = time.perf_counter() - t0
    stop.set()
    q.close(cancel_pending_enqueues=True)
    for t in threads:
        t.join()
    return wall, tags


# -- driver ----------------------------------------------------------------------------

Runner = Callable[[Config, Step], tuple[float, list[float]]]


def cases() -> list[tuple[str, str, Runner, str]]:
    """(key, label, runner, step kind) of the cases that need no peer library."""
    out: list[tuple[str, str, Runner, str]] = []
    for kind in ("sleep", "numpy"):
        for backend in ("asyncio", "trio"):
            out.append(
                (
                    f"aqueue/{backend}/{kind}",
                    f"aqueue QueueRunner, {backend}",
                    lambda c, s, b=backend: run_aqueue(c, s, b),  # type: ignore[misc]
                    kind,
                )
            )
        out.append(
            (f"threads+queue.Queue/{kind}", "8 threads + queue.Queue", run_threads_queue, kind)
        )
        out.append(
            (f"asyncio+to_thread/{kind}", "asyncio tasks + to_thread", run_asyncio_to_thread, kind)
        )
    out.append(("sequential/sleep", "sequential (no prefetch)", run_sequential, "sleep"))
    out.append(("sequential/numpy", "sequential (no prefetch)", run_sequential, "numpy"))
    return out


def torch_cases() -> list[tuple[str, str, Runner, str]]:
    """The torch cases."""
    return [
        (f"torch/{kind}", "torch DataLoader(8 workers)", run_torch, kind)
        for kind in ("sleep", "numpy")
    ]


def tf_cases() -> list[tuple[str, str, Runner, str]]:
    """The tensorflow cases."""
    out: list[tuple[str, str, Runner, str]] = []
    for kind in ("sleep", "numpy"):
        out.append(
            (
                f"tf.data-pool8/{kind}",
                "tf.data, 8-thread pool",
                lambda c, s: run_tf_data(c, s, c.producers),
                kind,
            )
        )
        out.append((f"tf.queue/{kind}", "tf.queue.FIFOQueue + 8 threads", run_tf_queue, kind))
    out.append(
        (
            "tf.data-default/sleep",
            "tf.data, default pool",
            lambda c, s: run_tf_data(c, s, None),
            "sleep",
        )
    )
    return out


def measure(cfg: Config, runner: Runner, kind: str, reps: int) -> dict[str, Any]:
    """Run one case ``reps`` times; the median wall time counts."""
    walls = []
    for _ in range(reps):
        try:
            wall, tags = runner(cfg, Step(kind, cfg.step_s))
        except Exception as exc:  # reported in the table, the other cases still run
            return {"error": f"{type(exc).__name__}: {exc}"}
        problem = check(tags, cfg)
        if problem is not None:
            return {"error": problem}
        walls.append(wall)
    wall = statistics.median(walls)
    return {"wall_s": wall, "efficiency": cfg.ideal_s / wall, "walls": walls}


def run_elsewhere(python: str, peer: str, argv: list[str]) -> dict[str, dict[str, Any]]:
    """Run one peer's cases (``peer``: tf or torch) in another interpreter; return its
    results by key."""
    script = os.path.abspath(__file__)
    done = subprocess.run(
        [python, script, "--peer-only", peer, "--json", "-", *argv],
        capture_output=True,
        text=True,
        timeout=1200,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return {peer: {"error": f"{python} failed: {message[0]}", "label": PEER_LABELS[peer]}}
    results: dict[str, dict[str, Any]] = json.loads(done.stdout)["results"]
    return results


PEER_LABELS = {"tf": "tf.data / tf.queue", "torch": "torch DataLoader(8 workers)"}
PEER_CASES: dict[str, Callable[[], list[tuple[str, str, Runner, str]]]] = {
    "tf": tf_cases,
    "torch": torch_cases,
}


def table(cfg: Config, results: dict[str, dict[str, Any]]) -> str:
    """The results as a text table, one row per case."""
    lines = [
        f"W4: {cfg.producers} producers x {cfg.load_s * 1000:g} ms load, batch {cfg.batch}, "
        f"{cfg.step_s * 1000:g} ms step, {cfg.steps} steps, capacity {cfg.capacity}; "
        f"ideal {cfg.ideal_s:.2f} s",
        f"{'case':34}{'step':>7}{'wall s':>9}{'efficiency':>12}",
    ]
    for key, r in results.items():
        step = key.rsplit("/", 1)[-1] if "/" in key else ""
        if "skipped" in r:
            lines.append(f"{r.get('label', key):34}{'':>7}  n/a: {r['skipped']}")
        elif "error" in r:
            lines.append(f"{r.get('label', key):34}{step:>7}  FAILED: {r['error']}")
        else:
            lines.append(f"{r['label']:34}{step:>7}{r['wall_s']:9.2f}{r['efficiency']:12.2f}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--load-ms", type=float, default=5.0)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--capacity", type=int, default=256)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--only", default=None, help="run the cases whose key matches")
    parser.add_argument("--no-tf", action="store_true")
    parser.add_argument("--no-torch", action="store_true")
    add_peer_arguments(parser, ["tf", "torch"])
    parser.add_argument("--peer-only", choices=["tf", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help="write the results as JSON ('-': stdout)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table; exit status 1 if a case failed."""
    args = parse_args(argv)
    cfg = Config(
        args.producers,
        args.load_ms / 1000,
        args.step_ms / 1000,
        args.batch,
        args.steps,
        args.capacity,
    )
    # In a peer's interpreter (--peer-only), only that peer's cases.
    selected = PEER_CASES[args.peer_only]() if args.peer_only else cases()
    if args.only:
        selected = [c for c in selected if re.search(args.only, c[0])]
    results: dict[str, dict[str, Any]] = {}
    for key, label, runner, kind in selected:
        print(f"running {key} ...", file=sys.stderr, flush=True)
        results[key] = {"label": label, **measure(cfg, runner, kind, args.reps)}
    wanted = {"tf": not args.no_tf, "torch": not args.no_torch}
    for peer in ("torch", "tf") if not args.peer_only else ():
        keys = [c[0] for c in PEER_CASES[peer]()]
        if not wanted[peer] or (args.only and not any(re.search(args.only, k) for k in keys)):
            continue
        python = find_python(peer, args)
        if python is None:
            results[peer] = {"label": PEER_LABELS[peer], "skipped": "not importable"}
            continue
        print(f"running the {peer} cases with {python} ...", file=sys.stderr, flush=True)
        forwarded = [
            f"--producers={args.producers}",
            f"--load-ms={args.load_ms}",
            f"--step-ms={args.step_ms}",
            f"--batch={args.batch}",
            f"--steps={args.steps}",
            f"--capacity={args.capacity}",
            f"--reps={args.reps}",
            *([f"--only={args.only}"] if args.only else []),
        ]
        results.update(run_elsewhere(python, peer, forwarded))
    report = {"config": dataclasses.asdict(cfg), "ideal_s": cfg.ideal_s, "results": results}
    if args.json == "-":
        print(json.dumps(report))
    else:
        print(table(cfg, results))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
