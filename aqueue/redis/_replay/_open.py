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
from collections.abc import Sequence
from typing import Any

import aqueue
from aqueue._queues._spec import ElementSpec
from aqueue._replay._checks import TableSettings, table_settings
from aqueue._replay._limiter import limiter_config, limiter_from_config
from aqueue._replay._selectors import (
    Fifo,
    Lifo,
    MaxHeap,
    Prioritized,
    Selector,
    selector_config,
    selector_from_config,
)

from .._core._handle import key_prefix
from .._core._shared import open_shared
from .._core._spec import make_spec, name_arg
from .._core._transport import Call, Op
from ._handle import TABLES, TableHandle

__all__ = [
    "FANOUT",
    "RENDER",
    "delete_table",
    "derived",
    "open_table",
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


def _stored(settings: TableSettings) -> dict[str, str]:
    """The settings as the server stores them (compared on reopen), in JSON, in the
    order ``rt_open`` takes them."""
    return {
        "kind": "table",
        "max_size": str(settings.max_size),
        **stored_fields(settings.spec, settings.shapes),
        **stored_selection(settings),
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


def derived(settings: TableSettings) -> list[str]:
    """What the Lua functions read: the limiter's numbers, the selectors' kinds and
    exponents, the tree fanout, and which ordered sets to keep."""
    lim = settings.rate_limiter
    s, r = settings.sampler, settings.remover
    return [
        repr(lim.samples_per_insert),
        str(lim.min_size_to_sample),
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
) -> Op[TableHandle]:
    """``rt_open``: create the table ``name`` (arguments as ``aqueue.ReplayTable``'s),
    or check that the one stored has these settings.

    Raises:
        ElementSpecError: A bad argument (as in process), a dtype AQ1 cannot carry, or a
            table (or queue) of that name exists with other settings (the message names
            the first field that differs, the stored and the given value).
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
    given = _stored(settings)
    gen = yield from open_shared(
        TABLES, name, settings.owner, given, derived(settings), same=_SAME, render=RENDER
    )
    return TableHandle(
        name=name, gen=gen, settings=settings, wait_timeout=wait_timeout, lease_time=lease_time
    )


def delete_table(name: Any) -> Op[bool]:
    """``rt_drop``: the table ``name`` with all its keys and items; True if it existed.

    Raises:
        ElementSpecError: ``name`` holds a queue.
    """
    name = name_arg(name, "RedisServer.delete_table", "table name")
    r = yield Call("rt_drop", key_prefix(name) + "meta", [])
    if int(r) < 0:
        raise aqueue.ElementSpecError(
            f"RedisServer.delete_table: '{name}' is a queue; use delete_queue"
        )
    return bool(r)
