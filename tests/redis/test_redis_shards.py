"""The layout of sharded objects (``aqueue/redis/_core/_shards.py``): tags, salts spread
over the primaries, totals split, the ``shards=`` argument and the stored-count check.
Pure functions: no server."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("redis", reason="aqueue[redis] is not installed")

import aqueue
from aqueue.redis._core._cluster._routing import slot_of
from aqueue.redis._core._shards import (
    check_stored,
    choose_tags,
    shard_of_tag,
    shards_arg,
    split,
    tag,
)


def test_shard_zero_is_the_name_and_the_others_are_marked() -> None:
    assert tag("q", 0, 7) == "q"
    assert tag("q", 2, 7) == "q#2.7"
    assert shard_of_tag("q#2.7") == ("q", 2)
    assert shard_of_tag("a#b#1.0") == ("a#b", 1)
    for plain in ("q", "q#0.1", "q#x.1", "q#1", "#1.2", "q#1.x"):
        assert shard_of_tag(plain) is None, plain


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_tags_land_on_distinct_primaries_least_loaded_first(k: int) -> None:
    # three primaries with the slot ranges redis-cli --cluster create gives
    def owner(slot: int) -> str:
        return "abc"[min(2, slot * 3 // 16384)]

    for name in ("t", "replay", "x-1", "table#7"):
        tags = choose_tags(name, k, owner)
        assert tags[0] == name
        assert len(set(tags)) == k
        assert all(shard_of_tag(t) == (name, s) for s, t in enumerate(tags) if s)
        load = [sum(owner(slot_of("{" + t + "}")) == n for t in tags) for n in "abc"]
        assert max(load) - min(load) <= 1, (name, tags, load)


def test_without_a_slot_map_the_shards_spread_over_the_slot_space() -> None:
    tags = choose_tags("t", 4)
    parts = sorted(slot_of("{" + t + "}") * 4 // 16384 for t in tags)
    assert parts == [0, 1, 2, 3]
    assert choose_tags("t", 4) == tags  # (deterministic)


def test_split_sums_to_the_total_and_is_even() -> None:
    for total, k in itertools.product([1, 2, 7, 30, 1000], [1, 2, 3, 7]):
        if k > total:
            continue
        parts = split(total, k)
        assert sum(parts) == total
        assert len(parts) == k
        assert max(parts) - min(parts) <= 1
        assert min(parts) >= 1


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (0, "shards must be an int >= 1, got 0"),
        (-1, "shards must be an int >= 1, got -1"),
        ("3", "shards must be None or an int >= 1, got '3' (str)"),
        (True, "shards must be None or an int >= 1, got True (bool)"),
        (2.0, "shards must be None or an int >= 1, got 2.0 (float)"),
        (11, "shards must be at most max_size (10): each shard holds at least one item; got 11"),
    ],
)
def test_bad_shards_are_refused_naming_what_was_expected(value: object, says: str) -> None:
    with pytest.raises(aqueue.ElementSpecError) as err:
        shards_arg(value, "T", 10, "max_size")
    assert says in str(err.value)


def test_good_shards_pass() -> None:
    assert shards_arg(None, "T", 10, "max_size") is None
    assert shards_arg(1, "T", 10, "max_size") == 1
    assert shards_arg(10, "T", 10, "max_size") == 10


def test_an_explicit_other_count_is_refused_naming_shards() -> None:
    check_stored("T", "table", ["t", "t#1.0"], None)
    check_stored("T", "table", ["t", "t#1.0"], 2)
    check_stored("T", "table", None, 1)  # (stored before shards existed: one)
    with pytest.raises(aqueue.ElementSpecError, match="with shards 2, but 3 was given"):
        check_stored("T", "table", ["t", "t#1.0"], 3)
    with pytest.raises(aqueue.ElementSpecError, match="with shards 1, but 2 was given"):
        check_stored("T", "table", None, 2)
