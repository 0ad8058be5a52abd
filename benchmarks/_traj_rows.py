"""T: trajectories, frames stored once, sampled as 4-frame stacks (``bench_replay.py --traj``).

Workload: Atari-like frames (84x84 uint8: a flat background per episode, a moving 6x6
sprite, a tag in the first row), episodes of 200 to 2,000 steps, ``--traj-steps``
(default 200,000) steps in all, appended by 4 writers interleaved in bursts of 16 steps
(each writer takes the next episode when its own ends). The items are the windows of 4
consecutive frames of one episode (stride 1): every step but the first 3 of its episode
starts one. The ring holds exactly the steps appended, so nothing is evicted.

Rows (each in a worker process of its own, the peers with their own interpreters):

- table: ``aqueue.TrajectoryTable(steps, np.uint8, (84, 84), length=4)``, one
  ``writer()`` per actor, ``await w.append_many(burst)`` and ``await w.end_episode()``;
  the loop is ``s = await table.sample(32)`` (``s.data`` is ``(32, 4, 84, 84)``) and
  ``await table.update_priorities(s.keys, ...)``, on one asyncio loop that the worker
  keeps (a block of loops is one ``run_until_complete``).
- core: the same table's synchronous core underneath (``StepStore`` beside a replay
  ``TableCore`` whose items are int64 rows of 4 step slots): ``core.sample(32)``,
  one gather per field of the 32 x 4 frames, ``core.update`` of the 32 priorities.
  No lock, await or argument check: what the table's calls add is the difference.
- floor: the frames in one numpy ring (episodes contiguous) and the array of valid
  window starts; a bare gather of 32 random windows (uniform), or the same drawn by
  a textbook sum tree whose 32 leaves are then set (prioritized).
- floor + the contract's costs: the floor as two awaited calls on an asyncio loop, with
  only what the contract requires of them: one ``anyio.lowlevel.checkpoint()`` per
  call, a ``threading.Lock`` held around the draw and gather and around the priority
  write, and the leanest checks (``n`` an int >= 1; keys a 1-d int array, each known;
  one finite priority >= 0 per key). The table over it is aqueue's own overhead.
- Reverb: ``client.trajectory_writer(num_keep_alive_refs=4)`` per writer, ``append``
  per step, ``create_item(history["obs"][-4:])`` once 4 steps are in, ``end_episode``;
  samples through ``TrajectoryDataset.from_table_signature(...).batch(32)``
  (sampling ahead in its own threads, as Reverb users run it), priorities through
  ``mutate_priorities``.
- TorchRL: ``ReplayBuffer(LazyTensorStorage(steps), SliceSampler(slice_len=4,
  traj_key="episode", strict_length=True, cache_values=True))`` or
  ``PrioritizedSliceSampler(...)`` with ``batch_size=128`` (32 slices of 4),
  ``update_priority`` of the 128 sampled steps. Its storage is one flat ring in which
  an episode must be contiguous, so it gets the episodes one after the other
  (``extend`` per episode), not interleaved.

Reported: the fill (steps appended per second, and the sampling set up), the resident
memory the row gained while it filled (its process's RSS when the last step was in,
minus before the table was built, its libraries imported) against the raw frames
(steps x 7,056 bytes), and loops/s of sample(32) + update(32) (the peers with a
uniform sampler skip the update: they keep no priorities). Every timed block ends
with a check of its last sample: 32 windows of 4 frames whose tags are 4 consecutive
steps of one episode, and whose payload matches the tag.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

FRAME = (84, 84)
LENGTH = 4
SAMPLE = 32
WRITERS = 4
BURST = 16
EXPONENT = 0.6
ROWS = ("table", "core", "contract", "floor", "reverb", "torchrl")
PEERS = ("reverb", "torchrl")
LABELS = {
    "table": "aqueue TrajectoryTable",
    "core": "its core (sync, no await)",
    "contract": "floor + the contract's costs",
    "floor": "floor (numpy ring + gather)",
    "reverb": "Reverb TrajectoryWriter",
    "torchrl": "TorchRL SliceSampler",
}
Loop = Callable[[int], np.ndarray]


# -- the data -------------------------------------------------------------------------


def episode_lengths(total: int) -> list[int]:
    """Episode lengths (200 to 2,000 steps, seeded) adding up to ``total``."""
    rng = np.random.default_rng(7)
    out: list[int] = []
    left = total
    while left > 0:
        n = min(left, int(rng.integers(200, 2001)))
        out.append(n)
        left -= n
    return out


def frames(episode: int, first: int, n: int) -> np.ndarray:
    """Frames of steps ``first .. first + n - 1`` of ``episode``: row 0 holds the
    position in the episode (bytes 0-3), the episode (4-7) and a check byte (8); a
    sprite moves over a flat background."""
    out = np.empty((n, *FRAME), dtype=np.uint8)
    out[:] = (episode * 37) % 200
    t = np.arange(first, first + n)
    ys, xs = (t * 3) % 76 + 2, (t * 5) % 76 + 2
    for j in range(n):
        out[j, ys[j] : ys[j] + 6, xs[j] : xs[j] + 6] = 255
    out[:, 0, 0:4] = t.astype(np.uint32).view(np.uint8).reshape(n, 4)
    out[:, 0, 4:8] = np.frombuffer(np.uint32(episode).tobytes(), np.uint8)
    out[:, 0, 8] = tag_check(episode, t)
    return out


def tag_check(episode: Any, t: Any) -> Any:
    """The check byte of step ``t`` of ``episode``."""
    return ((episode * 131 + t * 7 + 3) % 256).astype(np.uint8)


def schedule(total: int) -> Iterator[tuple[int, int, int, int, bool]]:
    """The interleaved appends: (writer, episode, first step, count, ends the episode),
    bursts of ``BURST`` in writer order; each writer takes the next episode when its
    own ends."""
    lengths = episode_lengths(total)
    cur = [[w, 0] for w in range(WRITERS)]  # per writer: [episode, position]
    nxt = WRITERS
    active = list(range(WRITERS))
    while active:
        for w in list(active):
            ep, pos = cur[w]
            if ep >= len(lengths):
                active.remove(w)
                continue
            n = min(BURST, lengths[ep] - pos)
            ends = pos + n == lengths[ep]
            yield w, ep, pos, n, ends
            if ends:
                cur[w] = [nxt, 0]
                nxt += 1
            else:
                cur[w][1] = pos + n


def valid_starts(total: int) -> tuple[np.ndarray, np.ndarray]:
    """The index of every window's first step in the contiguous layout (episode after
    episode), and each episode's first index there."""
    starts = []
    firsts = []
    at = 0
    for n in episode_lengths(total):
        firsts.append(at)
        starts.append(np.arange(at, at + n - LENGTH + 1))
        at += n
    return np.concatenate(starts), np.array(firsts)


def check(stacks: Any) -> str | None:
    """None if ``stacks`` is 32 windows of 4 consecutive steps of one episode with
    intact payloads, else what is wrong."""
    data = np.asarray(stacks)
    if data.shape != (SAMPLE, LENGTH, *FRAME) or data.dtype != np.uint8:
        return f"sample has shape {data.shape} and dtype {data.dtype}"
    row = np.ascontiguousarray(data[:, :, 0, :9])
    t = row[:, :, 0:4].copy().view(np.uint32)[..., 0].astype(np.int64)
    ep = row[:, :, 4:8].copy().view(np.uint32)[..., 0].astype(np.int64)
    if not (np.diff(ep, axis=1) == 0).all():
        return "a window crosses an episode end"
    if not (np.diff(t, axis=1) == 1).all():
        return "a window's frames are not consecutive steps"
    if not np.array_equal(row[:, :, 8], tag_check(ep, t)):
        return "a frame's payload does not match its tag"
    return None


def rss() -> int:
    """This process's resident bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


FILLED: list[int] = []  # the resident bytes when the row's fill ended


def filled() -> None:
    """Called by each row when everything is appended (before it sets up sampling)."""
    FILLED.append(rss())


# -- rows -----------------------------------------------------------------------------


def table_row(mode: str, total: int) -> Loop:
    import asyncio

    import aqueue

    sampler = aqueue.Prioritized(EXPONENT) if mode == "prioritized" else aqueue.Uniform()
    table = aqueue.TrajectoryTable(total, np.uint8, FRAME, length=LENGTH, sampler=sampler, seed=0)
    loop = asyncio.new_event_loop()
    rng = np.random.default_rng(1)

    async def fill() -> None:
        writers = [table.writer() for _ in range(WRITERS)]
        for w, ep, first, n, ends in schedule(total):
            await writers[w].append_many(frames(ep, first, n))
            if ends:
                await writers[w].end_episode()

    async def run(n: int) -> np.ndarray:
        out = None
        for _ in range(n):
            s = await table.sample(SAMPLE)
            out = s.data
            await table.update_priorities(s.keys, np.abs(rng.standard_normal(SAMPLE)) + 1e-3)
        assert out is not None
        return out

    loop.run_until_complete(fill())
    filled()
    return lambda n: loop.run_until_complete(run(n))


def core_row(mode: str, total: int) -> Loop:
    from aqueue import Fifo, MinSize, Prioritized, Uniform
    from aqueue._replay._core import TableCore
    from aqueue._replay._trajectory._steps import StepStore

    class Windows:
        """The windows as items of a replay core (no item cap, nothing leaves on the
        items' own account: the only departures are the step store's evictions)."""

        def __init__(self, core: TableCore) -> None:
            self.core = core
            self.steps: Any = None

        def insert_windows(self, rows: np.ndarray, priorities: np.ndarray | None) -> None:
            keys = self.core.insert((rows,), len(rows), priorities)
            self.steps.held(keys, rows)

        def evict_windows(self, keys: np.ndarray) -> None:
            self.core.delete(keys)

    sampler = Prioritized(EXPONENT) if mode == "prioritized" else Uniform()
    core = TableCore(
        total,
        (np.dtype(np.int64),),
        ((LENGTH,),),
        sampler=sampler,
        remover=Fifo(),
        limiter=MinSize(1),
        max_times_sampled=0,
        rng=np.random.default_rng(0),
    )
    items = Windows(core)
    steps = StepStore(total, (np.dtype(np.uint8),), (FRAME,), length=LENGTH, stride=1, items=items)
    items.steps = steps
    wids = [steps.open_writer() for _ in range(WRITERS)]
    for w, ep, first, n, ends in schedule(total):
        steps.append(wids[w], (frames(ep, first, n),), n, None)
        if ends:
            steps.end_episode(wids[w])
    filled()
    rng = np.random.default_rng(1)

    def loops(n: int) -> np.ndarray:
        out = None
        for _ in range(n):
            data, keys, _, _, _, _ = core.sample(SAMPLE)
            (out,) = steps.gather(data[0])
            core.update(keys, np.abs(rng.standard_normal(SAMPLE)) + 1e-3)
        assert out is not None
        return out

    return loops


def floor_ring(total: int) -> tuple[np.ndarray, np.ndarray]:
    """The floors' storage: the frames in one numpy ring (episodes contiguous) and the
    index of every window's first step in it."""
    ring = np.empty((total, *FRAME), dtype=np.uint8)
    starts, firsts = valid_starts(total)
    for _, ep, first, n, _ in schedule(total):
        at = int(firsts[ep]) + first
        ring[at : at + n] = frames(ep, first, n)
    filled()
    return ring, starts


def floor_tree(mode: str, size: int) -> Any:
    """R1's textbook numpy sum tree over ``size`` windows of priority 1 (prioritized),
    or None (uniform)."""
    from bench_replay import BareSumTree

    if mode != "prioritized":
        return None
    tree = BareSumTree(size)
    tree.set(np.arange(size), np.ones(size))
    return tree


def floor_row(mode: str, total: int) -> Loop:
    ring, starts = floor_ring(total)
    offsets = np.arange(LENGTH)
    tree = floor_tree(mode, len(starts))
    rng = np.random.default_rng(1)

    def loops(n: int) -> np.ndarray:
        out = None
        for _ in range(n):
            if tree is None:
                pick = rng.integers(0, len(starts), SAMPLE)
            else:
                pick, _ = tree.sample(SAMPLE, rng)
            rows = starts[pick][:, np.newaxis] + offsets
            out = ring.take(rows.ravel(), axis=0).reshape(SAMPLE, LENGTH, *FRAME)
            if tree is not None:
                tree.set(pick, (np.abs(rng.standard_normal(SAMPLE)) + 1e-3) ** EXPONENT)
        assert out is not None
        return out

    return loops


def contract_row(mode: str, total: int) -> Loop:
    """The floor plus only what the contract asks of an awaited sample and update: one
    ``anyio.lowlevel.checkpoint()`` per call, a ``threading.Lock`` held around the draw
    and gather and around the priority write, and the leanest argument checks (``n`` an
    int >= 1; keys a 1-d int array, each known; one finite priority >= 0 per key)."""
    import asyncio
    import threading

    import anyio.lowlevel

    ring, starts = floor_ring(total)
    size = len(starts)
    offsets = np.arange(LENGTH)
    tree = floor_tree(mode, size)
    priorities = np.ones(size)  # (uniform: written, never read, as a table keeps them)
    lock = threading.Lock()
    rng = np.random.default_rng(1)
    loop = asyncio.new_event_loop()

    async def sample(n: int) -> tuple[np.ndarray, np.ndarray]:
        if type(n) is not int or n < 1:
            raise ValueError(f"sample: n must be an int >= 1, got {n!r}")
        await anyio.lowlevel.checkpoint()
        with lock:
            if tree is None:
                pick = rng.integers(0, size, n)
            else:
                pick, _ = tree.sample(n, rng)
            rows = starts[pick][:, np.newaxis] + offsets
            data = ring.take(rows.ravel(), axis=0).reshape(n, LENGTH, *FRAME)
        return pick, data

    async def update(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        k = np.asarray(keys)
        p = np.asarray(values, dtype=np.float64)
        if k.dtype.kind not in "iu" or k.ndim != 1 or p.shape != k.shape:
            raise ValueError("update: expected a 1-d int array of keys and a priority each")
        if not (p.min(initial=0.0) >= 0.0 and p.max(initial=0.0) < np.inf):
            raise ValueError("update: priorities must be finite numbers >= 0")
        found = (k >= 0) & (k < size)
        await anyio.lowlevel.checkpoint()
        with lock:
            if tree is None:
                priorities[k[found]] = p[found]
            else:
                tree.set(k[found], p[found] ** EXPONENT)
        return found

    async def run(n: int) -> np.ndarray:
        out = None
        for _ in range(n):
            keys, out = await sample(SAMPLE)
            await update(keys, np.abs(rng.standard_normal(SAMPLE)) + 1e-3)
        assert out is not None
        return out

    return lambda n: loop.run_until_complete(run(n))


def reverb_row(mode: str, total: int) -> Loop:
    from bench_replay import reverb_batches, reverb_table

    server, client = reverb_table(mode, total, [LENGTH, *FRAME], "uint8")
    writers = [client.trajectory_writer(num_keep_alive_refs=LENGTH) for _ in range(WRITERS)]
    for w, ep, first, n, ends in schedule(total):
        writer = writers[w]
        batch = frames(ep, first, n)
        for j in range(n):
            writer.append({"obs": batch[j]})
            if first + j >= LENGTH - 1:
                writer.create_item("t", 1.0, {"obs": writer.history["obs"][-LENGTH:]})
        if ends:
            writer.end_episode()
    for writer in writers:
        writer.flush()
    filled()
    it = reverb_batches(client, SAMPLE)
    rng = np.random.default_rng(1)

    def loops(n: int) -> np.ndarray:
        out = None
        for _ in range(n):
            s = next(it)
            if mode == "prioritized":
                keys = s.info.key.numpy().tolist()
                td = (np.abs(rng.standard_normal(SAMPLE)) + 1e-3).tolist()
                client.mutate_priorities("t", updates=dict(zip(keys, td)))
            out = s.data["obs"].numpy()
        assert out is not None
        return out

    loops.keep = (server, client, writers, it)  # type: ignore[attr-defined]
    return loops


def torchrl_row(mode: str, total: int) -> Loop:
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, PrioritizedSliceSampler, ReplayBuffer, SliceSampler

    torch.set_num_threads(1)
    common = {
        "slice_len": LENGTH,
        "traj_key": "episode",
        "strict_length": True,
        "cache_values": True,
    }
    sampler: Any = (
        PrioritizedSliceSampler(max_capacity=total, alpha=EXPONENT, beta=0.4, **common)
        if mode == "prioritized"
        else SliceSampler(**common)
    )
    rb = ReplayBuffer(storage=LazyTensorStorage(total), sampler=sampler, batch_size=SAMPLE * LENGTH)
    lengths = episode_lengths(total)
    parts: dict[int, list[np.ndarray]] = {}
    for _, ep, first, n, ends in schedule(total):
        parts.setdefault(ep, []).append(frames(ep, first, n))
        if ends:
            obs = torch.from_numpy(np.concatenate(parts.pop(ep)))
            episode = torch.full((lengths[ep],), ep, dtype=torch.int64)
            rb.extend(TensorDict({"obs": obs, "episode": episode}, batch_size=[lengths[ep]]))
    filled()
    rng = np.random.default_rng(1)

    def loops(n: int) -> np.ndarray:
        out = None
        for _ in range(n):
            s, info = rb.sample(return_info=True)
            if mode == "prioritized":
                td = np.abs(rng.standard_normal(SAMPLE * LENGTH)) + 1e-3
                rb.update_priority(info["index"], torch.from_numpy(td.astype(np.float32)))
            out = s["obs"].numpy().reshape(SAMPLE, LENGTH, *FRAME)
        assert out is not None
        return out

    return loops


RUNNERS: dict[str, Callable[[str, int], Loop]] = {
    "table": table_row,
    "core": core_row,
    "contract": contract_row,
    "floor": floor_row,
    "reverb": reverb_row,
    "torchrl": torchrl_row,
}
IMPORTS = {  # (imported before the memory baseline: a library's code is not its data)
    "table": ["aqueue", "asyncio"],
    "core": ["aqueue"],
    "contract": ["anyio", "asyncio"],
    "floor": [],
    "reverb": ["reverb", "tensorflow"],
    "torchrl": ["torch", "tensordict", "torchrl.data"],
}
VERSIONS = {
    "table": ["aqueue", "numpy"],
    "core": ["aqueue", "numpy"],
    "contract": ["anyio", "numpy"],
    "floor": ["numpy"],
    "reverb": ["dm-reverb", "tensorflow-cpu", "tensorflow"],
    "torchrl": ["torchrl", "torch", "tensordict"],
}


# -- the worker's side and the parent's --------------------------------------------------


def serve(
    row: str, mode: str, total: int, warm: int, answer: Callable[[dict[str, Any]], None]
) -> None:
    """A worker (``bench_replay.py --peer-worker t-<row>``): build and fill, answer
    ready with the fill's numbers, then run a block of loops per "run N" line."""
    import importlib
    import importlib.metadata

    for module in IMPORTS[row]:
        importlib.import_module(module)
    before = rss()
    t0 = time.perf_counter()
    try:
        run = RUNNERS[row](mode, total)
    except Exception as exc:
        answer({"error": f"{type(exc).__name__}: {exc}"})
        return
    fill = time.perf_counter() - t0
    grown = FILLED[0] - before
    run(warm)
    versions = {}
    for name in VERSIONS[row]:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    answer({"ready": True, "fill_s": fill, "rss": grown, "versions": versions})
    for line in sys.stdin:
        if not line.startswith("run"):
            return
        t0, c0 = time.perf_counter(), time.process_time()
        data = run(int(line.split()[1]))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        problem = check(data)
        answer({"seconds": seconds, "cpu": cpu} if problem is None else {"error": problem})


def report(
    total: int, loops: int, modes: list[str], results: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """The T table and its ratios."""
    raw = total * FRAME[0] * FRAME[1]
    windows = len(valid_starts(total)[0])
    print(
        f"\nT: {total:,} Atari-like frames (84x84 uint8, {raw / 1e9:.2f} GB raw), "
        f"{len(episode_lengths(total))} episodes, {windows:,} windows of {LENGTH} (stride 1); "
        f"loop = sample({SAMPLE}) + update({SAMPLE}); blocks of {loops} loops (median / best)\n"
    )
    print(
        f"| {'mode':<11} | {'row':<30} | {'fill steps/s':>12} | {'memory / raw':>12} | "
        f"{'loops/s':>15} | {'CPU/loop':>8} |"
    )
    print(f"|{'-' * 13}|{'-' * 32}|{'-' * 14}|{'-' * 14}|{'-' * 17}|{'-' * 10}|")
    rates: dict[tuple[str, str], float] = {}
    cpus: dict[tuple[str, str], float] = {}
    for mode in modes:
        for row in ROWS:
            r = results.get((row, mode))
            if r is None:
                continue
            if "error" in r or not r.get("times"):
                print(
                    f"| {mode:<11} | {LABELS[row]:<30} | FAILED: {r.get('error', 'no result')[:70]}"
                )
                continue
            med = loops / statistics.median(r["times"])
            best = loops / min(r["times"])
            rates[(row, mode)] = med
            cpu = statistics.median(r["cpu"]) / loops * 1e6
            cpus[(row, mode)] = 1e6 / cpu  # (loops per CPU second)
            print(
                f"| {mode:<11} | {LABELS[row]:<30} | {total / r['fill_s']:>12,.0f} | "
                f"{r['rss'] / raw:>11.3f}x | {med:>7,.0f} / {best:>5,.0f} | {cpu:>5,.0f} us |"
            )
    print(
        f"| {'':<11} | {'stacked items (computed)':<30} | {'':>12} | "
        f"{windows * LENGTH * FRAME[0] * FRAME[1] / raw:>11.3f}x | {'':>15} | {'':>8} |"
    )
    print(
        "\nRatios, aqueue's TrajectoryTable over the row: by wall-clock loops/s (medians), "
        "then by CPU time per loop (steadier on a shared machine; Reverb's counts its "
        "sampling threads):"
    )
    for mode in modes:
        for what, by in (("wall", rates), ("CPU", cpus)):
            ours = by.get(("table", mode))
            if not ours:
                continue
            parts = []
            gather = by.get(("floor", "uniform"))
            if gather:
                parts.append(f"vs the bare gather {ours / gather:.2f}x (target >= 0.8x)")
            if mode == "prioritized" and by.get(("floor", mode)):
                parts.append(f"vs the floor with a sum tree {ours / by[('floor', mode)]:.2f}x")
            if by.get(("contract", mode)):
                parts.append(f"vs the floor + the contract {ours / by[('contract', mode)]:.2f}x")
            if by.get(("core", mode)):
                parts.append(f"vs its sync core {ours / by[('core', mode)]:.2f}x")
            for peer in PEERS:
                theirs = by.get((peer, mode))
                if theirs:
                    parts.append(f"vs {peer} {ours / theirs:.2f}x (target > 1x)")
            print(f"  {mode:<11} {what:<4} " + "; ".join(parts))
    seen: dict[str, str] = {}
    for r in results.values():
        seen.update(r.get("versions", {}))
    print("  versions: " + ", ".join(f"{k} {v}" for k, v in sorted(seen.items())))
