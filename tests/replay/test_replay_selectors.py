"""Selectors, as samplers and as removers: their distributions (chi-square with a fixed
seed), the probabilities they report, the deterministic orders and heap ties, what a
batch means with max_times_sampled, and the sum tree and key lookups underneath.

Chi-square: with counts O_i over k categories and expected counts E_i, the statistic
sum (O_i - E_i)^2 / E_i is compared with the tabulated critical value of the
chi-square distribution with k - 1 degrees of freedom at significance 0.001 (scipy is
not needed: the few values used are below). The seeds are fixed, so each test is
deterministic; the critical value says how unlikely a pass would be for a wrong
distribution of this size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from replay_support import SHAPE, items, values

import aqueue
from aqueue._replay._selection import PrioritizedState, UniformState
from aqueue._replay._store import ItemStore
from aqueue._replay._sumtree import SumTree

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

# Upper 0.001 critical values of the chi-square distribution, by degrees of freedom.
CHI2_999 = {1: 10.828, 4: 18.467, 5: 20.515, 7: 24.322, 9: 27.877}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Distributions do not depend on the event loop: asyncio only."""
    return "asyncio"


def chi2(counts: Any, expected: Any) -> float:
    o = np.asarray(counts, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    assert e.min() >= 5, "too few expected draws per category for the test"
    return float(((o - e) ** 2 / e).sum())


def assert_fits(counts: Any, probabilities: Any) -> None:
    p = np.asarray(probabilities, dtype=np.float64)
    total = float(np.sum(counts))
    stat = chi2(counts, total * p / p.sum())
    assert stat < CHI2_999[len(p) - 1], (stat, np.asarray(counts).tolist())


async def draw_counts(table: Any, k: int, draws: int, batch: int = 1000) -> np.ndarray:
    counts = np.zeros(k, dtype=np.int64)
    for _ in range(draws // batch):
        s = await table.sample(batch)
        counts += np.bincount(s.keys, minlength=k)
    return counts


async def test_uniform_draws_every_item_equally() -> None:
    """Uniform: each of 10 items about 1/10 of 20,000 draws; probabilities 1/10."""
    t = aqueue.ReplayTable(10, np.float32, SHAPE, seed=11)
    await t.insert_many(items(range(10)), priorities=np.arange(10.0))
    assert_fits(await draw_counts(t, 10, 20_000), np.ones(10))
    s = await t.sample(50)
    assert np.array_equal(s.probabilities, np.full(50, 0.1))


async def test_prioritized_draws_in_proportion_to_priority_to_the_exponent() -> None:
    """Prioritized(0.6): P(i) = p_i^0.6 / sum; the reported probabilities are exactly
    that; items of priority 0 are never drawn."""
    p = np.array([0.5, 1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 8.0, 10.0, 0.0])
    t = aqueue.ReplayTable(10, np.float32, SHAPE, sampler=aqueue.Prioritized(0.6), seed=12)
    await t.insert_many(items(range(10)), priorities=p)
    counts = await draw_counts(t, 10, 20_000)
    assert counts[[4, 9]].tolist() == [0, 0]
    w = p**0.6
    keep = p > 0
    assert_fits(counts[keep], w[keep])
    s = await t.sample(200)
    assert np.allclose(s.probabilities, w[s.keys] / w.sum(), rtol=1e-12)
    assert np.array_equal(s.priorities, p[s.keys])


async def test_prioritized_follows_updated_priorities() -> None:
    """After update_priorities the draws follow the new priorities."""
    t = aqueue.ReplayTable(8, np.float32, SHAPE, sampler=aqueue.Prioritized(1.0), seed=13)
    await t.insert_many(items(range(8)))
    new = np.array([8.0, 1.0, 1.0, 2.0, 2.0, 4.0, 0.5, 0.5])
    assert (await t.update_priorities(np.arange(8), new)).all()
    assert_fits(await draw_counts(t, 8, 20_000), new)


@pytest.mark.parametrize("exponent", [0.0, 0.7])
async def test_prioritized_all_zero_falls_back_to_uniform(exponent: float) -> None:
    """Every priority 0: each item equally likely (probability 1/N); exponent 0: every
    positive priority equally likely, zeros never."""
    t = aqueue.ReplayTable(5, np.float32, SHAPE, sampler=aqueue.Prioritized(exponent), seed=14)
    await t.insert_many(items(range(5)), priorities=np.zeros(5))
    assert_fits(await draw_counts(t, 5, 10_000), np.ones(5))
    assert np.array_equal((await t.sample(10)).probabilities, np.full(10, 0.2))
    if exponent == 0.0:
        await t.update_priorities([1, 3], [0.001, 1000.0])
        counts = await draw_counts(t, 5, 10_000)
        assert counts[[0, 2, 4]].tolist() == [0, 0, 0]
        assert_fits(counts[[1, 3]], [1, 1])


async def test_max_times_sampled_batch_is_sequential_single_samples() -> None:
    """A batch with max_times_sampled equals samples one at a time: with A (weight 9)
    and B (weight 1), each drawn once, sample(2) starts with A 9 times in 10 and reports
    the probability of each draw at its moment (0.9 or 0.1, then 1.0)."""
    t = aqueue.ReplayTable(
        4, np.float32, SHAPE, sampler=aqueue.Prioritized(1.0), max_times_sampled=1, seed=15
    )
    firsts = np.zeros(2, dtype=np.int64)
    for _ in range(2000):
        a, b = await t.insert_many(items([0, 1]), priorities=[9.0, 1.0])
        s = await t.sample(2)
        assert sorted(s.keys.tolist()) == [a, b]
        first = 0 if s.keys[0] == a else 1
        firsts[first] += 1
        assert np.allclose(s.probabilities, [0.9 if first == 0 else 0.1, 1.0])
        assert s.times_sampled.tolist() == [1, 1]
    assert_fits(firsts, [0.9, 0.1])
    assert t.size() == 0


@pytest.mark.parametrize("sampler", [aqueue.Uniform(), aqueue.Prioritized(0.5)])
async def test_max_times_sampled_never_overdraws_an_item(sampler: Any) -> None:
    """With max_times_sampled=m a batch draws no item more than m times, and a batch
    of every draw left takes each item exactly m times."""
    t = aqueue.ReplayTable(50, np.float32, SHAPE, sampler=sampler, max_times_sampled=3, seed=16)
    await t.insert_many(items(range(50)), priorities=np.linspace(0.1, 5.0, 50))
    s = await t.sample(60)
    assert np.bincount(s.keys).max() <= 3
    rest = await t.sample(150 - 60)
    both = np.concatenate([s.keys, rest.keys])
    assert np.bincount(both, minlength=50).tolist() == [3] * 50
    assert t.size() == 0
    assert (await t.statistics()).deletes == 50


@pytest.mark.parametrize(
    ("sampler", "expected"),
    [
        (aqueue.Fifo(), [0, 0, 0]),
        (aqueue.Lifo(), [4, 4, 4]),
        (aqueue.MinHeap(), [2, 2, 2]),
        (aqueue.MaxHeap(), [1, 1, 1]),
    ],
)
async def test_deterministic_samplers(sampler: Any, expected: list[int]) -> None:
    """Fifo, Lifo, MinHeap and MaxHeap draw their first item each time (with
    probability 1.0) until it leaves."""
    t = aqueue.ReplayTable(8, np.float32, SHAPE, sampler=sampler)
    await t.insert_many(items(range(5)), priorities=[3.0, 9.0, 1.0, 5.0, 4.0])
    s = await t.sample(3)
    assert s.keys.tolist() == expected
    assert s.probabilities.tolist() == [1.0] * 3
    assert s.times_sampled.tolist() == [1, 2, 3]


@pytest.mark.parametrize("heap", [aqueue.MinHeap(), aqueue.MaxHeap()])
async def test_heap_ties_go_to_the_priority_set_longest_ago(heap: Any) -> None:
    """Among equal priorities a heap picks the item whose priority was set longest
    ago: inserted first, unless an update made it newer."""
    t = aqueue.ReplayTable(8, np.float32, SHAPE, sampler=heap, max_times_sampled=1)
    await t.insert_many(items(range(4)), priorities=[2.0, 2.0, 2.0, 2.0])
    await t.update_priorities([0, 2], [2.0, 2.0])  # now 1, 3, 0, 2
    assert (await t.sample(4)).keys.tolist() == [1, 3, 0, 2]


@pytest.mark.parametrize(
    "remover",
    [aqueue.Fifo(), aqueue.Lifo(), aqueue.MinHeap(), aqueue.MaxHeap()],
    ids=repr,
)
async def test_batched_evictions_equal_one_insert_at_a_time(remover: Any) -> None:
    """insert_many beyond max_size evicts exactly what the same inserts one by one
    would (ties included), for every deterministic remover."""
    rng = np.random.default_rng(17)
    one = aqueue.ReplayTable(6, np.float32, SHAPE, remover=remover)
    many = aqueue.ReplayTable(6, np.float32, SHAPE, remover=remover)
    for size in (4, 3, 9, 1, 5):
        prios = rng.integers(0, 4, size).astype(np.float64)
        batch = items(range(size))
        for j in range(size):
            await one.insert(batch[j], priority=float(prios[j]))
        await many.insert_many(batch, priorities=prios)
        assert one.snapshot().keys.tolist() == many.snapshot().keys.tolist()
    assert (await one.statistics()) == (await many.statistics())


@pytest.mark.parametrize(
    ("remover", "evicted"),
    [(aqueue.Fifo(), [0]), (aqueue.Lifo(), [3]), (aqueue.MinHeap(), [1]), (aqueue.MaxHeap(), [2])],
    ids=repr,
)
async def test_deterministic_removers_evict_their_first(remover: Any, evicted: list[int]) -> None:
    """At max_size an insert evicts the remover's first item, the newcomer included
    (Lifo: the newcomer itself)."""
    t = aqueue.ReplayTable(3, np.float32, SHAPE, remover=remover)
    await t.insert_many(items(range(3)), priorities=[5.0, 1.0, 9.0])
    assert await t.insert(items([3])[0], priority=4.0) == 3
    held = set(t.snapshot().keys.tolist())
    assert sorted({0, 1, 2, 3} - held) == evicted
    assert (await t.statistics()).evictions == 1


async def test_keys_after_a_newcomer_evicted_at_the_start_of_a_batch_find_their_own_items() -> None:
    """A batch whose first newcomer is evicted on arrival (MinHeap: the lowest priority)
    while the rest go in leaves a gap in the keys between the items held and the batch:
    a key of the batch then reaches its own item, not its neighbour's."""
    t = aqueue.ReplayTable(3, np.float32, SHAPE, sampler=aqueue.MaxHeap(), remover=aqueue.MinHeap())
    assert await t.insert(items([0])[0], priority=5.0) == 0
    keys = await t.insert_many(items([1, 2, 3]), priorities=[0.1, 5.0, 6.0])
    assert keys.tolist() == [1, 2, 3]
    assert sorted(t.snapshot().keys.tolist()) == [0, 2, 3]  # key 1 evicted on arrival
    assert (await t.update_priorities(keys[1:2], [9.0])).tolist() == [True]
    s = await t.sample(1)  # MaxHeap: the item of key 2, now of priority 9
    assert s.keys.tolist() == [2]
    assert s.priorities.tolist() == [9.0]
    assert values(s.data) == [2]


async def test_uniform_remover_evicts_any_of_the_held_and_the_newcomer_equally() -> None:
    """Uniform remover: an insert at max_size evicts each held item, and the newcomer,
    with probability 1/(max_size + 1) (counted by age rank)."""
    t = aqueue.ReplayTable(5, np.float32, SHAPE, remover=aqueue.Uniform(), seed=18)
    await t.insert_many(items(range(5)))
    counts = np.zeros(6, dtype=np.int64)  # age rank 0 (oldest) .. 4, 5 = the newcomer
    for j in range(3000):
        before = t.snapshot().keys.tolist()
        key = await t.insert(items([j])[0])
        gone = sorted((set(before) | {key}) - set(t.snapshot().keys.tolist()))
        assert len(gone) == 1
        counts[5 if gone[0] == key else before.index(gone[0])] += 1
    assert_fits(counts, np.ones(6))


def test_random_victims_follow_the_weights_of_held_and_newcomer() -> None:
    """The victim of a random remover at max_size is drawn among the held items and the
    newcomer: uniformly, or in proportion to priority**exponent."""
    store = ItemStore(5, [np.dtype(np.float32)], [()])
    slots = np.array([0, 1, 2, 3, 4])
    rng = np.random.default_rng(19)
    uniform = UniformState(5)
    uniform.insert(slots, np.ones(5))
    counts = np.zeros(6, dtype=np.int64)
    for _ in range(6000):
        counts[uniform.victim(1.0, rng)] += 1  # -1 counts as the newcomer (index 5)
    assert_fits(counts, np.ones(6))
    prioritized = PrioritizedState(5, 0.5)
    prioritized.insert(slots, np.array([1.0, 4.0, 9.0, 0.0, 16.0]))
    counts[:] = 0
    for _ in range(10_000):
        counts[prioritized.victim(25.0, rng)] += 1
    assert counts[3] == 0
    keep = [0, 1, 2, 4, 5]
    assert_fits(counts[keep], [1.0, 2.0, 3.0, 4.0, 5.0])
    del store


@pytest.mark.parametrize("remover", [aqueue.Uniform(), aqueue.Prioritized(1.0)], ids=repr)
async def test_random_removers_keep_the_table_full_and_the_counters_right(remover: Any) -> None:
    """A random remover evicts one item per insert beyond max_size, in batches too."""
    t = aqueue.ReplayTable(20, np.float32, SHAPE, remover=remover, seed=20)
    for _ in range(5):
        await t.insert_many(items(range(15)), priorities=np.linspace(0.5, 3.0, 15))
    st = await t.statistics()
    assert (st.size, st.inserts, st.evictions, st.deletes) == (20, 75, 55, 55)
    snap = t.snapshot()
    assert len(set(snap.keys.tolist())) == 20


# -- the sum tree -------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 5, 1000, 3000])
def test_sum_tree_maps_prefix_intervals_to_leaves(size: int) -> None:
    """find(u) returns the leaf whose prefix interval holds u, skipping empty leaves;
    set with repeated indices and rebuild give the same tree."""
    rng = np.random.default_rng(size)
    w = rng.random(size)
    w[rng.random(size) < 0.3] = 0.0
    w[0] = 0.5
    tree = SumTree(size)
    idx = np.concatenate([np.arange(size), np.arange(size)])
    tree.set(idx, np.concatenate([w, w]))
    other = SumTree(size)
    other.tree[other.capacity : other.capacity + size] = w
    other.rebuild()
    tree.propagate()
    assert np.array_equal(tree.tree[1 << tree.top :], other.tree[1 << other.top :])
    prefix = tree.prefix()
    bounds = np.concatenate([[0.0], np.cumsum(w)])
    u = rng.random(500) * prefix[-1]
    leaf, value = tree.find(u.copy(), prefix)
    assert (w[leaf] > 0).all()
    assert np.array_equal(value, w[leaf])
    inside = (bounds[leaf] <= u * (1 + 1e-12) + 1e-12) & (u <= bounds[leaf + 1] * (1 + 1e-12))
    assert inside.all()


def test_sum_tree_sets_between_searches_give_the_rebuilt_tree() -> None:
    """Leaves set in many small batches (repeating leaves within and across batches,
    and more in all than are ever left pending), searched now and then: every search
    sees exactly the prefix sums of a tree rebuilt from the same leaves."""
    rng = np.random.default_rng(7)
    size = 5000
    tree = SumTree(size)
    for step in range(300):
        idx = rng.integers(0, size, int(rng.integers(1, 80)))
        idx = np.concatenate([idx, idx[:3]])  # (repeats agree on their value)
        values = rng.random(size)[idx]
        tree.set(idx, values)
        if step % 37 == 0:
            other = SumTree(size)
            other.tree[other.capacity : other.capacity + size] = tree.leaves()
            other.rebuild()
            assert np.array_equal(tree.prefix(), other.prefix())


def test_sum_tree_rounding_never_lands_on_an_empty_leaf() -> None:
    """A value at the very end of the total (where rounding can push the descent past
    the last item) still lands on an item of positive weight."""
    tree = SumTree(3000)
    w = np.zeros(3000)
    w[:10] = 1.0 / 3.0
    tree.set(np.arange(3000), w)
    prefix = tree.prefix()
    leaf, value = tree.find(np.array([prefix[-1], np.nextafter(prefix[-1], 0.0)]), prefix)
    assert leaf.tolist() == [9, 9]
    assert value.tolist() == [1.0 / 3.0] * 2


def test_default_priority_tracks_the_largest_held_through_churn() -> None:
    """Random inserts, updates (naming a key twice at times), deletes, evictions and
    samples that use items up: each insert without a priority gets exactly the largest
    priority then held (1.0 when none is)."""
    rng = np.random.default_rng(21)
    t = aqueue.ReplayTable(
        12, np.float32, SHAPE, sampler=aqueue.Prioritized(0.5), max_times_sampled=2, seed=22
    )
    view = t.blocking()
    for step in range(400):
        op = rng.integers(0, 5)
        held = t.snapshot()
        if op == 0 or held.keys.size == 0:
            expected = float(held.priorities.max()) if held.keys.size else 1.0
            key = view.insert(items([step])[0])
            after = t.snapshot()
            if key in after.keys:  # (a full table may evict the newcomer)
                assert after.priorities[after.keys.tolist().index(key)] == expected
        elif op == 1:
            k = int(rng.integers(1, 4))
            view.insert_many(items(range(k)), priorities=rng.integers(0, 4, k).astype(float))
        elif op == 2:
            keys = rng.choice(held.keys, size=3)  # (a key may be named twice)
            view.update_priorities(keys, rng.integers(0, 4, len(keys)).astype(float))
        elif op == 3:
            view.delete(rng.choice(held.keys, size=1))
        else:
            view.sample(1)


@pytest.mark.parametrize(
    "remover", [aqueue.Fifo(), aqueue.Lifo(), aqueue.MinHeap(), aqueue.Uniform()], ids=repr
)
@pytest.mark.parametrize("mts", [0, 2])
def test_keys_find_their_items_through_random_histories(remover: Any, mts: int) -> None:
    """Random batches (some larger than the table), deletes, samples that may use items
    up and updates (of keys around those held, or of keys held), on a small table, three
    histories each. After every step, update_priorities and delete find exactly the keys
    the table holds (its snapshot's), an update changes the priorities of the keys it
    names and no other (the last value of a key named twice), and every sample hands
    back each key's own item."""
    for seed in range(3):
        history(remover, mts, seed)


def history(remover: Any, mts: int, seed: int) -> None:
    """One random history of ``test_keys_find_their_items_through_random_histories``."""
    rng = np.random.default_rng(31 + seed)
    t = aqueue.ReplayTable(6, np.float32, SHAPE, remover=remover, max_times_sampled=mts, seed=seed)
    view = t.blocking()
    issued = 0
    for _ in range(400):
        op = int(rng.choice(5, p=[0.3, 0.05, 0.2, 0.15, 0.3]))
        snap = t.snapshot()
        held = set(snap.keys.tolist())
        if op == 0 or not held:
            k = int(rng.integers(1, 9))
            keys = view.insert_many(
                items(range(issued, issued + k)), priorities=rng.integers(0, 4, k).astype(float)
            )
            assert keys.tolist() == list(range(issued, issued + k))
            issued += k
        elif op == 1:
            probe = rng.integers(-1, issued + 2, 3)
            expected = []
            for key in probe.tolist():
                expected.append(key in held)
                held.discard(key)  # (a key given twice: True for its first)
            assert view.delete(probe).tolist() == expected
        elif op == 2:
            left = int((mts - snap.times_sampled).sum()) if mts else 3
            s = view.sample(int(rng.integers(1, min(3, left) + 1)))
            assert values(s.data) == s.keys.tolist()
            assert set(s.keys.tolist()) <= held
        else:  # keys around those held, or only keys held
            low, high = min(held) - 2, max(held) + 3
            probe = rng.integers(low, high, 3) if op == 3 else rng.choice(snap.keys, 8)
            given = rng.integers(0, 4, len(probe)).astype(float)
            found = view.update_priorities(probe, given)
            assert found.tolist() == [key in held for key in probe.tolist()]
            expected = dict(zip(snap.keys.tolist(), snap.priorities.tolist()))
            expected.update((k, v) for k, v in zip(probe.tolist(), given.tolist()) if k in held)
            after = t.snapshot()
            assert dict(zip(after.keys.tolist(), after.priorities.tolist())) == expected
