"""Opening and deleting a queue on the server, sans I/O: its settings checked (the
in-process rules), stored by the first process that opens its name and compared by
every later one (the core's ``open_shared``), then the handle its operations share.

Invariant: a queue's stored settings are its kind, capacity, min_after_dequeue,
dtypes, shapes, names and the key layout's format, in that order (``aq_open`` takes
and returns them so); processes sharing a name must give the same ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aqueue

from .._core._handle import key_prefix
from .._core._shards import choose_tags, shards_arg, split
from .._core._shared import open_shared
from .._core._spec import int_arg, make_spec, name_arg
from .._core._transport import Call, Op
from ._handle import QUEUES, QueueHandle
from ._shards import Layout, parse_layout, read_layout

__all__ = ["delete_queue", "open_queue"]

_CLASSES = {"fifo": "RedisFIFOQueue", "shuffle": "RedisRandomShuffleQueue"}
_SAME = "kind, capacity, shards, dtypes, shapes, names and min_after_dequeue"


def open_queue(
    kind: str,
    name: Any,
    capacity: Any,
    mad: Any,
    dtypes: Any,
    shapes: Any,
    names: Any,
    seed: Any,
    *,
    lease_time: float,
    wait_timeout: float,
    max_call_bytes: int,
    shards: Any = None,
    default_shards: int = 1,
    owner_of: Callable[[int], str] | None = None,
) -> Op[list[QueueHandle]]:
    """Open (creating if needed) the queue ``name`` of ``kind`` ("fifo" or "shuffle"):
    the handles of its shards, shard 0 first (one for a queue of one shard).

    ``shards``: None (as stored; on creation ``default_shards``) or the count, which
    must be the stored one; ``owner_of`` names a slot's primary (None on one server),
    to spread a new queue's shards over the nodes (``_core/_shards.py``).

    Raises:
        ElementSpecError: A bad argument (as in process), a dtype AQ1 cannot carry, or
            a queue (or table) of that name exists with other settings.
    """
    cls = _CLASSES[kind]
    name = name_arg(name, cls, "queue name")
    owner_text = f"{cls} '{name}'"
    capacity = int_arg(capacity, "capacity", owner_text, 1)
    mad = int_arg(mad, "min_after_dequeue", owner_text, 0)
    if mad >= capacity:
        raise aqueue.ElementSpecError(
            f"{owner_text}: min_after_dequeue must be < capacity ({capacity}), got {mad}"
        )
    if seed is not None:
        seed = int_arg(seed, "seed", owner_text, 0)
    # Every shard keeps its part of min_after_dequeue and must be able to release one
    # element past it: at most capacity - min_after_dequeue shards.
    most, most_name = capacity - mad, "capacity - min_after_dequeue" if mad else "capacity"
    explicit = shards_arg(shards, owner_text, most, most_name)
    spec = make_spec(owner_text, dtypes, shapes, names)
    timings = {"lease_time": lease_time, "wait_timeout": wait_timeout}

    def settings(cap: int, mad_s: int) -> dict[str, str]:
        return {
            "kind": kind,
            "capacity": str(cap),
            "min_after_dequeue": str(mad_s),
            "dtypes": json.dumps([dt.str for dt in spec.dtypes]),
            "shapes": json.dumps(None if spec.shapes is None else [list(s) for s in spec.shapes]),
            "names": json.dumps(None if spec.names is None else list(spec.names)),
            "format": QUEUES.format,
        }

    def handle(tag: str, gen: str, cap: int, mad_s: int) -> QueueHandle:
        h = QueueHandle(
            name=tag,
            kind=kind,
            gen=gen,
            capacity=cap,
            min_after_dequeue=mad_s,
            spec=spec,
            seed=seed,
            max_call_bytes=max_call_bytes,
            **timings,
        )
        h.name = name  # messages name the queue; the keys stay the shard's (prefix)
        return h

    layout = yield from read_layout(name)
    while True:
        stored_count = None if layout is None else _stored_shards(layout, owner_text)
        if layout is not None:
            _same(owner_text, "capacity", layout["capacity"], capacity)
        if explicit is not None and stored_count is not None and explicit != stored_count:
            _differs(owner_text, stored_count, explicit)
        count = min(explicit or stored_count or default_shards, most)
        tags = list(layout["tags"]) if layout is not None else choose_tags(name, count, owner_of)
        caps, mads = split(capacity, count), split(mad, count)
        derived = []
        if count > 1:
            derived = [json.dumps({"shards": count, "capacity": capacity, "tags": tags})]
        stored: list[str | None] = []
        try:
            gen = yield from open_shared(
                QUEUES,
                name,
                owner_text,
                settings(caps[0], mads[0]),
                derived,
                same=_SAME,
                tail=stored,
            )
        except aqueue.ElementSpecError:
            now = parse_layout(stored[0]) if stored and stored[0] else None
            if now is None and count > 1:  # it exists, as a queue of one shard
                explicit = _one_shard(owner_text, explicit)
                layout = None
                continue
            if now is None or now == layout:
                raise  # a setting differs indeed
            layout = now  # created meanwhile by another process, with another layout
            continue
        got = parse_layout(stored[0]) if stored and stored[0] else None
        if got is not None and "root" in got:
            _stored_shards(got, owner_text)
        if stored and got != (None if count == 1 else json.loads(derived[0])):
            if got is None:  # it exists, as a queue of one shard
                explicit = _one_shard(owner_text, explicit)
            layout = got  # (or created meanwhile with another layout)
            continue
        break
    handles = [handle(name, gen, caps[0], mads[0])]
    for tag, cap, mad_s in zip(tags[1:], caps[1:], mads[1:]):
        mark = [json.dumps({"root": name})]
        shard_gen = yield from open_shared(
            QUEUES, tag, owner_text, settings(cap, mad_s), mark, same=_SAME
        )
        handles.append(handle(tag, shard_gen, cap, mad_s))
    return handles


def _stored_shards(layout: Layout, owner_text: str) -> int:
    if "root" in layout:
        raise aqueue.ElementSpecError(
            f"{owner_text}: that name is a shard of the sharded queue '{layout['root']}'; "
            "open that queue instead"
        )
    return int(layout["shards"])


def _one_shard(owner_text: str, explicit: int | None) -> int:
    """The count to open a queue of one shard with (an explicit other: refused)."""
    if explicit is not None and explicit != 1:
        _differs(owner_text, 1, explicit)
    return 1


def _same(owner_text: str, field: str, stored: Any, given: Any) -> None:
    if stored != given:
        raise aqueue.ElementSpecError(
            f"{owner_text}: the queue already exists on the server with {field} {stored}, "
            f"but {given} was given (processes sharing a queue must open it with the "
            f"same {_SAME})"
        )


def _differs(owner_text: str, stored: int, given: int) -> None:
    raise aqueue.ElementSpecError(
        f"{owner_text}: the queue already exists on the server with shards {stored}, "
        f"but shards={given} was given (pass shards=None to open it as stored, or the "
        "stored count)"
    )


def delete_queue(name: Any) -> Op[bool]:
    """``aq_delete``: the queue ``name`` and all its keys (every shard's, shard 0
    last); True if it existed.

    Raises:
        ElementSpecError: ``name`` holds a replay table.
    """
    name = name_arg(name, "RedisServer.delete_queue", "queue name")
    layout = yield from read_layout(name)
    if layout is not None and "root" in layout:
        raise aqueue.ElementSpecError(
            f"RedisServer.delete_queue: '{name}' is a shard of the sharded queue "
            f"'{layout['root']}'; delete that queue instead"
        )
    for tag in reversed(layout["tags"][1:] if layout is not None else []):
        yield Call("aq_delete", key_prefix(tag) + "meta", [])  # shard 0 last
    r = yield Call("aq_delete", key_prefix(name) + "meta", [])
    if int(r) < 0:
        raise aqueue.ElementSpecError(
            f"RedisServer.delete_queue: '{name}' is a replay table; use delete_table"
        )
    return bool(r)
