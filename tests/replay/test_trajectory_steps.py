"""The trajectory tables' step store (``aqueue/_replay/_trajectory``) against a plain
model (``traj_model.py``): random histories of appends (single steps and batches, by
interleaved writers), episode ends, writers closed and reopened, and items leaving on
their own account, on rings from 1 step up, windows as long as the ring, strides
below, at and above the length, with and without an item cap. After every operation
the store's items (their steps' values, gathered), priorities, held steps and counters
equal the model's, and ``check_invariants`` holds."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from traj_model import Items, Model

from aqueue._replay._trajectory._state import dump_steps, index_of, load_steps
from aqueue._replay._trajectory._steps import StepStore

DTYPES = (np.dtype(np.int64), np.dtype(np.float32))
SHAPES = ((), (2,))
Op = tuple[Any, ...]


@dataclass
class Scenario:
    max_steps: int
    length: int
    stride: int
    writers: int
    cap: int | None
    remover: str
    ops: list[Op]


class Driver:
    """Runs the same operations on a store and on the model, and compares them."""

    def __init__(self, s: Scenario) -> None:
        self.scenario = s
        self.items, self.store = self.fresh()
        self.model = Model(s.max_steps, s.length, s.stride, s.cap, s.remover)
        self.wids = []
        for _ in range(s.writers):
            wid = self.store.open_writer()
            assert self.model.open_writer() == wid
            self.wids.append(wid)
        self.tag = 0

    def fresh(self) -> tuple[Items, StepStore]:
        s = self.scenario
        if s.cap is None:  # the item store a table without a cap has: never full
            items = Items(s.max_steps // min(s.stride, s.length), "never")
        else:
            items = Items(s.cap, s.remover)
        store = StepStore(
            s.max_steps,
            DTYPES,
            SHAPES,
            length=s.length,
            stride=s.stride,
            items=items,
            frees_on_insert=s.cap is not None,
        )
        items.steps = store
        return items, store

    def restored(self) -> Driver:
        """A driver whose store is loaded from this one's dump (its items naming their
        steps by index in between), with a copy of the model."""
        state = dump_steps(self.store)
        keys, rows = self.items.held_arrays()
        by_index = index_of(self.store)[rows]
        other = copy.copy(self)
        other.model = copy.deepcopy(self.model)
        other.wids = list(self.wids)
        other.items, other.store = self.fresh()
        other.items.next_key = self.items.next_key
        other.items.priority = dict(self.items.priority)
        slots = state["layout"]["slots"]
        other.items.rows = {int(k): slots[r] for k, r in zip(keys, by_index)}
        load_steps(other.store, state, keys, by_index)
        return other

    def run(self, op: Op) -> None:
        kind = op[0]
        if kind == "append":
            _, w, k, with_priorities = op
            wid = self.wids[w]
            tags = np.arange(self.tag, self.tag + k, dtype=np.int64)
            self.tag += k
            comps = (tags, np.stack([tags, -tags], axis=1).astype(np.float32))
            prios = tags * 0.5 + 0.25 if with_priorities else None
            self.store.append(wid, comps, k, prios)
            for j, t in enumerate(tags.tolist()):
                self.model.append(wid, t, None if prios is None else float(prios[j]))
        elif kind == "end":
            self.store.end_episode(self.wids[op[1]])
            self.model.end_episode(self.wids[op[1]])
        elif kind == "reopen":
            self.store.close_writer(self.wids[op[1]])
            self.model.close_writer(self.wids[op[1]])
            wid = self.store.open_writer()
            assert self.model.open_writer() == wid
            self.wids[op[1]] = wid
        else:  # "remove": items leaving on their own account
            _, pick, count = op
            held = list(self.items.rows)
            keys = sorted({held[(pick + 7 * j) % len(held)] for j in range(count)}) if held else []
            self.items.remove(keys)
            self.model.remove(keys)
        self.check()

    def check(self) -> None:
        store, model = self.store, self.model
        keys, rows = self.items.held_arrays()
        store.check_invariants(keys, rows)
        tags, vecs = store.gather(rows)
        assert tags.shape == rows.shape
        assert vecs.shape == (*rows.shape, 2)
        got = {int(k): tuple(t) for k, t in zip(keys.tolist(), tags.tolist())}
        assert got == model.item_tags()
        assert np.array_equal(vecs[..., 0], tags)
        assert np.array_equal(vecs[..., 1], -tags)
        assert self.items.priority == {k: model.priority[k] for k in model.items}
        stats = store.statistics()
        assert stats.held == len(model.tags)
        counts = {name: getattr(stats, name) for name in model.counts}
        assert counts == model.counts


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    max_steps = draw(st.integers(1, 16))
    length = draw(st.integers(1, max_steps))
    stride = draw(st.integers(1, 2 * length + 2))
    writers = draw(st.integers(1, 4))
    cap = draw(st.none() | st.integers(1, 8))
    remover = draw(st.sampled_from(["fifo", "lifo"]))
    w = st.integers(0, writers - 1)
    op = st.one_of(
        st.tuples(st.just("append"), w, st.integers(0, max_steps + 3), st.booleans()),
        st.tuples(st.just("append"), w, st.just(1), st.booleans()),
        st.tuples(st.just("end"), w),
        st.tuples(st.just("reopen"), w),
        st.tuples(st.just("remove"), st.integers(0, 1000), st.integers(1, 3)),
    )
    ops = draw(st.lists(op, max_size=40))
    return Scenario(max_steps, length, stride, writers, cap, remover, ops)


def drive(s: Scenario) -> Driver:
    d = Driver(s)
    d.check()
    for op in s.ops:
        d.run(op)
    return d


def same_layout(a: StepStore, b: StepStore) -> None:
    """Two stores hold the same steps in the same slots, with the same references,
    pins, free stack and counters."""
    ra, rb = a.ring, b.ring
    for name in ("sid", "ref", "owner"):
        assert np.array_equal(getattr(ra, name), getattr(rb, name)), name
    assert np.array_equal(ra.free[: ra.nfree], rb.free[: rb.nfree])
    held = ra.sid >= 0
    for da, db in zip(ra.data, rb.data):
        assert np.array_equal(da[held], db[held])
    assert np.array_equal(a.first_key, b.first_key)
    assert a.statistics() == b.statistics()


@settings(max_examples=200, deadline=None, database=None)
@given(s=scenarios(), data=st.data())
def test_a_restored_store_goes_on_as_the_original(s: Scenario, data: st.DataObject) -> None:
    """A store loaded from a dump taken after any prefix of a history holds the same
    steps in the same slots, and the rest of the history gives both the same."""
    cut = data.draw(st.integers(0, len(s.ops)))
    d = Driver(s)
    for op in s.ops[:cut]:
        d.run(op)
    other = d.restored()
    other.check()
    same_layout(d.store, other.store)
    for op in s.ops[cut:]:
        d.run(op)
        other.run(op)
    same_layout(d.store, other.store)


def appends(w: int, *ks: int) -> list[Op]:
    return [("append", w, k, False) for k in ks]


# Two writers interleaved on a full ring: a batch whose room is made by evicting the
# other writer's steps, where the first eviction frees that writer's last window at
# once (its other steps are needed by nothing else), so single appends in a row would
# evict one step, not two.
INTERLEAVED_EVICTION = Scenario(
    6,
    3,
    1,
    2,
    None,
    "fifo",
    appends(0, 1) + appends(1, 1) * 2 + [("end", 0)] + appends(1, 1) * 3 + appends(0, 4),
)


@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@example(s=INTERLEAVED_EVICTION)
@given(s=scenarios())
def test_random_histories_agree_with_the_model(s: Scenario) -> None:
    """Random histories of appends, episode ends, reopened writers and items leaving
    give the items, priorities, held steps and counters the model gives."""
    drive(s)


@pytest.mark.parametrize(("length", "stride"), [(4, 1), (3, 2), (2, 5), (1, 1)])
def test_a_ring_that_wraps_many_times_holds_the_newest_windows(length: int, stride: int) -> None:
    """A small ring written over 30 times, by two writers with episodes of every
    length (shorter than a window too), agrees with the model and keeps its id log
    bounded."""
    rng = np.random.default_rng(length * 10 + stride)
    ops: list[Op] = []
    for _ in range(400):
        w = int(rng.integers(0, 2))
        ops.append(("append", w, int(rng.integers(1, 4)), True))
        if rng.random() < 0.1:
            ops.append(("end", w))
    d = drive(Scenario(7, length, stride, 2, None, "fifo", ops))
    st_ = d.store.statistics()
    assert st_.stored >= 30 * 7
    assert st_.evicted > 0
    assert d.store.ring.log_n <= 2 * 7


def test_windows_as_long_as_the_ring_hold_one_item_at_a_time() -> None:
    """length == max_steps: each new window evicts the previous one's first step."""
    d = drive(Scenario(5, 5, 1, 1, None, "fifo", appends(0, 5, 1, 1, 3)))
    assert list(d.items.rows) == [5]
    assert d.store.statistics().item_evictions == 5


def test_a_stride_past_the_length_never_stores_the_gaps() -> None:
    """stride 5, length 2: only positions 0, 1, 5, 6, 10, 11, ... are stored."""
    d = drive(Scenario(100, 2, 5, 1, None, "fifo", appends(0, 20)))
    st_ = d.store.statistics()
    assert (st_.appended, st_.stored, st_.held) == (20, 8, 8)
    assert sorted(d.model.item_tags().values()) == [(0, 1), (5, 6), (10, 11), (15, 16)]


def test_an_episode_shorter_than_a_window_frees_its_steps() -> None:
    """Three steps of a 4-step window, then the episode ends: no item, nothing held,
    the three windows begun (at positions 0, 1, 2) dropped."""
    d = drive(Scenario(10, 4, 1, 1, None, "fifo", [*appends(0, 3), ("end", 0)]))
    st_ = d.store.statistics()
    assert (st_.held, st_.freed, st_.windows_dropped, len(d.items.rows)) == (0, 3, 3, 0)


def test_a_batch_longer_than_the_ring_goes_in_as_single_appends_would() -> None:
    """A batch of 3 x max_steps steps: its own early windows are evicted by its later
    steps, as single appends in a row would have them."""
    d = drive(Scenario(6, 3, 1, 2, None, "fifo", [*appends(1, 2), *appends(0, 18)]))
    assert sorted(d.model.item_tags().values())[-1] == (17, 18, 19)
