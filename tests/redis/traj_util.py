"""Helpers of the Redis trajectory table tests (``from traj_util import ...``): the
invariants of ``_replay/trajectory/_functions.lua`` read off the server, and tagged steps."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import redis
from redis_util import check_table


def check_trajectory(client: redis.Redis, name: str) -> list[str]:
    """The invariants a trajectory table ``name`` breaks (empty: none): the replay
    table's (``check_table``), and those of its steps: one ``s:<id>`` key per held step
    and no other, ``ref`` = the held items containing the step + 1 if a writer pins it,
    ``first`` names the held item starting at each step, ``own`` the writer whose
    pending steps hold it, the counters add up."""
    p = f"aq:{{{name}}}:"
    problems = check_table(client, name)
    meta = {k.decode(): v.decode() for k, v in client.hgetall(p + "meta").items()}
    held = {int(m) for m in client.zrange(p + "held", 0, -1)}
    keys = {int(k.decode().rsplit(":", 1)[1]) for k in client.scan_iter(match=p + "s:*")}
    if keys != held:
        problems.append(f"step keys {sorted(keys)} but held {sorted(held)}")
    rows = {
        int(k): [int(x) for x in v.decode()[len("AQrow:") :].split(",")]
        for k, v in client.hgetall(p + "pl").items()
    }
    want: Counter[int] = Counter()
    firsts = {}
    for key, row in rows.items():
        want.update(row)
        firsts[row[0]] = key
        if not set(row) <= held:
            problems.append(f"item {key} holds a step not held: {row}")
        if row != sorted(row):
            problems.append(f"item {key}: steps out of order {row}")
    pins: dict[int, str] = {}
    for wid, rec in client.hgetall(p + "wr").items():
        pend = rec.decode().split(";")[2]
        for x in pend.split(",") if pend else []:
            if int(x) >= 0:
                pins[int(x)] = wid.decode()
                want[int(x)] += 1
    ref = {int(k): int(v) for k, v in client.hgetall(p + "ref").items()}
    if ref != dict(want):
        problems.append(f"ref {ref} but items and pins make {dict(want)}")
    first = {int(k): int(v) for k, v in client.hgetall(p + "first").items()}
    if first != firsts:
        problems.append(f"first {first} but the items start at {firsts}")
    own = {int(k): v.decode() for k, v in client.hgetall(p + "own").items()}
    if own != pins:
        problems.append(f"own {own} but the writers pin {pins}")
    stored = int(meta["stored"])
    if stored != len(held) + int(meta["sevicted"]) + int(meta["sfreed"]):
        problems.append("stored != held + evicted + freed")
    if len(held) > int(meta["max_steps"]):
        problems.append(f"{len(held)} steps held, max_steps {meta['max_steps']}")
    return problems


def tag(writer: int, episode: int, pos: int) -> int:
    """A step's tag: who appended it, in which episode, at which position."""
    return (writer * 1000 + episode) * 1000 + pos


def steps_of(tags: Any) -> tuple[np.ndarray, np.ndarray]:
    """Tagged steps of two fields: the tag (int64) and a vector made of it."""
    t = np.asarray(tags, dtype=np.int64)
    return t, np.stack([t, -t], axis=-1).astype(np.float32)


def whole_windows(tags: np.ndarray, length: int, stride: int) -> None:
    """Assert each sampled window (a row of tags) is ``length`` consecutive positions of
    one episode of one writer, starting on the stride."""
    assert tags.shape[1] == length
    for row in tags.tolist():
        assert len({t // 1000 for t in row}) == 1, f"a window crosses an episode: {row}"
        assert row == list(range(row[0], row[0] + length)), f"a window with a gap: {row}"
        assert (row[0] % 1000) % stride == 0, f"a window off the stride: {row}"
