"""Opening and deleting a replay table on the server, sans I/O: its settings checked
(the in-process table's checks), stored by the first process that opens its name and
compared by every later one (the core's ``open_shared``), with what the Lua functions
read derived from them (``FANOUT`` among it), then the handle its operations share.

Invariant: a table's stored settings are its kind, max_size, dtypes, shapes, names,
sampler, remover, max_times_sampled, rate limiter and the key layout's format, in that
order (``rt_open`` takes and returns them so); processes sharing a name must give the
same ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import aqueue
from aqueue._queues._spec import ElementSpec
from aqueue._replay._checks import TableSettings, table_settings
from aqueue._replay._limiter import RateLimiter, limiter_config, limiter_from_config
from aqueue._replay._selectors import (
    Fifo,
    Lifo,
    MaxHeap,
    MinHeap,
    Prioritized,
    Selector,
    selector_config,
    selector_from_config,
)

from .._core._handle import key_prefix
from .._core._shards import check_stored, choose_tags, shards_arg, split
from .._core._shared import compare_stored, open_stored, text
from .._core._spec import make_spec, name_arg
from .._core._transport import Call, Op
from ._handle import TABLES, TableHandle

__all__ = [
    "FANOUT",
    "RENDER",
    "delete_table",
    "derived",
    "open_table",
    "shard_limiter",
    "unshardable",
    "stored_fields",
    "stored_selection",
]

# Children per node of a sum tree on the server: one GETRANGE reads them all, so a
# descent costs about log_F(max_size) calls and an update two per level (measured in
# benchmarks/README.md; read at each open: tests patch it).
FANOUT = 16

_SAME = (
    "settings: max_size, dtypes, shapes, names, sampler, remover, max_times_sampled and "
    "rate_limiter"
)
RENDER = {
    "sampler": lambda v: repr(selector_from_config(v)),
    "remover": lambda v: repr(selector_from_config(v)),
    "rate_limiter": lambda v: repr(limiter_from_config(v)),
}


def _kind(selector: Selector) -> str:
    return type(selector).__name__.lower()


def _stored(settings: TableSettings, k: int = 1, s: int = 0, tags: str = "") -> dict[str, str]:
    """The settings of shard ``s`` of ``k`` as the server stores them (compared on
    reopen), in JSON, in the order ``rt_open`` takes them: its part of ``max_size``,
    the shard count and ``tags`` (the root's: the JSON list of the shards' tags)."""
    return {
        "kind": "table",
        "max_size": str(split(settings.max_size, k)[s]),
        **stored_fields(settings.spec, settings.shapes),
        **stored_selection(settings),
        "shards": str(k),
        "tags": tags,
    }


def stored_fields(spec: ElementSpec, shapes: Sequence[tuple[int, ...]]) -> dict[str, str]:
    """An element's dtypes, shapes and names as the server stores them."""
    return {
        "dtypes": json.dumps([dt.str for dt in spec.dtypes]),
        "shapes": json.dumps([list(s) for s in shapes]),
        "names": json.dumps(None if spec.names is None else list(spec.names)),
    }


def stored_selection(settings: TableSettings) -> dict[str, str]:
    """The sampler, remover, max_times_sampled, rate limiter and the layout's format as
    the server stores them."""
    return {
        "sampler": json.dumps(selector_config(settings.sampler), sort_keys=True),
        "remover": json.dumps(selector_config(settings.remover), sort_keys=True),
        "max_times_sampled": str(settings.max_times_sampled),
        "rate_limiter": json.dumps(limiter_config(settings.rate_limiter), sort_keys=True),
        "format": TABLES.format,
    }


def shard_limiter(limiter: RateLimiter, k: int, s: int) -> RateLimiter:
    """Shard ``s`` of ``k``'s rate limiter: ``samples_per_insert`` as given,
    ``min_size_to_sample`` split among the shards, ``min_diff`` and ``max_diff``
    divided by ``k`` (the shards' numbers sum to the table's). A part of 0 is stored as
    0 (a shard draws only once it holds an item anyway); this object, which checks a
    call's counts, says 1 there (RateLimiter's least)."""
    if k == 1:
        return limiter
    return RateLimiter(
        limiter.samples_per_insert,
        max(1, split(limiter.min_size_to_sample, k)[s]),
        limiter.min_diff / k,
        limiter.max_diff / k,
    )


def derived(settings: TableSettings, k: int = 1, shard: int = 0) -> list[str]:
    """What the Lua functions read: the limiter's numbers (shard ``shard`` of ``k``'s),
    the selectors' kinds and exponents, the tree fanout, and which ordered sets to
    keep."""
    lim = shard_limiter(settings.rate_limiter, k, shard)
    s, r = settings.sampler, settings.remover
    return [
        repr(lim.samples_per_insert),
        str(split(settings.rate_limiter.min_size_to_sample, k)[shard]),  # (0 allowed here)
        repr(lim.min_diff),
        repr(lim.max_diff),
        _kind(s),
        repr(s.exponent if isinstance(s, Prioritized) else 0.0),
        _kind(r),
        repr(r.exponent if isinstance(r, Prioritized) else 0.0),
        str(FANOUT),
        "1" if isinstance(s, (Fifo, Lifo)) or isinstance(r, (Fifo, Lifo)) else "0",
        "1" if isinstance(s, MaxHeap) or isinstance(r, MaxHeap) else "0",
    ]


def unshardable(settings: TableSettings) -> str | None:
    """Why a table with these settings keeps one shard, or None."""
    sampler = settings.sampler
    if isinstance(sampler, (Fifo, Lifo)):
        return (
            f"a {type(sampler).__name__} sampler needs one insertion order, and each shard "
            "keeps its own"
        )
    if isinstance(sampler, (MinHeap, MaxHeap)):
        return (
            f"a {type(sampler).__name__} sampler needs the one extreme priority of the "
            "whole table, and each shard knows only its own"
        )
    if settings.max_times_sampled:
        return (
            "a sharded sample holds its draws until every shard has drawn, while "
            "max_times_sampled retires an item between two draws of one sample"
        )
    return None


def open_table(
    name: Any,
    max_size: Any,
    dtypes: Any,
    shapes: Any,
    names: Any,
    *,
    sampler: Any,
    remover: Any,
    max_times_sampled: Any,
    rate_limiter: Any,
    seed: Any,
    wait_timeout: float,
    lease_time: float,
    shards: Any = None,
    default_shards: int = 1,
    owner_of: Callable[[int], str] | None = None,
) -> Op[list[TableHandle]]:
    """``rt_open``: create the table ``name`` (arguments as ``aqueue.ReplayTable``'s)
    over ``shards`` shards (None: as stored, or ``default_shards`` for a new table, 1
    where its settings need one), or check that the one stored has these settings; a
    handle per shard (``owner_of`` names a slot's primary, where the shards' tags are
    chosen: ``_core/_shards.py``).

    Raises:
        ElementSpecError: A bad argument (as in process), a dtype AQ1 cannot carry, a
            ``shards`` that is not None or an int in 1..max_size, ``shards > 1`` with
            settings that need one shard (the message says why), or a table (or queue)
            of that name exists with other settings (the message names the first
            field that differs, ``shards`` among them, the stored and the given value).
    """
    name = name_arg(name, "RedisReplayTable", "table name")
    owner = f"RedisReplayTable '{name}'"
    settings = table_settings(
        owner,
        max_size,
        dtypes,
        shapes,
        names,
        sampler=sampler,
        remover=remover,
        max_times_sampled=max_times_sampled,
        rate_limiter=rate_limiter,
        seed=seed,
    )
    make_spec(owner, dtypes, shapes, names)  # (refuses what AQ1 cannot carry)
    given = shards_arg(shards, owner, settings.max_size, "max_size")
    why = unshardable(settings)
    if given is not None and given > 1 and why is not None:
        raise aqueue.ElementSpecError(
            f"{owner}: shards={given} is not possible: {why}; use shards=1, or a Uniform "
            "or Prioritized sampler without max_times_sampled"
        )
    k = given if given is not None else 1 if why else min(default_shards, settings.max_size)
    tags = choose_tags(name, k, owner_of)
    gen, stored = yield from open_stored(
        TABLES, name, _stored(settings, k, 0, json.dumps(tags)), derived(settings, k)
    )
    if stored is not None:
        tags = _stored_tags(owner, name, stored.get("tags"))
        check_stored(owner, "table", tags, given)
        k = len(tags)
        mine = _stored(settings, k, 0, json.dumps(tags))
        compare_stored(
            TABLES, owner, mine, stored, same=_SAME, render=RENDER, skip=("shards", "tags")
        )

    def handle(gen: str, tag: str | None = None) -> TableHandle:
        return TableHandle(
            name=name,
            gen=gen,
            settings=settings,
            wait_timeout=wait_timeout,
            lease_time=lease_time,
            tag=tag,
        )

    handles = [handle(gen)]
    for s in range(1, k):
        mine = _stored(settings, k, s, json.dumps({"shard": s, "of": name}))
        meta = key_prefix(tags[s]) + "meta"
        gen_s, stored = yield from open_stored(TABLES, name, mine, derived(settings, k, s), meta)
        if stored is not None:
            compare_stored(TABLES, owner, mine, stored, same=_SAME, render=RENDER)
        handles.append(handle(gen_s, tags[s]))
    return handles


def _stored_tags(owner: str, name: str, stored: str | None) -> list[str]:
    """The shards' tags a table's root stores (a table created before shards existed
    has one shard).

    Raises:
        ElementSpecError: ``name`` is a shard of another table.
    """
    if stored is None:
        return [name]
    value = json.loads(stored)
    if isinstance(value, dict):
        raise aqueue.ElementSpecError(
            f"{owner}: '{name}' holds shard {value.get('shard')} of the replay table "
            f"{value.get('of')!r}; open that table instead"
        )
    return [str(t) for t in value]


def delete_table(name: Any) -> Op[bool]:
    """``rt_drop``: the table ``name`` with all its keys and items; True if it existed.

    Raises:
        ElementSpecError: ``name`` holds a queue.
    """
    name = name_arg(name, "RedisServer.delete_table", "table name")
    meta = key_prefix(name) + "meta"
    r = yield Call("rt_drop", meta, ["tags"])
    if isinstance(r, list) and r[1]:  # (the shards first: the root names them)
        for tag_ in _stored_tags("RedisServer.delete_table", name, text(r[1]))[1:]:
            yield Call("rt_drop", key_prefix(tag_) + "meta", [])
    r = yield Call("rt_drop", meta, [])
    if int(r) < 0:
        raise aqueue.ElementSpecError(
            f"RedisServer.delete_table: '{name}' is a queue; use delete_queue"
        )
    return bool(r)
