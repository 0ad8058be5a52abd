"""A queue over shards, sans I/O: its layout, opening, deleting, closing and counting,
and the undo of a sharded op's one-shard steps (``release``, ``drop``, ``guarded``).

A queue of K shards is K queues of today's engine on the server, each under a hash tag
of its own, so every function stays atomic in one slot of a Redis Cluster:

- shard 0 is the queue ``name`` itself (``aq:{name}:``), so a queue of one shard is
  exactly a queue without shards (the same keys; existing queues open unchanged);
- shard s >= 1 is ``name#s.<salt>``, chosen as a replay table's are
  (``_core/_shards.py``: distinct primaries where it can, no round trip); the names
  are stored, so every process uses the same ones;
- shard 0's ``layout`` key stores ``{"shards": K, "capacity": C, "tags": [...]}``
  (written by the same ``aq_open`` that creates it); each other shard's stores
  ``{"root": name}``, so opening a shard by its name is refused;
- the capacity ``C`` is the total: shard s holds ``C // K`` (+1 for ``s < C % K``);
- producers are registered on shard 0 only; ``close`` closes shards K-1..1, then
  shard 0, so "shard 0 closed" implies that a close reached every shard (a closer that
  died midway is finished by the next close, or by any consumer that finds shard 0
  closed and another shard open, ``ends_all``).

Invariants: the shard count and names never change after creation; an explicit
``shards`` different from the stored count raises ElementSpecError naming ``shards``.
"""

from __future__ import annotations

import json
from typing import Any

import aqueue

from .._core._handle import key_prefix
from .._core._shared import close, stats
from .._core._transport import Call, Op, Read

__all__ = [
    "Layout",
    "close_all",
    "drop",
    "ends_all",
    "guarded",
    "parse_layout",
    "read_layout",
    "read_rows",
    "release",
    "total_stats",
]

Layout = dict[str, Any]
"""The stored layout of a sharded queue's shard 0 (see the module docstring)."""


def read_layout(name: str) -> Op[Layout | None]:
    """The stored layout of ``name`` (None: no such queue, or one of one shard)."""
    value = (yield Read([key_prefix(name) + "layout"]))[0]
    return None if value is None else parse_layout(value)


def parse_layout(value: Any) -> Layout:
    """A stored layout as a dict (bytes or str JSON)."""
    layout: Layout = json.loads(value.decode() if isinstance(value, bytes) else value)
    return layout


def close_all(handles: list[Any], cancel: str) -> Op[None]:
    """``aq_close`` on shards K-1..1, then shard 0 (see the module docstring); one
    handle: the queue of one shard."""
    for h in reversed(handles):
        yield from close(h, cancel)


def ends_all(handles: list[Any], rows: list[list[int]]) -> Op[None]:
    """Close the shards still open once shard 0 is closed (its last producer ended or
    expired there); ``rows`` are the shards' ``aq_stats`` replies, shard 0 first."""
    if rows[0][1]:
        for h, row in zip(handles[1:], rows[1:]):
            if not row[1]:
                yield from close(h, str(rows[0][2]))


def read_rows(handles: list[Any], end: bool = False) -> Op[list[list[int]]]:
    """Every shard's ``aq_stats`` counters, shard 0 first (QueueClosedError: a shard
    is gone); with ``end``, the shards still open once shard 0 closed are closed
    (``ends_all``)."""
    rows = []
    for h in handles:
        rows.append((yield from stats(h)))
    if end:
        yield from ends_all(handles, rows)
    return rows


def total_stats(handles: list[Any], end: bool = False) -> Op[list[int]]:
    """The counters of every shard (``read_rows``) summed; closed: shard 0's; the peak:
    the largest of the shards' peaks, since they need not coincide; the waiting tasks:
    the most any shard has, since a sharded op that waits registers on every shard, and
    the enqueues on hold (each on one shard, waiting for their process's turn)."""
    rows = yield from read_rows(handles, end)
    total = [sum(col) for col in zip(*rows)]
    total[1], total[2] = rows[0][1], rows[0][2]
    for col in (5, 6, 7):
        total[col] = max(row[col] for row in rows)
    total[6] += total[10]
    return total


def release(live: list[Any]) -> Op[None]:
    """The ``aq_leave`` of every sub-step in ``live`` (emptied first), the last taken
    first (each lease goes back to the head of its shard, so a shard's elements keep
    their order), each run even when an earlier one's wait for its reply was cancelled
    (the call itself ran)."""
    todo = list(live)
    live.clear()
    error: BaseException | None = None
    for sub in reversed(todo):
        call: Call | None = sub.leave_call()
        if call is None:
            continue
        try:
            yield call
        except aqueue.QueueError:
            pass  # unreachable or gone: the server's expiries undo it
        except BaseException as exc:  # a cancellation: the call ran; undo the rest too
            error = exc
    if error is not None:
        raise error


def drop(live: list[Any], subs: list[Any]) -> Op[None]:
    """Undo ``subs`` now (deregister, give back) and forget them from ``live``."""
    live[:] = [s for s in live if s not in subs]
    yield from release(list(subs))


def guarded(steps: Op[Any], live: list[Any]) -> Op[Any]:
    """``steps``; when it ends with an exception, ``release(live)`` first."""
    try:
        return (yield from steps)
    except GeneratorExit:
        raise
    except BaseException:
        yield from release(live)
        raise
