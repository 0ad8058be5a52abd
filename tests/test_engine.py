"""The Engine's synchronous steps, driven without an event loop.

Each test builds an Engine over a storage (a FIFO ring that fills waiting batches, a
ring without filling, or a shuffle pool with ``min_after_dequeue``), creates requests
as the queue classes do, gives each a ``threading.Event`` so that the engine's
wake-up decisions (``Request.fire``) can be observed, parks them under the engine's
lock, and checks what each step admits, takes, claims, restores and wakes.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from aqueue import OutOfRangeError, QueueClosedError
from aqueue._queues._engine import Engine
from aqueue._queues._pool import PoolStorage
from aqueue._queues._requests import (
    MANY,
    ONE,
    SOME,
    UP_TO,
    WAIT,
    GetRequest,
    PutRequest,
    Request,
    fire_all,
)
from aqueue._queues._storage import RingStorage
from aqueue._queues._tuples import HeapStorage

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


def put_req(vs: int | list[int], *, atomic: bool = False) -> PutRequest:
    """An enqueue of one int (ONE) or of a list of ints (MANY)."""
    if isinstance(vs, int):
        return PutRequest(ONE, one(vs), 1)
    req = PutRequest(MANY, rows(*vs), len(vs))
    req.atomic = atomic
    return req


class Probe(threading.Event):
    """An event that records whether the engine's lock was held when it was set."""

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self._engine = engine
        self.set_under_lock: bool | None = None

    def set(self) -> None:
        self.set_under_lock = self._engine.lock.locked()
        super().set()


def park(engine: Engine, req: Request) -> Probe:
    """Give ``req`` an event and park it, as a thread driver does; return the event."""
    event = Probe(engine)
    req.event = event
    with engine.lock:
        engine.park(req)
    return event


def rearm(req: Request) -> None:
    """What a driver does after a step that returned WAIT: consume the wake-up."""
    req.notified = False
    assert req.event is not None
    req.event.clear()


def try_get(engine: Engine, req: GetRequest) -> Any:
    with engine.lock:
        return engine.try_get(req)


def try_put(engine: Engine, req: PutRequest) -> bool:
    with engine.lock:
        return engine.try_put(req)


def fired(*reqs: Request) -> list[bool]:
    """Whether each request's event was set."""
    return [r.event is not None and r.event.is_set() for r in reqs]


def take_all(engine: Engine) -> list[int]:
    """Take everything stored (in storage order) through the fast path."""
    n = engine.storage.size
    if n == 0:
        return []
    got = engine.take_many_now(n)
    assert got is not WAIT
    return vals(got)


# --------------------------------------------------------------------------------------
# Fast paths
# --------------------------------------------------------------------------------------


def test_put_one_now_admits_only_with_room() -> None:
    """put_one_now admits while there is room and returns False when full, changing
    nothing."""
    e = ring_engine(2)
    assert e.put_one_now(one(0))
    assert e.put_one_now(one(1))
    assert not e.put_one_now(one(2))
    assert e.storage.size == 2
    assert e.enqueued_total == 2
    assert take_all(e) == [0, 1]


def test_fast_put_paths_refuse_while_putters_are_queued_or_closed() -> None:
    """With an enqueue queued ahead (even with room) or the queue closed, put_one_now and
    put_many_now return False and store nothing."""
    e = ring_engine(4)
    park(e, put_req(9))
    assert not e.put_one_now(one(0))
    assert not e.put_many_now(rows(1, 2), 2)
    assert (e.storage.size, e.enqueued_total) == (0, 0)
    closed = ring_engine(4)
    closed.close(False)
    assert not closed.put_one_now(one(0))
    assert not closed.put_many_now(rows(1), 1)
    assert closed.storage.size == 0


def test_put_many_now_admits_a_whole_batch_or_nothing() -> None:
    """put_many_now admits a batch that fits entirely, else returns False unchanged."""
    e = ring_engine(4)
    assert e.put_many_now(rows(0, 1, 2), 3)
    assert not e.put_many_now(rows(3, 4), 2)
    assert e.storage.size == 3
    assert e.put_many_now(rows(3), 1)
    assert take_all(e) == [0, 1, 2, 3]
    assert (e.enqueued_total, e.dequeued_total) == (4, 4)


def test_fast_take_paths_need_data_and_no_getter_ahead() -> None:
    """take_one_now / take_many_now take only what is there and only when no dequeue is
    queued ahead; otherwise WAIT and nothing changes."""
    e = ring_engine(4, fill=False)
    assert e.take_one_now() is WAIT
    assert e.take_many_now(1) is WAIT
    e.put_many_now(rows(0, 1, 2), 3)
    assert e.take_many_now(4) is WAIT
    assert vals(e.take_one_now()) == [0]
    ahead = GetRequest(MANY, 3)
    park(e, ahead)  # cannot complete: 2 stored
    assert e.take_one_now() is WAIT
    assert e.take_many_now(1) is WAIT
    assert e.storage.size == 2
    assert e.dequeued_total == 1


def test_take_some_now_takes_what_is_there_up_to_n() -> None:
    """take_some_now takes 1..n (as many as lie above the floor) when at least one can
    be taken and no dequeue is queued ahead; otherwise WAIT and nothing changes."""
    e = ring_engine(4, fill=False)
    assert e.take_some_now(3) is WAIT
    e.put_many_now(rows(0, 1), 2)
    assert vals(e.take_some_now(3)) == [0, 1]
    e.put_many_now(rows(2, 3, 4), 3)
    assert vals(e.take_some_now(2)) == [2, 3]
    park(e, GetRequest(MANY, 2))
    assert e.take_some_now(2) is WAIT
    assert e.storage.size == 1
    floor = pool_engine(6, min_after=2)
    floor.put_many_now(rows(0, 1, 2), 3)
    assert len(vals(floor.take_some_now(5))) == 1
    assert floor.take_some_now(5) is WAIT


# --------------------------------------------------------------------------------------
# Head of line and wake-up decisions
# --------------------------------------------------------------------------------------


def test_second_getter_is_neither_notified_nor_served_before_the_first() -> None:
    """A dequeue queued behind another waits even when it could be served, and is
    notified only once it is the head and can progress."""
    e = ring_engine(4, fill=False)
    first, second = GetRequest(MANY, 3), GetRequest(ONE, 1)
    park(e, first)
    park(e, second)
    assert e.put_one_now(one(0))
    assert fired(first, second) == [False, False]
    assert try_get(e, second) is WAIT  # one is there, but it is not the head
    assert e.storage.size == 1
    assert e.put_many_now(rows(1, 2), 2)
    assert fired(first, second) == [True, False]
    assert vals(try_get(e, first)) == [0, 1, 2]
    assert fired(second) == [False]  # the head now, but nothing to take
    assert e.put_one_now(one(3))
    assert fired(second) == [True]
    assert vals(try_get(e, second)) == [3]
    assert not e.getters


def test_new_getter_queues_behind_parked_ones() -> None:
    """A new (unparked) dequeue does not pass parked ones."""
    e = ring_engine(4, fill=False)
    park(e, GetRequest(MANY, 3))
    e.put_one_now(one(0))
    assert try_get(e, GetRequest(ONE, 1)) is WAIT
    assert e.storage.size == 1


def test_parked_getter_is_notified_exactly_when_it_can_progress() -> None:
    """A batch dequeue's event is set when the n-th element arrives, not before."""
    e = ring_engine(4, fill=False)
    g = GetRequest(MANY, 2)
    park(e, g)
    assert not g.notified
    e.put_one_now(one(0))
    assert fired(g) == [False]
    e.put_one_now(one(1))
    assert fired(g) == [True]
    assert g.notified
    assert vals(try_get(e, g)) == [0, 1]


def test_parked_putter_is_notified_when_room_frees() -> None:
    """A waiting enqueue is woken by the take that frees room for it, and then admits."""
    e = ring_engine(2)
    e.put_many_now(rows(0, 1), 2)
    p = put_req(5)
    assert try_put(e, p) is False
    park(e, p)
    assert fired(p) == [False]
    assert vals(e.take_one_now()) == [0]
    assert fired(p) == [True]
    assert try_put(e, p) is True
    assert not e.putters
    assert take_all(e) == [1, 5]


def test_atomic_putter_is_notified_only_when_all_of_it_fits() -> None:
    """An all-or-nothing enqueue_many is woken when its whole batch fits, not when the
    first slot frees."""
    e = ring_engine(3)
    e.put_many_now(rows(0, 1, 2), 3)
    p = put_req([3, 4], atomic=True)
    assert try_put(e, p) is False
    park(e, p)
    e.take_one_now()
    assert fired(p) == [False]
    e.take_one_now()
    assert fired(p) == [True]
    assert try_put(e, p) is True
    assert take_all(e) == [2, 3, 4]


def test_whole_rest_parks_a_short_rest_until_all_of_it_fits() -> None:
    """With ``whole_rest`` (the queues between pipeline stages), a waiting enqueue_many
    first admits what fits; a rest of at most ``whole_rest`` rows then wakes once, when
    all of it fits, instead of at every freed row. A longer rest still goes in row by
    row, and a plain queue (``whole_rest`` 0) wakes at the first freed row."""
    e = ring_engine(4)
    e.whole_rest = 2
    e.put_many_now(rows(0, 1), 2)
    p = put_req([2, 3, 4, 5])
    assert try_put(e, p) is False
    assert p.pos == 2  # what fitted went in
    park(e, p)
    assert vals(e.take_one_now()) == [0]
    assert fired(p) == [False]  # one row free, two to admit
    assert vals(e.take_one_now()) == [1]
    assert fired(p) == [True]
    assert try_put(e, p) is True
    assert take_all(e) == [2, 3, 4, 5]

    long_rest = put_req([6, 7, 8, 9, 10, 11, 12])
    e.put_many_now(rows(0, 1, 2, 3), 4)
    assert try_put(e, long_rest) is False
    park(e, long_rest)
    e.take_one_now()
    assert fired(long_rest) == [True]  # seven to admit: row by row

    plain = ring_engine(4)
    plain.put_many_now(rows(0, 1, 2, 3), 4)
    q = put_req([4, 5])
    assert try_put(plain, q) is False
    park(plain, q)
    plain.take_one_now()
    assert fired(q) == [True]


def test_non_atomic_enqueue_many_admits_what_fits_and_waits_for_the_rest() -> None:
    """A waiting enqueue_many admits as much as fits at each step, keeping its order."""
    e = ring_engine(2)
    p = put_req([0, 1, 2, 3, 4])
    assert try_put(e, p) is False
    assert p.pos == 2
    park(e, p)
    assert vals(e.take_many_now(2)) == [0, 1]
    assert fired(p) == [True]
    rearm(p)
    assert try_put(e, p) is False
    assert p.pos == 4
    assert vals(e.take_one_now()) == [2]
    assert try_put(e, p) is True  # the last one goes in
    assert not e.putters
    assert vals(e.take_many_now(2)) == [3, 4]
    assert e.enqueued_total == 5


def test_parked_some_getter_is_notified_by_the_first_element_and_takes_what_is_there() -> None:
    """A waiting dequeue_burst is woken as soon as one element can be taken (it does
    not fill a batch or claim), and takes everything there up to n."""
    e = ring_engine(4)
    g = e.get_request(SOME, 3)
    assert not g.progressive
    park(e, g)
    assert g.out is None
    e.put_one_now(one(0))
    assert fired(g) == [True]
    assert e.storage.size == 1
    e.put_many_now(rows(1, 2, 3), 3)
    assert vals(try_get(e, g)) == [0, 1, 2]
    assert vals(e.take_one_now()) == [3]


def test_some_getter_on_a_final_empty_queue_raises_out_of_range() -> None:
    """A dequeue_burst on a closed queue takes what is left, then raises OutOfRangeError."""
    e = ring_engine(4)
    e.put_one_now(one(0))
    e.close(False)
    assert vals(try_get(e, e.get_request(SOME, 3))) == [0]
    with pytest.raises(OutOfRangeError):
        try_get(e, e.get_request(SOME, 3))


# --------------------------------------------------------------------------------------
# Passing queued putters
# --------------------------------------------------------------------------------------


def test_new_putter_passes_queued_putters_only_when_all_of_them_fit() -> None:
    """A new enqueue goes ahead of queued ones that have not started if there is room
    for it and for all of them; otherwise it queues and nothing changes."""
    e = ring_engine(6)
    e.put_many_now(rows(0, 1), 2)
    p1, p2 = put_req(10), put_req([11, 12])
    park(e, p1)
    park(e, p2)
    assert try_put(e, put_req(20)) is True  # free 4 >= 1 + (1 + 2)
    assert try_put(e, put_req(21)) is False  # free 3 < 1 + 3
    assert try_put(e, put_req([22, 23])) is False
    assert e.storage.size == 3
    assert try_put(e, p1) is True
    assert try_put(e, p2) is True
    assert take_all(e) == [0, 1, 20, 10, 11, 12]


def test_new_putter_does_not_pass_a_started_enqueue_many() -> None:
    """Once a queued enqueue_many has admitted part of its batch, a new enqueue waits
    behind it even with room for both, so the batch stays contiguous."""
    e = ring_engine(6)
    e.put_many_now(rows(0, 1, 2, 3, 4), 5)
    p = put_req([10, 11, 12])
    assert try_put(e, p) is False
    park(e, p)
    assert p.pos == 1
    assert vals(e.take_many_now(5)) == [0, 1, 2, 3, 4]  # free 5: room for p and more
    late = put_req(20)
    assert try_put(e, late) is False
    assert not e.put_one_now(one(21))
    assert e.storage.size == 1
    assert try_put(e, p) is True
    assert try_put(e, late) is True
    assert take_all(e) == [10, 11, 12, 20]


# --------------------------------------------------------------------------------------
# All-or-nothing batches above capacity
# --------------------------------------------------------------------------------------


def test_atomic_put_goes_in_above_capacity_when_the_head_dequeue_takes_enough() -> None:
    """An all-or-nothing batch that does not fit is admitted whole when the waiting head
    dequeue will then bring the size back within capacity; that dequeue is woken."""
    e = ring_engine(4, fill=False)
    e.put_many_now(rows(0, 1, 2), 3)
    g = GetRequest(MANY, 4)
    park(e, g)
    a = put_req([3, 4, 5], atomic=True)
    assert try_put(e, a) is True
    assert e.storage.size == 6
    assert e.peak == 6
    assert fired(g) == [True]
    assert vals(try_get(e, g)) == [0, 1, 2, 3]
    assert take_all(e) == [4, 5]


def test_atomic_put_waits_when_the_head_dequeue_would_not_take_enough() -> None:
    """An all-or-nothing batch that would leave the size above capacity after the head
    dequeue took its n (or with no dequeue waiting) is not admitted at all."""
    e = ring_engine(4, fill=False)
    e.put_many_now(rows(0, 1, 2), 3)
    assert try_put(e, put_req([3, 4], atomic=True)) is False  # nobody waiting
    g = GetRequest(MANY, 4)
    park(e, g)
    assert try_put(e, put_req([3, 4, 5, 6, 7, 8], atomic=True)) is False  # 9 - 4 > 4
    assert e.storage.size == 3
    assert e.enqueued_total == 3
    assert fired(g) == [False]


def test_atomic_put_counts_on_what_the_floor_lets_the_dequeue_take() -> None:
    """With min_after_dequeue, the head dequeue can only take what lies above the floor:
    an all-or-nothing batch after which it still could not take all it needs is not
    admitted; one after which it can is, above capacity."""
    e = pool_engine(6, min_after=4)
    e.put_many_now(rows(0, 1, 2, 3, 4), 5)  # one above the floor
    g = e.get_request(MANY, 5)
    assert g.progressive
    park(e, g)
    assert try_put(e, put_req([5, 6], atomic=True)) is False  # 3 above the floor < 5
    assert e.storage.size == 5
    assert try_put(e, put_req([5, 6, 7, 8], atomic=True)) is True  # 5 above the floor
    assert e.storage.size == 9
    got = vals(try_get(e, g))
    assert len(set(got)) == 5
    assert e.storage.size == 4


# --------------------------------------------------------------------------------------
# Filling a waiting batch (FIFO ring)
# --------------------------------------------------------------------------------------


def test_parked_batch_getter_claims_the_ring_and_puts_copy_into_its_batch() -> None:
    """A batch dequeue parked at the head claims what the ring holds (size() no longer
    counts it); put_many_now copies straight into its batch and wakes it when full."""
    e = ring_engine(4)
    e.put_many_now(rows(0, 1), 2)
    g = e.get_request(MANY, 3)
    park(e, g)
    assert g.claimed == 2
    assert e.storage.size == 0
    assert e.statistics().size == 0
    assert fired(g) == [False]
    assert e.put_many_now(rows(2), 1)
    assert (g.claimed, e.storage.size) == (3, 0)
    assert fired(g) == [True]
    assert g.out is not None
    out = g.out
    result = try_get(e, g)
    assert result is out
    assert vals(result) == [0, 1, 2]
    assert (e.enqueued_total, e.dequeued_total) == (3, 3)


def test_rows_beyond_the_filling_batch_go_to_the_ring() -> None:
    """A batch larger than what the filling dequeue still needs fills it, and the rest
    is stored behind."""
    e = ring_engine(4)
    g = e.get_request(MANY, 3)
    park(e, g)
    assert e.put_many_now(rows(0, 1, 2, 3), 4)
    assert fired(g) == [True]
    assert e.storage.size == 1
    assert vals(try_get(e, g)) == [0, 1, 2]
    assert vals(e.take_one_now()) == [3]


def test_put_one_now_fills_the_waiting_batch() -> None:
    """Single enqueues also copy into the filling batch, waking it at the n-th."""
    e = ring_engine(4)
    g = e.get_request(MANY, 2)
    park(e, g)
    assert e.put_one_now(one(7))
    assert (g.claimed, e.storage.size) == (1, 0)
    assert fired(g) == [False]
    assert e.put_one_now(one(8))
    assert fired(g) == [True]
    assert vals(try_get(e, g)) == [7, 8]


def test_a_getter_that_becomes_head_claims_the_ring() -> None:
    """When the head dequeue completes, the next batch dequeue claims what is stored."""
    e = ring_engine(4)
    g1, g2 = e.get_request(MANY, 2), e.get_request(MANY, 2)
    park(e, g1)
    park(e, g2)
    assert e.put_many_now(rows(0, 1), 2)  # into g1's batch
    e.put_many_now(rows(2), 1)  # g2 is not the head: stored
    assert (g1.claimed, g2.claimed, e.storage.size) == (2, 0, 1)
    assert vals(try_get(e, g1)) == [0, 1]
    assert (g2.claimed, e.storage.size) == (1, 0)


def test_a_floor_disables_filling() -> None:
    """With min_after_dequeue the ring is not filled into a waiting batch: the parked
    dequeue claims nothing, so the floor stays stored."""
    ring = RingStorage(6, (I64,), ((),), "q")
    e = Engine(6, ring, name="q", fill=ring, min_after_dequeue=2)
    e.put_many_now(rows(0, 1, 2), 3)
    g = e.get_request(MANY, 2)
    park(e, g)
    assert (g.claimed, g.out, e.storage.size) == (0, None, 3)
    e.put_one_now(one(3))
    assert fired(g) == [True]
    assert vals(try_get(e, g)) == [0, 1]
    assert e.storage.size == 2


# --------------------------------------------------------------------------------------
# Leaving: abandon
# --------------------------------------------------------------------------------------


def test_abandon_restores_claims_at_the_front_in_order() -> None:
    """A progressive dequeue that leaves puts its claimed chunks back before the
    elements that arrived meanwhile, in their original order."""
    e = ring_engine(4, fill=False)
    e.put_many_now(rows(0, 1, 2, 3), 4)
    g = e.get_request(MANY, 6)
    assert g.progressive
    park(e, g)
    assert fired(g) == [True]  # it can claim
    assert try_get(e, g) is WAIT
    assert (g.claimed, e.storage.size) == (4, 0)
    rearm(g)
    e.put_many_now(rows(4), 1)
    assert try_get(e, g) is WAIT  # claims 4 too
    assert (g.claimed, e.storage.size) == (5, 0)
    rearm(g)
    e.put_many_now(rows(5, 6), 2)  # stored, not yet claimed
    e.abandon(g)
    assert not e.getters
    assert e.storage.size == 7  # above capacity for a while
    assert e.peak == 7
    assert take_all(e) == [0, 1, 2, 3, 4, 5, 6]
    assert e.dequeued_total == 7


def test_abandon_passes_the_wake_up_to_the_next_getter() -> None:
    """A filling dequeue that leaves gives its rows back and the next dequeue, which can
    now progress, is woken."""
    e = ring_engine(4)
    e.put_many_now(rows(0, 1, 2), 3)
    g1, g2 = e.get_request(MANY, 4), e.get_request(ONE, 1)
    park(e, g1)
    park(e, g2)
    assert g1.claimed == 3
    assert fired(g1, g2) == [False, False]
    e.abandon(g1)
    assert fired(g2) == [True]
    assert vals(try_get(e, g2)) == [0]
    assert take_all(e) == [1, 2]


def test_abandon_hands_restored_rows_to_the_next_filling_getter() -> None:
    """The next batch dequeue claims the restored rows from the front, in order."""
    e = ring_engine(4)
    e.put_many_now(rows(0, 1, 2), 3)
    g1, g2 = e.get_request(MANY, 4), e.get_request(MANY, 2)
    park(e, g1)
    park(e, g2)
    e.abandon(g1)
    assert g2.claimed == 2
    assert fired(g2) == [True]
    assert vals(try_get(e, g2)) == [0, 1]
    assert vals(e.take_one_now()) == [2]


def test_abandon_of_a_queued_getter_leaves_the_head_alone() -> None:
    """A dequeue behind the head that leaves changes neither the head's claims nor the
    stored elements."""
    e = ring_engine(4)
    e.put_many_now(rows(0, 1), 2)
    g1, g2 = e.get_request(MANY, 3), e.get_request(ONE, 1)
    park(e, g1)
    park(e, g2)
    e.abandon(g2)
    assert list(e.getters) == [g1]
    assert (g1.claimed, e.storage.size) == (2, 0)
    assert fired(g1) == [False]


def test_abandon_of_a_notified_putter_passes_the_wake_up_on() -> None:
    """A woken enqueue that leaves without admitting wakes the next one."""
    e = ring_engine(1)
    e.put_one_now(one(0))
    p1, p2 = put_req(1), put_req(2)
    park(e, p1)
    park(e, p2)
    e.take_one_now()
    assert fired(p1, p2) == [True, False]
    e.abandon(p1)
    assert fired(p2) == [True]
    assert try_put(e, p2) is True
    assert take_all(e) == [2]


# --------------------------------------------------------------------------------------
# Closing
# --------------------------------------------------------------------------------------


def test_close_with_cancel_rejects_pending_putters() -> None:
    """close(cancel_pending_enqueues=True) wakes pending enqueues, whose next step raises
    QueueClosedError naming what they had admitted; what they admitted stays."""
    e = ring_engine(2, fill=False)
    e.put_one_now(one(0))
    p = put_req([1, 2, 3])
    assert try_put(e, p) is False
    park(e, p)
    g = GetRequest(MANY, 3)
    park(e, g)
    e.close(True)
    assert fired(p, g) == [True, False]  # not final while p is pending
    with pytest.raises(QueueClosedError, match="after 1 of 3"):
        try_put(e, p)
    assert not e.putters
    assert fired(g) == [True]  # final now: the dequeue can fail
    with pytest.raises(OutOfRangeError):
        try_get(e, g)
    assert take_all(e) == [0, 1]


def test_closed_queue_refuses_new_enqueues() -> None:
    """After close, a new enqueue raises QueueClosedError and the fast paths refuse."""
    e = ring_engine(2)
    e.close(False)
    with pytest.raises(QueueClosedError, match="is closed"):
        try_put(e, put_req(0))
    assert not e.put_one_now(one(0))
    assert e.storage.size == 0


def test_pending_enqueue_finishes_after_close_without_cancel() -> None:
    """close() without cancelling lets a parked enqueue complete, and until it has, the
    queue is not final: a dequeue that cannot be satisfied waits instead of failing."""
    e = ring_engine(1, fill=False)
    e.put_one_now(one(0))
    p = put_req(1)
    park(e, p)
    e.close(False)
    g = GetRequest(MANY, 2)
    assert try_get(e, g) is WAIT
    assert vals(e.take_one_now()) == [0]
    assert try_put(e, p) is True
    assert vals(e.take_one_now()) == [1]


def test_final_queue_raises_out_of_range_without_consuming() -> None:
    """On a closed queue with nothing pending, a dequeue it cannot supply raises
    OutOfRangeError; the rows the waiting batch had claimed are back, in order."""
    e = ring_engine(4)
    e.put_many_now(rows(0, 1), 2)
    g = e.get_request(MANY, 3)
    park(e, g)
    assert (g.claimed, e.storage.size) == (2, 0)
    e.close(False)
    assert fired(g) == [True]
    with pytest.raises(OutOfRangeError) as info:
        try_get(e, g)
    assert (info.value.requested, info.value.size, info.value.queue_name) == (3, 2, "q")
    assert not e.getters
    assert e.dequeued_total == 0
    assert vals(e.take_many_now(2)) == [0, 1]


def test_up_to_returns_the_remainder_once_final() -> None:
    """dequeue_up_to waits while the queue is open, returns what is left once it is
    final, and raises OutOfRangeError when nothing is left."""
    e = ring_engine(4)
    e.put_many_now(rows(0, 1), 2)
    g = e.get_request(UP_TO, 3)
    park(e, g)
    assert try_get(e, g) is WAIT
    rearm(g)
    e.close(False)
    assert fired(g) == [True]
    assert vals(try_get(e, g)) == [0, 1]
    assert e.dequeued_total == 2
    with pytest.raises(OutOfRangeError):
        try_get(e, e.get_request(UP_TO, 3))


def test_final_queue_serves_what_it_can() -> None:
    """A final queue still serves dequeues it can supply in full."""
    e = ring_engine(4, fill=False)
    e.put_many_now(rows(0, 1, 2), 3)
    e.close(False)
    assert vals(try_get(e, GetRequest(MANY, 2))) == [0, 1]
    with pytest.raises(OutOfRangeError):
        try_get(e, GetRequest(MANY, 2))
    assert vals(try_get(e, GetRequest(ONE, 1))) == [2]


# --------------------------------------------------------------------------------------
# min_after_dequeue
# --------------------------------------------------------------------------------------


def test_min_after_dequeue_floor_holds_while_open_and_lifts_on_close() -> None:
    """Dequeues never take the pool below min_after_dequeue while it is open; a waiting
    dequeue is woken only when an element rises above the floor or on close."""
    e = pool_engine(10, min_after=3)
    e.put_many_now(rows(0, 1, 2, 3, 4), 5)
    taken = vals(e.take_one_now()) + vals(e.take_many_now(1))
    assert e.take_one_now() is WAIT
    assert e.take_many_now(1) is WAIT
    g = GetRequest(ONE, 1)
    park(e, g)
    assert fired(g) == [False]
    e.put_one_now(one(5))
    assert fired(g) == [True]
    taken += vals(try_get(e, g))
    assert e.storage.size == 3
    g2 = GetRequest(MANY, 2)
    park(e, g2)
    assert fired(g2) == [False]
    e.close(False)
    assert fired(g2) == [True]
    taken += vals(try_get(e, g2))
    taken += vals(e.take_one_now())
    assert e.storage.size == 0
    assert sorted(taken) == [0, 1, 2, 3, 4, 5]


def test_large_batch_with_a_floor_claims_progressively_above_the_floor() -> None:
    """A batch dequeue larger than capacity - min_after_dequeue claims what lies above
    the floor as it comes, never the floor itself, and returns n distinct elements."""
    e = pool_engine(6, min_after=2)
    assert not e.get_request(MANY, 4).progressive
    g = e.get_request(MANY, 5)
    assert g.progressive
    e.put_many_now(rows(0, 1, 2, 3, 4, 5), 6)
    park(e, g)
    assert fired(g) == [True]
    assert try_get(e, g) is WAIT
    assert (g.claimed, e.storage.size) == (4, 2)
    rearm(g)
    e.put_one_now(one(6))
    assert fired(g) == [True]
    got = vals(try_get(e, g))
    assert len(got) == len(set(got)) == 5
    assert e.storage.size == 2
    assert sorted(got + take_all_closed(e)) == list(range(7))


def take_all_closed(e: Engine) -> list[int]:
    """Close and take what is left (below the floor)."""
    e.close(False)
    return take_all(e)


# --------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------


def test_statistics_count_totals_peak_and_waiters() -> None:
    """statistics() reports size, totals, the peak size and how many wait each way."""
    e = ring_engine(3, fill=False)
    e.put_many_now(rows(0, 1, 2), 3)
    e.take_one_now()
    e.put_one_now(one(3))
    p = put_req(4)
    park(e, p)
    s = e.statistics()
    assert (s.size, s.capacity, s.closed) == (3, 3, False)
    assert (s.enqueued_total, s.dequeued_total, s.peak_size) == (4, 1, 3)
    assert (s.tasks_waiting_enqueue, s.tasks_waiting_dequeue) == (1, 0)
    e.take_many_now(3)
    assert try_put(e, p) is True
    g1, g2 = GetRequest(MANY, 2), GetRequest(ONE, 1)
    park(e, g1)
    park(e, g2)
    e.close(False)
    s = e.statistics()
    assert (s.size, s.closed, s.enqueued_total, s.dequeued_total) == (1, True, 5, 4)
    assert (s.tasks_waiting_enqueue, s.tasks_waiting_dequeue) == (0, 2)
    assert s.time_full_s >= 0.0
    assert s.time_empty_s >= 0.0


def test_peak_counts_fast_path_puts_and_restored_claims() -> None:
    """The peak follows single puts, batches and restores above capacity."""
    e = ring_engine(2, fill=False)
    e.put_one_now(one(0))
    assert e.statistics().peak_size == 1
    e.put_one_now(one(1))
    assert e.statistics().peak_size == 2
    g = e.get_request(MANY, 3)  # progressive (3 > capacity)
    park(e, g)
    try_get(e, g)
    rearm(g)
    e.put_many_now(rows(2, 3), 2)
    e.abandon(g)
    s = e.statistics()
    assert (s.size, s.peak_size) == (4, 4)


# --------------------------------------------------------------------------------------
# Deferred wake-ups (a thread's step)
# --------------------------------------------------------------------------------------


def test_step_with_deferred_collects_wake_ups_and_fire_all_sends_them() -> None:
    """While ``deferred`` is a list, a step records the requests it decided to wake
    (marking them notified) instead of firing them; fire_all fires them."""
    e = ring_engine(4, fill=False)
    g = GetRequest(ONE, 1)
    event = park(e, g)
    deferred: list[Request] = []
    with e.lock:
        e.deferred = deferred
        assert e.try_put(put_req(7)) is True
        e.deferred = None
    assert deferred == [g]
    assert g.notified
    assert not event.is_set()
    fire_all(deferred)
    assert event.is_set()
    assert event.set_under_lock is False


def test_fast_paths_with_deferred_fire_after_releasing_the_lock() -> None:
    """put_one_now / take_one_now given a list fire their wake-ups after the lock is
    released; without one, they fire under the lock."""
    e = ring_engine(1, fill=False)
    g = GetRequest(ONE, 1)
    g_event = park(e, g)
    deferred: list[Request] = []
    assert e.put_one_now(one(0), deferred)
    assert deferred == [g]
    assert g_event.is_set()
    assert g_event.set_under_lock is False
    assert e.deferred is None
    assert vals(try_get(e, g)) == [0]

    e.put_one_now(one(1))
    p = put_req(2)
    p_event = park(e, p)
    deferred = []
    assert vals(e.take_one_now(deferred)) == [1]
    assert deferred == [p]
    assert p_event.set_under_lock is False

    g2 = GetRequest(ONE, 1)
    g2_event = park(e, g2)
    assert try_put(e, p) is True  # no deferred list: fired at once, under the lock
    assert g2_event.set_under_lock is True


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
        assert e.put_one_now((np.array(p, dtype=np.int64), held))
    try:
        got = e.take_many_now(2)
    except ValueError:
        assert e.storage.size == 2, "the failed take lost the elements"
    else:
        assert list(got[1]) == [("a", 1), ("b", 2, 3)]
