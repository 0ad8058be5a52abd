"""Random sequences of Engine steps, with the invariants checked after every step.

Hypothesis draws a capacity, ``whole_rest`` and a list of steps, and a driver below
takes them on an Engine over each storage kind (a FIFO ring that fills waiting batches,
a ring without filling, a shuffle pool with a floor, a heap, a deque of per-element
tuples): new enqueues (ONE/MANY, atomic or not, nowait, parked, or a thread's step with
deferred wake-ups), new dequeues (ONE/MANY/UP_TO/SOME, nowait, parked, parked first,
or a batch dequeue's route: parked first when ``parks_first`` guesses it must wait),
retries of woken requests (one, or all of them in turn as their tasks would: "settle",
and spurious ones), leaves of random parked requests, close with and without
cancelling pending enqueues, snapshots (``dump``) and loads. Every element carries a
unique value. After every step:

- ``Engine.check_invariants()`` holds;
- conservation of values: what came out plus what is held (``dump``) is exactly, as a
  multiset, what was admitted (every completed enqueue, the admitted prefix of every
  other) plus what was loaded; the counters and ``statistics()`` agree;
- the waiting lists are the parked requests in the order they parked; a request is
  notified exactly when its waker was set; a thread's step (``thread_step``) set no
  waker under the lock;
- a step that raised QueueFull/QueueEmpty, or OutOfRangeError on its first step,
  changed nothing; only the head progresses; results have the sizes their mode allows;
- a batch dequeue that parks first (it has not checkpointed) always parks: its wait is
  its checkpoint, so it may never complete in its first step (a batch of 0 included:
  it must not park first, and checkpoints instead);
- counts are often the edges: 0, 1 and the capacity;
- FIFO kinds: what came out followed by what is held only ever grows at the end (takes
  and give-backs keep the order), and the admitted rows of one enqueue_many are
  contiguous in it; a pool never goes below its floor by a take while open; a heap
  takes the smallest keys.

At the end the queue is closed (cancelling or not) and woken requests take their steps
until none is left: none may stay parked (no lost wake-up), and everything admitted
comes out exactly once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from support import Flag, engine_step

from aqueue import OutOfRangeError, QueueClosedError, QueueEmpty, QueueFull
from aqueue._queues._engine import Engine
from aqueue._queues._pool import PoolStorage
from aqueue._queues._requests import MANY, ONE, SOME, UP_TO, GetRequest, PutRequest
from aqueue._queues._storage import RingStorage
from aqueue._queues._tuples import DequeStorage, HeapStorage
from aqueue._waiting._wait import WAIT, Request

I64 = np.dtype(np.int64)
DTYPES = (I64, I64)  # (key, value): the key (value % 3) is the heap's priority
KINDS = ["ring_fill", "ring", "pool", "heap", "deque"]
FIFO_KINDS = {"ring_fill", "ring", "deque"}

Op = tuple[Any, ...]


def make_engine(kind: str, capacity: int, floor: int) -> Engine:
    if kind in ("ring_fill", "ring"):
        ring = RingStorage(capacity, DTYPES, ((), ()), kind)
        return Engine(capacity, ring, name=kind, fill=ring if kind == "ring_fill" else None)
    if kind == "pool":
        pool = PoolStorage(capacity, DTYPES, ((), ()), kind, np.random.default_rng(0))
        return Engine(capacity, pool, name=kind, min_after_dequeue=floor)
    if kind == "heap":
        return Engine(capacity, HeapStorage(DTYPES), name=kind)
    return Engine(capacity, DequeStorage(DTYPES, pad=False), name=kind)


def element(v: int) -> tuple[Any, ...]:
    """The components of the element of value ``v`` (as the spec converts one)."""
    return (np.array(v % 3, dtype=np.int64), np.array(v, dtype=np.int64))


@dataclass
class Scenario:
    capacity: int
    floor: int
    whole_rest: int
    ops: list[Op]
    cancel_at_end: bool


STEPS = (
    *("put", "get", "retry") * 3,
    *("settle", "settle", "spurious retry", "leave", "leave", "dump", "load"),
)


def decode(raw: tuple[str, int, int, int]) -> Op:
    """A drawn step: its name and the arguments of the Driver method of that name."""
    name, a, n, c = raw
    if name == "put":  # (mode, count, atomic, how)
        return ("put", (ONE, MANY)[a % 2], n, a >= 2, ("nowait", "arm", "arm", "thread")[c % 4])
    if name == "get":  # (mode, n, how)
        how = ("nowait", "arm", "park", "thread", "route")[c]
        return ("get", (ONE, MANY, UP_TO, SOME)[a], n, how)
    if name in ("retry", "spurious retry"):  # (pick, spurious, thread)
        return ("retry", n, name != "retry", c % 2 == 1)
    if name == "leave":  # (pick,)
        return ("leave", n)
    if name == "settle":  # woken requests take their steps, as their tasks would
        return ("settle",)
    if name == "load":  # (count, as rows)
        return ("load", 1 + a % 2, c % 2 == 1)
    return ("dump",)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    capacity = draw(st.integers(1, 5))
    floor = draw(st.integers(1, 4))  # (the pool's: see drive)
    whole_rest = draw(st.sampled_from([0, capacity // 2]))
    # One flat shape per step (cheap to draw, and it shrinks well): the step's name, then
    # three numbers that ``decode`` reads as that step's arguments.
    op = st.tuples(
        st.sampled_from(STEPS),
        st.integers(0, 3),
        st.one_of(st.sampled_from([0, 1, capacity]), st.integers(0, 2 * capacity + 1)),
        st.integers(0, 4),
    ).map(decode)
    ops = draw(st.lists(op, min_size=10, max_size=50))
    # One close at most, somewhere (or none until the end, where the queue is drained).
    at = draw(st.none() | st.integers(0, len(ops)))
    if at is not None:
        ops.insert(at, ("close", draw(st.booleans())))
    return Scenario(capacity, floor, whole_rest, ops, draw(st.booleans()))


@dataclass
class Put:
    """One enqueue: its values, and its request if it parked."""

    mode: int
    values: list[int]
    req: PutRequest | None

    def admitted(self) -> list[int]:
        return self.values if self.req is None else self.values[: self.req.pos]


@dataclass
class Driver:
    """Takes the drawn steps on one engine and checks everything after each."""

    kind: str
    engine: Engine
    next_value: int = 0
    puts: list[Put] = field(default_factory=list)
    loaded: list[int] = field(default_factory=list)
    out: list[int] = field(default_factory=list)
    getters: list[GetRequest] = field(default_factory=list)
    putters: list[PutRequest] = field(default_factory=list)
    sequence: list[int] = field(default_factory=list)  # FIFO: out + held
    set_under_lock: int = 0
    seen: set[str] = field(default_factory=set)  # what happened (hypothesis events)

    # -- helpers -----------------------------------------------------------------------

    def arm(self) -> Flag:
        return Flag(self)

    def fresh(self, k: int) -> list[int]:
        values = list(range(self.next_value, self.next_value + k))
        self.next_value += k
        return values

    def held(self, pending: bool = False) -> list[int]:
        return [int(c[1]) for c in self.engine.dump(pending)]

    def state(self) -> tuple[Any, ...]:
        """What a step that changed nothing leaves as it was."""
        e = self.engine
        return (
            e.enqueued_total,
            e.dequeued_total,
            e.loaded_total,
            e.storage.size,
            sorted(self.held()),
            list(e.getters),
            list(e.putters),
            [(g.claimed, g.notified) for g in e.getters],
            [(p.pos, p.notified) for p in e.putters],
        )

    def final(self) -> bool:
        return self.engine.closed and not self.engine.putters

    def result_values(self, comps: Any) -> list[int]:
        if comps is None:
            return []
        return [int(v) for v in np.atleast_1d(np.asarray(comps[1]))]

    def check_result(self, mode: int, n: int, got: list[int], final: bool, nowait: bool) -> None:
        if mode == ONE:
            assert len(got) == 1, got
        elif mode == MANY or (mode == UP_TO and not final and not nowait):
            assert len(got) == n, (mode, n, got)
        else:  # SOME, dequeue_up_to_nowait, UP_TO once final
            assert 1 <= len(got) <= n or n == 0 == len(got), (mode, n, got)
        self.out += got

    # -- the steps ---------------------------------------------------------------------

    def put(self, mode: int, count: int, atomic: bool, how: str) -> None:
        e = self.engine
        count = 1 if mode == ONE else max(1, count)  # (the queues never enqueue 0)
        values = self.fresh(count)
        arr = np.array(values, dtype=np.int64)
        comps = (arr % 3, arr) if mode == MANY else element(values[0])
        atomic = atomic and how != "nowait" and count <= e.capacity  # (as the views)
        arm = None if how == "nowait" else self.arm
        thread = how == "thread"
        before = self.state()
        started = [p.pos for p in self.putters]
        try:
            req = engine_step(self, lambda: e.put(mode, comps, count, arm, atomic), thread)
        except QueueFull:
            assert how == "nowait"
            assert self.state() == before, "a refused enqueue changed the queue"
            return
        except QueueClosedError:
            assert e.closed
            assert self.state() == before, "a refused enqueue changed the queue"
            return
        self.puts.append(Put(mode, values, req))
        if req is None:
            assert not any(started), "a new enqueue passed a started one"
        else:
            assert how != "nowait"
            self.putters.append(req)

    def get(self, mode: int, n: int, how: str) -> None:
        e = self.engine
        if mode == ONE:
            n = 1
        if how == "route":  # QueueBase's route: park first if it guesses it must wait
            park = mode in (MANY, UP_TO) and e.parks_first(n)
        else:  # (only batches of n >= 1 park first)
            park = how == "park" and mode in (MANY, UP_TO) and n > 0
        arm = None if how == "nowait" else self.arm
        thread = how == "thread"
        before = self.state()
        final = self.final()
        waiting = bool(self.getters)
        size, opened = e.storage.size, not e.closed
        try:
            got = engine_step(self, lambda: e.get(mode, n, arm, park), thread)
        except QueueEmpty:
            assert how == "nowait"
            assert self.state() == before, "a refused dequeue changed the queue"
            return
        except OutOfRangeError:
            assert final, "OutOfRangeError on a queue that is not final"
            assert self.state() == before, "a failed dequeue consumed something"
            return
        if type(got) is GetRequest:
            assert how != "nowait"
            self.getters.append(got)
            return
        assert not park, f"a dequeue of {n} that parked first completed before its checkpoint"
        assert not waiting or n == 0, "a new dequeue passed the waiting ones"
        self.check_result(mode, n, self.result_values(got), final, how == "nowait")
        self.check_floor(size, opened)
        self.check_priority(self.result_values(got))

    def check_priority(self, got: list[int]) -> None:
        """A heap's take (of elements it did not claim earlier) took the smallest keys."""
        if self.kind == "heap" and got:
            keys = [int(c[0]) for c in self.engine.storage.dump()]
            assert max(v % 3 for v in got) <= min(keys, default=3), "not the smallest keys"

    def check_floor(self, size: int, opened: bool) -> None:
        e = self.engine
        if opened and e.storage.size < size:
            assert e.storage.size >= e.floor, "a take went below the floor"

    def retry(self, pick: int, spurious: bool, thread: bool) -> None:
        e = self.engine
        parked: list[Request] = [*self.getters, *self.putters]
        if not spurious:
            parked = [r for r in parked if r.notified]
        if not parked:
            return
        req = parked[pick % len(parked)]
        head = req is (e.getters[0] if type(req) is GetRequest else e.putters[0])
        final = self.final()
        size, opened = e.storage.size, not e.closed
        try:
            result = engine_step(self, lambda: e.retry(req, self.arm), thread)
        except OutOfRangeError:
            assert type(req) is GetRequest
            assert head, "a dequeue behind the head failed"
            assert final, "OutOfRangeError on a queue that is not final"
            assert not req.registered
            assert req.claimed == 0, "a failed dequeue kept its claims"
            self.seen.add("a retry raised OutOfRangeError")
            return
        except QueueClosedError:
            assert isinstance(req, PutRequest)
            assert req.rejected
            assert not req.registered
            self.seen.add("a rejected enqueue left")
            return
        if result is WAIT:
            assert req.registered
            assert not req.notified
            if isinstance(req, PutRequest) and req.rejected:
                raise AssertionError("a rejected enqueue waits on")
            return
        assert head, "a request behind the head completed"
        assert not req.registered
        self.seen.add(f"a retried {type(req).__name__} completed")
        if isinstance(req, GetRequest):
            self.check_result(req.mode, req.n, self.result_values(result), final, False)
            self.check_floor(size, opened)
            if not req.progressive:  # (a progressive one's claims are older)
                self.check_priority(self.result_values(result))
        else:
            assert isinstance(req, PutRequest)
            assert result is None
            assert req.pos == req.count

    def settle(self) -> None:
        """Woken requests take their steps, oldest woken first, until none is woken (at
        most a few rounds: a woken request may wake another)."""
        for _ in range(2 * (len(self.getters) + len(self.putters))):
            if not any(r.notified for r in (*self.getters, *self.putters)):
                break
            self.retry(0, False, False)
            self.check()

    def leave(self, pick: int) -> None:
        parked: list[Request] = [*self.getters, *self.putters]
        if parked:
            req = parked[pick % len(parked)]
            if isinstance(req, GetRequest) and req.claimed:
                self.seen.add("a getter left holding claims")
            self.engine.leave(req)
            assert not req.registered

    def close(self, cancel: bool) -> None:
        self.engine.close(cancel)
        if cancel:
            assert all(p.rejected and p.notified for p in self.putters)

    def dump(self) -> None:
        e = self.engine
        held, everything = self.held(), self.held(pending=True)
        pending = [
            v
            for p in self.puts
            if p.req is not None and p.req.registered and not p.req.rejected
            for v in p.values[p.req.pos :]
        ]
        assert everything == held + pending
        elements, closed, extra = e.dump_with(lambda: "read")
        assert ([int(c[1]) for c in elements], closed, extra) == (held, e.closed, "read")

    def load(self, k: int, as_rows: bool) -> None:
        values = self.fresh(k)
        arr = np.array(values, dtype=np.int64)
        if as_rows:
            self.engine.load_rows((arr % 3, arr), k)
        else:
            self.engine.load([element(v) for v in values])
        self.loaded += values

    def run(self, op: Op) -> None:
        name, *args = op
        getattr(self, name)(*args)
        self.check()

    # -- after every step --------------------------------------------------------------

    def check(self) -> None:
        e = self.engine
        e.check_invariants()
        if e.storage.size > e.capacity:
            self.seen.add("above capacity")
        if e.getters and e.getters[0].claimed:
            self.seen.add("the head getter held claims")
        if len(e.getters) > 1 or len(e.putters) > 1:
            self.seen.add("two requests waited in one list")
        if e.getters and e.putters:
            self.seen.add("getters and putters waited together")
        self.getters = [g for g in self.getters if g.registered]
        self.putters = [p for p in self.putters if p.registered]
        assert list(e.getters) == self.getters, "the getters are not in the order they parked"
        assert list(e.putters) == self.putters, "the putters are not in the order they parked"
        for r in (*self.getters, *self.putters):
            assert r.notified == r.waker.fired, "notified and the waker disagree"
        admitted = [v for p in self.puts for v in p.admitted()]
        held = self.held()
        assert Counter(self.out) + Counter(held) == Counter(admitted + self.loaded), (
            "values lost or duplicated"
        )
        assert len(self.out) == len(set(self.out))
        assert (e.enqueued_total, e.loaded_total, e.dequeued_total) == (
            len(admitted),
            len(self.loaded),
            len(self.out),
        )
        s = e.statistics()
        assert (s.size, s.enqueued_total, s.dequeued_total, s.peak_size, s.closed) == (
            e.storage.size,
            e.enqueued_total,
            e.dequeued_total,
            e.peak,
            e.closed,
        )
        assert (s.tasks_waiting_dequeue, s.tasks_waiting_enqueue) == (
            len(self.getters),
            len(self.putters),
        )
        assert e.quiet_getters() == sum(not g.notified for g in self.getters)
        assert e.quiet_putters() == sum(not p.notified for p in self.putters)
        if self.kind in FIFO_KINDS:
            sequence = self.out + held
            assert sequence[: len(self.sequence)] == self.sequence, "FIFO order broken"
            self.sequence = sequence

    def drain(self, cancel: bool) -> None:
        """Close, then let woken requests step until none is left; take the rest."""
        e = self.engine
        self.run(("close", cancel))
        for _ in range(1000):  # (far more rounds than a drawn run can need)
            woken = [r for r in (*self.getters, *self.putters) if r.notified]
            if woken:
                self.run(("retry", 0, False, False))
            elif self.putters and not self.getters:
                self.run(("get", UP_TO, max(1, e.storage.size), "nowait"))
            else:
                break
        stuck = f"stuck: {len(self.getters)} getters, {len(self.putters)} putters, none woken"
        assert not self.getters, stuck
        assert not self.putters, stuck
        while e.storage.size:
            self.run(("get", UP_TO, e.storage.size, "nowait"))
        with pytest.raises(OutOfRangeError):
            e.get(ONE, 1)
        admitted = [v for p in self.puts for v in p.admitted()]
        assert sorted(self.out) == sorted(admitted + self.loaded)
        if self.kind in FIFO_KINDS:
            # An enqueue_many's admitted rows stay contiguous among the enqueued elements
            # (a load stores after what is held, so it may land between them).
            loaded = set(self.loaded)
            enqueued = [v for v in self.out if v not in loaded]
            for p in self.puts:
                rows = p.admitted()
                if p.mode == MANY and rows:
                    i = enqueued.index(rows[0])
                    assert enqueued[i : i + len(rows)] == rows, "a batch was split"


def drive(kind: str, s: Scenario) -> None:
    capacity, floor = s.capacity, 0
    if kind == "pool":  # a floor of 1..capacity-1
        capacity = max(2, capacity)
        floor = 1 + (s.floor - 1) % (capacity - 1)
    e = make_engine(kind, capacity, floor)
    e.whole_rest = s.whole_rest
    d = Driver(kind, e)
    d.check()
    for op in s.ops:
        d.run(op)
    d.drain(s.cancel_at_end)
    for what in sorted(d.seen):
        event(what)


SETTINGS = settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# A putter that retries while the head getter's batch is filling: the rows that fill
# the batch take no room, so it must admit what still fits in the same step (it used to
# wait, not woken, although it could progress).
FILLS_THE_HEAD_BATCH = Scenario(
    capacity=2,
    floor=1,
    whole_rest=0,
    ops=[
        ("put", MANY, 2, False, "nowait"),
        ("put", MANY, 5, False, "arm"),
        ("get", MANY, 2, "nowait"),
        ("get", MANY, 2, "arm"),
        ("retry", 0, False, False),
    ],
    cancel_at_end=False,
)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@example(s=FILLS_THE_HEAD_BATCH)
@given(s=scenarios())
def test_random_steps_keep_the_invariants(kind: str, s: Scenario) -> None:
    """Random steps on an engine over each storage kind keep its invariants and lose,
    duplicate or reorder nothing (see the module docstring)."""
    drive(kind, s)
