"""Checkpoints: the pause, the save, the file and the resume, beside tf.data's.

The pipeline (a 10,000-element shuffle buffer of ``float32[32, 32]`` elements):

    Pipeline(range(1_000_000))
        .map(frame, concurrency=4, ordered=True)        # float32[32, 32], on 4 threads
        .shuffle(capacity=11_000, min_after_dequeue=10_000, seed=1)
        .batch(32)
        .prefetch(4)

``frame(i)`` is frame ``i % 1024`` of a pool of random frames plus ``i`` (incompressible
bytes, a fresh array per call); it also appends ``time.perf_counter()`` to a list, the
producers' heartbeat. A round takes ``--warm`` batches (the first one arrives once the
buffer holds 10,000 elements), then measures:

- ``checkpoint()`` wall time: what the trainer waits, an upper bound of the pause from
  the request to the resume (it includes the wait for every worker to come to rest,
  the capture, and putting the capacities back);
- producers standing still: the longest stretch, from the pause request until the first
  map call after the checkpoint returned, in which no map call started (measured from
  the heartbeat; it also counts the threads' wake-up after the resume, so it can exceed
  the wall time). For
  reference, the longest gap between map calls in the ``--after`` batches taken after
  the checkpoint, when nothing paused them (the pipeline's own noise: a map worker
  waits when its output queue is full);
- ``state.save(path)``: time (atomic: temporary file, fsync, rename) and file size,
  against the raw bytes of every array the state holds (``items_held`` items: the
  buffered elements at 4,096 bytes each, the queued elements, the finished batches at
  131,072 bytes each; the source queue's ints are not arrays and are not counted);
- resume: ``PipelineState.load`` plus ``pipe.open(state=...)`` until the first batch
  arrives, checking that the first ``--after`` batches equal those the checkpointed run
  delivered after the cut.

Floors (the leanest code doing what the contract asks, in the same round): writing the
same arrays' bytes straight into a file (``os.writev``, 1,024 arrays per call), fsync and
rename (the save floor); reading that file into one new array with ``readinto`` (the
load floor). A floor is what is possible, so each round keeps the best of 3 tries (a
fresh 40 MB array costs page faults whose price varies widely on a shared machine).

tf.data, when an interpreter can import tensorflow (see ``_peers.py``): the equivalent
``Dataset.range(1_000_000).map(f, num_parallel_calls=4, deterministic=True)
.shuffle(10_000, seed=1).batch(32).prefetch(4)`` with ``f`` building the same frames from
the same pool with TF ops, the same ``--warm`` batches, then
``tf.train.Checkpoint(iterator=it).write(prefix)`` (save) and, into a new iterator of a
new dataset, ``.read(prefix)`` plus the first batch (restore), checked against the batch
the saved iterator gave next. Each round runs TF in a fresh subprocess that does one
untimed save and restore first; aqueue has one untimed round first in this process.

Rounds are interleaved (aqueue, then tf.data), ``--repeat`` of them (default 5); the
table shows medians (and the range). Targets, printed, never asserted: producers stand
still <= 20 ms; aqueue (save + resume) <= 0.5x tf.data's (save + restore); file size <=
1.1x the raw bytes.

Run: python benchmarks/bench_checkpoint.py [--repeat 5] [--warm 20] [--after 50]
     [--quick] [--no-peers] [--json PATH] [--peer-python PY] [--tf-python PY]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _peers import add_peer_arguments, find_python

SOURCE = 1_000_000  # source length: never reached in a round
POOL = 1024  # distinct random frames (4 MiB)
SHAPE = (32, 32)
BUFFER = 10_000  # min_after_dequeue (tf.data: buffer_size)
CAPACITY = 11_000
BATCH = 32
SEED = 1
WORKERS = 4
_IOV_MAX = 1024  # buffers per writev call (Linux's limit)
FLOOR_TRIES = 3  # a floor is the best of this many tries in each round

_perf = time.perf_counter
F32 = npt.NDArray[np.float32]


def frame_pool() -> F32:
    return np.random.default_rng(0).random((POOL, *SHAPE), dtype=np.float32)


class Frames:
    """The map function: frame ``i``, and the time of every call (the heartbeat)."""

    def __init__(self) -> None:
        self.pool = frame_pool()
        self.stamps: list[float] = []  # list.append is atomic: the 4 threads share it

    def __call__(self, i: int) -> F32:
        self.stamps.append(_perf())
        out: F32 = self.pool[i % POOL] + np.float32(i)
        return out


# -- aqueue ------------------------------------------------------------------------------


def make_pipeline(frames: Frames) -> Any:
    from aqueue import Pipeline

    return (
        Pipeline(range(SOURCE))
        .map(frames, concurrency=WORKERS, ordered=True, name="map(frame)")
        .shuffle(capacity=CAPACITY, min_after_dequeue=BUFFER, seed=SEED)
        .batch(BATCH)
        .prefetch(4)
    )


def stand_still(stamps: list[float], t0: float, t1: float) -> tuple[float, float]:
    """The longest stretch with no map call from ``t0`` (the request) to the first call
    after ``t1`` (the checkpoint returned), and the longest gap between calls after
    that (the noise reference)."""
    calls = sorted(stamps)
    i0 = bisect.bisect_left(calls, t0)
    i1 = bisect.bisect_right(calls, t1)
    points = [t0, *calls[i0 : i1 + 1]]  # up to and including the first call after t1
    during = float(np.diff(points).max()) if len(points) > 1 else float("nan")
    later = calls[i1:]
    noise = float(np.diff(later).max()) if len(later) > 1 else float("nan")
    return during, noise


def state_arrays(state: Any) -> list[npt.NDArray[Any]]:
    """Every array the state holds, in order (queues, then shuffle buffers)."""
    out: list[npt.NDArray[Any]] = []

    def walk(item: Any) -> None:
        if isinstance(item, np.ndarray):
            out.append(item)
        elif isinstance(item, (tuple, list)):
            for x in item:
                walk(x)
        elif isinstance(item, dict):
            for x in item.values():
                walk(x)

    for items in state.queues:
        walk(items)
    for s in state.shuffles.values():
        walk(s["buffer"])
    return out


def write_floor(arrays: list[npt.NDArray[Any]], path: Path) -> None:
    """The save floor: every array's bytes gathered straight into the file (``writev``,
    no copy in Python), fsync, rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        views = [np.ascontiguousarray(a).data for a in arrays]
        for i in range(0, len(views), _IOV_MAX):
            chunk = views[i : i + _IOV_MAX]
            want = sum(v.nbytes for v in chunk)
            if os.writev(fd, chunk) != want:
                raise AssertionError(f"{tmp}: short write")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_floor(path: Path, size: int) -> npt.NDArray[np.uint8]:
    """The load floor: the file's bytes read into one new array."""
    out = np.empty(size, dtype=np.uint8)
    with open(path, "rb") as f:
        if f.readinto(out.data) != size:
            raise AssertionError(f"{path}: short read")
    return out


async def aqueue_round(warm: int, after: int, folder: Path) -> dict[str, Any]:
    """One round (see the module docstring); seconds and bytes by measure."""
    from aqueue import PipelineState

    frames = Frames()
    async with make_pipeline(frames).open() as items:
        for _ in range(warm):
            await items.get()
        t0 = _perf()
        state = await items.checkpoint()
        t1 = _perf()
        delivered = [await items.get() for _ in range(after)]
    still, noise = stand_still(frames.stamps, t0, t1)

    path = folder / "state.npz"
    t2 = _perf()
    state.save(path)
    t3 = _perf()
    size = path.stat().st_size

    t4 = _perf()
    loaded = PipelineState.load(path)
    t5 = _perf()
    async with make_pipeline(Frames()).open(state=loaded) as items:
        first = await items.get()
        t6 = _perf()
        resumed = [first] + [await items.get() for _ in range(after - 1)]
    exact = all(np.array_equal(a, b) for a, b in zip(resumed, delivered))

    arrays = state_arrays(state)
    raw = sum(a.nbytes for a in arrays)
    floor_path = folder / "floor.bin"
    floor_save, floor_load = [], []
    for _ in range(FLOOR_TRIES):
        t7 = _perf()
        write_floor(arrays, floor_path)
        t8 = _perf()
        read_floor(floor_path, raw)
        t9 = _perf()
        floor_save.append(t8 - t7)
        floor_load.append(t9 - t8)
    for p in (path, floor_path):
        p.unlink()
    buffered = sum(len(s["buffer"]) for s in state.shuffles.values())
    return {
        "checkpoint_s": t1 - t0,
        "stand_still_s": still,
        "noise_gap_s": noise,
        "save_s": t3 - t2,
        "size_bytes": size,
        "raw_bytes": raw,
        "load_s": t5 - t4,
        "first_batch_s": t6 - t5,
        "resume_s": t6 - t4,
        "floor_save_s": min(floor_save),
        "floor_load_s": min(floor_load),
        "items_held": state.items_held,
        "buffered": buffered,
        "queued": [len(q) for q in state.queues],
        "exact": exact,
    }


def run_aqueue(warm: int, after: int) -> dict[str, Any]:
    import anyio

    with tempfile.TemporaryDirectory() as tmp:
        result: dict[str, Any] = anyio.run(aqueue_round, warm, after, Path(tmp))
    return result


# -- tf.data (in its own interpreter) ----------------------------------------------------------


def tf_round(warm: int, folder: str) -> dict[str, Any]:
    import tensorflow as tf  # type: ignore[import-untyped,unused-ignore]

    pool = tf.constant(frame_pool())

    def frame(x: Any) -> Any:
        return tf.gather(pool, x % POOL) + tf.cast(x, tf.float32)

    def dataset() -> Any:
        return (
            tf.data.Dataset.range(SOURCE)
            .map(frame, num_parallel_calls=WORKERS, deterministic=True)
            .shuffle(BUFFER, seed=SEED)
            .batch(BATCH)
            .prefetch(4)
        )

    it = iter(dataset())
    for _ in range(warm):
        next(it)
    prefix = os.path.join(folder, "ckpt")
    t0 = _perf()
    saved = tf.train.Checkpoint(iterator=it).write(prefix)
    t1 = _perf()
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    want = next(it).numpy()
    t2 = _perf()
    it2 = iter(dataset())
    tf.train.Checkpoint(iterator=it2).read(saved).assert_consumed()
    t3 = _perf()
    got = next(it2).numpy()
    t4 = _perf()
    for f in os.listdir(folder):
        os.unlink(os.path.join(folder, f))
    return {
        "save_s": t1 - t0,
        "size_bytes": size,
        "load_s": t3 - t2,
        "first_batch_s": t4 - t3,
        "resume_s": t4 - t2,
        "exact": bool(np.array_equal(got, want)),
    }


def tf_worker(warm: int) -> dict[str, Any]:
    """One untimed save and restore, then the timed one; with the versions."""
    from importlib.metadata import version

    with tempfile.TemporaryDirectory() as tmp:
        tf_round(warm, tmp)
        result = tf_round(warm, tmp)
    result["versions"] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "tensorflow-cpu": version("tensorflow-cpu"),
    }
    return result


def run_tf(python: str, warm: int) -> dict[str, Any] | str:
    """One tf.data round in a fresh subprocess, or why it failed."""
    cmd = [python, os.path.abspath(__file__), "--peer-worker", "tf", f"--warm={warm}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    except subprocess.TimeoutExpired:
        return "timed out after 900 s"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["no output"])[-1]
    doc: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return doc


# -- report --------------------------------------------------------------------------------


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.1f} ms"


def mb(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e6:.1f} MB"


class Medians:
    """Median and range of a measure over the rounds."""

    def __init__(self, rounds: list[dict[str, Any]]) -> None:
        self.rounds = rounds

    def get(self, key: str) -> float | None:
        values = [r[key] for r in self.rounds if key in r]
        return statistics.median(values) if values else None

    def cell(self, key: str, fmt: Any) -> str:
        values = [r[key] for r in self.rounds if key in r]
        if not values:
            return "-"
        if len(values) == 1:
            return str(fmt(values[0]))
        return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def report(aq: Medians, tf: Medians, n: int) -> tuple[str, list[dict[str, Any]]]:
    """The markdown tables (measures, then targets) and the target records."""
    rows = [
        ("checkpoint() wall time (upper bound of the pause)", "checkpoint_s", None, ms),
        ("producers stand still (request to next map call)", "stand_still_s", None, ms),
        ("longest gap between map calls after it (noise)", "noise_gap_s", None, ms),
        ("save to file", "save_s", "save_s", ms),
        ("file size", "size_bytes", "size_bytes", mb),
        ("load (aqueue) / Checkpoint.read (tf.data)", "load_s", "load_s", ms),
        ("open(state) to first batch / next()", "first_batch_s", "first_batch_s", ms),
        ("resume: load to first batch", "resume_s", "resume_s", ms),
    ]
    lines = [
        f"medians of {n} round(s) (range)",
        "",
        "| measure | aqueue | tf.data | floor |",
        "|---|---|---|---|",
    ]
    floors = {
        "save_s": aq.cell("floor_save_s", ms),
        "size_bytes": aq.cell("raw_bytes", mb),
        "load_s": aq.cell("floor_load_s", ms),
        "resume_s": aq.cell("floor_load_s", ms),
    }
    for label, key, tf_key, fmt in rows:
        tf_cell = tf.cell(tf_key, fmt) if tf_key else "-"
        lines.append(f"| {label} | {aq.cell(key, fmt)} | {tf_cell} | {floors.get(key, '-')} |")
    both = [r["save_s"] + r["resume_s"] for r in aq.rounds]
    tf_both = [r["save_s"] + r["resume_s"] for r in tf.rounds]
    floor_both = [r["floor_save_s"] + r["floor_load_s"] for r in aq.rounds]
    aq_sum = statistics.median(both)
    tf_sum = statistics.median(tf_both) if tf_both else None
    floor_sum = statistics.median(floor_both)
    lines.append(
        f"| save + resume (median of each round's sum) | {ms(aq_sum)} | {ms(tf_sum)} | "
        f"{ms(floor_sum)} |"
    )

    still = aq.get("stand_still_s")
    wall = aq.get("checkpoint_s")
    size, raw = aq.get("size_bytes"), aq.get("raw_bytes")
    targets: list[dict[str, Any]] = [
        {
            "target": "producers stand still <= 20 ms",
            "value": ms(still),
            "met": still is not None and still <= 0.020,
        },
        {
            "target": "checkpoint() wall time <= 20 ms (the upper bound)",
            "value": ms(wall),
            "met": wall is not None and wall <= 0.020,
        },
        {
            "target": "(save + resume) <= 0.5x tf.data's (save + restore)",
            "value": "n/a" if tf_sum is None else f"{aq_sum / tf_sum:.2f}x",
            "met": None if tf_sum is None else aq_sum / tf_sum <= 0.5,
        },
        {
            "target": "file size <= 1.1x the raw bytes",
            "value": "n/a" if not (size and raw) else f"{size / raw:.3f}x",
            "met": bool(size and raw and size / raw <= 1.1),
        },
    ]
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    for t in targets:
        met = "n/a" if t["met"] is None else ("met" if t["met"] else "not met")
        lines.append(f"| {t['target']} | {t['value']} | {met} |")
    lines.append(
        f"\naqueue (save + resume) / floor (save + load): {aq_sum / floor_sum:.2f}x "
        "(how far aqueue is from the leanest code doing the job)"
    )
    if tf_sum:
        lines.append(
            f"floor (save + load) / tf.data (save + restore): {floor_sum / tf_sum:.2f}x "
            "(how far below tf.data the leanest code gets on this machine)"
        )
    return "\n".join(lines), targets


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "aqueue": version("aqueue"),
        "anyio": version("anyio"),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (median)")
    parser.add_argument("--warm", type=int, default=20, help="batches before the checkpoint")
    parser.add_argument("--after", type=int, default=50, help="batches compared after it")
    parser.add_argument("--quick", action="store_true", help="smoke run: one round")
    parser.add_argument("--no-peers", action="store_true", help="no tf.data subprocess")
    parser.add_argument("--json", default=None, help="also write the JSON report here")
    parser.add_argument("--peer-worker", default=None, help=argparse.SUPPRESS)
    add_peer_arguments(parser, ["tf"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.peer_worker:  # in tensorflow's interpreter: one round, JSON on stdout
        print(json.dumps(tf_worker(args.warm)))
        return 0
    repeat = 1 if args.quick else args.repeat
    python = None if args.no_peers else find_python("tf", args)
    print("warm-up round (not counted)", file=sys.stderr, flush=True)
    run_aqueue(args.warm, args.after)
    aq_rounds: list[dict[str, Any]] = []
    tf_rounds: list[dict[str, Any]] = []
    failures: list[str] = []
    tf_versions: dict[str, str] = {}
    for r in range(repeat):
        print(f"round {r + 1}/{repeat}", file=sys.stderr, flush=True)
        aq_rounds.append(run_aqueue(args.warm, args.after))
        if python is not None:
            got = run_tf(python, args.warm)
            if isinstance(got, str):
                failures.append(got)
                print(f"# tf.data failed: {got}", file=sys.stderr)
            else:
                tf_versions = got.pop("versions")
                tf_rounds.append(got)
    text, targets = report(Medians(aq_rounds), Medians(tf_rounds), repeat)
    held = [r["items_held"] for r in aq_rounds]
    print(
        f"Checkpoint of a running pipeline: {BUFFER:,}-element shuffle buffer of float32"
        f"[32, 32]; {args.warm} batches before the cut, {args.after} compared after; "
        f"{repeat} round(s)\n"
    )
    print(text)
    print(
        f"\nthe state held {min(held):,}-{max(held):,} items: "
        f"{aq_rounds[0]['buffered']:,} in the shuffle buffer and, by stage queue, "
        f"{aq_rounds[0]['queued']} (round 1)"
    )
    exact = all(r["exact"] for r in aq_rounds)
    print(
        f"resumed batches equal those the checkpointed run delivered after the cut: "
        f"aqueue {'yes' if exact else 'NO'} in every round"
        + (
            f", tf.data {'yes' if all(r['exact'] for r in tf_rounds) else 'NO'} in every round"
            if tf_rounds
            else ""
        )
    )
    print(
        f"versions: {platform.machine()}, {os.cpu_count()} cores; "
        + ", ".join(f"{k} {v}" for k, v in versions().items())
    )
    if tf_versions:
        print(f"  tf.data ({python}): " + ", ".join(f"{k} {v}" for k, v in tf_versions.items()))
    doc = {
        "workload": {"buffer": BUFFER, "warm": args.warm, "after": args.after, "rounds": repeat},
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "versions": versions(),
        "tf": {"python": python, **tf_versions} if python else None,
        "failures": failures,
        "aqueue": aq_rounds,
        "tf_data": tf_rounds,
        "targets": targets,
    }
    print(json.dumps(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0 if exact else 1


if __name__ == "__main__":
    raise SystemExit(main())
