"""Opening and deleting a queue on the server, sans I/O: its settings checked (the
in-process rules), stored by the first process that opens its name and compared by
every later one (the core's ``open_shared``), then the handle its operations share.

Invariant: a queue's stored settings are its kind, capacity, min_after_dequeue,
dtypes, shapes, names and the key layout's format, in that order (``aq_open`` takes
and returns them so); processes sharing a name must give the same ones.
"""

from __future__ import annotations

import json
from typing import Any

import aqueue

from .._core._handle import key_prefix
from .._core._shared import open_shared
from .._core._spec import int_arg, make_spec, name_arg
from .._core._transport import Call, Op
from ._handle import QUEUES, QueueHandle

__all__ = ["delete_queue", "open_queue"]

_CLASSES = {"fifo": "RedisFIFOQueue", "shuffle": "RedisRandomShuffleQueue"}
_SAME = "kind, capacity, dtypes, shapes, names and min_after_dequeue"


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
) -> Op[QueueHandle]:
    """Open (creating if needed) the queue ``name`` of ``kind`` ("fifo" or "shuffle").

    Raises:
        ElementSpecError: A bad argument (as in process), a dtype AQ1 cannot carry, or
            a queue (or table) of that name exists with other settings.
    """
    cls = _CLASSES[kind]
    name = name_arg(name, cls, "queue name")
    owner = f"{cls} '{name}'"
    capacity = int_arg(capacity, "capacity", owner, 1)
    mad = int_arg(mad, "min_after_dequeue", owner, 0)
    if mad >= capacity:
        raise aqueue.ElementSpecError(
            f"{owner}: min_after_dequeue must be < capacity ({capacity}), got {mad}"
        )
    if seed is not None:
        seed = int_arg(seed, "seed", owner, 0)
    spec = make_spec(owner, dtypes, shapes, names)
    given = {
        "kind": kind,
        "capacity": str(capacity),
        "min_after_dequeue": str(mad),
        "dtypes": json.dumps([dt.str for dt in spec.dtypes]),
        "shapes": json.dumps(None if spec.shapes is None else [list(s) for s in spec.shapes]),
        "names": json.dumps(None if spec.names is None else list(spec.names)),
        "format": QUEUES.format,
    }
    gen = yield from open_shared(QUEUES, name, owner, given, same=_SAME)
    return QueueHandle(
        name=name,
        kind=kind,
        gen=gen,
        capacity=capacity,
        min_after_dequeue=mad,
        spec=spec,
        seed=seed,
        lease_time=lease_time,
        wait_timeout=wait_timeout,
        max_call_bytes=max_call_bytes,
    )


def delete_queue(name: Any) -> Op[bool]:
    """``aq_delete``: the queue ``name`` and all its keys; True if it existed.

    Raises:
        ElementSpecError: ``name`` holds a replay table.
    """
    name = name_arg(name, "RedisServer.delete_queue", "queue name")
    r = yield Call("aq_delete", key_prefix(name) + "meta", [])
    if int(r) < 0:
        raise aqueue.ElementSpecError(
            f"RedisServer.delete_queue: '{name}' is a replay table; use delete_table"
        )
    return bool(r)
