"""Rate limiters: Reverb's arithmetic against a reference written here, the checks of
SampleToInsertRatio, their settings' JSON form, and a table paced by each limiter
exactly as the reference says (every operation the reference allows completes at
once, every one it refuses waits, and leaves nothing when cancelled)."""

from __future__ import annotations

import math
from typing import Any

import anyio
import numpy as np
import pytest
from replay_support import SHAPE, MakeTable, counters, finished, item, items, settled
from support import spawn

import aqueue
from aqueue._replay._limiter import limiter_config, limiter_from_config
from aqueue._replay._selectors import selector_config, selector_from_config

pytestmark = pytest.mark.timeout(60)


def ref_can_sample(
    spi: float, min_size: int, lo: float, inserts: int, samples: int, deletes: int, n: int
) -> bool:
    """Reverb's RateLimiter::CanSample, written out again."""
    if inserts - deletes < min_size:
        return False
    return inserts * spi - samples - n >= lo


def ref_can_insert(
    spi: float, min_size: int, hi: float, inserts: int, samples: int, deletes: int, n: int
) -> bool:
    """Reverb's RateLimiter::CanInsert, written out again."""
    if inserts + n - deletes <= min_size:
        return True
    return (inserts + n) * spi - samples <= hi


def test_arithmetic_matches_the_reference() -> None:
    """can_sample and can_insert agree with the reference over 20,000 random states."""
    rng = np.random.default_rng(0)
    for _ in range(20_000):
        spi = float(rng.choice([0.25, 1.0, 2.5, 4.0, 32.0]))
        min_size = int(rng.integers(1, 50))
        lo = float(rng.integers(-200, 100))
        hi = lo + float(rng.integers(0, 300))
        limiter = aqueue.RateLimiter(spi, min_size, lo, hi)
        inserts = int(rng.integers(0, 200))
        deletes = int(rng.integers(0, inserts + 1))
        samples = int(rng.integers(0, 800))
        n = int(rng.integers(1, 64))
        assert limiter.can_sample(inserts, samples, deletes, n) == ref_can_sample(
            spi, min_size, lo, inserts, samples, deletes, n
        )
        assert limiter.can_insert(inserts, samples, deletes, n) == ref_can_insert(
            spi, min_size, hi, inserts, samples, deletes, n
        )


def reachable_counters(limiter: aqueue.RateLimiter, steps: int) -> set[tuple[int, int, int]]:
    """Every (inserts, samples, deletes) a table can reach in up to ``steps`` single
    inserts, samples and deletes, each taken only when the limiter allows it (and an
    item is held, for a sample or a delete)."""
    seen = {(0, 0, 0)}
    frontier = [(0, 0, 0)]
    for _ in range(steps):
        nxt = []
        for i, s, d in frontier:
            moves = []
            if limiter.can_insert(i, s, d, 1):
                moves.append((i + 1, s, d))
            if i - d > 0:
                moves.append((i, s, d + 1))
                if limiter.can_sample(i, s, d, 1):
                    moves.append((i, s + 1, d))
            for m in moves:
                if m not in seen:
                    seen.add(m)
                    nxt.append(m)
        frontier = nxt
    return seen


@pytest.mark.parametrize(
    "limiter",
    [
        aqueue.RateLimiter(1.0, 2, 0.0, 6.0),
        aqueue.RateLimiter(2.0, 1, 3.0, 9.0),  # min_diff > 0: an empty table starts below
        aqueue.RateLimiter(1.0, 3, -4.0, 2.0),  # min_diff < 0: samples reach below 0
        aqueue.RateLimiter(3.0, 2, 2.0, 4.0),
        aqueue.SampleToInsertRatio(2.0, 3, 2.0),  # band [4, 8]
    ],
    ids=repr,
)
def test_insert_many_is_refused_exactly_when_no_state_admits_it(limiter: Any) -> None:
    """``insert_many(k)`` is refused at the call exactly when no counters a table can
    reach (by single inserts, samples and deletes the limiter allows) admit k items at
    once (Reverb's ``CanInsert(k)``): never a batch the limiter admits now or later."""
    states = reachable_counters(limiter, 40)
    for k in range(1, 16):
        if any(limiter.can_insert(i, s, d, k) for i, s, d in states):
            limiter.check_insert_count(k, "t")  # admissible: never refused
        else:
            with pytest.raises(aqueue.ElementSpecError, match=f"insert_many of {k} items"):
                limiter.check_insert_count(k, "t")


def test_min_size_and_ratio_are_rate_limiters_with_reverbs_numbers() -> None:
    """MinSize(m) = spi 1, band (-inf, inf); SampleToInsertRatio's band is offset +- eb
    with offset = spi * min_size, or the pair given."""
    m = aqueue.MinSize(3)
    assert (m.samples_per_insert, m.min_size_to_sample, m.min_diff, m.max_diff) == (
        1.0,
        3,
        -math.inf,
        math.inf,
    )
    assert isinstance(m, aqueue.RateLimiter)
    r = aqueue.SampleToInsertRatio(4.0, 100, 40.0)
    assert (r.min_diff, r.max_diff) == (360.0, 440.0)
    pair = aqueue.SampleToInsertRatio(2.0, 10, (5.0, 30.0))
    assert (pair.min_diff, pair.max_diff, pair.error_buffer) == (5.0, 30.0, (5.0, 30.0))
    assert (
        repr(r)
        == "SampleToInsertRatio(samples_per_insert=4.0, min_size_to_sample=100, error_buffer=40.0)"
    )
    assert repr(m) == "MinSize(3)"
    assert r == aqueue.SampleToInsertRatio(4, 100, 40)
    assert r != aqueue.RateLimiter(4.0, 100, 360.0, 440.0)
    assert len({r, aqueue.SampleToInsertRatio(4, 100, 40)}) == 1
    with pytest.raises(AttributeError):
        r.min_diff = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: aqueue.SampleToInsertRatio(4.0, 10, 3.0),
            "6 wide, narrower than 2 \\* max\\(1, samples_per_insert\\) = 8",
        ),
        (lambda: aqueue.SampleToInsertRatio(0.5, 10, 0.9), "narrower than 2 \\* max"),
        (
            lambda: aqueue.SampleToInsertRatio(1.0, 10, (11.0, 20.0)),
            "min_diff 11 is above samples_per_insert \\* min_size_to_sample = 10",
        ),
        (
            lambda: aqueue.SampleToInsertRatio(0.0, 10, 5.0),
            "samples_per_insert must be finite and > 0",
        ),
        (lambda: aqueue.SampleToInsertRatio(1.0, 0, 5.0), "min_size_to_sample must be >= 1"),
        (lambda: aqueue.SampleToInsertRatio(1.0, 10, -1.0), "error_buffer must be >= 0"),
        (
            lambda: aqueue.SampleToInsertRatio(1.0, 10, (1.0, 2.0, 3.0)),
            "a number or a \\(min_diff, max_diff\\) pair",
        ),
        (lambda: aqueue.MinSize(0), "min_size_to_sample must be >= 1, got 0"),
        (lambda: aqueue.MinSize(2.5), "min_size_to_sample must be an int, got float"),
        (lambda: aqueue.RateLimiter(1.0, 1, 5.0, 4.0), "min_diff must be <= max_diff, got 5 > 4"),
        (lambda: aqueue.RateLimiter(math.inf, 1, 0.0, 4.0), "samples_per_insert must be finite"),
        (lambda: aqueue.RateLimiter(1.0, 1, math.nan, 4.0), "min_diff must not be NaN"),
        (lambda: aqueue.Prioritized(-0.5), "exponent must be finite and >= 0"),
        (lambda: aqueue.Prioritized("high"), "exponent must be a number, got str"),
    ],
)
def test_bad_settings_are_refused(make: Any, message: str) -> None:
    """Settings that could never work, or are of the wrong type, raise a ValueError
    (ElementSpecError) that names the numbers."""
    with pytest.raises(aqueue.ElementSpecError, match=message):
        make()
    assert issubclass(aqueue.ElementSpecError, ValueError)


def test_a_band_ending_below_the_offset_warns() -> None:
    """As Reverb: max_diff below spi * min_size warns (a deadlock unless samples run
    concurrently)."""
    with pytest.warns(RuntimeWarning, match="inserts stall"):
        aqueue.SampleToInsertRatio(1.0, 10, (0.0, 5.0))


@pytest.mark.filterwarnings("ignore:SampleToInsertRatio")
@pytest.mark.parametrize(
    "limiter",
    [
        "MinSize(7)",
        "SampleToInsertRatio(4.0, 100, 40.0)",
        "SampleToInsertRatio(1.0, 10, (0.0, 5.0))",
        "RateLimiter(2.0, 3, -math.inf, 12.5)",
    ],
)
def test_limiter_settings_round_trip_as_json_data(limiter: str) -> None:
    """A limiter's JSON description builds an equal limiter."""
    import json

    value = eval(f"aqueue.{limiter}")
    config = json.loads(json.dumps(limiter_config(value)))
    assert limiter_from_config(config) == value


@pytest.mark.parametrize(
    "selector",
    [
        aqueue.Uniform(),
        aqueue.Prioritized(0.6),
        aqueue.Fifo(),
        aqueue.Lifo(),
        aqueue.MinHeap(),
        aqueue.MaxHeap(),
    ],
    ids=repr,
)
def test_selector_settings_round_trip_and_read_well(selector: Any) -> None:
    """A selector's JSON description builds an equal one; its repr is its constructor."""
    assert selector_from_config(selector_config(selector)) == selector
    assert eval(f"aqueue.{selector!r}") == selector
    with pytest.raises(aqueue.ElementSpecError, match="not a selector description"):
        selector_from_config({"kind": "Random"})


# -- a table paced exactly as the reference says -------------------------------------------


LIMITERS = [
    aqueue.MinSize(3),
    aqueue.SampleToInsertRatio(2.0, 4, 6.0),
    aqueue.RateLimiter(0.5, 2, -1.0, 3.0),
]


@pytest.mark.anyio
@pytest.mark.parametrize("limiter", LIMITERS, ids=repr)
async def test_table_allows_exactly_what_the_reference_allows(
    make_table: MakeTable, limiter: Any
) -> None:
    """Random inserts, samples and deletes: each one the reference limiter allows (and
    the items can supply) completes at once; each one it refuses waits, and cancelled
    it leaves every counter as it was."""
    rng = np.random.default_rng(1)
    t = await make_table(12, np.float32, SHAPE, rate_limiter=limiter, seed=2)
    spi, min_size = limiter.samples_per_insert, limiter.min_size_to_sample
    lo, hi = limiter.min_diff, limiter.max_diff
    inserts = samples = deletes = 0
    waited = done = 0
    async with anyio.create_task_group() as tg:
        for step in range(160):
            kind = rng.choice(["insert", "sample", "delete"], p=[0.45, 0.45, 0.1])
            if kind == "delete":
                st = await t.statistics()
                if st.size:
                    key = int(rng.integers(max(0, inserts - 12), inserts))
                    found = await t.delete([key])
                    deletes += int(found[0])
                continue
            n = int(rng.integers(1, 4))
            before = await counters(t)
            size = before[0]
            if kind == "insert":
                ok = ref_can_insert(spi, min_size, hi, inserts, samples, deletes, n)
                op = spawn(tg, t.insert_many, items(range(step, step + n)))
            else:
                ok = ref_can_sample(spi, min_size, lo, inserts, samples, deletes, n) and size > 0
                op = spawn(tg, t.sample, n)
            await settled(t, op)
            if ok:
                await finished(op)
                op.result()
                done += 1
                if kind == "insert":
                    evicted = max(0, size + n - 12)
                    inserts += n
                    deletes += evicted
                else:
                    samples += n
            else:
                waited += 1
                assert op.pending, (step, kind, n, inserts, samples, deletes)
                op.scope.cancel()
                await finished(op)
                assert op.cancelled
                assert await counters(t) == before
            st = await t.statistics()
            assert (st.inserts, st.samples, st.deletes) == (inserts, samples, deletes)
    assert done > 50
    assert waited > 0


@pytest.mark.anyio
async def test_the_ratio_holds_over_a_run(make_table: MakeTable) -> None:
    """Two actors and a learner under SampleToInsertRatio: once sampling began, inserts
    * spi - samples stays within the band at every sample the learner sees."""
    limiter = aqueue.SampleToInsertRatio(4.0, 20, 16.0)  # band [64, 96]
    t = await make_table(1000, np.float32, SHAPE, rate_limiter=limiter, seed=3)

    async def actor(base: int) -> None:
        for j in range(200):
            await t.insert(item(base + j))

    async with anyio.create_task_group() as tg:
        tg.start_soon(actor, 0)
        tg.start_soon(actor, 10_000)
        for _ in range(90):
            await t.sample(8)
            st = await t.statistics()
            diff = st.inserts * 4.0 - st.samples
            assert limiter.min_diff <= diff <= limiter.max_diff, diff
        tg.cancel_scope.cancel()
    st = await t.statistics()
    assert st.samples == 720
    assert 64 <= st.inserts * 4 - st.samples <= 96
