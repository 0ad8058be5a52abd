#!/usr/bin/env python3
"""R1: an in-process replay table under the prioritized-replay loop, beside its peers.

Workload (item = float32[32, 32], 4,096 bytes; a table of max_size 100,000, filled
before the clock starts). One *loop* is what a learner next to its actors does:
insert a batch of 64 items (the 64 oldest are evicted), sample a batch of 256, and
update those 256 priorities with fake TD errors (|N(0, 1)| + 0.001). It runs with a
uniform sampler and with Prioritized(0.6); the remover is Fifo, the rate limiter
MinSize(1). Throughput is reported as loops/s and as transitions moved per second
(64 in + 256 out per loop).

Rows (peers run in subprocesses, with the interpreters ``_peers.py`` finds):

- aqueue: ``aqueue.ReplayTable`` on asyncio, the three calls awaited in one task.
- floor: the leanest numpy code doing the loop's data work: a preallocated ring
  written in place, a bare ``np.take`` of 256 random rows, the 256 priorities written
  back; for prioritized, plus a textbook binary sum tree (leaves at the bottom, parents
  recomputed level by level, a full descent per batch).
- records: the floor plus the records the contract keeps and reports (keys issued and
  checked, times_sampled per draw, keys, priorities and probabilities returned, the
  largest priority held as the default, repeated keys resolved), in the leanest form
  this workload allows (Fifo eviction only: key k in slot k % size), with aqueue's own
  sum tree; no locks, awaits, checks, limiter or other selectors.
- awaited: the records floor with each of the three operations awaited as the
  contract's are (each one pass through the event loop, the leanest asyncio
  checkpoint: a bare yield), in an event loop set up as aqueue's row.
- Reverb (dm-reverb, server and client in one process, its tables accessed without
  gRPC): inserts through ``client.structured_writer`` (64 ``append`` calls and one
  ``flush`` per batch), samples through ``reverb.TrajectoryDataset.
  from_table_signature(...).batch(256)`` (the fastest route measured: 390 batches/s
  against 214/s for the pybind ``NewSampler`` and 42/s for ``client.sample``; it
  samples ahead in its own threads, as Reverb users run it), priorities through
  ``client.mutate_priorities``.
- TorchRL: ``ReplayBuffer(LazyTensorStorage(100000), PrioritizedSampler(alpha=0.6)``
  or ``RandomSampler()``), ``extend``/``sample(256, return_info=True)``/
  ``update_priority``; ``torch.set_num_threads(1)`` (the machine has 2 cores).
- cpprb: ``PrioritizedReplayBuffer(100000, alpha=0.6)`` or ``ReplayBuffer``,
  ``add``/``sample(256)``/``update_priorities``.

With a uniform sampler the peers have no priorities to update and skip the third
call; aqueue (which keeps each item's priority whatever the sampler) and the floor
make it.

Also measured: ``sample(256)`` alone against the floor's gather of 256 random rows
(uniform), and a *limiter run*: 4 actor threads inserting batches of 64 through
``table.blocking()`` and a learner task sampling 256 and updating priorities under
``SampleToInsertRatio(4, 1000, 1024)``; it prints the samples/inserts ratio reached,
the band and the range ``inserts * 4 - samples`` stayed in, and the share of the
run each side waited.

R2 (``--redis also``, the default, or ``--redis only``): the Redis replay table
beside the Redis FIFO, on a private redis-server (``bench_redis.py``'s) or ``--url``:
4 actor processes inserting ``insert_many(64)`` (enqueue_many(64) for the FIFO) and a
learner process taking ``sample(256)`` under ``SampleToInsertRatio(4, 1000, 1024)``
(``dequeue_many(256)`` for the FIFO), and a floor (raw redis-py and a small function
library: a ring, the limiter's counters, staged inserts, samples copied to keys of their
own in one MULTI), rounds interleaved; it prints MB/s moved (payload bytes in plus
out), the ratios (target >= 0.5x the FIFO) and the samples/inserts reached against the
band.

Targets (printed as ratios, never asserted): aqueue >= 2x Reverb, >= TorchRL and >=
cpprb in transitions/s for both samplers; uniform ``sample(256)`` >= 0.7x the bare
gather; the limiter keeps ``inserts * 4 - samples`` within its band.

Every timed block ends with a check of its last sample: 256 items of the right
shape whose payload matches the source item its tag names (element [0, 0] is the
source index, [-1, -1] its value), so a row that returns garbage fails, never wins.
Blocks of the in-process rows are interleaved, half before the peers and half after;
each row reports the median and the best block.

Usage: python benchmarks/bench_replay.py [--quick] [--reps R] [--loops L]
       [--rows aqueue,floor,records,awaited,reverb,torchrl,cpprb] [--peer-python PY]
       [--reverb-python PY] [--torchrl-python PY] [--cpprb-python PY]
``--quick`` is a smoke run (a table of 20,000, few loops, seconds per row). The
table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np
from _peers import add_peer_arguments, find_python

SHAPE = (32, 32)
INSERT = 64
SAMPLE = 256
PER_LOOP = INSERT + SAMPLE  # transitions moved per loop
EXPONENT = 0.6
SOURCE = 4096  # distinct source items, cycled
MODES = ("uniform", "prioritized")
PEERS = ("reverb", "torchrl", "cpprb")
ROWS = ("aqueue", "floor", "records", "awaited", *PEERS)
ASYNC_ROWS = ("aqueue", "awaited")  # (their runners are async functions)
LABELS = {
    "aqueue": "aqueue.ReplayTable (asyncio)",
    "floor": "floor (numpy ring + gather + sum tree)",
    "records": "floor + the contract's records",
    "awaited": "floor + records + awaits",
    "reverb": "Reverb in process",
    "torchrl": "TorchRL ReplayBuffer",
    "cpprb": "cpprb",
}


def source() -> np.ndarray:
    """SOURCE items; item k carries k in [0, 0]."""
    items = np.random.default_rng(12345).standard_normal((SOURCE, *SHAPE), dtype=np.float32)
    items[:, 0, 0] = np.arange(SOURCE, dtype=np.float32)
    return items


def check(batch: Any, src: np.ndarray) -> str | None:
    """None if ``batch`` is 256 intact source items, else what is wrong."""
    data = np.asarray(batch)
    if data.shape != (SAMPLE, *SHAPE) or data.dtype != np.float32:
        return f"sample has shape {data.shape} and dtype {data.dtype}"
    tags = data[:, 0, 0].astype(np.int64)
    if tags.min() < 0 or tags.max() >= SOURCE or not np.array_equal(data[:, 0, 0], tags):
        return "sampled items carry tags that no source item has"
    if not np.array_equal(data[:, -1, -1], src[tags, -1, -1]):
        return "sampled payloads differ from their source items"
    return None


def td_errors(rng: np.random.Generator) -> np.ndarray:
    return np.abs(rng.standard_normal(SAMPLE)) + 1e-3


def batch_at(src: np.ndarray, j: int) -> np.ndarray:
    start = (j * INSERT) % SOURCE
    return src[start : start + INSERT]


# --------------------------------------------------------------------------------------
# Runners: each builds its table, fills it, and returns a function running n loops
# (which returns its last sample's data).
# --------------------------------------------------------------------------------------


def fill(add: Callable[[np.ndarray], None], src: np.ndarray, size: int) -> None:
    for start in range(0, size, SOURCE):
        add(src[: min(SOURCE, size - start)])


def looped(
    src: np.ndarray, add: Callable[[np.ndarray], Any], learn: Callable[[], Any]
) -> Callable[[int], Any]:
    """A sync runner's ``n`` loops: insert the source's next batch (``add``), then
    sample and update (``learn``, returning the sample's data); the last data."""
    step = [0]

    def loops(n: int) -> Any:
        out = None
        for _ in range(n):
            add(batch_at(src, step[0]))
            step[0] += 1
            out = learn()
        return out

    return loops


def aqueue_runner(mode: str, size: int, src: np.ndarray) -> Callable[[int], Any]:
    """(An async function: the in-process blocks all run in one event loop.)"""
    import aqueue

    sampler = aqueue.Prioritized(EXPONENT) if mode == "prioritized" else aqueue.Uniform()
    table = aqueue.ReplayTable(size, np.float32, SHAPE, sampler=sampler, seed=0)
    view = table.blocking()
    fill(view.insert_many, src, size)
    rng = np.random.default_rng(1)
    step = [0]

    async def loops(n: int) -> Any:
        s = None
        for _ in range(n):
            await table.insert_many(batch_at(src, step[0]))
            step[0] += 1
            s = await table.sample(SAMPLE)
            await table.update_priorities(s.keys, td_errors(rng))
        return None if s is None else s.data

    return loops


class BareSumTree:
    """The textbook numpy sum tree (leaves at the bottom, every level kept)."""

    def __init__(self, size: int) -> None:
        self.depth = max(1, (size - 1).bit_length())
        self.cap = 1 << self.depth
        self.tree = np.zeros(2 * self.cap)

    def set(self, idx: np.ndarray, values: np.ndarray) -> None:
        tree = self.tree
        i = idx + self.cap
        tree[i] = values
        for _ in range(self.depth):
            i >>= 1
            tree[i] = tree[2 * i] + tree[2 * i + 1]

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        tree = self.tree
        total = tree[1]
        u = rng.random(n) * total
        i = np.ones(n, dtype=np.int64)
        for _ in range(self.depth):
            i <<= 1
            left = tree[i]
            right = u >= left
            u -= left * right
            i += right
        return i - self.cap, tree[i] / total


def floor_runner(mode: str, size: int, src: np.ndarray) -> Callable[[int], Any]:
    ring = np.empty((size, *SHAPE), dtype=np.float32)
    priority = np.ones(size)
    tree = BareSumTree(size) if mode == "prioritized" else None
    pos = [0]

    def add(batch: np.ndarray) -> None:
        k = len(batch)
        start = pos[0]
        idx = (start + np.arange(k)) % size
        end = start + k
        if end <= size:
            ring[start:end] = batch
        else:
            ring[start:] = batch[: size - start]
            ring[: end - size] = batch[size - start :]
        pmax = 1.0  # (a running maximum: never lower than the contract's)
        priority[idx] = pmax
        if tree is not None:
            tree.set(idx, np.full(k, pmax**EXPONENT))
        pos[0] = end % size

    fill(add, src, size)
    rng = np.random.default_rng(1)

    def learn() -> np.ndarray:
        if tree is None:
            idx = rng.integers(0, size, SAMPLE)
        else:
            idx, _ = tree.sample(SAMPLE, rng)
        out = ring.take(idx, axis=0)
        td = td_errors(rng)
        priority[idx] = td
        if tree is not None:
            tree.set(idx, td**EXPONENT)
        return out

    return looped(src, add, learn)


def records_parts(
    mode: str, size: int, src: np.ndarray
) -> tuple[Callable[[np.ndarray], Any], Callable[[], np.ndarray], Callable[[np.ndarray], None]]:
    """The floor plus the records the contract keeps and reports, in the leanest form
    this workload allows: Fifo eviction and nothing else removed, so key ``k`` lives
    in slot ``k % size`` (no free list, key index or eviction order to keep). Keys are
    issued and checked on update (a key evicted is reported not found), each draw's
    times_sampled counted (repeats of a slot in one batch in order), keys, priorities
    and probabilities returned, the largest priority held is the default (kept with
    a count of its holders, recomputed when the last one leaves), repeated keys in an
    update resolved (the last value wins); aqueue's own sum tree and repeat handling
    (``_repeats.py``: a few repeats one by one, many by one stable sort); numpy's
    cheapest calls for each check
    (``count_nonzero`` and ``argmax`` where a reduction would do, an in-place sort of a
    copy, array methods and ``nonzero`` rather than numpy's Python-level wrappers such
    as ``np.take``, ``np.full`` and ``np.flatnonzero``). No locks, awaits,
    argument checks, rate limiter or other selectors. Returns, the table filled,
    ``add`` (insert a batch), ``draw`` (sample 256: the sample's data and keys) and
    ``learn`` (update the keys' priorities with fake TD errors)."""
    from aqueue._replay._repeats import count_draws, last_of_each
    from aqueue._replay._sumtree import SumTree

    ring = np.empty((size, *SHAPE), dtype=np.float32)
    key = np.full(size, -1, dtype=np.int64)
    prio = np.full(size, -np.inf)
    times = np.zeros(size, dtype=np.int64)
    tree = SumTree(size) if mode == "prioritized" else None
    st = {"next": 0, "max": -np.inf, "at": 0}
    rng = np.random.default_rng(1)

    def untrack(values: np.ndarray) -> None:
        st["at"] -= int(np.count_nonzero(values == st["max"]))

    def track(values: np.ndarray) -> None:
        top = float(values[values.argmax()])
        if top > st["max"]:
            st["max"], st["at"] = top, int(np.count_nonzero(values == top))
        elif top == st["max"]:
            st["at"] += int(np.count_nonzero(values == top))

    def largest() -> float:
        if st["next"] == 0:
            return 1.0
        if st["at"] <= 0:
            st["max"] = float(prio[prio.argmax()])
            st["at"] = int(np.count_nonzero(prio == st["max"]))
        return float(st["max"])

    def add(batch: np.ndarray) -> np.ndarray:
        k = len(batch)
        base = st["next"]
        keys = np.arange(base, base + k, dtype=np.int64)
        start = base % size
        slots = (start + np.arange(k)) % size
        if start + k <= size:
            ring[start : start + k] = batch
        else:
            ring[start:] = batch[: size - start]
            ring[: start + k - size] = batch[size - start :]
        p = np.empty(k)
        p.fill(largest())
        if base >= size:
            untrack(prio[slots])  # the evicted items' priorities
        key[slots] = keys
        prio[slots] = p
        times[slots] = 0
        track(p)
        if tree is not None:
            tree.set(slots, p**EXPONENT)
        st["next"] = base + k
        return keys

    def sample(n: int) -> tuple[np.ndarray, ...]:
        held = min(st["next"], size)
        if tree is not None:
            prefix = tree.prefix()
            total = float(prefix[-1])
            slots, w = tree.find(rng.random(n) * total, prefix)
            probs = w / total
        else:
            slots = rng.integers(0, held, n)
            probs = np.empty(n)
            probs.fill(1.0 / held)
        t, _ = count_draws(times, slots)  # (repeats of a slot: t + 1, t + 2, ... in order)
        data = ring.take(slots, axis=0)
        return data, key[slots], prio[slots], probs, t

    def update(keys: np.ndarray, p: np.ndarray) -> np.ndarray:
        slots = keys % size
        found = key[slots] == keys
        if np.count_nonzero(found) == len(found):
            held, values = slots, p
        else:
            held, values = slots[found], p[found]
        keep = last_of_each(held)
        if keep is not None:  # a key given twice: its last value
            held, values = held[keep], values[keep]
        untrack(prio[held])
        prio[held] = values
        track(values)
        if tree is not None:
            tree.set(held, values**EXPONENT)
        return found

    fill(add, src, size)

    def draw() -> tuple[np.ndarray, np.ndarray]:
        s = sample(SAMPLE)
        return s[0], s[1]

    def learn(keys: np.ndarray) -> None:
        found = update(keys, td_errors(rng))
        if np.count_nonzero(found) != len(found):
            raise AssertionError("a key just sampled was not found")

    return add, draw, learn


def records_runner(mode: str, size: int, src: np.ndarray) -> Callable[[int], Any]:
    add, draw, learn = records_parts(mode, size, src)

    def sample_and_update() -> np.ndarray:
        data, keys = draw()
        learn(keys)
        return data

    return looped(src, add, sample_and_update)


@types.coroutine
def _turn() -> Any:
    """One pass through the event loop, the leanest asyncio checkpoint (a bare yield)."""
    yield


def awaited_runner(mode: str, size: int, src: np.ndarray) -> Callable[[int], Any]:
    """The records floor with each of the loop's three operations awaited as the
    contract's are (every operation is a checkpoint: one pass through the event loop);
    an async function like aqueue's, in the same event loop setup."""
    add, draw, learn = records_parts(mode, size, src)
    step = [0]

    async def loops(n: int) -> Any:
        out = None
        for _ in range(n):
            await _turn()
            add(batch_at(src, step[0]))
            step[0] += 1
            await _turn()
            out, keys = draw()
            await _turn()
            learn(keys)
        return out

    return loops


def reverb_table(mode: str, size: int, shape: list[int], dtype: str) -> tuple[Any, Any]:
    """A Reverb server in process with one table "t" of ``size`` items, each one tensor
    "obs" of ``shape`` and ``dtype`` (the mode's sampler, Fifo remover, MinSize(1)): the
    server and its client."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import reverb
    import tensorflow as tf

    sampler = (
        reverb.selectors.Prioritized(EXPONENT)
        if mode == "prioritized"
        else reverb.selectors.Uniform()
    )
    table = reverb.Table(
        name="t",
        sampler=sampler,
        remover=reverb.selectors.Fifo(),
        max_size=size,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature={"obs": tf.TensorSpec(shape, tf.as_dtype(dtype))},
    )
    server = reverb.Server(tables=[table], port=None)
    return server, server.localhost_client()


def reverb_batches(client: Any, n: int) -> Any:
    """Batches of ``n`` samples of table "t" through ``TrajectoryDataset`` (the fastest
    route measured; it samples ahead in its own threads)."""
    import reverb

    dataset = reverb.TrajectoryDataset.from_table_signature(
        server_address=client.server_address,
        table="t",
        max_in_flight_samples_per_worker=2 * n,
        num_workers_per_iterator=1,
    ).batch(n)
    return iter(dataset)


def reverb_runner(mode: str, size: int, src: np.ndarray) -> Callable[[int], Any]:
    from reverb import structured_writer as sw

    server, client = reverb_table(mode, size, list(SHAPE), "float32")
    ref = sw.create_reference_step({"obs": src[0]})
    writer = client.structured_writer(
        [sw.create_config(pattern={"obs": ref["obs"][-1]}, table="t")]
    )

    def add(batch: np.ndarray) -> None:
        for item in batch:
            writer.append({"obs": item})
        writer.flush()

    fill(add, src, size)
    it = reverb_batches(client, SAMPLE)
    rng = np.random.default_rng(1)

    def learn() -> np.ndarray:
        s = next(it)
        if mode == "prioritized":
            keys = s.info.key.numpy().tolist()
            client.mutate_priorities("t", updates=dict(zip(keys, td_errors(rng).tolist())))
        return s.data["obs"].numpy()

    loops = looped(src, add, learn)
    loops.keep = (server, client, writer, it)  # type: ignore[attr-defined]
    return loops


def torchrl_runner(mode: str, size: int, src: np.ndarray) -> Callable[[int], Any]:
    import torch
    from torchrl.data import LazyTensorStorage, PrioritizedSampler, RandomSampler, ReplayBuffer

    torch.set_num_threads(1)
    sampler: Any = (
        PrioritizedSampler(max_capacity=size, alpha=EXPONENT, beta=0.4)
        if mode == "prioritized"
        else RandomSampler()
    )
    rb = ReplayBuffer(storage=LazyTensorStorage(size), sampler=sampler, batch_size=SAMPLE)

    def add(batch: np.ndarray) -> None:
        rb.extend(torch.from_numpy(batch))

    fill(add, src, size)
    rng = np.random.default_rng(1)

    def learn() -> np.ndarray:
        data, info = rb.sample(SAMPLE, return_info=True)
        if mode == "prioritized":
            rb.update_priority(info["index"], torch.from_numpy(td_errors(rng).astype(np.float32)))
        return data.numpy()

    return looped(src, add, learn)


def cpprb_runner(mode: str, size: int, src: np.ndarray) -> Callable[[int], Any]:
    from cpprb import PrioritizedReplayBuffer, ReplayBuffer

    spec = {"obs": {"shape": SHAPE, "dtype": np.float32}}
    rb: Any = (
        PrioritizedReplayBuffer(size, spec, alpha=EXPONENT)
        if mode == "prioritized"
        else ReplayBuffer(size, spec)
    )

    def add(batch: np.ndarray) -> None:
        rb.add(obs=batch)

    fill(add, src, size)
    rng = np.random.default_rng(1)

    def learn() -> np.ndarray:
        if mode == "prioritized":
            s = rb.sample(SAMPLE, beta=0.4)
            rb.update_priorities(s["indexes"], td_errors(rng))
        else:
            s = rb.sample(SAMPLE)
        return s["obs"]

    return looped(src, add, learn)


RUNNERS = {
    "aqueue": aqueue_runner,
    "floor": floor_runner,
    "records": records_runner,
    "awaited": awaited_runner,
    "reverb": reverb_runner,
    "torchrl": torchrl_runner,
    "cpprb": cpprb_runner,
}


async def timed_block(loops: Callable[[int], Any], n: int, src: np.ndarray) -> float:
    """One block of ``n`` loops of an async loop function: its seconds (after checking
    its last sample)."""
    t0 = time.perf_counter()
    data = await loops(n)
    seconds = time.perf_counter() - t0
    problem = check(data, src)
    if problem:
        raise AssertionError(problem)
    return seconds


def versions(row: str) -> dict[str, str]:
    import importlib.metadata

    names = {
        "aqueue": ["aqueue", "numpy", "anyio"],
        "floor": ["numpy"],
        "records": ["numpy", "aqueue"],
        "awaited": ["numpy", "aqueue", "anyio"],
        "reverb": ["dm-reverb", "tensorflow-cpu", "tensorflow"],
        "torchrl": ["torchrl", "torch", "tensordict"],
        "cpprb": ["cpprb", "numpy"],
    }[row]
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


# Every row runs in a worker process of its own (aqueue and the floor with this
# interpreter, the peers with theirs): it builds and fills its table once, says it is
# ready, then runs a block of loops each time the parent asks ("run N" on its stdin),
# answering one line (MARK + JSON: wall and CPU seconds, or the problem found). The
# parent interleaves the rows block by block, so load from other processes on a
# shared machine spreads over all of them.
MARK = "R1 "


def _answer(payload: dict[str, Any]) -> None:
    print(MARK + json.dumps(payload), flush=True)


def _measure(data: Any, t0: float, c0: float, src: np.ndarray) -> dict[str, Any]:
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    problem = check(data, src)
    return {"seconds": seconds, "cpu": cpu} if problem is None else {"error": problem}


def serve(row: str, mode: str, size: int, warm: int) -> None:
    """The worker's side of the protocol (``--peer-worker``)."""
    if row.startswith("t-"):  # a T row: ``size`` is its number of steps
        import _traj_rows

        _traj_rows.serve(row[2:], mode, size, warm, _answer)
        return
    src = source()
    try:
        run = RUNNERS[row](mode, size, src)
    except Exception as exc:
        _answer({"error": f"{type(exc).__name__}: {exc}"})
        return
    if row not in ASYNC_ROWS:
        run(warm)
        _answer({"ready": True, "versions": versions(row)})
        for line in sys.stdin:
            if not line.startswith("run"):
                return
            t0, c0 = time.perf_counter(), time.process_time()
            _answer(_measure(run(int(line.split()[1])), t0, c0, src))
        return

    import anyio
    import anyio.to_thread

    async def main() -> None:
        await run(warm)
        _answer({"ready": True, "versions": versions(row)})
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line.startswith("run"):
                return
            t0, c0 = time.perf_counter(), time.process_time()
            _answer(_measure(await run(int(line.split()[1])), t0, c0, src))

    anyio.run(main)


class Worker:
    """The parent's side: one row's worker process."""

    def __init__(self, row: str, python: str, mode: str, args: argparse.Namespace) -> None:
        self.row = row
        self.error: str | None = None
        self.versions: dict[str, str] = {}
        cmd = [python, os.path.abspath(__file__), "--peer-worker", row, "--mode", mode]
        cmd += ["--size", str(args.size), "--loops", str(args.loops)]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        first = self._read()
        self.ready = {k: v for k, v in first.items() if k != "ready"}
        if "error" in first:
            self.error = first["error"]
        else:
            self.versions = first.get("versions", {})

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARK):
                answer: dict[str, Any] = json.loads(line[len(MARK) :])
                return answer
        return {"error": f"the worker ended (exit {self.proc.wait()})"}

    def block(self, n: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"run {n}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin is not None and self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# --------------------------------------------------------------------------------------
# sample(256) alone, and the limiter run
# --------------------------------------------------------------------------------------


def sample_only(size: int, loops: int, reps: int, src: np.ndarray) -> dict[str, list[float]]:
    """Seconds per block of ``loops`` uniform sample(256): aqueue against the bare gather."""
    import anyio

    import aqueue

    table = aqueue.ReplayTable(size, np.float32, SHAPE, seed=0)
    fill(table.blocking().insert_many, src, size)
    ring = np.empty((size, *SHAPE), dtype=np.float32)
    for start in range(0, size, SOURCE):
        ring[start : start + SOURCE] = src[: min(SOURCE, size - start)]
    rng = np.random.default_rng(2)

    async def ours(n: int) -> Any:
        s = None
        for _ in range(n):
            s = await table.sample(SAMPLE)
        return None if s is None else s.data

    async def bare(n: int) -> Any:
        out = None
        for _ in range(n):
            out = np.take(ring, rng.integers(0, size, SAMPLE), axis=0)
        return out

    result: dict[str, list[float]] = {"aqueue": [], "gather": []}

    async def blocks() -> None:
        await ours(10)
        await bare(10)
        for _ in range(reps):
            result["aqueue"].append(await timed_block(ours, loops, src))
            result["gather"].append(await timed_block(bare, loops, src))

    anyio.run(blocks)
    return result


def limiter_run(steps: int, src: np.ndarray) -> dict[str, Any]:
    """4 actor threads and a learner task under SampleToInsertRatio(4, 1000, 1024)."""
    import anyio

    import aqueue

    limiter = aqueue.SampleToInsertRatio(4.0, 1000, 1024.0)
    table = aqueue.ReplayTable(
        100_000,
        np.float32,
        SHAPE,
        sampler=aqueue.Prioritized(EXPONENT),
        rate_limiter=limiter,
        seed=3,
    )
    view = table.blocking()
    stop = threading.Event()

    def actor(a: int) -> None:
        j = a
        while not stop.is_set():
            try:
                view.insert_many(batch_at(src, j), timeout=0.1)
            except TimeoutError:
                continue
            except aqueue.QueueClosedError:
                return
            j += 4

    diffs: list[float] = []

    async def learner() -> float:
        rng = np.random.default_rng(4)
        threads = [threading.Thread(target=actor, args=(a,)) for a in range(4)]
        t0 = time.perf_counter()  # (before the actors start: their waits count from then)
        for t in threads:
            t.start()
        try:
            for _ in range(steps):
                s = await table.sample(SAMPLE)
                st = table.statistics()
                diffs.append(st.inserts * 4.0 - st.samples)
                await table.update_priorities(s.keys, td_errors(rng))
            final.append(table.statistics())  # (with the time, at one moment)
            return time.perf_counter() - t0
        finally:
            stop.set()
            table.close()
            for t in threads:
                t.join()

    final: list[Any] = []
    seconds = anyio.run(learner)
    st = final[0]
    return {
        "seconds": seconds,
        "inserts": st.inserts,
        "samples": st.samples,
        "ratio": st.samples / st.inserts,
        "band": (limiter.min_diff, limiter.max_diff),
        "diff_range": (min(diffs), max(diffs)),
        "insert_wait_share": st.insert_wait_s / seconds,
        "sample_wait_share": st.sample_wait_s / seconds,
    }


# --------------------------------------------------------------------------------------
# R2: the Redis table beside the Redis FIFO (processes; bench_redis.py's server)
# --------------------------------------------------------------------------------------

ACTORS = 4
REDIS_SIZE = 20_000
REDIS_FIFO_CAPACITY = 4096


def _cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _redis_limiter() -> Any:
    import aqueue

    return aqueue.SampleToInsertRatio(4.0, 1000, 1024.0)


# The floor of the Redis table row: the leanest code doing what the contract requires
# for this workload (uniform draws, Fifo eviction at max_size, the limiter counted in the
# same step as the selection, a sample atomic and leaving nothing behind): items in a
# ring of max_size slots (slot = key % max_size, an insert past max_size replaces the
# oldest), payloads staged by MSET in the insert's MULTI and renamed into place, a
# sample's draws copied to keys of its own and read and deleted in the same MULTI; raw
# bytes, no header, no keys or records returned, no priorities, no wait registry (a
# refused insert sleeps 2 ms and retries, a refused sample 0.5 ms).
FLOOR_LUA = """#!lua name=aqrfloor
local function counters(P)
  local m = redis.call('HMGET', P .. 'meta', 'ins', 'smp')
  return tonumber(m[1] or 0), tonumber(m[2] or 0)
end
redis.register_function('rf_insert', function(keys, args)
  local P, spi, hi, min_size, max = keys[1], tonumber(args[1]), tonumber(args[2]),
    tonumber(args[3]), tonumber(args[4])
  local k = #args - 4
  local ins, smp = counters(P)
  if ins + k > min_size and (ins + k) * spi - smp > hi then
    local st = {}
    for j = 5, #args do st[#st + 1] = P .. 'st:' .. args[j] end
    redis.call('DEL', unpack(st))
    return 0
  end
  for j = 1, k do
    local key = ins + j - 1
    local slot = key % max
    if key >= max then redis.call('DEL', P .. 'd:' .. (key - max)) end
    redis.call('RENAME', P .. 'st:' .. args[4 + j], P .. 'd:' .. key)
    redis.call('HSET', P .. 'ring', slot, key)
  end
  redis.call('HSET', P .. 'meta', 'ins', ins + k)
  return k
end)
redis.register_function('rf_sample', function(keys, args)
  local P, spi, lo, min_size, max, wid = keys[1], tonumber(args[1]), tonumber(args[2]),
    tonumber(args[3]), tonumber(args[4]), args[5]
  local n = #args - 5
  local ins, smp = counters(P)
  if ins < min_size or ins * spi - smp - n < lo then return 0 end
  local size = math.min(ins, max)
  local slots = {}
  for j = 1, n do slots[j] = math.floor(tonumber(args[5 + j]) * size) end
  local held = redis.call('HMGET', P .. 'ring', unpack(slots))
  for j = 1, n do
    redis.call('COPY', P .. 'd:' .. held[j], P .. 'o:' .. wid .. '.' .. j)
  end
  redis.call('HSET', P .. 'meta', 'smp', smp + n)
  return n
end)
"""


def floor_actor(url: str, name: str, a: int, go: Any, out: Any) -> None:
    """The floor's actor: MULTI (MSET of 64 staged payloads, rf_insert) until stopped."""
    import redis

    src = source()
    lim = _redis_limiter()
    r = redis.Redis.from_url(url)
    r.ping()
    P = f"{{{name}}}:"
    out.put(("ready", a))
    go.wait()
    c0 = _cpu()
    j, n = a, 0
    while r.get(P + "stop") is None:
        batch = batch_at(src, j)
        refs = [f"{a}.{n}.{i}" for i in range(INSERT)]
        pipe = r.pipeline(transaction=True)
        pipe.mset({P + "st:" + ref: row.tobytes() for ref, row in zip(refs, batch)})
        pipe.fcall("rf_insert", 1, P, 4.0, lim.max_diff, 1000, REDIS_SIZE, *refs)
        if int(pipe.execute()[1]):
            j += ACTORS
            n += 1
        else:
            time.sleep(0.002)  # (held back: leave the cores to the learner and the server)
    out.put(("actor", _cpu() - c0))


def floor_learner(url: str, name: str, steps: int, ready: Any, go: Any, out: Any) -> None:
    """The floor's learner: MULTI (rf_sample, MGET and DEL of its copies) ``steps`` times."""
    import redis

    src = source()
    lim = _redis_limiter()
    r = redis.Redis.from_url(url)
    P = f"{{{name}}}:"
    rng = np.random.default_rng(0)
    ready.set()
    go.wait()

    def sample(w: int) -> np.ndarray:
        outs = [f"{P}o:{w}.{i}" for i in range(1, SAMPLE + 1)]
        while True:
            pipe = r.pipeline(transaction=True)
            args = [4.0, lim.min_diff, 1000, REDIS_SIZE, w, *rng.random(SAMPLE).tolist()]
            pipe.fcall("rf_sample", 1, P, *args)
            pipe.mget(outs)
            pipe.delete(*outs)
            k, values, _ = pipe.execute()
            if int(k):
                return np.frombuffer(b"".join(values), np.float32).reshape(SAMPLE, *SHAPE)
            time.sleep(0.0005)

    sample(0)
    m0 = r.hmget(P + "meta", "ins", "smp")
    t0, c0 = time.perf_counter(), _cpu()
    for w in range(1, steps + 1):
        data = sample(w)
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    m1 = r.hmget(P + "meta", "ins", "smp")
    r.set(P + "stop", 1)
    out.put(
        (
            "learner",
            {
                "seconds": seconds,
                "cpu": cpu,
                "inserts": int(m1[0]) - int(m0[0]),
                "samples": int(m1[1]) - int(m0[1]),
                "error": check(data, src),
            },
        )
    )


async def _open_redis(srv: Any, kind: str, name: str) -> Any:
    if kind == "table":
        return await srv.replay_table(
            name, REDIS_SIZE, np.float32, SHAPE, rate_limiter=_redis_limiter()
        )
    return await srv.fifo_queue(name, REDIS_FIFO_CAPACITY, np.float32, SHAPE)


def redis_actor(kind: str, url: str, name: str, a: int, count: int, go: Any, out: Any) -> None:
    """One actor process: insert_many(64) into the table until it is closed, or
    enqueue_many(64) ``count`` items into the FIFO; reports its CPU seconds."""
    import asyncio

    import aqueue
    import aqueue.redis

    src = source()

    async def main() -> None:
        async with aqueue.redis.connect(url) as srv:
            sink = await _open_redis(srv, kind, name)
            out.put(("ready", a))
            go.wait()
            c0 = _cpu()
            j = a
            try:
                if kind == "table":
                    while True:
                        await sink.insert_many(batch_at(src, j))
                        j += ACTORS
                else:
                    for _ in range(0, count, INSERT):
                        await sink.enqueue_many(batch_at(src, j))
                        j += ACTORS
            except aqueue.QueueClosedError:
                pass
            out.put(("actor", _cpu() - c0))

    asyncio.run(main())


def redis_learner(
    kind: str, url: str, name: str, steps: int, ready: Any, go: Any, out: Any
) -> None:
    """The learner process: ``steps`` sample(256) (after the first, which waits for
    min_size_to_sample) reading the statistics after each, or dequeue_many(256) of the
    FIFO; reports wall and CPU seconds, and for the table the counters and band."""
    import asyncio

    import aqueue.redis

    src = source()

    async def main() -> None:
        async with aqueue.redis.connect(url) as srv:
            sink = await _open_redis(srv, kind, name)
            ready.set()
            go.wait()
            bad = None
            if kind == "table":
                await sink.sample(SAMPLE)  # stage 1 of the limiter: the table fills
                st0 = await sink.statistics()
                t0, c0 = time.perf_counter(), _cpu()
                diffs = []
                for _ in range(steps):
                    s = await sink.sample(SAMPLE)
                    st = await sink.statistics()
                    diffs.append(st.inserts * 4.0 - st.samples)
                seconds, cpu = time.perf_counter() - t0, _cpu() - c0
                bad = check(s.data, src)
                st1 = await sink.statistics()
                span = time.perf_counter() - t0  # (from the first reading to the last)
                await sink.aclose()  # (the actors' waiting inserts end)
                out.put(
                    (
                        "learner",
                        {
                            "seconds": seconds,
                            "cpu": cpu,
                            "inserts": st1.inserts - st0.inserts,
                            "samples": st1.samples - st0.samples,
                            "diff_range": (min(diffs), max(diffs)),
                            "insert_wait_s": st1.insert_wait_s - st0.insert_wait_s,
                            "sample_wait_s": st1.sample_wait_s - st0.sample_wait_s,
                            "span": span,
                            "error": bad,
                        },
                    )
                )
                await srv.delete_table(name)
                return
            t0, c0 = time.perf_counter(), _cpu()
            got = 0
            total = steps * SAMPLE
            while got < total:
                batch = await sink.dequeue_many(SAMPLE)
                got += len(batch)
            seconds, cpu = time.perf_counter() - t0, _cpu() - c0
            bad = check(batch, src)
            out.put(("learner", {"seconds": seconds, "cpu": cpu, "items": got, "error": bad}))
            await srv.delete_queue(name)

    asyncio.run(main())


def redis_row(kind: str, url: str, steps: int) -> dict[str, Any]:
    """One run: ACTORS actor processes and a learner process, connected before the clock
    starts; the learner's numbers, the actors' CPU and the server's CPU."""
    import multiprocessing

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_redis import server_cpu

    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    name = f"bench-r2-{kind}-{os.getpid()}-{time.monotonic_ns()}"
    per_actor = steps * SAMPLE // ACTORS
    if kind == "floor":
        learner = ctx.Process(target=floor_learner, args=(url, name, steps, ready, go, out))
        actors = [
            ctx.Process(target=floor_actor, args=(url, name, a, go, out)) for a in range(ACTORS)
        ]
    else:
        learner = ctx.Process(target=redis_learner, args=(kind, url, name, steps, ready, go, out))
        actors = [
            ctx.Process(target=redis_actor, args=(kind, url, name, a, per_actor, go, out))
            for a in range(ACTORS)
        ]
    learner.start()
    ready.wait(120)
    for p in actors:
        p.start()
    for _ in range(ACTORS):
        if out.get(timeout=300)[0] != "ready":
            raise RuntimeError("an actor reported before it was ready")
    time.sleep(0.2)
    srv0 = server_cpu(url)
    go.set()
    result: dict[str, Any] = {}
    actors_cpu = 0.0
    for _ in range(ACTORS + 1):
        msg = out.get(timeout=600)
        if msg[0] == "learner":
            result = msg[1]
            result["server_cpu"] = server_cpu(url) - srv0
        else:
            actors_cpu += msg[1]
    for p in [*actors, learner]:
        p.join(60)
    result["actors_cpu"] = actors_cpu
    return result


def redis_run(url: str | None, steps: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """R2: rounds of the Redis table row and the Redis FIFO row, interleaved, on one
    private server (or ``url``)."""
    import signal

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_redis import start_server

    proc = None
    if url is None:
        proc, url = start_server()
    try:
        import redis

        redis.Redis.from_url(url).function_load(FLOOR_LUA, replace=True)
        runs: dict[str, list[dict[str, Any]]] = {"table": [], "floor": [], "fifo": []}
        for r in range(rounds):
            for kind in ("table", "floor", "fifo"):
                res = redis_row(kind, url, steps)
                runs[kind].append(res)
                print(f"  redis {kind:<5} round {r + 1} {res}", file=sys.stderr)
        return runs
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(5)


def print_redis(runs: dict[str, list[dict[str, Any]]], steps: int) -> None:
    """The R2 table: MB/s moved through the server (payload bytes in plus out)."""
    item = int(np.prod(SHAPE)) * 4
    print(
        f"\nR2 (Redis): float32{list(SHAPE)} items ({item:,} B), {ACTORS} actor processes, "
        f"1 learner process; {len(runs['table'])} rounds, interleaved (median, min-max).\n"
        f"  table: uniform, max_size {REDIS_SIZE:,}, actors insert_many({INSERT}), learner "
        f"{steps} x sample({SAMPLE}) under SampleToInsertRatio(4, 1000, 1024)\n"
        f"  FIFO: capacity {REDIS_FIFO_CAPACITY:,}, actors enqueue_many({INSERT}), learner "
        f"{steps} x dequeue_many({SAMPLE})\n"
        "  MB/s moved = payload bytes through the server, in (inserts, enqueues) plus out "
        "(sampled, dequeued items)\n"
    )
    print(
        f"| {'row':<34} | {'MB/s moved (min-max)':>22} | {'items in/s':>10} | "
        f"{'items out/s':>11} | {'server CPU':>10} | {'actors CPU':>10} | {'learner CPU':>11} |"
    )
    print(f"|{'-' * 36}|{'-' * 24}|{'-' * 12}|{'-' * 13}|{'-' * 12}|{'-' * 12}|{'-' * 13}|")
    mbs: dict[str, float] = {}
    rows = (
        ("table", "aqueue.redis replay table"),
        ("floor", "floor: ring, MULTI insert / sample"),
        ("fifo", "aqueue.redis FIFO"),
    )
    for kind, label in rows:
        rs = runs[kind]
        if not rs:
            continue
        if kind in ("table", "floor"):
            ins = [r["inserts"] / r["seconds"] for r in rs]
            outs = [r["samples"] / r["seconds"] for r in rs]
        else:
            ins = outs = [r["items"] / r["seconds"] for r in rs]
        moved = [(i + o) * item / 1e6 for i, o in zip(ins, outs)]
        mbs[kind] = statistics.median(moved)
        cpu = [
            statistics.median(r[f] / r["seconds"] for r in rs)
            for f in ("server_cpu", "actors_cpu", "cpu")
        ]
        print(
            f"| {label:<34} | {mbs[kind]:>7.1f} ({min(moved):>5.1f}-{max(moved):>5.1f}) | "
            f"{statistics.median(ins):>10,.0f} | {statistics.median(outs):>11,.0f} | "
            f"{cpu[0]:>8.2f} c | {cpu[1]:>8.2f} c | {cpu[2]:>9.2f} c |"
        )
    print("  (CPU: cores busy on average while the clock ran; the machine's cores are shared)")
    errors = [r["error"] for rs in runs.values() for r in rs if r.get("error")]
    if errors:
        print(f"  CHECK FAILED: {errors[0]}")
    if "table" in mbs and "fifo" in mbs:
        floor = f"; vs its floor {mbs['table'] / mbs['floor']:.2f}x" if "floor" in mbs else ""
        print(
            f"\nRedis table vs Redis FIFO, MB/s moved: {mbs['table'] / mbs['fifo']:.2f}x "
            f"(target >= 0.5x){floor}"
        )
    band = _redis_limiter()
    for i, r in enumerate(runs["table"]):
        dlo, dhi = r["diff_range"]
        held = band.min_diff <= dlo and dhi <= band.max_diff
        print(
            f"  round {i + 1}: samples/inserts = {r['samples'] / max(1, r['inserts']):.2f} "
            f"(target 4); inserts * 4 - samples stayed in [{dlo:.0f}, {dhi:.0f}] (band "
            f"[{band.min_diff:.0f}, {band.max_diff:.0f}]: {'held' if held else 'LEFT THE BAND'}); "
            f"actors waited {r['insert_wait_s'] / r['span']:.0%} of the run, the learner "
            f"{r['sample_wait_s'] / r['span']:.0%}"
        )


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--quick", action="store_true", help="smoke run: a table of 20,000, few loops")
    p.add_argument(
        "--reps", type=int, default=None, help="timed blocks per row (default 6, quick 2)"
    )
    p.add_argument(
        "--loops", type=int, default=None, help="loops per block (default 200, quick 30)"
    )
    p.add_argument("--size", type=int, default=None, help="table max_size (default 100000)")
    p.add_argument(
        "--rows", default=",".join(ROWS), help="comma-separated subset of " + ", ".join(ROWS)
    )
    p.add_argument("--modes", default=",".join(MODES), help="uniform, prioritized or both")
    add_peer_arguments(p, list(PEERS))
    p.add_argument(
        "--redis",
        choices=("no", "also", "only"),
        default="also",
        help="R2, the Redis table beside the Redis FIFO (processes): run it too (also), "
        "not at all, or alone (only)",
    )
    p.add_argument("--url", help="R2's Redis server (default: start a private one)")
    p.add_argument(
        "--json",
        default=None,
        help="also write R1's median loops/s per row and sampler to this JSON file",
    )
    p.add_argument(
        "--r1-only",
        action="store_true",
        help="R1's rows only (no sample-alone and limiter runs): what compare_revisions runs",
    )
    p.add_argument("--redis-rounds", type=int, default=None, help="R2 rounds (default 3)")
    p.add_argument(
        "--traj",
        choices=("no", "also", "only"),
        default="no",
        help="T, trajectories (Atari-like frames stored once, sampled as 4-frame stacks, "
        "_traj_rows.py): run it too (also), not at all (no, the default), or alone (only)",
    )
    p.add_argument(
        "--traj-steps", type=int, default=None, help="T's steps (default 200000, quick 20000)"
    )
    p.add_argument(
        "--traj-rows",
        default="table,core,contract,floor,reverb,torchrl",
        help="comma-separated subset of table, core, contract, floor, reverb, torchrl",
    )
    p.add_argument("--peer-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--mode", default="uniform", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.redis_rounds = args.redis_rounds or (1 if args.quick else 3)
    args.redis_steps = 40 if args.quick else 300
    args.reps = args.reps or (2 if args.quick else 6)
    args.loops = args.loops or (30 if args.quick else 200)
    args.size = args.size or (20_000 if args.quick else 100_000)
    args.traj_steps = args.traj_steps or (20_000 if args.quick else 200_000)
    return args


def rate(times: list[float], loops: int) -> tuple[float, float]:
    """(median, best) loops/s."""
    return loops / statistics.median(times), loops / min(times)


def interleaved(
    pythons: dict[str, str | None], mode: str, args: argparse.Namespace, prefix: str = ""
) -> dict[tuple[str, str], dict[str, Any]]:
    """Each row's worker (``prefix + row``) builds its table, then ``args.reps`` blocks
    of ``args.loops`` loops run row after row: each row's times, CPU times and what its
    worker reported when ready."""
    results: dict[tuple[str, str], dict[str, Any]] = {}
    workers = []
    for row, python in pythons.items():
        if python is None:
            continue
        print(f"  {mode:<11} {row:<8} filling its table ...", file=sys.stderr)
        worker = Worker(prefix + row, python, mode, args)
        results[(row, mode)] = {"times": [], "cpu": [], **worker.ready}
        if worker.error:
            worker.close()
        else:
            workers.append((row, worker))
    for rep in range(args.reps):
        for row, worker in workers:
            r = results[(row, mode)]
            if "error" in r:
                continue
            answer = worker.block(args.loops)
            if "error" in answer:
                r["error"] = answer["error"]
            else:
                r["times"].append(answer["seconds"])
                r["cpu"].append(answer["cpu"])
            print(f"  {mode:<11} {row:<8} block {rep + 1} {answer}", file=sys.stderr)
    for _, worker in workers:
        worker.close()
    return results


def traj_run(args: argparse.Namespace, modes: list[str]) -> bool:
    """T: the trajectory rows (``_traj_rows.py``), interleaved per mode; whether all
    of them ran and passed their checks."""
    import _traj_rows

    rows = [r.strip() for r in args.traj_rows.split(",") if r.strip()]
    pythons = {
        r: sys.executable if r not in _traj_rows.PEERS else find_python(r, args) for r in rows
    }
    t_args = argparse.Namespace(**vars(args))
    t_args.size = args.traj_steps  # (what the workers are told to build)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for mode in modes:
        results.update(interleaved(pythons, mode, t_args, prefix="t-"))
    _traj_rows.report(args.traj_steps, args.loops, modes, results)
    return not any("error" in r for r in results.values())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.peer_worker:
        serve(args.peer_worker, args.mode, args.size, max(5, args.loops // 10))
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.traj == "only":
        return 0 if traj_run(args, modes) else 1
    if args.redis == "only":
        runs = redis_run(args.url, args.redis_steps, args.redis_rounds)
        print_redis(runs, args.redis_steps)
        return 1 if any(r.get("error") for rs in runs.values() for r in rs) else 0
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    pythons = {r: sys.executable if r not in PEERS else find_python(r, args) for r in rows}
    src = source()
    load_start = os.getloadavg()
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for mode in modes:
        results.update(interleaved(pythons, mode, args))
    if args.json:
        medians = {
            f"{row}/{mode}": rate(r["times"], args.loops)[0]
            for (row, mode), r in results.items()
            if r.get("times") and "error" not in r
        }
        with open(args.json, "w") as f:
            json.dump({"loops_per_s": medians}, f)
    if args.r1_only:
        print_report(args, rows, modes, results, None, None, load_start)
        return 1 if any("error" in r for r in results.values()) else 0
    samples = sample_only(args.size, args.loops, args.reps, src) if "uniform" in modes else None
    limiter = limiter_run(60 if args.quick else 400, src)
    print_report(args, rows, modes, results, samples, limiter, load_start)
    failed = any("error" in r for r in results.values())
    if args.traj == "also":
        failed = not traj_run(args, modes) or failed
    if args.redis == "also":
        runs = redis_run(args.url, args.redis_steps, args.redis_rounds)
        print_redis(runs, args.redis_steps)
        failed = failed or any(r.get("error") for rs in runs.values() for r in rs)
    return 1 if failed else 0


def print_report(
    args: argparse.Namespace,
    rows: list[str],
    modes: list[str],
    results: dict[tuple[str, str], dict[str, Any]],
    samples: dict[str, list[float]] | None,
    limiter: dict[str, Any] | None,
    load_start: tuple[float, float, float],
) -> None:
    print(
        f"\nR1: table of {args.size:,} float32{list(SHAPE)} items; loop = insert_many({INSERT}) + "
        f"sample({SAMPLE}) + update_priorities({SAMPLE}); {args.reps} blocks of {args.loops} "
        f"loops per row (median / best); Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, load {load_start[0]:.1f} -> {os.getloadavg()[0]:.1f}\n"
    )
    rates: dict[tuple[str, str], float] = {}
    for mode in modes:
        print(
            f"| {mode:<11} | {'row':<40} | {'loops/s':>15} | {'transitions/s':>21} | "
            f"{'CPU/loop':>8} |"
        )
        print(f"|{'-' * 13}|{'-' * 42}|{'-' * 17}|{'-' * 23}|{'-' * 10}|")
        for row in rows:
            r = results.get((row, mode))
            if r is None:
                continue
            if "error" in r or not r.get("times"):
                print(
                    f"| {'':<11} | {LABELS[row]:<40} | FAILED: {r.get('error', 'no result')[:60]}"
                )
                continue
            med, best = rate(r["times"], args.loops)
            cpu = statistics.median(r["cpu"]) / args.loops * 1e6
            rates[(row, mode)] = med
            print(
                f"| {'':<11} | {LABELS[row]:<40} | {med:>7,.0f} / {best:>5,.0f} | "
                f"{med * PER_LOOP:>10,.0f} / {best * PER_LOOP:>8,.0f} | {cpu:>5,.0f} us |"
            )
        print()
    print("Ratios (medians; aqueue over the row):")
    for mode in modes:
        ours = rates.get(("aqueue", mode))
        parts = []
        # (the TorchRL and cpprb targets name their prioritized buffers; their uniform
        # buffers keep no priorities and skip the update, so they are compared only)
        prioritized = mode == "prioritized"
        for row, target in (
            ("reverb", 2.0),
            ("torchrl", 1.0 if prioritized else None),
            ("cpprb", 1.0 if prioritized else None),
            ("floor", None),
        ):
            theirs = rates.get((row, mode))
            if ours and theirs:
                goal = (
                    f" (target >= {target:g}x)"
                    if target
                    else " (of the floor)"
                    if row == "floor"
                    else " (no target: it skips the update)"
                )
                parts.append(f"vs {row} {ours / theirs:.2f}x{goal}")
        print(f"  {mode}: " + "; ".join(parts))
        cpprb = rates.get(("cpprb", mode))
        for row, what in (
            ("records", "the floor with the contract's records"),
            (
                "awaited",
                "the floor with the records and the awaits (what any awaitable table "
                "keeping them could reach)",
            ),
        ):
            floor = rates.get((row, mode))
            if floor and cpprb:
                mine = f"; aqueue of it {ours / floor:.2f}x" if ours else ""
                print(f"  {mode}: {what} vs cpprb {floor / cpprb:.2f}x{mine}")
    if samples:
        ours_s = statistics.median(samples["aqueue"])
        bare_s = statistics.median(samples["gather"])
        print(
            f"  uniform sample({SAMPLE}) alone: {ours_s / args.loops * 1e6:.0f} us against a bare "
            f"gather of {SAMPLE} random rows {bare_s / args.loops * 1e6:.0f} us: "
            f"{bare_s / ours_s:.2f}x of the gather's speed (target >= 0.7x)"
        )
    if limiter is not None:
        lo, hi = limiter["band"]
        dlo, dhi = limiter["diff_range"]
        print(
            f"\nLimiter run: 4 actor threads, 1 learner task, SampleToInsertRatio(4, 1000, "
            f"1024), {limiter['seconds']:.1f} s: {limiter['inserts']:,} inserts, "
            f"{limiter['samples']:,} samples, samples/inserts = {limiter['ratio']:.2f}; "
            f"inserts * 4 - samples stayed in [{dlo:.0f}, {dhi:.0f}] (band [{lo:.0f}, "
            f"{hi:.0f}]: {'held' if lo <= dlo and dhi <= hi else 'LEFT THE BAND'}); actors "
            f"waited {limiter['insert_wait_share']:.0%} of the run, the learner "
            f"{limiter['sample_wait_share']:.0%}"
        )
    print("\nVersions:")
    seen: dict[str, str] = {}
    for r in results.values():
        seen.update(r.get("versions", {}))
    print("  " + ", ".join(f"{k} {v}" for k, v in sorted(seen.items())))


if __name__ == "__main__":
    sys.exit(main())
