"""T-R: frame stacks on Redis (``bench_redis.py --traj``): a Redis trajectory table, which
stores each frame once, against the Redis replay table storing the stacked frames.

Workload: ``_traj_rows``' Atari-like frames (84x84 uint8, a tag in the first row),
episodes of 200 to 2,000 steps, ``--traj-steps`` (default 8,000) steps in all, appended
by 4 writers interleaved in bursts of 16 steps. The items are the windows of 4
consecutive frames of one episode (stride 1). Both tables draw with
``Prioritized(0.6)`` and hold every window (nothing evicted).

Rows (one process, one asyncio loop, one server, the tables filled once, then their
timed blocks interleaved; the median block is reported):

- trajectory: ``server.trajectory_table(name, steps, np.uint8, (84, 84), length=4)``,
  one writer per actor, ``append_many(burst)`` and ``end_episode()``; the loop is
  ``s = await table.sample(32)`` (``s.data`` is ``(32, 4, 84, 84)``, gathered on the
  server from the steps) and ``await table.update_priorities(s.keys, ...)``.
- stacked: ``server.replay_table(name, windows, np.uint8, (4, 84, 84))``, each window
  inserted as one item of its 4 frames (``insert_many`` of 16 windows); the same loop.

Reported: the fill (steps appended per second), the server's memory for the table
(``INFO memory`` used_memory, after minus before the fill) per window and against the
raw frames (steps x 7,056 bytes), and loops/s of sample(32) + update(32). Every timed
block ends with a check of its last sample: 32 windows of 4 consecutive frames of one
episode whose payloads match their tags.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

import numpy as np
from _traj_rows import FRAME, LENGTH, SAMPLE, WRITERS, check, episode_lengths, frames, schedule

EXPONENT = 0.6
BATCH = 16  # windows per insert_many of the stacked row
LABELS = {
    "trajectory": "aqueue.redis trajectory table (frames once)",
    "stacked": "aqueue.redis replay table (stacked frames)",
}


def stacked_windows(total: int) -> Any:
    """Batches of stacked windows, episode after episode: ``(k, 4, 84, 84)`` each."""
    for ep, n in enumerate(episode_lengths(total)):
        if n < LENGTH:
            continue
        f = frames(ep, 0, n)
        stacks = np.lib.stride_tricks.sliding_window_view(f, LENGTH, axis=0)
        stacks = np.moveaxis(stacks, -1, 1)  # (n - 3, 4, 84, 84)
        for i in range(0, len(stacks), BATCH):
            yield np.ascontiguousarray(stacks[i : i + BATCH])


async def used_memory(srv: Any) -> int:
    """The server's used_memory now."""
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(srv.url)
    try:
        return int((await client.info("memory"))["used_memory"])
    finally:
        await client.aclose()


async def fill(kind: str, srv: Any, total: int) -> tuple[Any, float, int]:
    """The table of row ``kind``, filled: (table, seconds, server bytes it took)."""
    import aqueue

    sampler = aqueue.Prioritized(EXPONENT)
    name = f"bench-{kind}-{uuid.uuid4().hex[:8]}"
    windows = sum(n - LENGTH + 1 for n in episode_lengths(total) if n >= LENGTH)
    before = await used_memory(srv)
    t0 = time.perf_counter()
    if kind == "trajectory":
        table = await srv.server.trajectory_table(
            name, total, np.uint8, FRAME, length=LENGTH, sampler=sampler, seed=0
        )
        writers = [table.writer() for _ in range(WRITERS)]
        for w, ep, first, n, ends in schedule(total):
            await writers[w].append_many(frames(ep, first, n))
            if ends:
                await writers[w].end_episode()
        for w in writers:
            await w.aclose()
    else:
        table = await srv.server.replay_table(
            name, windows, np.uint8, (LENGTH, *FRAME), sampler=sampler, seed=0
        )
        for batch in stacked_windows(total):
            await table.insert_many(batch)
    seconds = time.perf_counter() - t0
    held = (await table.statistics()).size
    assert held == windows, (kind, held, windows)
    return table, seconds, await used_memory(srv) - before


async def block(table: Any, loops: int, rng: np.random.Generator) -> float:
    """``loops`` of sample(32) + update_priorities(32): their seconds (the last
    sample checked)."""
    t0 = time.perf_counter()
    data = None
    for _ in range(loops):
        s = await table.sample(SAMPLE)
        data = s.data
        await table.update_priorities(s.keys, np.abs(rng.standard_normal(SAMPLE)) + 1e-3)
    seconds = time.perf_counter() - t0
    if (problem := check(data)) is not None:
        raise SystemExit(f"{table!r}: {problem}")
    return seconds


class Server:
    """The connection the rows share, and its URL (for INFO)."""

    def __init__(self, server: Any, url: str) -> None:
        self.server = server
        self.url = url


async def run(url: str, total: int, loops: int, repeat: int) -> None:
    """Fill both tables, time ``repeat`` interleaved blocks of ``loops`` each, print."""
    import aqueue.redis

    async with aqueue.redis.connect(url) as server:
        srv = Server(server, url)
        tables: dict[str, Any] = {}
        fills: dict[str, tuple[float, int]] = {}
        for kind in LABELS:
            table, seconds, nbytes = await fill(kind, srv, total)
            tables[kind] = table
            fills[kind] = (seconds, nbytes)
        rng = np.random.default_rng(1)
        for table in tables.values():
            await block(table, max(1, loops // 10), rng)  # (warm up)
        times: dict[str, list[float]] = {k: [] for k in LABELS}
        for _ in range(repeat):
            for kind, table in tables.items():
                times[kind].append(await block(table, loops, rng))
        for table in tables.values():
            await server.delete_table(table.name)
    windows = sum(n - LENGTH + 1 for n in episode_lengths(total) if n >= LENGTH)
    raw = total * int(np.prod(FRAME))
    print(
        f"\nT-R: {total:,} Atari-like frames ({FRAME[0]}x{FRAME[1]} uint8), {windows:,} windows "
        f"of {LENGTH}, Prioritized({EXPONENT}); sample({SAMPLE}) + update_priorities"
        f"({SAMPLE}); median of {repeat} blocks of {loops} loops"
    )
    print(
        f"| {'row':44} | {'fill steps/s':>12} | {'server MB':>9} | {'vs raw':>6} | "
        f"{'B/window':>8} | {'loops/s':>7} |"
    )
    print(f"|{'-' * 46}|{'-' * 14}|{'-' * 11}|{'-' * 8}|{'-' * 10}|{'-' * 9}|")
    rate: dict[str, float] = {}
    for kind, label in LABELS.items():
        seconds, nbytes = fills[kind]
        rate[kind] = loops / statistics.median(times[kind])
        print(
            f"| {label:44} | {total / seconds:12,.0f} | {nbytes / 1e6:9.1f} | "
            f"{nbytes / raw:5.2f}x | {nbytes / windows:8,.0f} | {rate[kind]:7.1f} |"
        )
    print(
        f"\ntrajectory vs stacked: sample+update {rate['trajectory'] / rate['stacked']:.2f}x "
        f"the loops/s; server memory {fills['trajectory'][1] / fills['stacked'][1]:.2f}x"
    )
