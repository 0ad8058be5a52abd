"""``aqueue.TrajectoryTable`` through its public API against the plain model of
``traj_model.py``: random histories of appends (single steps and batches, by
interleaved writers), episode ends, writers closed and new ones opened, samples (with
``max_times_sampled`` retiring items), deletes and snapshots restored mid-history, on
tables from 1 step up, windows as long as the table, strides below, at and above the
length, with and without an item cap (Fifo or Lifo remover).

After every operation: the windows held (read from ``table.snapshot()``: each key's
steps) and their priorities equal the model's; every sampled window equals the steps
appended for it, never crosses an episode (its steps are consecutive positions of one
episode of one writer), and is whole (``length`` steps); the step counters of
``statistics()`` equal the model's; the engine's invariants, the step store's among
them, hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from traj_model import Model

import aqueue

Op = tuple[Any, ...]
COUNTERS = ("appended", "stored", "evicted", "freed", "windows_dropped")


@dataclass
class Scenario:
    max_steps: int
    length: int
    stride: int
    writers: int
    cap: int | None
    remover: str
    mts: int
    ops: list[Op]


class CountingModel(Model):
    """The model, also counting the items an item cap's remover evicts (the table's
    ``evictions`` counts those and the items evicted with their first step)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.cap_evictions = 0

    def insert_item(self, ids: tuple[int, ...], priority: float | None) -> None:
        full = self.cap is not None and len(self.items) >= self.cap
        super().insert_item(ids, priority)
        self.cap_evictions += full


def tag_of(writer: int, episode: int, pos: int) -> int:
    """A step's tag: who appended it, in which episode, at which position."""
    return (writer * 1000 + episode) * 1000 + pos


class Driver:
    """Runs the same operations on a table and on the model, and compares them."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        self.table = aqueue.TrajectoryTable(
            s.max_steps,
            (np.int64, np.float32),
            ((), (2,)),
            length=s.length,
            stride=s.stride,
            remover=aqueue.Lifo() if s.remover == "lifo" else aqueue.Fifo(),
            max_size=s.cap,
            max_times_sampled=s.mts,
            seed=3,
        )
        self.model = CountingModel(s.max_steps, s.length, s.stride, s.cap, s.remover)
        self.writers: list[aqueue.TrajectoryWriter] = []
        self.episode: list[int] = []
        self.pos: list[int] = []
        for i in range(s.writers):
            self.open(i)
        self.times: dict[int, int] = {}

    def open(self, i: int) -> None:
        w = self.table.writer()
        assert self.model.open_writer() == w.id
        if i < len(self.writers):
            self.writers[i], self.episode[i], self.pos[i] = w, self.episode[i] + 1, 0
        else:
            self.writers.append(w)
            self.episode.append(0)
            self.pos.append(0)

    async def run(self, op: Op) -> None:
        kind = op[0]
        model = self.model
        if kind == "append":
            _, i, k, many = op
            w = self.writers[i]
            tags = np.array(
                [tag_of(i, self.episode[i], self.pos[i] + j) for j in range(k)], dtype=np.int64
            )
            self.pos[i] += k
            vecs = np.stack([tags, -tags], axis=1).astype(np.float32)
            prios = (tags % 997) * 0.5 + 0.25
            if many:
                keys = await w.append_many((tags, vecs), prios)
            else:
                keys = np.concatenate(
                    [await w.append((t, v), float(p)) for t, v, p in zip(tags, vecs, prios)]
                    or [np.empty(0, np.int64)]
                )
            before = model.next_key
            for t, p in zip(tags.tolist(), prios.tolist()):
                model.append(w.id, t, p)
            assert keys.tolist() == list(range(before, model.next_key))
        elif kind == "end":
            await self.writers[op[1]].end_episode()
            model.end_episode(self.writers[op[1]].id)
            self.episode[op[1]] += 1
            self.pos[op[1]] = 0
        elif kind == "reopen":
            self.writers[op[1]].close()
            model.close_writer(self.writers[op[1]].id)
            self.open(op[1])
        elif kind == "sample":
            if self.can_sample(op[1]):
                await self.sample(op[1])
        elif kind == "delete":
            _, pick, count = op
            held = sorted(model.items)
            keys = sorted({held[(pick + 7 * j) % len(held)] for j in range(count)}) if held else []
            found = await self.table.delete([*keys, 10**9])
            assert found.tolist() == [True] * len(keys) + [False]
            model.remove(keys)
        else:  # "restore": the table from its snapshot, the writers taken up again
            snap = self.table.snapshot()
            self.table = aqueue.TrajectoryTable.from_snapshot(snap)
            self.writers = [self.table.writer(resume=w.id) for w in self.writers]
        self.check()

    def can_sample(self, n: int) -> bool:
        items = self.model.items
        if not self.s.mts:
            return bool(items)
        return sum(self.s.mts - self.times.get(k, 0) for k in items) >= n

    async def sample(self, n: int) -> None:
        model = self.model
        expect = model.item_tags()
        s = await self.table.sample(n)
        tags, vecs = s.data
        assert tags.shape == (n, self.s.length)
        assert vecs.shape == (n, self.s.length, 2)
        assert np.array_equal(vecs[..., 0], tags)
        assert np.array_equal(vecs[..., 1], -tags)
        for key, row in zip(s.keys.tolist(), tags.tolist()):
            assert tuple(row) == expect[key]
            # one episode of one writer, consecutive positions (never across an end)
            assert len({t // 1000 for t in row}) == 1
            assert [t % 1000 for t in row] == list(range(row[0] % 1000, row[0] % 1000 + len(row)))
        if self.s.mts:
            for key in s.keys.tolist():
                self.times[key] = self.times.get(key, 0) + 1
            used = sorted({k for k in s.keys.tolist() if self.times[k] >= self.s.mts})
            model.remove(used)

    def check(self) -> None:
        table, model = self.table, self.model
        table._engine.check_invariants()  # (the core's, the engine's and the steps')
        snap = table.snapshot()
        rows = snap.items.items[0]
        got = {int(k): tuple(snap.fields[0][row].tolist()) for k, row in zip(snap.items.keys, rows)}
        assert got == model.item_tags()
        prios = dict(zip(snap.items.keys.tolist(), snap.items.priorities.tolist()))
        assert prios == {k: model.priority[k] for k in model.items}
        stats = table.statistics()
        assert stats.size == len(model.items)
        assert stats.evictions == model.counts["item_evictions"] + model.cap_evictions
        assert stats.steps_held == len(model.tags) <= self.s.max_steps
        counts = {
            "appended": stats.steps_appended,
            "stored": stats.steps_stored,
            "evicted": stats.steps_evicted,
            "freed": stats.steps_freed,
            "windows_dropped": stats.windows_dropped,
        }
        assert counts == {c: model.counts[c] for c in COUNTERS}


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    max_steps = draw(st.integers(1, 12))
    length = draw(st.integers(1, max_steps))
    stride = draw(st.integers(1, 2 * length + 2))
    writers = draw(st.integers(1, 3))
    cap = draw(st.none() | st.integers(1, 6))
    remover = draw(st.sampled_from(["fifo", "lifo"]))
    mts = draw(st.sampled_from([0, 0, 1, 3]))
    w = st.integers(0, writers - 1)
    op = st.one_of(
        st.tuples(st.just("append"), w, st.integers(0, max_steps + 3), st.booleans()),
        st.tuples(st.just("append"), w, st.just(1), st.just(False)),
        st.tuples(st.just("end"), w),
        st.tuples(st.just("reopen"), w),
        st.tuples(st.just("sample"), st.sampled_from([1, 2, max_steps])),
        st.tuples(st.just("delete"), st.integers(0, 1000), st.integers(1, 3)),
        st.tuples(st.just("restore")),
    )
    ops = draw(st.lists(op, max_size=30))
    return Scenario(max_steps, length, stride, writers, cap, remover, mts, ops)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=scenarios())
def test_random_histories_agree_with_the_model(s: Scenario) -> None:
    async def main() -> None:
        d = Driver(s)
        d.check()
        for op in s.ops:
            await d.run(op)

    anyio.run(main)
