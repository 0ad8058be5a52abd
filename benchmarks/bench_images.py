"""W8, a real image pipeline: read + decode JPEGs, augment, batch.

The job: 2,000 JPEGs of 256 x 256 (made once with Pillow: a random 12 x 12 colour field
scaled up bicubically plus noise, quality 90, about 25 kB each, so decoding costs what a
photo of that size costs) -> per image: read the file, decode it with Pillow (which
releases the GIL while decoding), a random 224 x 224 crop and a random horizontal flip in
numpy -> batches of 64 (the last one 16) -> a consumer that takes every batch. C = 1, 2, 4
workers.

Rows:

- ``aqueue``: ``Pipeline.from_iterable(paths).map(load, concurrency=C)
  .batch(64, allow_smaller_final_batch=True)``, an async consumer;
- ``aqueue processes``: the same with ``executor="process"``: C worker processes, each
  image written once, by its worker, into its row of a batch in shared memory;
- ``floor``: not a peer, the leanest hand-written version: C threads pull paths from a
  ``queue.SimpleQueue``, call ``load``, one ``loop.call_soon_threadsafe`` per image to an
  asyncio consumer that stacks 64 (``np.stack``);
- ``floor-proc``: not a peer either, the leanest process version: C spawned processes
  write each image into its row of a batch in one shared-memory file, fed bursts of 8
  paths over pipes (two in flight each) by one main thread waiting on all of them;
- ``ThreadPoolExecutor(C).map(load)``, a synchronous consumer stacking 64;
- ``raw``: C threads calling ``load`` on the paths in a loop, results dropped: no
  hand-off and no batching, the most any thread pipeline can do with this function here;
- peers, each in a subprocess of its own interpreter (see ``_peers.py``) when it imports
  them: tf.data with its own ops (``tf.io.read_file`` + ``tf.io.decode_jpeg`` +
  ``tf.image.random_crop`` + ``random_flip_left_right``) at ``num_parallel_calls=C`` and
  at AUTOTUNE (which ignores C), and with the same Pillow function through
  ``tf.numpy_function``; Grain (``MapDataset.map(load)`` -> thread prefetch with
  ``ReadOptions(num_threads=C)`` -> ``batch(64)``, and batching before the prefetch);
  SPDL (``pipe(load, concurrency=C)`` -> ``aggregate(64)`` -> ``pipe(np.stack)``,
  ``build(num_threads=C)``, and the same with SPDL's own decoder ``spdl.io.load_image``
  when its FFmpeg libraries load); torch ``DataLoader(num_workers=C, batch_size=64)``
  over a map-style dataset calling ``load`` (C worker *processes*).

The *ceiling* is measured in the same round: the number of cores times the rate of one
thread calling ``load`` on every file in a loop (no pipeline, no batching). It assumes
the whole function runs in parallel; the parts that hold the GIL (``np.asarray`` of the
decoded image, the crop copy) make the real limit for threads somewhat lower. Each row
prints its images/s, its percentage of the ceiling, and aqueue's ratio to it.

Each timed run goes from building the pipeline to the last batch consumed (thread or
process start-up included, teardown excluded) and checks it got 2,000 images in batches
of 64. Every case has one warm-up run of 128 images in its process first, not timed.
Rounds are interleaved (every case once per round, the peers in one fresh subprocess per
round); the table shows medians over ``--repeat`` rounds.

Each row is also given *steady*: the images after the first batch over the time from the
first batch to the last (thread or process start-up excluded).

This is a script, not a test; nothing is asserted. Targets, printed with the ratios:
aqueue >= 0.85x the ceiling at C >= 2, and >= every peer that runs the same Python
function; aqueue processes >= 0.9x the ceiling and >= 1.3x torch's DataLoader at C = 2,
and no slower at C = 4 than at C = 2. Needs Pillow (``pip install pillow``) in every
interpreter that runs a row.

Run: python benchmarks/bench_images.py [--images 2000] [--concurrency 1,2,4] [--repeat 3]
     [--data-dir DIR] [--quick] [--no-peers] [--only REGEX] [--calm LOAD] [--json PATH]
     [--peer-python PY]
     [--tf-python PY] [--grain-python PY] [--spdl-python PY] [--torch-python PY]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import queue
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _peers import add_peer_arguments, find_python

BATCH = 64
SIZE = 256
Times = tuple[float, float]  # seconds to the last batch, seconds to the first
CROP = 224
WARMUP_IMAGES = 128
PEER_DISTRIBUTIONS = {
    "tf": "tensorflow-cpu",
    "spdl": "spdl",
    "grain": "grain",
    "torch": "torch",
}


# -- the data and the function ---------------------------------------------------------------


def make_images(directory: Path, count: int) -> list[str]:
    """``count`` JPEGs in ``directory``, made once (a marker file says they are complete)."""
    paths = [str(directory / f"img-{i:05d}.jpg") for i in range(count)]
    made = [int(m.name.rsplit("-", 1)[1]) for m in directory.glob(".complete-*")]
    if made and max(made) >= count:  # the first images are the same for every count
        return paths
    from PIL import Image

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for path in paths:
        field = rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)
        smooth = np.asarray(Image.fromarray(field).resize((SIZE, SIZE), Image.BICUBIC))
        noisy = smooth.astype(np.int16) + rng.normal(0, 10, smooth.shape).astype(np.int16)
        Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(path, quality=90)
    (directory / f".complete-{count}").touch()
    return paths


def augment(img: np.ndarray) -> np.ndarray:
    """A random 224 x 224 crop and a random horizontal flip, as a contiguous array."""
    y = random.randrange(img.shape[0] - CROP + 1)
    x = random.randrange(img.shape[1] - CROP + 1)
    out = img[y : y + CROP, x : x + CROP]
    if random.random() < 0.5:
        out = out[:, ::-1]
    return np.ascontiguousarray(out)


def load(path: str) -> np.ndarray:
    """Read and decode one JPEG with Pillow, then augment it: the function every Python
    row runs per image."""
    from PIL import Image

    with Image.open(path) as im:
        if im.mode != "RGB":
            im = im.convert("RGB")
        img = np.asarray(im)
    return augment(img)


def load_spdl(path: str) -> np.ndarray:
    """SPDL's own decoder (FFmpeg) instead of Pillow, then the same augmentation."""
    import spdl.io

    return augment(spdl.io.to_numpy(spdl.io.load_image(path)))


class Images:
    """The consumer's side of every row: counts images and checks batch shapes."""

    __slots__ = ("batches", "first", "images")

    def __init__(self) -> None:
        self.images = 0
        self.batches = 0
        self.first = 0.0  # perf_counter() when the first batch arrived

    def take(self, batch: Any) -> None:
        if not self.batches:
            self.first = time.perf_counter()
        arr = np.asarray(batch)
        if arr.shape[1:] != (CROP, CROP, 3) or arr.dtype != np.uint8 or len(arr) > BATCH:
            raise AssertionError(f"bad batch {arr.shape} {arr.dtype}")
        self.images += len(arr)
        self.batches += 1

    def check(self, n: int) -> None:
        if self.images != n or self.batches != -(-n // BATCH):
            raise AssertionError(f"got {self.images} images in {self.batches} batches, want {n}")


def single_thread_rate(paths: list[str]) -> float:
    """Images/s of one thread calling ``load`` on every path in a loop."""
    t0 = time.perf_counter()
    for p in paths:
        load(p)
    return len(paths) / (time.perf_counter() - t0)


# -- rows in this interpreter ------------------------------------------------------------------


async def aqueue_run(paths: list[str], c: int, executor: str = "thread") -> Times:
    from aqueue import Pipeline

    got = Images()
    t0 = time.perf_counter()
    pipe = (
        Pipeline.from_iterable(paths)
        .map(load, concurrency=c, executor=executor)
        .batch(BATCH, allow_smaller_final_batch=True)
    )
    async with pipe.open() as batches:
        async for b in batches:
            got.take(b)
        t1 = time.perf_counter()
    got.check(len(paths))
    return t1 - t0, got.first - t0


async def floor_run(paths: list[str], c: int) -> Times:
    loop = asyncio.get_running_loop()
    got = Images()
    t0 = time.perf_counter()
    src: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    for p in paths:
        src.put(p)
    for _ in range(c):
        src.put(None)
    out: asyncio.Queue[np.ndarray] = asyncio.Queue()

    def work() -> None:
        while (p := src.get()) is not None:
            loop.call_soon_threadsafe(out.put_nowait, load(p))

    threads = [threading.Thread(target=work, daemon=True) for _ in range(c)]
    for t in threads:
        t.start()
    left = len(paths)
    while left:
        k = min(BATCH, left)
        got.take(np.stack([await out.get() for _ in range(k)]))
        left -= k
    t1 = time.perf_counter()
    for t in threads:
        t.join()
    got.check(len(paths))
    return t1 - t0, got.first - t0


def batched(items: Iterable[np.ndarray], got: Images) -> None:
    """Stack ``items`` 64 at a time into ``got`` (a synchronous consumer)."""
    buf: list[np.ndarray] = []
    for x in items:
        buf.append(x)
        if len(buf) == BATCH:
            got.take(np.stack(buf))
            buf = []
    if buf:
        got.take(np.stack(buf))


def raw_run(paths: list[str], c: int) -> Times:
    """C threads calling ``load`` on a shared list in a loop: no hand-off, no batching."""
    it = iter(paths)
    lock = threading.Lock()
    counts = [0] * c

    def work(i: int) -> None:
        while True:
            with lock:
                p = next(it, None)
            if p is None:
                return
            load(p)
            counts[i] += 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t1 = time.perf_counter()
    if sum(counts) != len(paths):
        raise AssertionError(f"loaded {sum(counts)} images, want {len(paths)}")
    return t1 - t0, 0.0


def _floor_worker(conn: Any, size: int) -> None:
    """The process floor's worker: map the batch slots, then for each burst of (path,
    offset) pairs write ``load(path)`` at ``offset`` and answer the offsets."""
    import mmap
    import socket

    sock = socket.socket(fileno=os.dup(conn.fileno()))
    _, fds, _, _ = socket.recv_fds(sock, 1, 1)
    slots = np.frombuffer(mmap.mmap(fds[0], size), dtype=np.uint8)
    image = CROP * CROP * 3
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        for path, off in msg:
            slots[off : off + image] = load(path).reshape(-1)
        conn.send(len(msg))


def floor_proc_run(paths: list[str], c: int, burst: int = 8) -> Times:
    """The leanest process pipeline doing the job: C spawned workers write each image
    straight into its row of a batch in one shared-memory file (2C + 2 batch slots,
    reused in turn); the main thread sends bursts of ``burst`` (path, offset) pairs,
    two in flight per worker, waits on every worker's pipe at once, and hands each
    complete batch on as a view. No queues, statistics, failure handling or order
    beyond the batches' own."""
    import mmap
    import multiprocessing
    import multiprocessing.connection
    import socket

    got = Images()
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    image = CROP * CROP * 3
    nslots = 2 * c + 2
    size = nslots * BATCH * image
    fd = os.memfd_create("floor")
    os.ftruncate(fd, size)
    slots = np.frombuffer(mmap.mmap(fd, size), dtype=np.uint8)
    conns, procs = [], []
    for _ in range(c):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_floor_worker, args=(child, size))
        p.start()
        child.close()
        socket.send_fds(socket.socket(fileno=os.dup(parent.fileno())), [b"f"], [fd])
        conns.append(parent)
        procs.append(p)
    os.close(fd)
    nxt = 0
    done = [0] * nslots  # rows done per batch slot
    want = [0] * nslots  # rows each slot's batch has
    inflight: dict[Any, list[tuple[int, int]]] = {conn: [] for conn in conns}
    next_out = 0  # the batch handed on next (in order)

    def send(conn: Any) -> None:
        nonlocal nxt
        if nxt >= len(paths):
            return
        b, row = divmod(nxt, BATCH)
        k = min(burst, BATCH - row, len(paths) - nxt)
        slot = b % nslots
        want[slot] = min(BATCH, len(paths) - b * BATCH)
        base = slot * BATCH * image
        conn.send([(paths[nxt + j], base + (row + j) * image) for j in range(k)])
        inflight[conn].append((slot, k))
        nxt += k

    for conn in conns:
        send(conn)
        send(conn)
    live = list(conns)
    while live:
        for conn in multiprocessing.connection.wait(live):
            conn.recv()
            slot, k = inflight[conn].pop(0)
            done[slot] += k
            while done[next_out % nslots] == want[next_out % nslots] > 0:
                s = next_out % nslots
                n = want[s]
                batch = slots[s * BATCH * image : (s * BATCH + n) * image]
                got.take(batch.reshape((n, CROP, CROP, 3)))
                done[s] = want[s] = 0
                next_out += 1
            if nxt < len(paths):
                send(conn)
            elif not inflight[conn]:
                live.remove(conn)
    t1 = time.perf_counter()
    for conn in conns:
        conn.send(None)
    for p in procs:
        p.join()
    got.check(len(paths))
    return t1 - t0, got.first - t0


def executor_run(paths: list[str], c: int) -> Times:
    got = Images()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(c) as pool:
        batched(pool.map(load, paths), got)
        t1 = time.perf_counter()
    got.check(len(paths))
    return t1 - t0, got.first - t0


# -- peers (in their own interpreter) -----------------------------------------------------------


def tfdata_run(paths: list[str], c: int, how: str) -> Times:
    import tensorflow as tf

    got = Images()
    t0 = time.perf_counter()
    ds = tf.data.Dataset.from_tensor_slices(paths)
    if how == "pillow":

        def py_load(p: Any) -> Any:
            return tf.ensure_shape(
                tf.numpy_function(lambda s: load(s.decode()), [p], tf.uint8), (CROP, CROP, 3)
            )

        ds = ds.map(py_load, num_parallel_calls=c)
    else:

        def tf_load(p: Any) -> Any:
            img = tf.io.decode_jpeg(tf.io.read_file(p), channels=3)
            img = tf.image.random_crop(img, (CROP, CROP, 3))
            return tf.image.random_flip_left_right(img)

        ds = ds.map(tf_load, num_parallel_calls=tf.data.AUTOTUNE if how == "auto" else c)
    ds = ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)
    for b in ds:
        got.take(b.numpy())
    t1 = time.perf_counter()
    got.check(len(paths))
    return t1 - t0, got.first - t0


def grain_run(paths: list[str], c: int, batch_first: bool) -> Times:
    import grain

    got = Images()
    t0 = time.perf_counter()
    options = grain.ReadOptions(num_threads=c)
    ds = grain.MapDataset.source(paths).map(load)
    if batch_first:
        it_ds = ds.batch(BATCH).to_iter_dataset(options)
    else:
        it_ds = ds.to_iter_dataset(options).batch(BATCH)
    for b in it_ds:
        got.take(b)
    t1 = time.perf_counter()
    got.check(len(paths))
    return t1 - t0, got.first - t0


def spdl_run(paths: list[str], c: int, fn: Callable[[str], np.ndarray]) -> Times:
    from spdl.pipeline import PipelineBuilder

    got = Images()
    t0 = time.perf_counter()
    pipeline = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(fn, concurrency=c)
        .aggregate(BATCH)
        .pipe(np.stack)
        .add_sink(3)
        .build(num_threads=c)
    )
    with pipeline.auto_stop():
        for b in pipeline:
            got.take(b)
        t1 = time.perf_counter()
    got.check(len(paths))
    return t1 - t0, got.first - t0


def torch_run(paths: list[str], c: int) -> Times:
    import torch.utils.data as tud

    class Files(tud.Dataset[np.ndarray]):
        def __len__(self) -> int:
            return len(paths)

        def __getitem__(self, i: int) -> np.ndarray:
            return load(paths[i])

    got = Images()
    t0 = time.perf_counter()
    loader = tud.DataLoader(Files(), batch_size=BATCH, num_workers=c)
    for b in loader:
        got.take(b.numpy())
    t1 = time.perf_counter()
    got.check(len(paths))
    return t1 - t0, got.first - t0


def spdl_decoder_works(path: str) -> bool:
    """Whether SPDL's own decoder loads here (it needs FFmpeg's shared libraries)."""
    try:
        load_spdl(path)
    except Exception as exc:
        print(f"# spdl.io.load_image does not work here: {exc}"[:300], file=sys.stderr)
        return False
    return True


# -- cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One row of the table."""

    key: str
    label: str
    same_fn: bool  # runs the same Python function (load) as aqueue
    role: str  # "aqueue", "floor", "raw" (no pipeline) or "peer"
    run: Callable[[list[str], int], Times]  # (paths, C) -> seconds to the last and first batch


def local_cases() -> list[Case]:
    return [
        Case(
            "aqueue",
            "aqueue map(load) on C threads -> batch(64)",
            True,
            "aqueue",
            lambda p, c: asyncio.run(aqueue_run(p, c)),
        ),
        Case(
            "aqueue-proc",
            "aqueue map(load) in C processes -> batch(64), written in place",
            True,
            "aqueue-proc",
            lambda p, c: asyncio.run(aqueue_run(p, c, "process")),
        ),
        Case(
            "floor",
            "floor: threads + SimpleQueue + call_soon_threadsafe",
            True,
            "floor",
            lambda p, c: asyncio.run(floor_run(p, c)),
        ),
        Case(
            "floor-proc",
            "floor: C spawned processes writing rows of batches in shared memory",
            True,
            "floor",
            floor_proc_run,
        ),
        Case("executor", "ThreadPoolExecutor(C).map(load)", True, "peer", executor_run),
        Case("raw", "raw: C threads calling load, no hand-off or batch", True, "raw", raw_run),
    ]


def peer_cases(peer: str, probe: str | None) -> list[Case]:
    """``peer``'s rows; SPDL's own decoder only if it decodes ``probe`` (None: listed
    without trying, for the table's labels)."""
    if peer == "tf":
        return [
            Case(
                "tfdata-native",
                "tf.data read_file+decode_jpeg, num_parallel_calls=C",
                False,
                "peer",
                lambda p, c: tfdata_run(p, c, "native"),
            ),
            Case(
                "tfdata-auto",
                "tf.data read_file+decode_jpeg, AUTOTUNE (C unused)",
                False,
                "peer",
                lambda p, c: tfdata_run(p, c, "auto"),
            ),
            Case(
                "tfdata-pillow",
                "tf.data numpy_function(load), num_parallel_calls=C",
                True,
                "peer",
                lambda p, c: tfdata_run(p, c, "pillow"),
            ),
        ]
    if peer == "grain":
        return [
            Case(
                "grain",
                "Grain map(load) -> thread prefetch -> batch",
                True,
                "peer",
                lambda p, c: grain_run(p, c, False),
            ),
            Case(
                "grain-batched",
                "Grain map(load) -> batch -> thread prefetch",
                True,
                "peer",
                lambda p, c: grain_run(p, c, True),
            ),
        ]
    if peer == "spdl":
        cases = [
            Case("spdl", "SPDL pipe(load)", True, "peer", lambda p, c: spdl_run(p, c, load)),
        ]
        if probe is None or spdl_decoder_works(probe):
            cases.append(
                Case(
                    "spdl-native",
                    "SPDL pipe(spdl.io.load_image + same augment)",
                    False,
                    "peer",
                    lambda p, c: spdl_run(p, c, load_spdl),
                )
            )
        return cases
    assert peer == "torch"
    return [Case("torch", "torch DataLoader(num_workers=C)", True, "peer", torch_run)]


STEADY = "@steady"  # key suffix of the rates from the first batch to the last


def run_round(
    cases: list[Case], paths: list[str], cs: list[int], warm: bool
) -> dict[str, dict[int, float]]:
    """One round: every case at every C once; images/s by case key and C, and under
    ``key + STEADY`` the rate from the first batch to the last (start-up excluded)."""
    out: dict[str, dict[int, float]] = {}
    for case in cases:
        if warm:
            case.run(paths[:WARMUP_IMAGES], cs[0])
        for c in cs:
            print(f"  {case.key} C={c} ...", file=sys.stderr, flush=True)
            total, first = case.run(paths, c)
            out.setdefault(case.key, {})[c] = len(paths) / total
            steady = (len(paths) - BATCH) / (total - first) if first > 0 else len(paths) / total
            out.setdefault(case.key + STEADY, {})[c] = steady
    return out


def wanted(key: str, only: str | None) -> bool:
    """Whether the row ``key`` runs (``--only``)."""
    return only is None or re.search(only, key) is not None


def peer_round(
    python: str,
    peer: str,
    data_dir: str,
    n: int,
    cs: list[int],
    seen: dict[str, Any],
    only: str | None = None,
) -> dict[str, dict[int, float]] | str:
    """One round of ``peer``'s rows in a fresh subprocess (or why it failed)."""
    cmd = [
        python,
        os.path.abspath(__file__),
        "--peer-worker",
        peer,
        f"--images={n}",
        f"--data-dir={data_dir}",
        f"--concurrency={','.join(map(str, cs))}",
    ]
    if only is not None:
        cmd.append(f"--only={only}")
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


# -- report ----------------------------------------------------------------------------------


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


def report(
    cases: list[Case],
    med: dict[str, dict[int, float]],
    spreads: dict[str, dict[int, float]],
    ceiling: dict[int, float],
    cs: list[int],
) -> tuple[str, list[dict[str, Any]]]:
    """The markdown tables and the ratio records."""
    lines = [
        "images/s, start-up included, median of the rounds (percent of the ceiling, "
        "spread of the rounds: max/min - 1)",
        "",
        "| row | same fn | " + " | ".join(f"C={c}" for c in cs) + " |",
        "|---|---|" + "---|" * len(cs),
    ]
    lines.append(
        "| ceiling: cores x single-thread rate of load | - | "
        + " | ".join(f"{ceiling[c]:.0f}" for c in cs)
        + " |"
    )
    for suffix, title in (("", None), (STEADY, "steady")):
        if title is not None:
            lines += [
                "",
                "images/s from the first batch to the last (start-up excluded), median of "
                "the rounds (percent of the ceiling, spread)",
                "",
                "| row | same fn | " + " | ".join(f"C={c}" for c in cs) + " |",
                "|---|---|" + "---|" * len(cs),
            ]
        for case in cases:
            if case.key + suffix not in med:
                continue
            cells = []
            for c in cs:
                v = med[case.key + suffix].get(c)
                sp = spreads.get(case.key + suffix, {}).get(c, 0.0)
                cells.append(
                    "n/a" if v is None else f"{v:.0f} ({100 * v / ceiling[c]:.0f}%, ±{sp:.0%})"
                )
            lines.append(
                f"| {case.label} | {'yes' if case.same_fn else 'no'} | " + " | ".join(cells) + " |"
            )

    ratios: list[dict[str, Any]] = []
    if "aqueue" in med:
        a = med["aqueue"]
        values = {c: a[c] / ceiling[c] for c in cs if c in a}
        ratios.append(
            {
                "ratio": "aqueue / ceiling (target at C >= 2)",
                "target": 0.85,
                "met": all(v >= 0.85 for c, v in values.items() if c >= 2),
                "values": values,
            }
        )
        for case in cases:
            if case.role == "aqueue" or case.key not in med:
                continue
            values = {c: a[c] / med[case.key][c] for c in cs if c in a and c in med[case.key]}
            target = 1.0 if case.same_fn and case.role == "peer" else None
            ratios.append(
                {
                    "ratio": f"aqueue / {case.label}",
                    "target": target,
                    "met": None if target is None else all(v >= target for v in values.values()),
                    "values": values,
                }
            )
    ratios += process_ratios(med, ceiling, cs)
    lines += [
        "",
        "| ratio | " + " | ".join(f"C={c}" for c in cs) + " | target | met |",
        "|---|" + "---|" * (len(cs) + 2),
    ]
    for r in ratios:
        cells = " | ".join(f"{r['values'][c]:.2f}x" if c in r["values"] else "n/a" for c in cs)
        if r["target"] is None:
            target, met = "(information)", "-"
        else:
            target, met = f">= {r['target']}x", "yes" if r["met"] else "no"
        lines.append(f"| {r['ratio']} | {cells} | {target} | {met} |")
    return "\n".join(lines), ratios


def process_ratios(
    med: dict[str, dict[int, float]], ceiling: dict[int, float], cs: list[int]
) -> list[dict[str, Any]]:
    """The process row's targets: >= 0.9x the ceiling and >= 1.3x torch's DataLoader at
    C = 2, C = 4 no slower than C = 2; each with start-up included and excluded."""
    out: list[dict[str, Any]] = []
    for suffix, how in (("", "start-up included"), (STEADY, "steady")):
        p = med.get("aqueue-proc" + suffix)
        if p is None:
            continue
        values = {c: p[c] / ceiling[c] for c in cs if c in p}
        out.append(
            {
                "ratio": f"aqueue processes / ceiling, {how} (target at C = 2)",
                "target": 0.9,
                "met": values.get(2, 0.0) >= 0.9,
                "values": values,
            }
        )
        t = med.get("torch" + suffix)
        if t is not None:
            values = {c: p[c] / t[c] for c in cs if c in p and c in t}
            out.append(
                {
                    "ratio": f"aqueue processes / torch DataLoader(num_workers=C), {how} "
                    "(target at C = 2)",
                    "target": 1.3,
                    "met": values.get(2, 0.0) >= 1.3,
                    "values": values,
                }
            )
        if 2 in p and 4 in p:
            out.append(
                {
                    "ratio": f"aqueue processes at C = 4 / at C = 2, {how}",
                    "target": 1.0,
                    "met": p[4] / p[2] >= 1.0,
                    "values": {4: p[4] / p[2]},
                }
            )
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2_000)
    parser.add_argument("--concurrency", default="1,2,4", help="comma-separated C values")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="where the JPEGs are made once (default: a folder in the temp directory)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 320 images, 1 round")
    parser.add_argument("--no-peers", action="store_true", help="no subprocess peers")
    parser.add_argument(
        "--calm",
        type=float,
        default=None,
        help="before each round, wait (at most 10 minutes) until the machine keeps fewer "
        "than this many cores busy (measured over 2 s; for a shared machine); default: "
        "do not wait",
    )
    parser.add_argument(
        "--only",
        default=None,
        help="run only the rows whose key matches this regular expression (keys: aqueue, "
        "aqueue-proc, floor, floor-proc, executor, raw, tfdata-native, tfdata-auto, "
        "tfdata-pillow, "
        "grain, grain-batched, spdl, spdl-native, torch); default: every row",
    )
    parser.add_argument("--json", default=None, help="also write the JSON report here")
    parser.add_argument("--peer-worker", default=None, help=argparse.SUPPRESS)
    add_peer_arguments(parser, ["tf", "grain", "spdl", "torch"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    n, cs, repeat = args.images, [int(x) for x in args.concurrency.split(",")], args.repeat
    if args.quick:
        n, repeat = 320, 1
    try:
        import PIL  # noqa: F401
    except ImportError:
        print("bench_images needs Pillow: pip install pillow", file=sys.stderr)
        return 2
    data_dir = args.data_dir or os.path.join(tempfile.gettempdir(), f"aqueue-bench-w8-jpeg{SIZE}")
    paths = make_images(Path(data_dir), n)
    if args.peer_worker:  # in a peer's interpreter: one round, JSON on stdout
        single_thread_rate(paths)  # reads every file once, as the main process does
        mine = [c for c in peer_cases(args.peer_worker, paths[0]) if wanted(c.key, args.only)]
        result = run_round(mine, paths, cs, warm=True)
        dist = PEER_DISTRIBUTIONS[args.peer_worker]
        print(json.dumps({"rates": result, "versions": versions(dist, "pillow")}))
        return 0

    cases = [c for c in local_cases() if wanted(c.key, args.only)]
    peers: dict[str, str] = {}
    if not args.no_peers:
        for peer in ("tf", "grain", "spdl", "torch"):
            if not any(wanted(c.key, args.only) for c in peer_cases(peer, None)):
                continue
            python = find_python(peer, args)
            if python is not None:
                peers[peer] = python
                cases += [c for c in peer_cases(peer, None) if wanted(c.key, args.only)]
    cores = os.cpu_count() or 1
    rounds: dict[str, dict[int, list[float]]] = {}
    single: list[float] = []
    failures: dict[str, str] = {}
    peer_versions: dict[str, Any] = {}
    loads: list[float] = []
    for r in range(repeat):
        if args.calm is not None:
            from bench_procs import wait_calm

            wait_calm(args.calm)
        loads.append(os.getloadavg()[0])
        print(f"round {r + 1}/{repeat} (load {loads[-1]:.1f})", file=sys.stderr, flush=True)
        if r == 0:
            single_thread_rate(paths)  # warm the page cache
        single.append(single_thread_rate(paths))
        local = [c for c in local_cases() if wanted(c.key, args.only)]
        results = [run_round(local, paths, cs, warm=r == 0)]
        for peer, python in peers.items():
            got = peer_round(python, peer, data_dir, n, cs, peer_versions, args.only)
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
    spreads = {
        k: {c: max(v) / min(v) - 1 for c, v in by_c.items() if min(v) > 0}
        for k, by_c in rounds.items()
    }
    one = statistics.median(single)
    ceiling = dict.fromkeys(cs, cores * one)
    text, ratios = report(cases, med, spreads, ceiling, cs)
    print(
        f"W8: {n:,} JPEGs {SIZE}x{SIZE} -> read + Pillow decode + random {CROP} crop + flip "
        f"-> batch({BATCH}); {repeat} round(s); single thread {one:.0f} images/s "
        f"({1e3 / one:.2f} ms per image; rounds {', '.join(f'{x:.0f}' for x in single)}), "
        f"{cores} cores; load average at each round's start: "
        f"{', '.join(f'{x:.1f}' for x in loads)}\n\n{text}"
    )
    print("\nversions: " + ", ".join(f"{k} {v}" for k, v in versions("aqueue", "pillow").items()))
    for peer, v in peer_versions.items():
        print(f"  {peer} ({peers[peer]}): " + ", ".join(f"{k} {x}" for k, x in v.items()))
    doc = {
        "workload": {"images": n, "batch": BATCH, "size": SIZE, "crop": CROP, "rounds": repeat},
        "machine": f"{platform.machine()}, {cores} cores",
        "single_thread_images_per_s": single,
        "ceiling": ceiling,
        "versions": versions("aqueue", "anyio", "pillow"),
        "peers": {p: {"python": py, **peer_versions.get(p, {})} for p, py in peers.items()},
        "failures": failures,
        "rows": [
            {
                "key": c.key,
                "label": c.label,
                "same_fn": c.same_fn,
                "images_per_s": rounds.get(c.key, {}),
                "steady_images_per_s": rounds.get(c.key + STEADY, {}),
            }
            for c in cases
        ],
        "ratios": ratios,
        "load_average": loads,
    }
    print(json.dumps(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
