"""The Engine's synchronous steps, driven without an event loop.

Each test builds an Engine over a storage (a FIFO ring that fills waiting batches, a
ring without filling, a shuffle pool with ``min_after_dequeue``, a heap), takes steps
as the queue classes do (``put``/``get``, then ``retry`` or ``leave`` for a request
that parked), and checks what each step admits, takes, claims, restores and wakes.
Parked requests are armed with ``Probe`` events, so the engine's wake-up decisions can
be observed, together with whether the engine's lock was held when each was sent.
Every step goes through the helpers below, which call ``check_invariants()`` after it
(whether it returned or raised). The last section breaks each invariant the checker
states, by hand, and checks that the checker names it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

from aqueue import OutOfRangeError, QueueClosedError, QueueEmpty, QueueFull
from aqueue._queues._engine import Engine
from aqueue._queues._pool import PoolStorage
from aqueue._queues._requests import MANY, ONE, SOME, UP_TO, GetRequest, PutRequest
from aqueue._queues._storage import RingStorage
from aqueue._queues._tuples import HeapStorage
from aqueue._waiting._wait import WAIT, Request, thread_step

I64 = np.dtype(np.int64)


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def ring_engine(capacity: int = 4, *, fill: bool = True) -> Engine:
    """A FIFO engine over an int64 ring; ``fill``: waiting batch dequeues fill their batch."""
    ring = RingStorage(capacity, (I64,), ((),), "q")
    return Engine(capacity, ring, name="q", fill=ring if fill else None)


def pool_engine(capacity: int, min_after: int, seed: int = 0) -> Engine:
    """A shuffle engine over an int64 pool with ``min_after_dequeue``."""
    pool = PoolStorage(capacity, (I64,), ((),), "pool", np.random.default_rng(seed))
    return Engine(capacity, pool, name="pool", min_after_dequeue=min_after)


def one(v: int) -> tuple[Any, ...]:
    return (np.array(v, dtype=np.int64),)


def rows(*vs: int) -> tuple[Any, ...]:
    return (np.array(vs, dtype=np.int64),)


def vals(comps: Any) -> list[int]:
    """The ints of an element or batch result."""
    return [int(v) for v in np.asarray(comps[0]).reshape(-1)]


class Probe(threading.Event):
    """An event that records whether the engine's lock was held when it was set."""

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self._engine = engine
        self.set_under_lock: bool | None = None

    def set(self) -> None:
        self.set_under_lock = self._engine.lock.locked()
        super().set()


def arm(e: Engine) -> Callable[[], Probe]:
    """The waker factory a parked request of ``e`` is armed with."""
    return lambda: Probe(e)


def checked(e: Engine, step: Callable[[], Any], thread: bool = False) -> Any:
    """Run one step of ``e`` (``thread``: as a thread takes it, its wake-ups sent after
    it), then check the engine's invariants (also if it raised)."""
    try:
        return thread_step(step) if thread else step()
    finally:
        e.check_invariants()


def put(
    e: Engine,
    vs: int | list[int],
    *,
    wait: bool = True,
    atomic: bool = False,
    thread: bool = False,
) -> PutRequest | None:
    """Enqueue one int (ONE) or a list of ints (MANY): None when done, else the request
    it parked. ``wait=False``: the ``_nowait`` twin (raises instead of parking)."""
    if isinstance(vs, int):
        mode, comps, count = ONE, one(vs), 1
    else:
        mode, comps, count = MANY, rows(*vs), len(vs)
    waker = arm(e) if wait else None
    req: PutRequest | None = checked(
        e, lambda: e.put(mode, comps, count, waker, atomic=atomic), thread
    )
    return req


def get(
    e: Engine,
    mode: int = ONE,
    n: int = 1,
    *,
    wait: bool = True,
    park: bool = False,
    thread: bool = False,
) -> Any:
    """Dequeue: the components, or the request it parked (``wait=False``: the
    ``_nowait`` twin)."""
    waker = arm(e) if wait else None
    return checked(e, lambda: e.get(mode, n, waker, park=park), thread)


def parked_get(e: Engine, mode: int = ONE, n: int = 1, *, park: bool = False) -> GetRequest:
    """A dequeue that must park: its request."""
    req = get(e, mode, n, park=park)
    assert type(req) is GetRequest
    return req


def parked_put(e: Engine, vs: int | list[int], *, atomic: bool = False) -> PutRequest:
    """An enqueue that must park: its request."""
    req = put(e, vs, atomic=atomic)
    assert type(req) is PutRequest
    return req


def retry(e: Engine, req: Request, thread: bool = False) -> Any:
    """A woken request's next step: its result, or WAIT (re-armed with a fresh Probe)."""
    return checked(e, lambda: e.retry(req, arm(e)), thread)


def leave(e: Engine, req: Request) -> None:
    """``req`` gives up (cancelled, timed out)."""
    checked(e, lambda: e.leave(req))


def close(e: Engine, cancel: bool = False) -> None:
    checked(e, lambda: e.close(cancel))


def fired(*reqs: Request) -> list[bool]:
    """Whether each request's current waker was set."""
    return [r.waker is not None and r.waker.is_set() for r in reqs]


def probe(req: Request) -> Probe:
    assert isinstance(req.waker, Probe)
    return req.waker


def take_all(e: Engine) -> list[int]:
    """Take everything stored (in storage order) with one nowait step."""
    n = e.storage.size
    if n == 0:
        return []
    return vals(get(e, MANY, n, wait=False))


# --------------------------------------------------------------------------------------
# First steps that complete at once, and their _nowait twins
# --------------------------------------------------------------------------------------


def test_nowait_put_admits_only_with_room() -> None:
    """An enqueue_nowait admits while there is room and raises QueueFull when full,
    changing nothing."""
    e = ring_engine(2)
    assert put(e, 0, wait=False) is None
    assert put(e, 1, wait=False) is None
    with pytest.raises(QueueFull, match="needs room for 1, has 0"):
        put(e, 2, wait=False)
    assert e.storage.size == 2
    assert e.enqueued_total == 2
    assert take_all(e) == [0, 1]


def test_nowait_puts_refuse_while_putters_are_queued_or_closed() -> None:
    """With an enqueue queued ahead (even with room) or the queue closed, a new single or
    batch enqueue_nowait raises and stores nothing."""
    e = ring_engine(2)
    put(e, [0, 1])
    p = parked_put(e, 9)
    assert vals(get(e, wait=False)) == [0]  # room for one, p queued (woken, not yet in)
    assert fired(p) == [True]
    with pytest.raises(QueueFull, match="earlier enqueues are waiting"):
        put(e, 5, wait=False)
    with pytest.raises(QueueFull, match="earlier enqueues are waiting"):
        put(e, [1, 2], wait=False)
    assert (e.storage.size, e.enqueued_total) == (1, 2)
    closed = ring_engine(4)
    close(closed)
    with pytest.raises(QueueClosedError):
        put(closed, 0, wait=False)
    with pytest.raises(QueueClosedError):
        put(closed, [1], wait=False)
    assert closed.storage.size == 0


def test_nowait_put_many_admits_a_whole_batch_or_nothing() -> None:
    """An enqueue_many_nowait admits a batch that fits entirely, else raises QueueFull
    unchanged."""
    e = ring_engine(4)
    assert put(e, [0, 1, 2], wait=False) is None
    with pytest.raises(QueueFull, match="needs room for 2, has 1"):
        put(e, [3, 4], wait=False)
    assert e.storage.size == 3
    assert put(e, [3], wait=False) is None
    assert take_all(e) == [0, 1, 2, 3]
    assert (e.enqueued_total, e.dequeued_total) == (4, 4)


def test_nowait_gets_need_data_and_no_getter_ahead() -> None:
    """A dequeue_nowait / dequeue_many_nowait takes only what is there and only when no
    dequeue is queued ahead; otherwise it raises QueueEmpty and nothing changes."""
    e = ring_engine(4, fill=False)
    with pytest.raises(QueueEmpty, match="cannot supply 1"):
        get(e, wait=False)
    with pytest.raises(QueueEmpty):
        get(e, MANY, 1, wait=False)
    put(e, [0, 1, 2])
    with pytest.raises(QueueEmpty, match="cannot supply 4"):
        get(e, MANY, 4, wait=False)
    assert vals(get(e, wait=False)) == [0]
    parked_get(e, MANY, 3)  # cannot complete: 2 stored
    with pytest.raises(QueueEmpty, match="earlier dequeues are waiting"):
        get(e, wait=False)
    with pytest.raises(QueueEmpty, match="earlier dequeues are waiting"):
        get(e, MANY, 1, wait=False)
    assert e.storage.size == 2
    assert e.dequeued_total == 1


def test_some_get_takes_what_is_there_up_to_n() -> None:
    """A SOME dequeue (dequeue_burst) takes 1..n (as many as lie above the floor) in its
    first step when at least one can be taken and no dequeue is queued ahead; otherwise
    its nowait form raises QueueEmpty and nothing changes."""
    e = ring_engine(4, fill=False)
    with pytest.raises(QueueEmpty):
        get(e, SOME, 3, wait=False)
    put(e, [0, 1])
    assert vals(get(e, SOME, 3)) == [0, 1]
    put(e, [2, 3, 4])
    assert vals(get(e, SOME, 2)) == [2, 3]
    parked_get(e, MANY, 2)
    with pytest.raises(QueueEmpty, match="earlier dequeues are waiting"):
        get(e, SOME, 2, wait=False)
    assert e.storage.size == 1
    floor = pool_engine(6, min_after=2)
    put(floor, [0, 1, 2])
    assert len(vals(get(floor, SOME, 5))) == 1
    with pytest.raises(QueueEmpty, match="floor 2"):
        get(floor, SOME, 5, wait=False)
    assert floor.storage.size == 2


# --------------------------------------------------------------------------------------
# Head of line and wake-up decisions
# --------------------------------------------------------------------------------------


def test_second_getter_is_neither_notified_nor_served_before_the_first() -> None:
    """A dequeue queued behind another waits even when it could be served, and is
    notified only once it is the head and can progress."""
    e = ring_engine(4, fill=False)
    first = parked_get(e, MANY, 3)
    second = parked_get(e, ONE, 1)
    put(e, 0)
    assert fired(first, second) == [False, False]
    assert retry(e, second) is WAIT  # one is there, but it is not the head
    assert e.storage.size == 1
    put(e, [1, 2])
    assert fired(first, second) == [True, False]
    assert vals(retry(e, first)) == [0, 1, 2]
    assert fired(second) == [False]  # the head now, but nothing to take
    put(e, 3)
    assert fired(second) == [True]
    assert vals(retry(e, second)) == [3]
    assert not e.getters


def test_new_getter_queues_behind_parked_ones() -> None:
    """A new dequeue does not pass parked ones: its nowait form raises, and it parks
    behind them although an element is there."""
    e = ring_engine(4, fill=False)
    first = parked_get(e, MANY, 3)
    put(e, 0)
    with pytest.raises(QueueEmpty, match="earlier dequeues are waiting"):
        get(e, wait=False)
    second = parked_get(e, ONE, 1)
    assert list(e.getters) == [first, second]
    assert e.storage.size == 1
    assert fired(first, second) == [False, False]


def test_parked_getter_is_notified_exactly_when_it_can_progress() -> None:
    """A batch dequeue's waker is set when the n-th element arrives, not before."""
    e = ring_engine(4, fill=False)
    g = parked_get(e, MANY, 2)
    assert not g.notified
    put(e, 0)
    assert fired(g) == [False]
    put(e, 1)
    assert fired(g) == [True]
    assert g.notified
    assert vals(retry(e, g)) == [0, 1]


def test_parked_putter_is_notified_when_room_frees() -> None:
    """A waiting enqueue is woken by the take that frees room for it, and then admits."""
    e = ring_engine(2)
    put(e, [0, 1])
    with pytest.raises(QueueFull):
        put(e, 5, wait=False)
    p = parked_put(e, 5)
    assert fired(p) == [False]
    assert vals(get(e)) == [0]
    assert fired(p) == [True]
    assert retry(e, p) is None
    assert not e.putters
    assert take_all(e) == [1, 5]


def test_atomic_putter_is_notified_only_when_all_of_it_fits() -> None:
    """An all-or-nothing enqueue_many is woken when its whole batch fits, not when the
    first slot frees."""
    e = ring_engine(3)
    put(e, [0, 1, 2])
    p = parked_put(e, [3, 4], atomic=True)
    assert p.pos == 0
    get(e)
    assert fired(p) == [False]
    get(e)
    assert fired(p) == [True]
    assert retry(e, p) is None
    assert take_all(e) == [2, 3, 4]


def test_whole_rest_parks_a_short_rest_until_all_of_it_fits() -> None:
    """With ``whole_rest`` (the queues between pipeline stages), a waiting enqueue_many
    first admits what fits; a rest of at most ``whole_rest`` rows then wakes once, when
    all of it fits, instead of at every freed row. A longer rest, while no dequeue
    waits, goes in ``whole_rest`` rows or more at a time; a plain queue (``whole_rest``
    0) wakes at the first freed row."""
    e = ring_engine(4)
    e.whole_rest = 2
    put(e, [0, 1])
    p = parked_put(e, [2, 3, 4, 5])
    assert p.pos == 2  # what fitted went in
    assert p.atomic
    assert vals(get(e)) == [0]
    assert fired(p) == [False]  # one row free, two to admit
    assert vals(get(e)) == [1]
    assert fired(p) == [True]
    assert retry(e, p) is None
    assert take_all(e) == [2, 3, 4, 5]

    put(e, [0, 1, 2, 3])
    long_rest = parked_put(e, [6, 7, 8, 9, 10, 11, 12])
    assert not long_rest.atomic
    get(e)
    assert fired(long_rest) == [False]  # one row free: fewer than whole_rest
    get(e)
    assert fired(long_rest) == [True]
    assert retry(e, long_rest) is WAIT
    assert long_rest.pos == 2
    assert take_all(e) == [2, 3, 6, 7]
    assert fired(long_rest) == [True]
    assert retry(e, long_rest) is WAIT  # four more in, one to go
    assert long_rest.pos == 6

    plain = ring_engine(4)
    put(plain, [0, 1, 2, 3])
    q = parked_put(plain, [4, 5])
    get(plain)
    assert fired(q) == [True]


class TaskWaker:
    """A waker that is not a thread's ``threading.Event`` (as a task's is not)."""

    def __init__(self) -> None:
        self.fired = False

    def set(self) -> None:
        self.fired = True


def test_whole_rest_waits_for_room_in_pieces_only_for_threads() -> None:
    """A task parked with a long rest is woken at the first freed row (its wake-up is a
    loop turn); a thread (``threading.Event``) waits for ``whole_rest`` rows."""
    e = ring_engine(4)
    e.whole_rest = 2
    put(e, [0, 1, 2, 3])
    task = checked(e, lambda: e.put(MANY, rows(6, 7, 8, 9, 10, 11, 12), 7, TaskWaker))
    assert type(task) is PutRequest
    assert task.least == 0
    get(e)
    assert task.waker.fired
    assert checked(e, lambda: e.retry(task, TaskWaker)) is WAIT
    assert task.pos == 1


def test_non_atomic_enqueue_many_admits_what_fits_and_waits_for_the_rest() -> None:
    """A waiting enqueue_many admits as much as fits at each step, keeping its order."""
    e = ring_engine(2)
    p = parked_put(e, [0, 1, 2, 3, 4])
    assert p.pos == 2
    assert vals(get(e, MANY, 2)) == [0, 1]
    assert fired(p) == [True]
    assert retry(e, p) is WAIT
    assert p.pos == 4
    assert fired(p) == [False]  # re-armed
    assert vals(get(e)) == [2]
    assert fired(p) == [True]
    assert retry(e, p) is None  # the last one goes in
    assert not e.putters
    assert vals(get(e, MANY, 2)) == [3, 4]
    assert e.enqueued_total == 5


def test_parked_some_getter_is_notified_by_the_first_element_and_takes_what_is_there() -> None:
    """A waiting dequeue_burst is woken as soon as one element can be taken (it does
    not fill a batch or claim), and takes everything there up to n."""
    e = ring_engine(4)
    g = parked_get(e, SOME, 3)
    assert not g.progressive
    assert g.out is None
    put(e, 0)
    assert fired(g) == [True]
    assert e.storage.size == 1
    put(e, [1, 2, 3])
    assert vals(retry(e, g)) == [0, 1, 2]
    assert vals(get(e)) == [3]


def test_some_getter_on_a_final_empty_queue_raises_out_of_range() -> None:
    """A dequeue_burst on a closed queue takes what is left, then raises OutOfRangeError."""
    e = ring_engine(4)
    put(e, 0)
    close(e)
    assert vals(get(e, SOME, 3)) == [0]
    with pytest.raises(OutOfRangeError):
        get(e, SOME, 3)
    assert not e.getters


# --------------------------------------------------------------------------------------
# Passing queued putters
# --------------------------------------------------------------------------------------


def test_new_putter_passes_queued_putters_only_when_all_of_them_fit() -> None:
    """A new enqueue goes ahead of queued ones that have not started if there is room
    for it and for all of them; otherwise it queues behind them and nothing changes."""
    e = ring_engine(6)
    put(e, [0, 1, 2, 3, 4, 5])
    p1, p2 = parked_put(e, 10), parked_put(e, [11, 12])
    assert (p1.pos, p2.pos) == (0, 0)
    assert vals(get(e, MANY, 4)) == [0, 1, 2, 3]  # free 4; p1 woken, not yet in
    assert put(e, 20) is None  # free 4 >= 1 + (1 + 2)
    with pytest.raises(QueueFull, match="earlier enqueues are waiting"):
        put(e, 21, wait=False)  # free 3 < 1 + 3
    with pytest.raises(QueueFull):
        put(e, [22, 23], wait=False)
    late = parked_put(e, 21)
    assert list(e.putters) == [p1, p2, late]
    assert e.storage.size == 3
    assert retry(e, p1) is None
    assert retry(e, p2) is None
    assert fired(late) == [False]  # full again
    assert take_all(e) == [4, 5, 20, 10, 11, 12]
    assert retry(e, late) is None
    assert take_all(e) == [21]


def test_new_putter_does_not_pass_a_started_enqueue_many() -> None:
    """Once a queued enqueue_many has admitted part of its batch, a new enqueue waits
    behind it even with room for both, so the batch stays contiguous."""
    e = ring_engine(6)
    put(e, [0, 1, 2, 3, 4])
    p = parked_put(e, [10, 11, 12])
    assert p.pos == 1
    assert vals(get(e, MANY, 5)) == [0, 1, 2, 3, 4]  # free 5: room for p and more
    late = parked_put(e, 20)
    with pytest.raises(QueueFull, match="earlier enqueues are waiting"):
        put(e, 21, wait=False)
    assert e.storage.size == 1
    assert retry(e, p) is None
    assert fired(late) == [True]
    assert retry(e, late) is None
    assert take_all(e) == [10, 11, 12, 20]


# --------------------------------------------------------------------------------------
# All-or-nothing batches above capacity
# --------------------------------------------------------------------------------------


def test_atomic_put_goes_in_above_capacity_when_the_head_dequeue_takes_enough() -> None:
    """An all-or-nothing batch that does not fit is admitted whole when the waiting head
    dequeue will then bring the size back within capacity; that dequeue is woken."""
    e = ring_engine(4, fill=False)
    put(e, [0, 1, 2])
    g = parked_get(e, MANY, 4)
    assert put(e, [3, 4, 5], atomic=True) is None
    assert e.storage.size == 6
    assert e.peak == 6
    assert fired(g) == [True]
    assert vals(retry(e, g)) == [0, 1, 2, 3]
    assert take_all(e) == [4, 5]


def test_atomic_put_waits_when_the_head_dequeue_would_not_take_enough() -> None:
    """An all-or-nothing batch that would leave the size above capacity after the head
    dequeue took its n (or with no dequeue waiting) is not admitted at all."""
    e = ring_engine(4, fill=False)
    put(e, [0, 1, 2])
    with pytest.raises(QueueFull):
        put(e, [3, 4], wait=False)  # nobody waiting
    g = parked_get(e, MANY, 4)
    with pytest.raises(QueueFull):
        put(e, [3, 4, 5, 6, 7, 8], wait=False)  # 9 - 4 > 4
    a = parked_put(e, [3, 4, 5, 6, 7, 8], atomic=True)
    assert a.pos == 0
    assert e.storage.size == 3
    assert e.enqueued_total == 3
    assert fired(g, a) == [False, False]
    leave(e, a)
    assert not e.putters


def test_atomic_put_counts_on_what_the_floor_lets_the_dequeue_take() -> None:
    """With min_after_dequeue, the head dequeue can only take what lies above the floor:
    an all-or-nothing batch after which it still could not take all it needs is not
    admitted; one after which it can is, above capacity."""
    e = pool_engine(6, min_after=4)
    put(e, [0, 1, 2, 3, 4])  # one above the floor
    g = parked_get(e, MANY, 5)
    assert g.progressive
    with pytest.raises(QueueFull):
        put(e, [5, 6], wait=False)  # 3 above the floor < 5
    assert e.storage.size == 5
    assert put(e, [5, 6, 7, 8], wait=False) is None  # 5 above the floor
    assert e.storage.size == 9
    got = vals(retry(e, g))
    assert len(set(got)) == 5
    assert e.storage.size == 4


# --------------------------------------------------------------------------------------
# Filling a waiting batch (FIFO ring)
# --------------------------------------------------------------------------------------


def test_parked_batch_getter_claims_the_ring_and_puts_copy_into_its_batch() -> None:
    """A batch dequeue parked at the head claims what the ring holds (size() no longer
    counts it); an enqueue copies straight into its batch and wakes it when full."""
    e = ring_engine(4)
    put(e, [0, 1])
    g = parked_get(e, MANY, 3)
    assert g.claimed == 2
    assert e.storage.size == 0
    assert e.statistics().size == 0
    assert fired(g) == [False]
    assert put(e, [2]) is None
    assert (g.claimed, e.storage.size) == (3, 0)
    assert fired(g) == [True]
    assert g.out is not None
    out = g.out
    result = retry(e, g)
    assert result is out
    assert vals(result) == [0, 1, 2]
    assert (e.enqueued_total, e.dequeued_total) == (3, 3)


def test_a_batch_getter_that_parks_first_claims_but_completes_in_its_next_step() -> None:
    """A batch dequeue parked before its checkpoint (``park=True``) parks although the
    elements are there: it claims them into its batch and is woken, and returns them
    only from its next step; leaving instead puts them back in order."""
    e = ring_engine(4)
    put(e, [0, 1, 2])
    g = parked_get(e, MANY, 2, park=True)
    assert (g.claimed, e.storage.size, e.dequeued_total) == (2, 1, 0)
    assert fired(g) == [True]
    assert vals(retry(e, g)) == [0, 1]
    h = parked_get(e, UP_TO, 2, park=True)
    assert (h.claimed, e.storage.size) == (1, 0)
    leave(e, h)
    assert take_all(e) == [2]
    assert (e.enqueued_total, e.dequeued_total) == (3, 3)


def test_a_parked_putter_admits_what_fits_beyond_the_filling_batch_in_one_step() -> None:
    """A parked enqueue_many whose step fills the head dequeue's batch goes on admitting
    into the ring in the same step: the rows that went into the batch took no room, so
    it must not wait (un-woken) while there is room for more."""
    e = ring_engine(2)
    put(e, [0, 1])
    p = parked_put(e, [2, 3, 4, 5, 6])
    assert vals(get(e, MANY, 2, wait=False)) == [0, 1]
    g = parked_get(e, MANY, 2)  # the ring is empty: its batch fills
    assert retry(e, p) is WAIT
    assert (p.pos, g.claimed, e.storage.size) == (4, 2, 2)
    assert fired(g, p) == [True, False]
    assert vals(retry(e, g)) == [2, 3]
    assert fired(p) == [False]  # the ring is full
    assert take_all(e) == [4, 5]
    assert fired(p) == [True]
    assert retry(e, p) is None
    assert take_all(e) == [6]


def test_a_putter_parked_after_filling_the_head_batch_is_woken_at_once() -> None:
    """An enqueue_many whose first step fills the head dequeue's batch and parks with
    its rest is woken at once: the rows that went into the batch took no room."""
    e = ring_engine(2)
    g = parked_get(e, MANY, 2)
    p = parked_put(e, [0, 1, 2, 3, 4])
    assert (p.pos, g.claimed, e.storage.size) == (2, 2, 0)
    assert fired(g, p) == [True, True]
    assert retry(e, p) is WAIT
    assert (p.pos, e.storage.size) == (4, 2)
    assert vals(retry(e, g)) == [0, 1]
    assert take_all(e) == [2, 3]
    assert retry(e, p) is None
    assert take_all(e) == [4]


def test_loaded_elements_go_into_the_filling_head_batch_first() -> None:
    """Elements loaded whole (a snapshot's, ``load_items``) while a batch dequeue fills
    at the head go into its batch first, then the ring, in order; it is woken when full."""
    e = ring_engine(4)
    g = parked_get(e, MANY, 3)
    checked(e, partial(e.load, [one(0), one(1)]))
    assert (g.claimed, e.storage.size, e.loaded_total) == (2, 0, 2)
    assert fired(g) == [False]
    checked(e, partial(e.load_rows, rows(2, 3, 4, 5, 6), 5))
    assert (g.claimed, e.storage.size) == (3, 4)
    assert fired(g) == [True]
    assert [vals(c) for c in e.dump()] == [[0], [1], [2], [3], [4], [5], [6]]
    assert vals(retry(e, g)) == [0, 1, 2]
    assert take_all(e) == [3, 4, 5, 6]


def test_rows_beyond_the_filling_batch_go_to_the_ring() -> None:
    """A batch larger than what the filling dequeue still needs fills it, and the rest
    is stored behind."""
    e = ring_engine(4)
    g = parked_get(e, MANY, 3)
    assert put(e, [0, 1, 2, 3], wait=False) is None
    assert fired(g) == [True]
    assert e.storage.size == 1
    assert vals(retry(e, g)) == [0, 1, 2]
    assert vals(get(e)) == [3]


def test_single_puts_fill_the_waiting_batch() -> None:
    """Single enqueues also copy into the filling batch, waking it at the n-th."""
    e = ring_engine(4)
    g = parked_get(e, MANY, 2)
    assert put(e, 7, wait=False) is None
    assert (g.claimed, e.storage.size) == (1, 0)
    assert fired(g) == [False]
    assert put(e, 8, wait=False) is None
    assert fired(g) == [True]
    assert vals(retry(e, g)) == [7, 8]


def test_a_getter_that_becomes_head_claims_the_ring() -> None:
    """When the head dequeue completes, the next batch dequeue claims what is stored."""
    e = ring_engine(4)
    g1, g2 = parked_get(e, MANY, 2), parked_get(e, MANY, 2)
    put(e, [0, 1])  # into g1's batch
    put(e, [2])  # g2 is not the head: stored
    assert (g1.claimed, g2.claimed, e.storage.size) == (2, 0, 1)
    assert vals(retry(e, g1)) == [0, 1]
    assert (g2.claimed, e.storage.size) == (1, 0)


def test_a_floor_disables_filling() -> None:
    """With min_after_dequeue the ring is not filled into a waiting batch: the parked
    dequeue claims nothing, so the floor stays stored."""
    ring = RingStorage(6, (I64,), ((),), "q")
    e = Engine(6, ring, name="q", fill=ring, min_after_dequeue=2)
    put(e, [0, 1, 2])
    g = parked_get(e, MANY, 2)
    assert (g.claimed, g.out, e.storage.size) == (0, None, 3)
    put(e, 3)
    assert fired(g) == [True]
    assert vals(retry(e, g)) == [0, 1]
    assert e.storage.size == 2


# --------------------------------------------------------------------------------------
# Leaving
# --------------------------------------------------------------------------------------


def test_leave_restores_claims_at_the_front_in_order() -> None:
    """A progressive dequeue that leaves puts its claimed chunks back before the
    elements that arrived meanwhile, in their original order."""
    e = ring_engine(4, fill=False)
    put(e, [0, 1, 2, 3])
    g = parked_get(e, MANY, 6)
    assert g.progressive
    assert fired(g) == [True]  # it can claim
    assert retry(e, g) is WAIT
    assert (g.claimed, e.storage.size) == (4, 0)
    put(e, [4])
    assert fired(g) == [True]
    assert retry(e, g) is WAIT  # claims 4 too
    assert (g.claimed, e.storage.size) == (5, 0)
    put(e, [5, 6])  # stored, not yet claimed
    leave(e, g)
    assert not e.getters
    assert e.storage.size == 7  # above capacity for a while
    assert e.peak == 7
    assert take_all(e) == [0, 1, 2, 3, 4, 5, 6]
    assert e.dequeued_total == 7


def test_leave_passes_the_wake_up_to_the_next_getter() -> None:
    """A filling dequeue that leaves gives its rows back and the next dequeue, which can
    now progress, is woken."""
    e = ring_engine(4)
    put(e, [0, 1, 2])
    g1, g2 = parked_get(e, MANY, 4), parked_get(e, ONE, 1)
    assert g1.claimed == 3
    assert fired(g1, g2) == [False, False]
    leave(e, g1)
    assert fired(g2) == [True]
    assert vals(retry(e, g2)) == [0]
    assert take_all(e) == [1, 2]


def test_leave_hands_restored_rows_to_the_next_filling_getter() -> None:
    """The next batch dequeue claims the restored rows from the front, in order."""
    e = ring_engine(4)
    put(e, [0, 1, 2])
    g1, g2 = parked_get(e, MANY, 4), parked_get(e, MANY, 2)
    leave(e, g1)
    assert g2.claimed == 2
    assert fired(g2) == [True]
    assert vals(retry(e, g2)) == [0, 1]
    assert vals(get(e)) == [2]


def test_leave_of_a_queued_getter_leaves_the_head_alone() -> None:
    """A dequeue behind the head that leaves changes neither the head's claims nor the
    stored elements."""
    e = ring_engine(4)
    put(e, [0, 1])
    g1, g2 = parked_get(e, MANY, 3), parked_get(e, ONE, 1)
    leave(e, g2)
    assert list(e.getters) == [g1]
    assert (g1.claimed, e.storage.size) == (2, 0)
    assert fired(g1) == [False]


def test_leave_of_a_notified_putter_passes_the_wake_up_on() -> None:
    """A woken enqueue that leaves without admitting wakes the next one."""
    e = ring_engine(1)
    put(e, 0)
    p1, p2 = parked_put(e, 1), parked_put(e, 2)
    get(e)
    assert fired(p1, p2) == [True, False]
    leave(e, p1)
    assert fired(p2) == [True]
    assert retry(e, p2) is None
    assert take_all(e) == [2]


def test_leave_after_completing_changes_nothing() -> None:
    """A request that completed (its driver then sees an exception, say) is not listed
    any more: leaving it again is a no-op."""
    e = ring_engine(2)
    g = parked_get(e)
    put(e, 5)
    assert vals(retry(e, g)) == [5]
    leave(e, g)
    put(e, [0, 1])
    p = parked_put(e, 2)
    get(e)
    assert retry(e, p) is None
    leave(e, p)
    assert (e.enqueued_total, e.dequeued_total, e.storage.size) == (4, 2, 2)


# --------------------------------------------------------------------------------------
# Closing
# --------------------------------------------------------------------------------------


def test_close_with_cancel_rejects_pending_putters() -> None:
    """close(cancel_pending_enqueues=True) wakes pending enqueues, whose next step raises
    QueueClosedError naming what they had admitted; what they admitted stays, and the
    queue becomes final once they have left."""
    e = ring_engine(2, fill=False)
    put(e, 0)
    p = parked_put(e, [1, 2, 3])
    assert p.pos == 1
    g = parked_get(e, MANY, 3)  # progressive (3 > capacity): it claims both
    assert retry(e, g) is WAIT
    assert g.claimed == 2
    close(e, cancel=True)
    assert fired(p, g) == [True, False]  # not final while p is pending
    with pytest.raises(QueueClosedError, match="after 1 of 3"):
        retry(e, p)
    assert not e.putters
    assert fired(g) == [True]  # final now: the dequeue can fail
    with pytest.raises(OutOfRangeError):
        retry(e, g)
    assert take_all(e) == [0, 1]


def test_closed_queue_refuses_new_enqueues() -> None:
    """After close, a new enqueue raises QueueClosedError, waiting or not."""
    e = ring_engine(2)
    close(e)
    with pytest.raises(QueueClosedError, match="is closed"):
        put(e, 0)
    with pytest.raises(QueueClosedError, match="is closed"):
        put(e, [0, 1], wait=False)
    assert e.storage.size == 0
    assert not e.putters


def test_pending_enqueue_finishes_after_close_without_cancel() -> None:
    """close() without cancelling lets a parked enqueue complete, and until it has, the
    queue is not final: a dequeue that cannot be satisfied waits instead of failing."""
    e = ring_engine(1, fill=False)
    put(e, 0)
    p = parked_put(e, 1)
    close(e)
    with pytest.raises(QueueEmpty):  # not OutOfRangeError
        get(e, MANY, 2, wait=False)
    assert vals(get(e)) == [0]
    assert retry(e, p) is None
    assert vals(get(e)) == [1]
    with pytest.raises(OutOfRangeError):
        get(e)


def test_final_queue_raises_out_of_range_without_consuming() -> None:
    """On a closed queue with nothing pending, a dequeue it cannot supply raises
    OutOfRangeError; the rows the waiting batch had claimed are back, in order."""
    e = ring_engine(4)
    put(e, [0, 1])
    g = parked_get(e, MANY, 3)
    assert (g.claimed, e.storage.size) == (2, 0)
    close(e)
    assert fired(g) == [True]
    with pytest.raises(OutOfRangeError) as info:
        retry(e, g)
    assert (info.value.requested, info.value.size, info.value.queue_name) == (3, 2, "q")
    assert not e.getters
    assert e.dequeued_total == 0
    assert vals(get(e, MANY, 2)) == [0, 1]


def test_up_to_returns_the_remainder_once_final() -> None:
    """dequeue_up_to waits while the queue is open, returns what is left once it is
    final, and raises OutOfRangeError when nothing is left."""
    e = ring_engine(4)
    put(e, [0, 1])
    g = parked_get(e, UP_TO, 3)
    assert retry(e, g) is WAIT
    close(e)
    assert fired(g) == [True]
    assert vals(retry(e, g)) == [0, 1]
    assert e.dequeued_total == 2
    with pytest.raises(OutOfRangeError):
        get(e, UP_TO, 3)


def test_final_queue_serves_what_it_can() -> None:
    """A final queue still serves dequeues it can supply in full."""
    e = ring_engine(4, fill=False)
    put(e, [0, 1, 2])
    close(e)
    assert vals(get(e, MANY, 2)) == [0, 1]
    with pytest.raises(OutOfRangeError):
        get(e, MANY, 2)
    assert vals(get(e, ONE, 1)) == [2]


# --------------------------------------------------------------------------------------
# min_after_dequeue
# --------------------------------------------------------------------------------------


def test_min_after_dequeue_floor_holds_while_open_and_lifts_on_close() -> None:
    """Dequeues never take the pool below min_after_dequeue while it is open; a waiting
    dequeue is woken only when an element rises above the floor or on close."""
    e = pool_engine(10, min_after=3)
    put(e, [0, 1, 2, 3, 4])
    taken = vals(get(e, wait=False)) + vals(get(e, MANY, 1, wait=False))
    with pytest.raises(QueueEmpty):
        get(e, wait=False)
    with pytest.raises(QueueEmpty):
        get(e, MANY, 1, wait=False)
    g = parked_get(e)
    assert fired(g) == [False]
    put(e, 5)
    assert fired(g) == [True]
    taken += vals(retry(e, g))
    assert e.storage.size == 3
    g2 = parked_get(e, MANY, 2)
    assert fired(g2) == [False]
    close(e)
    assert fired(g2) == [True]
    taken += vals(retry(e, g2))
    taken += vals(get(e, wait=False))
    assert e.storage.size == 0
    assert sorted(taken) == [0, 1, 2, 3, 4, 5]


def test_large_batch_with_a_floor_claims_progressively_above_the_floor() -> None:
    """A batch dequeue larger than capacity - min_after_dequeue claims what lies above
    the floor as it comes, never the floor itself, and returns n distinct elements."""
    e = pool_engine(6, min_after=2)
    small = parked_get(e, MANY, 4)
    assert not small.progressive
    leave(e, small)
    put(e, [0, 1, 2, 3, 4, 5])
    g = parked_get(e, MANY, 5)
    assert g.progressive
    assert fired(g) == [True]
    assert retry(e, g) is WAIT
    assert (g.claimed, e.storage.size) == (4, 2)
    put(e, 6)
    assert fired(g) == [True]
    got = vals(retry(e, g))
    assert len(got) == len(set(got)) == 5
    assert e.storage.size == 2
    close(e)
    assert sorted(got + take_all(e)) == list(range(7))


# --------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------


def test_statistics_count_totals_peak_and_waiters() -> None:
    """statistics() reports size, totals, the peak size and how many wait each way."""
    e = ring_engine(3, fill=False)
    put(e, [0, 1, 2])
    get(e)
    put(e, 3)
    p = parked_put(e, 4)
    s = e.statistics()
    assert (s.size, s.capacity, s.closed) == (3, 3, False)
    assert (s.enqueued_total, s.dequeued_total, s.peak_size) == (4, 1, 3)
    assert (s.tasks_waiting_enqueue, s.tasks_waiting_dequeue) == (1, 0)
    assert (e.quiet_putters(), e.quiet_getters()) == (1, 0)
    get(e, MANY, 3)
    assert e.quiet_putters() == 0  # woken
    assert retry(e, p) is None
    parked_get(e, MANY, 2)
    parked_get(e, ONE, 1)
    assert e.quiet_getters() == 2
    close(e)
    assert e.quiet_getters() == 1  # the head is woken (final), the other waits its turn
    s = e.statistics()
    assert (s.size, s.closed, s.enqueued_total, s.dequeued_total) == (1, True, 5, 4)
    assert (s.tasks_waiting_enqueue, s.tasks_waiting_dequeue) == (0, 2)
    assert s.time_full_s >= 0.0
    assert s.time_empty_s >= 0.0


def test_peak_counts_single_puts_batches_and_restored_claims() -> None:
    """The peak follows single puts, batches and restores above capacity."""
    e = ring_engine(2, fill=False)
    put(e, 0)
    assert e.statistics().peak_size == 1
    put(e, 1)
    assert e.statistics().peak_size == 2
    g = parked_get(e, MANY, 3)  # progressive (3 > capacity)
    assert retry(e, g) is WAIT
    put(e, [2, 3])
    leave(e, g)
    s = e.statistics()
    assert (s.size, s.peak_size) == (4, 4)


# --------------------------------------------------------------------------------------
# Deferred wake-ups (a thread's step)
# --------------------------------------------------------------------------------------


def test_a_threads_step_sends_its_wake_ups_after_the_lock() -> None:
    """A step taken as a thread takes it (``thread_step``) marks the requests it decided
    to wake as notified under the lock, and sends their wake-ups once it has released
    the lock."""
    e = ring_engine(4, fill=False)
    g = parked_get(e)
    assert put(e, 7, thread=True) is None
    assert g.notified
    assert probe(g).is_set()
    assert probe(g).set_under_lock is False
    assert vals(retry(e, g)) == [7]


def test_threads_steps_fire_after_releasing_the_lock() -> None:
    """put, get and retry taken by a thread fire their wake-ups after the lock is
    released; taken by the event loop's thread, under the lock."""
    e = ring_engine(1, fill=False)
    g = parked_get(e)
    assert put(e, 0, thread=True) is None
    assert probe(g).is_set()
    assert probe(g).set_under_lock is False
    assert vals(retry(e, g)) == [0]

    put(e, 1)
    p = parked_put(e, 2)
    assert vals(get(e, thread=True)) == [1]
    assert probe(p).set_under_lock is False

    g2 = parked_get(e)
    assert retry(e, p) is None  # the loop's step: fired at once, under the lock
    assert probe(g2).set_under_lock is True

    p3 = parked_put(e, 3)
    assert vals(retry(e, g2, thread=True)) == [2]
    assert probe(p3).set_under_lock is False


# --------------------------------------------------------------------------------------
# Object components holding tuples
# --------------------------------------------------------------------------------------


def test_a_batch_take_of_object_tuples_loses_nothing() -> None:
    """A batch dequeue of scalar object elements that are tuples either returns them or,
    if it fails, leaves them stored."""
    e = Engine(4, HeapStorage((I64, np.dtype(object))), name="pq")
    for p, obj in ((1, ("a", 1)), (2, ("b", 2, 3))):
        held = np.empty((), dtype=object)
        held[()] = obj
        assert checked(e, partial(e.put, ONE, (np.array(p), held), 1)) is None
    try:
        got = get(e, MANY, 2, wait=False)
    except ValueError:
        assert e.storage.size == 2, "the failed take lost the elements"
    else:
        assert list(got[1]) == [("a", 1), ("b", 2, 3)]


# --------------------------------------------------------------------------------------
# The invariant checker: each check it states fires on a state that breaks it
# --------------------------------------------------------------------------------------


def assert_violates(e: Engine, words: str) -> None:
    with pytest.raises(AssertionError, match=words):
        e.check_invariants()


def test_checker_names_elements_lost_or_made_up() -> None:
    """Invariant 1 (conservation): counters that disagree with what is stored and held."""
    e = ring_engine(4)
    put(e, [0, 1])
    g = parked_get(e, MANY, 3)
    e.enqueued_total += 1
    assert_violates(e, r"q: 3 in != 0 out \+ 0 stored \+ 2 held")
    e.enqueued_total -= 1
    g.claimed -= 1  # an element the head holds, forgotten
    assert_violates(e, "in != ")


def test_checker_names_a_listed_getter_that_is_not_registered() -> None:
    """Invariant 2 (the lists): a getter in the list must be registered."""
    e = ring_engine(4)
    g = parked_get(e)
    g.registered = False
    assert_violates(e, "getter 0 is listed but not registered")


def test_checker_names_claims_behind_the_head() -> None:
    """Invariant 2 (head of line): only the head getter holds claims."""
    e = ring_engine(4, fill=False)
    parked_get(e, MANY, 2)
    second = parked_get(e, MANY, 6)  # progressive, behind the head
    second.claimed = 1
    assert_violates(e, "getter 1 holds claims behind the head")
    second.claimed = 0
    second.claims.append(object())
    assert_violates(e, "getter 1 holds claims behind the head")


def test_checker_names_a_putter_started_behind_the_head() -> None:
    """Invariant 2 (head of line): only the head putter may have admitted part of its
    batch, and every listed putter is registered."""
    e = ring_engine(2)
    put(e, [0, 1])
    parked_put(e, [2, 3])
    p2 = parked_put(e, [4, 5])
    p2.pos = 1
    assert_violates(e, "putter 1 started behind the head")
    p2.pos = 0
    p2.registered = False
    assert_violates(e, "putter 1 started behind the head")


def test_checker_names_a_head_getter_not_woken() -> None:
    """Invariant 3 (no lost wake-up), getters: a head that can progress was notified."""
    e = ring_engine(4, fill=False)
    g = parked_get(e, MANY, 2)
    put(e, [0, 1])
    assert g.notified
    g.notified = False
    assert_violates(e, "the head getter can progress, not woken")


def test_checker_names_a_head_putter_not_woken() -> None:
    """Invariant 3 (no lost wake-up), putters: a head that can progress was notified."""
    e = ring_engine(1)
    put(e, 0)
    p = parked_put(e, 1)
    get(e)
    assert p.notified
    p.notified = False
    assert_violates(e, "the head putter can progress, not woken")


def test_checker_names_a_filling_head_that_left_elements_in_the_ring() -> None:
    """Invariant 4: a filling head getter that is not complete has emptied the ring."""
    e = ring_engine(4)
    g = parked_get(e, MANY, 3)
    assert g.out is not None
    e.storage.put_one(one(0))  # as if an element had bypassed the batch
    e.loaded_total += 1
    e.peak = 1
    assert_violates(e, "a filling head getter left 1 in the ring")


def test_checker_names_a_peak_below_the_size() -> None:
    """Invariant 5: the peak is at least the size."""
    e = ring_engine(4)
    put(e, [0, 1])
    e.peak = 1
    assert_violates(e, "peak 1 < size 2")
