"""PoolStorage and ListPoolStorage driven directly: random order, nothing lost or doubled.

A RandomShuffleQueue's pool must give every stored element back exactly once, in an
order drawn uniformly from the queue's own Generator, so a seed pins the order. These
tests drive the storages without a queue: conservation over long seeded random
sequences of operations (on both the small-pool shuffle path and the large-pool
``choice`` path of ``take_chunk``), golden orders, restores, growth, released object
references, and chi-square checks of uniformity with fixed seeds (deterministic).
"""

from __future__ import annotations

import weakref
from collections import Counter
from typing import Any

import numpy as np
import pytest
from support import Token, alive, int_batch, multi_batch, multi_values

from aqueue._queues._pool import _SHUFFLE_ALL, ListPoolStorage, PoolStorage

I64 = np.dtype(np.int64)
F32 = np.dtype(np.float32)
OBJ = np.dtype(object)

# Chi-square critical values at p = 0.001 by degrees of freedom: a uniform sampler
# exceeds them once in a thousand seeds; the seeds below are fixed, so never flaky.
_CHI2_999 = {9: 27.88, 15: 37.70, 35: 66.62, 99: 148.2}


class RecordingRng:
    """A Generator that records which of its methods the pool called."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        self.calls[name] += 1
        return getattr(self._rng, name)


def int_pool(capacity: int, rng: Any) -> PoolStorage:
    """A pool of int64 scalars."""
    return PoolStorage(capacity, (I64,), ((),), "pool", rng)


def multi_pool(capacity: int, rng: Any) -> PoolStorage:
    """A pool of (int64 v, float32[2] = [v, -v], object ("tag", v)) elements."""
    return PoolStorage(capacity, (I64, F32, OBJ), ((), (2,), ()), "multi", rng)


def multi_value(comps: tuple[Any, ...]) -> int:
    """The value of one ``multi_pool`` element, checking that its components agree."""
    a, x, obj = comps
    v = int(a)
    assert x.tolist() == [float(v), float(-v)]
    assert obj == ("tag", v)
    return v


# --------------------------------------------------------------------------------------
# PoolStorage: conservation
# --------------------------------------------------------------------------------------


def _random_ops(
    pool: PoolStorage, ops: np.random.Generator, steps: int, ks: list[int], prefill: int = 0
) -> None:
    """Put ``prefill`` elements, run ``steps`` random puts, takes and restores on a
    multi-component pool, and check that every element stored comes out exactly once,
    with its components together."""
    pool.put_rows(multi_batch(range(prefill)), 0, prefill)
    stored: set[int] = set(range(prefill))
    taken: list[int] = []
    held: list[tuple[Any, ...]] = []  # claimed chunks not yet given back
    nxt = prefill
    for _ in range(steps):
        op = int(ops.integers(6))
        k = int(ops.choice(ks))
        if op == 0:
            pool.put_rows(multi_batch(range(nxt, nxt + k)), 0, k)
            stored.update(range(nxt, nxt + k))
            nxt += k
        elif op == 1:
            a = np.array(nxt, dtype=np.int64)
            x = np.array([nxt, -nxt], dtype=np.float32)
            obj = np.empty((), dtype=object)
            obj[()] = ("tag", nxt)
            pool.put_one((a, x, obj))
            stored.add(nxt)
            nxt += 1
        elif op == 2 and pool.size:
            v = multi_value(pool.take_one())
            assert v in stored
            stored.remove(v)
            taken.append(v)
        elif op in (3, 4) and pool.size >= k:
            chunk = pool.take_chunk(k)
            vs = multi_values(chunk)
            assert len(set(vs)) == k
            assert set(vs) <= stored
            stored.difference_update(vs)
            if op == 3:
                taken += vs
            else:
                held.append(chunk)
        elif op == 5 and held:
            back = [held.pop() for _ in range(len(held))]
            pool.restore(back)
            for chunk in back:
                stored.update(int(v) for v in chunk[0])
        assert pool.size == len(stored)
    pool.restore(held)
    for chunk in held:
        stored.update(int(v) for v in chunk[0])
    rest = multi_values(pool.take_batch(pool.size))
    assert sorted(rest) == sorted(stored)
    assert sorted(taken + rest) == list(range(nxt))


def test_small_pool_gives_every_element_back_exactly_once() -> None:
    """Random puts, takes (one and chunks), restores and growth on a small pool (the
    shuffle path) lose and duplicate nothing."""
    rng = RecordingRng(1)
    pool = multi_pool(16, rng)
    _random_ops(pool, np.random.default_rng(11), 600, [1, 2, 3, 5, 9])
    assert rng.calls["shuffle"] > 50
    assert rng.calls["choice"] == 0


def test_large_pool_gives_every_element_back_exactly_once() -> None:
    """The same on a pool larger than the shuffle threshold (the choice path with its
    vectorised swap-remove), growing beyond its initial capacity."""
    rng = RecordingRng(2)
    pool = multi_pool(_SHUFFLE_ALL + 50, rng)
    _random_ops(pool, np.random.default_rng(12), 400, [1, 2, 3, 5, 9], prefill=_SHUFFLE_ALL + 50)
    assert rng.calls["choice"] > 50


def test_choice_path_swap_remove_keeps_a_permutation() -> None:
    """Many large-pool takes interleaved with refills never duplicate a slot: each
    value put in comes out once, whichever dense positions the samples hit."""
    rng = RecordingRng(3)
    size = _SHUFFLE_ALL + 300
    pool = int_pool(size, rng)
    pool.put_rows(int_batch(0, size), 0, size)
    nxt = size
    out: list[int] = []
    for k in (1, 2, 5, 17, 60, 1, 33, 70, 8, 3, 64, 50):
        assert pool.size > _SHUFFLE_ALL + 4 * k  # the choice path
        vs = pool.take_chunk(k)[0].tolist()
        assert len(set(vs)) == k
        out += vs
        pool.put_rows(int_batch(nxt, nxt + k), 0, k)
        nxt += k
    assert rng.calls["shuffle"] == 0
    out += pool.take_chunk(pool.size)[0].tolist()  # (one shuffle of everything)
    assert sorted(out) == list(range(nxt))


@pytest.mark.parametrize("k", [1, 4, 32])
def test_take_chunk_below_and_at_the_threshold_uses_one_shuffle(k: int) -> None:
    """A take from a pool no larger than the threshold + 4k shuffles; one larger uses
    choice; both give k distinct stored elements and leave the rest."""
    for size, path in ((_SHUFFLE_ALL + 4 * k, "shuffle"), (_SHUFFLE_ALL + 4 * k + 1, "choice")):
        rng = RecordingRng(4)
        pool = int_pool(size, rng)
        pool.put_rows(int_batch(0, size), 0, size)
        chunk = pool.take_chunk(k)[0].tolist()
        assert rng.calls[path] == 1
        assert rng.calls["shuffle" if path == "choice" else "choice"] == 0
        rest = pool.take_chunk(pool.size)[0].tolist()
        assert len(chunk) == k
        assert sorted(chunk + rest) == list(range(size))


# --------------------------------------------------------------------------------------
# PoolStorage: determinism, restore, growth, references
# --------------------------------------------------------------------------------------


def test_small_pool_seed_gives_a_pinned_order() -> None:
    """Seed 42 gives this order, now and in every later version (golden values)."""
    pool = int_pool(8, np.random.default_rng(42))
    pool.put_rows(int_batch(0, 8), 0, 8)
    assert [int(pool.take_one()[0]) for _ in range(3)] == [0, 5, 3]
    assert pool.take_chunk(3)[0].tolist() == [2, 7, 1]
    pool.put_rows(int_batch(8, 11), 0, 3)
    assert pool.take_batch(pool.size)[0].tolist() == [8, 10, 6, 4, 9]


def test_large_pool_seed_gives_a_pinned_order() -> None:
    """Seed 42 on a pool above the shuffle threshold gives these samples (golden)."""
    pool = int_pool(2000, np.random.default_rng(42))
    pool.put_rows(int_batch(0, 2000), 0, 2000)
    assert pool.take_chunk(8)[0].tolist() == [171, 1394, 1715, 1305, 864, 876, 177, 1543]
    assert pool.take_chunk(8)[0].tolist() == [895, 1560, 1019, 738, 254, 1669, 995, 363]


def test_same_seed_same_operations_same_order() -> None:
    """Two pools with one seed and one sequence of operations give identical outputs."""

    def run() -> list[int]:
        pool = int_pool(64, np.random.default_rng(123))
        out: list[int] = []
        for i in range(40):
            pool.put_rows(int_batch(i * 5, i * 5 + 5), 0, 5)
            out += pool.take_chunk(3)[0].tolist() if i % 2 else [int(pool.take_one()[0])]
        return out + pool.take_batch(pool.size)[0].tolist()

    first = run()
    assert run() == first
    assert sorted(first) == list(range(200))


def test_restore_puts_chunks_back_into_the_pool() -> None:
    """Restored chunks are stored again (size and contents) and can be taken again."""
    pool = multi_pool(6, np.random.default_rng(5))
    pool.put_rows(multi_batch(range(6)), 0, 6)
    a, b = pool.take_chunk(2), pool.take_chunk(3)
    assert pool.size == 1
    pool.restore([a, b])
    assert pool.size == 6
    assert sorted(multi_values(pool.take_batch(6))) == list(range(6))


def test_restore_and_put_beyond_capacity_grow_the_pool() -> None:
    """Restoring claims into a refilled pool, and puts above capacity (one and many),
    grow it; every element keeps its components and comes out once."""
    pool = multi_pool(4, np.random.default_rng(6))
    pool.put_rows(multi_batch(range(4)), 0, 4)
    claimed = pool.take_chunk(3)
    pool.put_rows(multi_batch(range(4, 7)), 0, 3)  # full again
    pool.restore([claimed])
    assert pool.size == 7
    pool.put_rows(multi_batch(range(7, 10)), 0, 3)
    obj = np.empty((), dtype=object)
    obj[()] = ("tag", 10)
    pool.put_one((np.array(10), np.array([10, -10], dtype=np.float32), obj))
    assert pool.size == 11
    got = [multi_value(pool.take_one()) for _ in range(3)]
    got += multi_values(pool.take_chunk(8))
    assert sorted(got) == list(range(11))


def test_put_rows_into_scattered_free_slots() -> None:
    """Rows put after random takes land in the freed (non-contiguous) slots without
    overwriting stored elements."""
    pool = int_pool(10, np.random.default_rng(7))
    pool.put_rows(int_batch(0, 10), 0, 10)
    first = [*pool.take_chunk(3)[0].tolist(), int(pool.take_one()[0])]
    pool.put_rows(int_batch(10, 14), 0, 4)
    rest = pool.take_batch(10)[0].tolist()
    assert sorted(first + rest) == list(range(14))


@pytest.mark.parametrize("size", [8, _SHUFFLE_ALL + 64])
def test_taken_objects_are_released(size: int) -> None:
    """A pool holds no reference to an object element once it was taken, one at a
    time or as a chunk (small and large pools)."""
    pool = PoolStorage(size, (I64, OBJ), ((), ()), "objs", np.random.default_rng(8))
    tokens = [Token(i) for i in range(size)]
    refs = [weakref.ref(t) for t in tokens]
    objs = np.empty(size, dtype=object)
    objs[:] = tokens
    pool.put_rows((np.arange(size, dtype=np.int64), objs), 0, size)
    del tokens, objs
    v, t = pool.take_one()
    assert t.v == int(v)
    del t
    chunk = pool.take_chunk(5)
    assert [o.v for o in chunk[1]] == chunk[0].tolist()
    gone = {int(v), *chunk[0].tolist()}
    del chunk
    assert set(range(size)) - set(alive(refs)) == gone
    pool.take_chunk(pool.size)
    assert alive(refs) == []


# --------------------------------------------------------------------------------------
# PoolStorage: uniformity (chi-square with fixed seeds)
# --------------------------------------------------------------------------------------


def _chi2(counts: list[int], expected: float) -> float:
    return sum((c - expected) ** 2 / expected for c in counts)


def _pairs_chi2(take_one: Any, put_one: Any, trials: int) -> float:
    """Chi-square of (previous, next) pairs of values taken one at a time from a pool of
    0..9, each put back after it was taken: uniform and independent of the previous
    take (which the pool just got back) means 100 equally likely pairs."""
    counts = [0] * 100
    prev = -1
    for _ in range(trials + 1):
        comps = take_one()
        v = int(comps[0])
        if prev >= 0:
            counts[10 * prev + v] += 1
        prev = v
        put_one(comps)
    return _chi2(counts, trials / 100)


def test_take_one_is_uniform_and_independent_of_the_last_put() -> None:
    """Each of 10 elements is taken equally often, whichever was taken (and put back)
    just before (chi-square over the 100 pairs, 99 degrees of freedom)."""
    pool = int_pool(10, np.random.default_rng(2024))
    pool.put_rows(int_batch(0, 10), 0, 10)
    assert _pairs_chi2(pool.take_one, pool.put_one, 5000) < _CHI2_999[99]


def test_small_pool_chunk_is_a_uniform_ordered_sample() -> None:
    """Every position of a 3-element sample from 12 (shuffle path) holds each element
    equally often (chi-square, 35 degrees of freedom)."""
    pool = int_pool(12, np.random.default_rng(2025))
    pool.put_rows(int_batch(0, 12), 0, 12)
    counts = [0] * 36
    trials = 3000
    for _ in range(trials):
        chunk = pool.take_chunk(3)
        for j, v in enumerate(chunk[0].tolist()):
            counts[12 * j + v] += 1
        pool.restore([chunk])
    assert _chi2(counts, trials / 12) < _CHI2_999[35]


def test_large_pool_chunk_is_a_uniform_ordered_sample() -> None:
    """Every position of a 2-element sample from a pool above the threshold (choice
    path) falls in each eighth of the values equally often (chi-square, 15 d.f.)."""
    size = _SHUFFLE_ALL + 16
    pool = int_pool(size, np.random.default_rng(2026))
    pool.put_rows(int_batch(0, size), 0, size)
    counts = [0] * 16
    trials = 4000
    for _ in range(trials):
        chunk = pool.take_chunk(2)
        for j, v in enumerate(chunk[0].tolist()):
            counts[8 * j + v * 8 // size] += 1
        pool.restore([chunk])
    assert _chi2(counts, trials / 8) < _CHI2_999[15]


# --------------------------------------------------------------------------------------
# ListPoolStorage
# --------------------------------------------------------------------------------------


def _elem(v: int) -> tuple[Any, ...]:
    """An element of a (int64 scalar, int64 vector of v % 3 copies of v) list pool."""
    return (np.array(v, dtype=np.int64), np.full(v % 3, v, dtype=np.int64))


def _value(comps: tuple[Any, ...]) -> int:
    v = int(comps[0])
    assert comps[1].tolist() == [v] * (v % 3)
    return v


def test_list_pool_gives_every_element_back_exactly_once() -> None:
    """Random puts, takes and restores on a list pool lose and duplicate nothing."""
    pool = ListPoolStorage((I64, I64), np.random.default_rng(9))
    ops = np.random.default_rng(19)
    stored: set[int] = set()
    taken: list[int] = []
    held: list[list[Any]] = []
    nxt = 0
    for _ in range(500):
        op = int(ops.integers(4))
        k = int(ops.integers(1, 5))
        if op == 0:
            for v in range(nxt, nxt + k):
                pool.put_one(_elem(v))
            stored.update(range(nxt, nxt + k))
            nxt += k
        elif op == 1 and pool.size:
            v = _value(pool.take_one())
            stored.remove(v)
            taken.append(v)
        elif op == 2 and pool.size >= k:
            chunk = pool.take_chunk(k)
            vs = [_value(e) for e in chunk]
            assert len(set(vs)) == k
            stored.difference_update(vs)
            held.append(chunk)
        elif op == 3 and held:
            pool.restore(held)
            for chunk in held:
                stored.update(_value(e) for e in chunk)
            held = []
        assert pool.size == len(stored)
    pool.restore(held)
    rest = [_value(pool.take_one()) for _ in range(pool.size)]
    assert sorted(taken + rest) == list(range(nxt))


def test_list_pool_put_rows_copies_each_row() -> None:
    """Rows of a batch become independent elements; later changes to the batch (or to a
    put element) do not leak into the pool."""
    pool = ListPoolStorage((I64,), np.random.default_rng(10))
    batch = np.arange(10, dtype=np.int64).reshape(5, 2)
    pool.put_rows((batch,), 1, 4)
    one = np.array([10, 11], dtype=np.int64)
    pool.put_one((one,))
    batch[:] = -1
    one[:] = -1
    assert pool.size == 4
    got = sorted(pool.take_one()[0].tolist() for _ in range(4))
    assert got == [[2, 3], [4, 5], [6, 7], [10, 11]]


def test_list_pool_restore_and_assemble() -> None:
    """Restored chunks are taken again; assemble stacks chunks into batch components."""
    pool = ListPoolStorage((I64,), np.random.default_rng(11))
    for v in range(6):
        pool.put_one((np.array(v, dtype=np.int64),))
    a, b = pool.take_chunk(2), pool.take_chunk(2)
    pool.restore([a, b])
    assert pool.size == 6
    (batch,) = pool.assemble([pool.take_chunk(4), pool.take_chunk(2)])
    assert batch.dtype == I64
    assert sorted(batch.tolist()) == list(range(6))


def test_list_pool_seed_gives_a_pinned_order() -> None:
    """Seed 42 gives this order (golden values), and the same again on a second pool."""

    def run() -> tuple[list[int], list[int]]:
        pool = ListPoolStorage((I64,), np.random.default_rng(42))
        for v in range(8):
            pool.put_one((np.array(v, dtype=np.int64),))
        ones = [int(pool.take_one()[0]) for _ in range(3)]
        return ones, pool.assemble([pool.take_chunk(3)])[0].tolist()

    assert run() == ([0, 5, 3], [2, 1, 4])
    assert run() == run()


def test_list_pool_take_one_is_uniform_and_independent_of_the_last_put() -> None:
    """Each of 10 elements is taken equally often, whichever was taken (and put back)
    just before (chi-square over the 100 pairs, 99 degrees of freedom)."""
    pool = ListPoolStorage((I64,), np.random.default_rng(2027))
    for v in range(10):
        pool.put_one((np.array(v, dtype=np.int64),))
    assert _pairs_chi2(pool.take_one, pool.put_one, 5000) < _CHI2_999[99]
