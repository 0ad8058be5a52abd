"""The operations every product shares, sans I/O, parametrised by the handle's product
(its functions' prefix and its noun): how an op undoes what it holds when it leaves
early, where a payload travels, the one-call ops (statistics, close, producer
registration and its heartbeat), and opening a shared object with its stored
settings and the reopen check. Each product's ``_ops.py`` holds the operations only it
has (a queue's take and put, a table's insert and sample).

Every op is a generator (an ``Op``, see ``_transport``); a driver performs its requests.

Invariants:
- ``undoing`` yields at most one undo call, and only after the op's own request
  failed; a failing undo is dropped (the server's expiries undo what it could not);
- ``open_shared`` creates the object with the given settings, or compares every
  stored setting with the given one and raises ElementSpecError naming the first that
  differs (TensorFlow's shared_name rule), rendered as users write it (``readable``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

import aqueue
from aqueue._queues._declare import format_shape

from ._handle import Handle, Product, key_prefix
from ._transport import Call, Op

__all__ = [
    "CLASS_OF",
    "INLINE_MAX",
    "Producers",
    "close",
    "compare_stored",
    "keep_producers",
    "open_shared",
    "open_stored",
    "producer_done",
    "readable",
    "register_producer",
    "stats",
    "text",
    "undoing",
]

T = TypeVar("T")

# Payloads shorter than this travel inline, through the Lua functions, instead of
# under their own keys: below it, a key per element costs the server more than Lua's
# per-byte cost (it interns and hashes every string it sees). Measured on Redis 7.0.
# Read at each call (tests patch it here).
INLINE_MAX = 1024

CLASS_OF = {
    "fifo": "RedisFIFOQueue",
    "shuffle": "RedisRandomShuffleQueue",
    "table": "RedisReplayTable",
    "traj": "RedisTrajectoryTable",
}
"""The stored ``kind`` of each product's objects and the class that opens it (a new
product adds its kinds here, so that a reopen under another class names them)."""


class Producers(Protocol):
    """The connection's producer bookkeeping, which its heartbeat refreshes."""

    def add_producer(self, handle: Handle, pid: str) -> None: ...

    def remove_producer(self, handle: Handle, pid: str) -> None: ...


def text(v: Any) -> str:
    """A reply field as str (redis-py gives bytes)."""
    return v.decode() if isinstance(v, bytes) else str(v)


def undoing(steps: Op[T], leave: Callable[[], Call | None]) -> Op[T]:
    """``steps``; when it ends with an exception, first the call ``leave()`` gives
    (None: nothing to undo), then the exception again. Best effort: if the server is
    unreachable, the op's registrations and leases expire there instead."""
    try:
        return (yield from steps)
    except GeneratorExit:  # closed unfinished: no request may be yielded any more
        raise
    except BaseException:
        call = leave()
        if call is not None:
            try:
                yield call
            except aqueue.QueueError:
                pass
        raise


# -- the one-call ops -------------------------------------------------------------------


def stats(h: Handle) -> Op[list[int]]:
    """``<prefix>stats``: the product's counters as ints (QueueClosedError: the object
    is gone)."""
    reply = yield Call(f"{h.product.functions}stats", h.key, [h.gen], ro=True)
    if not reply:
        raise h.gone()
    return [int(x) for x in reply]


def close(h: Handle, *args: str) -> Op[None]:
    """``<prefix>close``: closed for every process (idempotent); wakes the waiters."""
    yield Call(f"{h.product.functions}close", h.key, [h.gen, *args])


def register_producer(h: Handle) -> Op[str]:
    """One more registered producer of every process's count; its id
    (QueueClosedError: the object is closed, or gone)."""
    pid = uuid.uuid4().hex
    reply = yield Call(
        f"{h.product.functions}producer", h.key, [h.gen, "add", h.lease_ms, "1", pid]
    )
    status = text(reply[0])
    if status == "gone":
        raise h.gone()
    if status != "ok":
        raise aqueue.QueueClosedError(
            f"{h.product.noun} '{h.name}' is closed: cannot register a producer"
        )
    return pid


def producer_done(h: Handle, pid: str, clean: bool) -> Op[None]:
    """Producer ``pid`` ended: the last clean end of every process's producers closes
    the object (consumers drain it first); an unclean end closes it at once."""
    args = [h.gen, "done", h.lease_ms, "1" if clean else "0", pid]
    yield Call(f"{h.product.functions}producer", h.key, args)


def keep_producers(h: Handle, pids: Iterable[str]) -> Op[None]:
    """The heartbeat: producers ``pids`` are alive for another ``lease_time``."""
    args = [h.gen, "beat", h.lease_ms, "1", *sorted(pids)]
    yield Call(f"{h.product.functions}producer", h.key, args)


# -- opening ----------------------------------------------------------------------------


def open_shared(
    product: Product,
    name: str,
    owner: str,
    given: Mapping[str, str],
    derived: Sequence[str] = (),
    *,
    same: str,
    render: Mapping[str, Callable[[Any], str]] | None = None,
    tail: list[str | None] | None = None,
) -> Op[str]:
    """``<prefix>open``: create ``name`` with the settings ``given`` (field -> stored
    text, in the order the function takes them, ``derived`` after them: what the Lua
    reads), or check that the stored ones are the same; the object's generation.

    When the object exists and ``tail`` is a list, the stored values the function
    returns after the compared settings (a product's own, e.g. a queue's layout) are
    appended to it.

    Raises:
        ElementSpecError: A stored setting differs from the given one (the message
            names the field, both values as users write them, and ``same``: which
            settings processes sharing it must agree on).
    """
    gen, stored = yield from open_stored(product, name, given, derived, tail=tail)
    if stored is not None:
        compare_stored(product, owner, given, stored, same=same, render=render)
    return gen


def open_stored(
    product: Product,
    name: str,
    given: Mapping[str, str],
    derived: Sequence[str] = (),
    meta: str | None = None,
    tail: list[str | None] | None = None,
) -> Op[tuple[str, dict[str, str | None] | None]]:
    """``<prefix>open`` of ``name`` (at ``meta``, its tag's meta key by default) with
    ``given`` and ``derived`` as ``open_shared`` sends them: its generation, and None
    if this call created it, else the stored settings (field -> text, None where a
    field is not stored); ``tail`` as ``open_shared``'s."""
    order = list(given)
    args = [uuid.uuid4().hex, *(given[f] for f in order), *derived]
    key = meta if meta is not None else key_prefix(name) + "meta"
    reply = yield Call(f"{product.functions}open", key, args)
    texts = [None if v is None else text(v) for v in reply]
    gen = texts[1]
    assert gen is not None
    if texts[0] != "exists":
        return gen, None
    if tail is not None:
        tail.extend(texts[2 + len(order) :])
    return gen, dict(zip(order, texts[2:]))


def compare_stored(
    product: Product,
    owner: str,
    given: Mapping[str, str],
    stored: Mapping[str, str | None],
    *,
    same: str,
    render: Mapping[str, Callable[[Any], str]] | None = None,
    skip: Sequence[str] = (),
) -> None:
    """Refuse stored settings that differ from ``given`` (fields in ``skip`` are not
    compared: the caller adopts them).

    Raises:
        ElementSpecError: As ``open_shared``.
    """
    for field in given:
        if field in skip or stored.get(field) == given[field]:
            continue
        was = readable(field, stored.get(field), product, render)
        now = readable(field, given[field], product, render)
        raise aqueue.ElementSpecError(
            f"{owner}: the {product.short} already exists on the server with "
            f"{field} {was}, but {now} was given (processes sharing a "
            f"{product.short} must open it with the same {same})"
        )


def readable(
    field: str,
    stored: str | None,
    product: Product,
    render: Mapping[str, Callable[[Any], str]] | None = None,
) -> str:
    """A stored setting in the notation users write it in: the class of a ``kind``,
    numpy dtype names, shape tuples, component names, and a product's own fields
    through ``render`` (field -> its JSON value as text); as stored when it is
    foreign."""
    if stored is None:
        return "None"
    if field == "kind":
        return CLASS_OF.get(stored, repr(stored))
    if field == "format":
        version = "this" if stored == product.format else "another"
        return f"{stored} (the stored layout of {version} aqueue version)"
    try:
        if render is not None and field in render:
            return render[field](json.loads(stored))
        if field not in ("dtypes", "shapes", "names"):
            return stored
        value: Any = json.loads(stored)
        if value is None:
            return "None"
        if field == "dtypes":
            texts = [str(np.dtype(d)) for d in value]
        elif field == "shapes":
            texts = [format_shape(s) for s in value]
        else:
            texts = [repr(str(n)) for n in value]
    except (ValueError, TypeError, aqueue.ElementSpecError):
        return stored
    return texts[0] if len(texts) == 1 else f"({', '.join(texts)})"
