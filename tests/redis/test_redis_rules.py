"""One table of take and put cases, run through both implementations of the rules.

The in-process queues decide with ``Engine.take_count`` and ``Engine.put_count``
(aqueue/_queues/_engine.py); a Redis queue decides in its Lua library (``take_count``
and ``put_count`` in aqueue/redis/_queues/_functions.lua, called by ``aq_take`` and
``aq_put``).
Every row is run through the Python rule, and through the Lua function on the real
server: a Redis queue is brought to the row's state (its size, its elements claimed
by a progressive take, a pending enqueue, closed or not, a waiting dequeue), the
function is called once, and its reply is read as the same outcome. Rows where the
backends differ by design carry Lua's outcome and the reason; every other row must
agree. A row with no ``min_after_dequeue`` runs on both a FIFO and a shuffle queue.

Take outcomes: ``take k`` (the request gets k elements in all, claimed ones
included), ``wait``, ``oor`` (OutOfRangeError), ``empty`` (QueueEmpty: a ``_nowait``
twin that cannot complete). Put outcomes: ``admit k`` (all k), ``admit j, wait`` (j
now, the rest waits), ``wait`` (none yet), ``full`` (QueueFull: a ``_nowait`` twin),
``closed`` (QueueClosedError).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import aqueue.redis
from aqueue._queues._engine import Engine
from aqueue._queues._requests import MANY, ONE, SOME, UP_TO, GetRequest
from aqueue._queues._tuples import DequeStorage
from aqueue.redis._core._transport import Call

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

NO_NOWAIT = (
    "Redis has no _nowait twins (the Redis guide: a server call cannot complete without "
    "awaiting); the same request without nowait waits"
)
NO_RESERVATION = (
    "Redis admits an all-or-nothing batch only when it fits: no reservation spans "
    "processes, so a waiting dequeue that would make room does not let it in early "
    "(the Redis guide: 'a timed thread enqueue_many ... waits until the whole batch fits')"
)


@dataclass(frozen=True)
class Take:
    """A dequeue request of ``mode`` for ``n`` against a queue in a given state."""

    capacity: int
    floor: int  # min_after_dequeue
    size: int  # elements stored (claimed ones not counted)
    mode: str  # one | many | upto | some
    n: int
    want: str  # the outcome on both backends (Python's, where they differ)
    closed: bool = False
    pending: bool = False  # an enqueue is pending (the queue is not final when closed)
    claimed: int = 0  # held by this (progressive) request from an earlier step
    nowait: bool = False
    lua: str | None = None  # Lua's outcome where it differs by design
    why: str = ""


@dataclass(frozen=True)
class Put:
    """An enqueue of ``k`` elements against a queue in a given state (no floor)."""

    capacity: int
    size: int
    k: int
    want: str
    atomic: bool = False  # all or nothing (a timed thread enqueue_many)
    nowait: bool = False
    closed: bool = False
    cancel: bool = False  # closed with cancel_pending_enqueues
    pending: bool = False  # this enqueue was already pending before the close
    head: int = 0  # a dequeue_many(head) waits at the head
    lua: str | None = None
    why: str = ""


TAKES = [
    # exact n, FIFO rules (no floor)
    Take(8, 0, 5, "many", 3, "take 3"),
    Take(8, 0, 2, "many", 3, "wait"),
    Take(8, 0, 2, "many", 3, "oor", closed=True),
    Take(8, 0, 2, "many", 3, "wait", closed=True, pending=True),
    Take(8, 0, 3, "many", 0, "take 0"),
    Take(8, 0, 0, "one", 1, "wait"),
    Take(8, 0, 1, "one", 1, "take 1"),
    Take(8, 0, 0, "one", 1, "oor", closed=True),
    # up to n: all n while open, the rest once final
    Take(8, 0, 2, "upto", 3, "wait"),
    Take(8, 0, 2, "upto", 3, "take 2", closed=True),
    Take(8, 0, 0, "upto", 3, "oor", closed=True),
    Take(8, 0, 0, "upto", 3, "wait", closed=True, pending=True),
    Take(8, 0, 2, "upto", 3, "wait", closed=True, pending=True),
    # a burst: 1..n as soon as one can be taken
    Take(8, 0, 7, "some", 5, "take 5"),
    Take(8, 0, 2, "some", 5, "take 2"),
    Take(8, 0, 1, "some", 5, "take 1"),
    Take(8, 0, 0, "some", 5, "wait"),
    Take(8, 0, 3, "some", 5, "take 3", closed=True),
    Take(8, 0, 0, "some", 5, "oor", closed=True),
    Take(8, 0, 0, "some", 5, "wait", closed=True, pending=True),
    # the floor (min_after_dequeue) of a shuffle queue, lifted by close
    Take(10, 3, 5, "many", 2, "take 2"),
    Take(10, 3, 4, "many", 2, "wait"),
    Take(10, 3, 4, "many", 2, "take 2", closed=True),
    Take(10, 3, 4, "one", 1, "take 1"),
    Take(10, 3, 3, "one", 1, "wait"),
    Take(10, 3, 5, "some", 8, "take 2"),
    Take(10, 3, 4, "some", 8, "take 1"),
    Take(10, 3, 3, "some", 8, "wait"),
    Take(10, 3, 3, "some", 8, "take 3", closed=True),
    Take(10, 3, 2, "upto", 4, "take 2", closed=True),
    # progressive requests (n > capacity - floor), holding claimed elements
    Take(4, 0, 2, "many", 6, "wait", claimed=3),
    Take(4, 0, 3, "many", 6, "take 6", claimed=3),
    Take(4, 0, 1, "many", 6, "oor", claimed=3, closed=True),
    Take(4, 0, 1, "upto", 6, "take 4", claimed=3, closed=True),
    Take(4, 0, 0, "upto", 6, "take 3", claimed=3, closed=True),
    Take(6, 2, 2, "many", 5, "wait", claimed=2),
    Take(6, 2, 2, "many", 5, "oor", claimed=2, closed=True),
    Take(6, 2, 3, "upto", 5, "take 5", claimed=2, closed=True),
    # the _nowait twins (in process only)
    Take(8, 0, 2, "upto", 3, "take 2", nowait=True, lua="wait", why=NO_NOWAIT),
    Take(8, 0, 2, "many", 3, "empty", nowait=True, lua="wait", why=NO_NOWAIT),
    Take(8, 0, 0, "some", 5, "empty", nowait=True, lua="wait", why=NO_NOWAIT),
    Take(8, 0, 4, "many", 3, "take 3", nowait=True),
    Take(8, 0, 0, "one", 1, "oor", nowait=True, closed=True),
]

PUTS = [
    Put(4, 1, 2, "admit 2"),
    Put(4, 3, 3, "admit 1, wait"),
    Put(4, 4, 2, "wait"),
    Put(4, 0, 6, "admit 4, wait"),
    Put(4, 2, 2, "admit 2", atomic=True),
    Put(4, 3, 2, "wait", atomic=True),
    Put(4, 3, 2, "full", nowait=True, lua="wait", why=NO_NOWAIT),
    Put(4, 2, 2, "admit 2", nowait=True),
    # a waiting dequeue_many(4) at the head, 2 stored, room for 2
    Put(4, 2, 3, "admit 2, wait", head=4),
    Put(4, 2, 3, "admit 3", atomic=True, head=4, lua="wait", why=NO_RESERVATION),
    Put(4, 2, 3, "admit 3", nowait=True, head=4, lua="wait", why=NO_RESERVATION),
    # closed: new enqueues refused; a pending one finishes unless cancelled
    Put(4, 1, 2, "closed", closed=True),
    Put(4, 1, 2, "admit 2", closed=True, pending=True),
    Put(4, 3, 2, "admit 1, wait", closed=True, pending=True),
    Put(4, 1, 2, "closed", closed=True, cancel=True, pending=True),
]

_MODES = {"one": ONE, "many": MANY, "upto": UP_TO, "some": SOME}


def _engine(capacity: int, floor: int, closed: bool) -> Engine:
    """An engine in the admission state of a row (its storage is never read here)."""
    storage = DequeStorage((np.dtype(np.int64),), pad=False)
    engine = Engine(capacity, storage, name="rules", min_after_dequeue=floor)
    engine.closed = closed
    return engine


def python_take(c: Take) -> str:
    """The in-process decision: ``Engine.take_count``, then what the engine does with
    -1 (OutOfRangeError when final, QueueEmpty for a _nowait twin, else wait)."""
    engine = _engine(c.capacity, c.floor, c.closed)
    final = c.closed and not c.pending
    need = c.n - c.claimed
    avail = c.size - (0 if c.closed else c.floor)  # (what a dequeue may take of the size)
    k = engine.take_count(_MODES[c.mode], need, c.claimed, avail, final, c.nowait)
    if k >= 0:
        return f"take {c.claimed + k}"
    if final:
        return "oor"
    return "empty" if c.nowait else "wait"


def python_put(c: Put) -> str:
    """The in-process decision: a closed queue refuses new enqueues and rejects pending
    ones on cancel_pending_enqueues; else ``Engine.put_count`` (a _nowait twin is all
    or nothing)."""
    engine = _engine(c.capacity, 0, c.closed)
    if c.closed and (c.cancel or not c.pending):
        return "closed"
    head = GetRequest(MANY, c.head, c.head > c.capacity) if c.head else None
    k = engine.put_count(c.k, c.size, c.atomic or c.nowait, head)
    if k == c.k:
        return f"admit {k}"
    if c.nowait:
        return "full"
    return "wait" if k == 0 else f"admit {k}, wait"


def kinds(floor: int) -> list[str]:
    return ["fifo", "shuffle"] if floor == 0 else ["shuffle"]


async def open_q(srv: Any, kind: str, capacity: int, floor: int) -> Any:
    name = f"rules-{uuid.uuid4().hex[:12]}"
    if kind == "fifo":
        return await srv.fifo_queue(name, capacity, np.int64, ())
    return await srv.random_shuffle_queue(name, capacity, floor, np.int64, (), seed=0)


def _call(q: Any, fn: str, *args: Any) -> Call:
    return Call(fn, q._h.key, [q._h.gen, *args])


async def lua_take(srv: Any, kind: str, c: Take) -> str:
    """Bring a Redis queue to the row's state, call ``aq_take`` once, read the reply."""
    q = await open_q(srv, kind, c.capacity, c.floor)
    h, t = q._h, q._t
    lease = uuid.uuid4().hex
    progressive = c.mode in ("many", "upto") and c.n > c.capacity - c.floor
    args = [lease, lease, c.mode, c.n, h.lease_ms, h.reg_ms, "1" if progressive else "0"]
    take = _call(q, "aq_take", *args, *h.rands(c.n))
    if c.claimed:  # an earlier step of this progressive request claimed `claimed`
        assert progressive
        assert c.size >= c.floor
        await q.enqueue_many(np.arange(c.claimed + c.floor))
        assert await t.call(take) == [b"wait", c.claimed]
        if c.size > c.floor:
            await q.enqueue_many(np.arange(c.size - c.floor))
    elif c.size:
        await q.enqueue_many(np.arange(c.size))
    if c.pending:  # an enqueue that sends nothing yet registers as pending
        await t.call(_call(q, "aq_put", uuid.uuid4().hex, "0", 1, h.reg_ms))
    if c.closed:
        await q.aclose()
    assert (await q.statistics()).size == c.size
    reply = await t.call(take)
    await srv.delete_queue(q.name)
    status = reply[0].decode()
    return f"take {int(reply[1])}" if status == "ok" else status


async def lua_put(srv: Any, kind: str, c: Put) -> str:
    """Bring a Redis queue to the row's state, call ``aq_put`` once with ``k`` inline
    payloads, read the reply."""
    q = await open_q(srv, kind, c.capacity, 0)
    h, t = q._h, q._t
    if c.size:
        await q.enqueue_many(np.arange(c.size))
    if c.head:  # a waiting dequeue_many(head)
        args = [uuid.uuid4().hex, uuid.uuid4().hex, "many", c.head, h.lease_ms, h.reg_ms, "0"]
        assert (await t.call(_call(q, "aq_take", *args)))[0] == b"wait"
    wid = uuid.uuid4().hex
    atomic = "1" if c.atomic or c.nowait else "0"
    if c.pending:  # registered before the close: it sent nothing yet
        await t.call(_call(q, "aq_put", wid, atomic, c.k, h.reg_ms))
    if c.closed:
        await q.aclose(cancel_pending_enqueues=c.cancel)
    payloads = h.codec.encode_batch([np.arange(100, 100 + c.k)], c.k)
    reply = await t.call(_call(q, "aq_put", wid, atomic, c.k, h.reg_ms, *payloads))
    await srv.delete_queue(q.name)
    if reply[0] != b"ok":
        return reply[0].decode()
    admitted = int(reply[1])
    if admitted == c.k:
        return f"admit {admitted}"
    return "wait" if admitted == 0 else f"admit {admitted}, wait"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # server calls only: the backends are the contract tests' subject


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=30.0, wait_timeout=2.0) as server:
        yield server


def _label(c: Take | Put) -> str:
    flags = [f for f in ("closed", "pending", "nowait", "atomic", "cancel") if getattr(c, f, 0)]
    if isinstance(c, Take):
        state = f"cap{c.capacity} floor{c.floor} size{c.size} claimed{c.claimed}"
        return f"{c.mode}({c.n}) {state} {' '.join(flags)} -> {c.want}".strip()
    state = f"cap{c.capacity} size{c.size} head{c.head}"
    return f"put({c.k}) {state} {' '.join(flags)} -> {c.want}".strip()


@pytest.mark.parametrize("case", TAKES, ids=_label)
async def test_take_rule(srv: Any, case: Take) -> None:
    """The row's outcome from Engine.take_count and from aq_take (per queue kind)."""
    assert python_take(case) == case.want
    for kind in kinds(case.floor):
        assert await lua_take(srv, kind, case) == (case.lua or case.want), kind


@pytest.mark.parametrize("case", PUTS, ids=_label)
async def test_put_rule(srv: Any, case: Put) -> None:
    """The row's outcome from Engine.put_count and from aq_put (per queue kind)."""
    assert python_put(case) == case.want
    for kind in kinds(0):
        assert await lua_put(srv, kind, case) == (case.lua or case.want), kind


def test_every_difference_is_explained() -> None:
    """A row where Lua's outcome differs says why, and a reason comes only with a
    difference; the differences are the documented ones (no _nowait twins on Redis, no
    reservation across processes)."""
    rows: list[Take | Put] = [*TAKES, *PUTS]
    for row in rows:
        assert bool(row.why) == (row.lua is not None and row.lua != row.want), row
    assert {row.why for row in rows if row.why} == {NO_NOWAIT, NO_RESERVATION}
