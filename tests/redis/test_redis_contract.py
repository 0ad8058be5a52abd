"""The queue contract on both backends: Redis queues and in-process ones, asyncio and trio.

The contract tests take ``srv``, which is a Redis server (payloads stored under their own
keys, then inline) or a stand-in that builds in-process FIFOQueue and RandomShuffleQueue
with the same arguments; the in-process queues are seen through the few calls that need
a server on Redis (``await q.size()``, ``await q.statistics()``, ``await
q.is_closed()``; see the Redis guide's table of differences). So one body of tests checks both:
FIFO order, blocking at capacity, exact-n, progressive batch dequeues, dequeue_up_to
after close, dequeue_burst (1..n, the floor, close, cancellation), close waking every
waiter, errors on a closed queue, pending enqueues at close, bad input changing
nothing, element forms, iteration. Tests of what only a shared
queue has (the shared-name rule, a second connection, producer accounting across
processes, delete_queue, wake-ups through the server) take ``rsrv``, a Redis server only.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import until

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


class InProcess:
    """An in-process queue through the calls that are awaited on a shared queue."""

    def __init__(self, q: Any) -> None:
        self._q = q

    def __getattr__(self, name: str) -> Any:
        return getattr(self._q, name)

    def __aiter__(self) -> Any:
        return self._q.__aiter__()

    async def size(self) -> int:
        return int(self._q.size())

    async def statistics(self) -> aqueue.QueueStatistics:
        return self._q.statistics()  # type: ignore[no-any-return]

    async def is_closed(self) -> bool:
        return bool(self._q.closed)


class InProcessServer:
    """Builds in-process queues with a Redis server's arguments (the name is the label)."""

    async def fifo_queue(self, name: str, capacity: int, *args: Any, **kw: Any) -> InProcess:
        return InProcess(aqueue.FIFOQueue(capacity, *args, name=name, **kw))

    async def random_shuffle_queue(
        self, name: str, capacity: int, min_after: int, *args: Any, **kw: Any
    ) -> InProcess:
        return InProcess(aqueue.RandomShuffleQueue(capacity, min_after, *args, name=name, **kw))


def _inline(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Every payload under its own key, or every payload inline (in this process)."""
    from aqueue.redis._core import _shared

    monkeypatch.setattr(_shared, "INLINE_MAX", 0 if how == "keys" else 1 << 30)


@pytest.fixture(params=["redis-keys", "redis-inline", "in-process"])
async def srv(
    request: pytest.FixtureRequest, url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    if request.param == "in-process":
        yield InProcessServer()
        return
    _inline(monkeypatch, request.param.removeprefix("redis-"))
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.1) as server:
        yield server


@pytest.fixture(params=["keys", "inline"])
async def rsrv(
    request: pytest.FixtureRequest, url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[aqueue.redis.RedisServer]:
    _inline(monkeypatch, request.param)
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.1) as server:
        yield server


@pytest.fixture(params=["fifo", "shuffle"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def open_q(srv: Any, kind: str, name: str, cap: int) -> Any:
    if kind == "fifo":
        return await srv.fifo_queue(name, cap, np.int64, ())
    return await srv.random_shuffle_queue(name, cap, 0, np.int64, (), seed=3)


def check(kind: str, got: list[int], want: list[int]) -> None:
    assert (got if kind == "fifo" else sorted(got)) == want


def ints(batch: Any) -> list[int]:
    arr = np.asarray(batch)
    assert arr.dtype == np.int64
    return [int(v) for v in arr]


async def waiting(q: Any, *, put: int = 0, get: int = 0) -> None:
    async def ok() -> bool:
        s = await q.statistics()
        return bool(s.tasks_waiting_enqueue >= put and s.tasks_waiting_dequeue >= get)

    await until(ok)


async def test_order_and_forms(srv: Any, kind: str, qname: str) -> None:
    """Elements come out once each, in order for FIFO; dequeue gives numpy scalars."""
    q = await open_q(srv, kind, qname, 50)
    await q.enqueue_many(np.arange(10))
    for v in range(10, 13):
        await q.enqueue(v)
    one = await q.dequeue()
    assert isinstance(one, np.int64)
    got = [int(one), *ints(await q.dequeue_many(7)), *ints(await q.dequeue_up_to(5))]
    check(kind, got, list(range(13)))
    assert await q.size() == 0


async def test_enqueue_blocks_at_capacity(srv: Any, kind: str, qname: str) -> None:
    """A batch bigger than the room is admitted progressively, as room frees."""
    q = await open_q(srv, kind, qname, 3)
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.enqueue_many, np.arange(5))
        await waiting(q, put=1)
        assert await q.size() == 3
        got = ints(await q.dequeue_many(2))
        got += ints(await q.dequeue_many(3))
    check(kind, got, list(range(5)))
    s = await q.statistics()
    assert (s.enqueued_total, s.dequeued_total, s.peak_size, s.size) == (5, 5, 3, 0)
    assert s.time_full_s > 0


async def test_dequeue_many_takes_exactly_n(srv: Any, kind: str, qname: str) -> None:
    """A dequeue_many(5) with 3 present waits, then takes exactly 5."""
    q = await open_q(srv, kind, qname, 10)
    await q.enqueue_many(np.arange(3))
    out: list[int] = []

    async def take() -> None:
        out.extend(ints(await q.dequeue_many(5)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(take)
        await waiting(q, get=1)
        # A waiting batch dequeue on an in-process FIFO claims what is queued (claimed
        # elements have left the queue, as in TF); a shared queue's takes nothing yet.
        claims = kind == "fifo" and isinstance(q, InProcess)
        assert await q.size() == (0 if claims else 3)
        await q.enqueue_many(np.arange(3, 7))
    assert len(out) == 5
    if kind == "fifo":
        assert out == [0, 1, 2, 3, 4]
    assert len(set(out)) == 5
    assert set(out) <= set(range(7))
    assert await q.size() == 2


async def test_progressive_dequeue_larger_than_capacity(srv: Any, kind: str, qname: str) -> None:
    """dequeue_many(n > capacity) claims progressively and returns n in order."""
    q = await open_q(srv, kind, qname, 4)
    out: list[int] = []

    async def take() -> None:
        out.extend(ints(await q.dequeue_many(10)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(take)
        await q.enqueue_many(np.arange(10))
    check(kind, out, list(range(10)))


async def test_dequeue_up_to_after_close(srv: Any, kind: str, qname: str) -> None:
    """After close, dequeue_up_to returns the 1..n left, then OutOfRangeError."""
    q = await open_q(srv, kind, qname, 10)
    await q.enqueue_many(np.arange(3))
    await q.aclose()
    assert await q.is_closed()
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue_many(5)
    assert await q.size() == 3  # nothing consumed
    check(kind, ints(await q.dequeue_up_to(5)), [0, 1, 2])
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue_up_to(5)
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue()


async def test_dequeue_burst_waits_for_one_then_takes_what_is_there(
    srv: Any, kind: str, qname: str
) -> None:
    """dequeue_burst(n) waits for the first element, then takes 1..n at once: all
    that is there, up to n (in queue order for FIFO)."""
    q = await open_q(srv, kind, qname, 10)
    out: list[int] = []

    async def burst() -> None:
        out.extend(ints(await q.dequeue_burst(4)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(burst)
        await waiting(q, get=1)
        await q.enqueue(0)
    assert out == [0]
    await q.enqueue_many(np.arange(1, 7))
    first = ints(await q.dequeue_burst(4))
    rest = ints(await q.dequeue_burst(4))
    assert (len(first), len(rest)) == (4, 2)
    check(kind, first + rest, list(range(1, 7)))
    assert await q.size() == 0
    assert ints(await q.dequeue_burst(0)) == []


async def test_dequeue_burst_ends_on_a_closed_empty_queue(srv: Any, kind: str, qname: str) -> None:
    """A closed queue gives its remainder, then OutOfRangeError; a waiting burst is
    woken by the close and gets OutOfRangeError."""
    q = await open_q(srv, kind, qname, 4)
    await q.enqueue_many(np.arange(2))
    await q.aclose()
    check(kind, ints(await q.dequeue_burst(8)), [0, 1])
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue_burst(8)
    q2 = await open_q(srv, kind, qname + "b", 4)
    errors: list[BaseException] = []

    async def burst() -> None:
        try:
            await q2.dequeue_burst(2)
        except aqueue.OutOfRangeError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(burst)
        await waiting(q2, get=1)
        with anyio.fail_after(5):
            await q2.aclose()
    assert len(errors) == 1


async def test_cancelled_dequeue_burst_consumes_nothing(srv: Any, kind: str, qname: str) -> None:
    """A burst cancelled while it waits takes nothing and leaves no waiter behind: the
    elements enqueued after it all go to the next burst."""
    q = await open_q(srv, kind, qname, 10)
    with anyio.move_on_after(0.3) as scope:
        await q.dequeue_burst(5)
    assert scope.cancelled_caught
    await q.enqueue_many(np.arange(3))
    s = await q.statistics()
    assert (s.size, s.dequeued_total, s.tasks_waiting_dequeue) == (3, 0, 0)
    check(kind, ints(await q.dequeue_burst(5)), [0, 1, 2])


async def test_dequeue_burst_honours_min_after_dequeue(srv: Any, qname: str) -> None:
    """On a shuffle queue an open queue keeps min_after_dequeue elements: a burst takes
    only what is above the floor, waits at the floor, and takes the rest once closed."""
    q = await srv.random_shuffle_queue(qname, 10, 3, np.int64, (), seed=4)
    await q.enqueue_many(np.arange(5))
    first = ints(await q.dequeue_burst(8))
    assert len(first) == 2
    assert await q.size() == 3
    out: list[int] = []

    async def burst() -> None:
        out.extend(ints(await q.dequeue_burst(8)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(burst)
        await waiting(q, get=1)
        assert out == []
        await q.aclose()
    assert len(out) == 3
    assert sorted(first + out) == list(range(5))


async def test_close_wakes_every_waiter(srv: Any, kind: str, qname: str) -> None:
    """Closing wakes all blocked dequeuers: up_to gets the rest, the others OutOfRange."""
    q = await open_q(srv, kind, qname, 10)
    await q.enqueue(7)
    results: list[Any] = []

    async def many() -> None:
        try:
            await q.dequeue_many(3)
        except aqueue.OutOfRangeError as exc:
            results.append(exc)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(many)
        await waiting(q, get=3)
        with anyio.fail_after(5):
            await q.aclose()
    assert len(results) == 3
    assert all(isinstance(r, aqueue.OutOfRangeError) for r in results)
    assert ints(await q.dequeue_up_to(3)) == [7]


async def test_closed_queue_errors(srv: Any, kind: str, qname: str) -> None:
    q = await open_q(srv, kind, qname, 10)
    await q.aclose()
    with pytest.raises(aqueue.QueueClosedError, match="closed"):
        await q.enqueue(1)
    with pytest.raises(aqueue.QueueClosedError):
        await q.enqueue_many(np.arange(3))
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue()
    with pytest.raises(aqueue.QueueClosedError):
        await q.register_producer()
    assert await q.size() == 0


async def test_close_lets_pending_enqueue_finish(srv: Any, kind: str, qname: str) -> None:
    """A plain close lets a pending enqueue_many finish as room frees (as TF)."""
    q = await open_q(srv, kind, qname, 2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.enqueue_many, np.arange(4))
        await waiting(q, put=1)
        await q.aclose()
        got = ints(await q.dequeue_many(2))
        got += ints(await q.dequeue_many(2))  # not OutOfRange: the enqueue was pending
    check(kind, got, [0, 1, 2, 3])
    with pytest.raises(aqueue.OutOfRangeError):
        await q.dequeue()


async def test_cancel_pending_enqueues(srv: Any, kind: str, qname: str) -> None:
    q = await open_q(srv, kind, qname, 2)
    errors: list[BaseException] = []

    async def put() -> None:
        try:
            await q.enqueue_many(np.arange(5))
        except aqueue.QueueClosedError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(put)
        await waiting(q, put=1)
        await q.aclose(cancel_pending_enqueues=True)
    assert len(errors) == 1
    assert "cancel_pending_enqueues" in str(errors[0])
    assert "2 of 5" in str(errors[0])
    check(kind, ints(await q.dequeue_up_to(5)), [0, 1])  # the admitted prefix stays


async def test_bad_input_changes_nothing(srv: Any, kind: str, qname: str) -> None:
    q = await open_q(srv, kind, qname, 10)
    await q.enqueue_many(np.arange(2))
    with pytest.raises(aqueue.ElementSpecError, match="dtype"):
        await q.enqueue(np.float64(1.5))
    with pytest.raises(aqueue.ElementSpecError, match="shape"):
        await q.enqueue(np.zeros(3, np.int64))
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue_many(np.float32([1, 2]))
    with pytest.raises(aqueue.ElementSpecError, match="n must be >= 0"):
        await q.dequeue_many(-1)
    with pytest.raises(aqueue.ElementSpecError, match="n must be an int"):
        await q.dequeue_up_to(2.0)
    with pytest.raises(aqueue.ElementSpecError):
        q.batches(0)
    assert await q.size() == 2
    empty = await q.dequeue_many(0)
    assert empty.shape == (0,)
    assert await q.size() == 2


async def test_reopen_with_another_spec_names_the_field(rsrv: Any, qname: str) -> None:
    """TF's shared_name rule: the same name must come with the same spec."""
    await rsrv.random_shuffle_queue(qname, 10, 2, np.int64, (3,), names=["x"])
    shuffle = rsrv.random_shuffle_queue
    cases: list[tuple[str, str, Any]] = [
        (
            "kind",
            "kind RedisRandomShuffleQueue, but RedisFIFOQueue was given",
            rsrv.fifo_queue(qname, 10, np.int64, (3,), names=["x"]),
        ),
        ("capacity", "capacity 10, but 11", shuffle(qname, 11, 2, np.int64, (3,), names=["x"])),
        (
            "min_after_dequeue",
            "min_after_dequeue 2, but 1",
            shuffle(qname, 10, 1, np.int64, (3,), names=["x"]),
        ),
        ("dtypes", "dtypes int64, but int32", shuffle(qname, 10, 2, np.int32, (3,), names=["x"])),
        ("shapes", "shapes (3,), but (4,)", shuffle(qname, 10, 2, np.int64, (4,), names=["x"])),
        ("names", "names 'x', but 'y'", shuffle(qname, 10, 2, np.int64, (3,), names=["y"])),
    ]
    for field, words, coro in cases:
        with pytest.raises(aqueue.ElementSpecError, match=field) as info:
            await coro
        assert "already exists" in str(info.value)
        assert words in str(info.value)  # numpy's notation, not the stored JSON
    again = await rsrv.random_shuffle_queue(qname, 10, 2, np.int64, (3,), names=["x"], seed=9)
    assert (again.capacity, again.min_after_dequeue, again.names) == (10, 2, ("x",))


async def test_constructor_arguments_are_checked(rsrv: Any, qname: str) -> None:
    with pytest.raises(aqueue.ElementSpecError, match="capacity"):
        await rsrv.fifo_queue(qname, 0, np.int64)
    with pytest.raises(aqueue.ElementSpecError, match="min_after_dequeue"):
        await rsrv.random_shuffle_queue(qname, 5, 5, np.int64)
    with pytest.raises(aqueue.ElementSpecError, match="cannot be stored"):
        await rsrv.fifo_queue(qname, 5, object)
    with pytest.raises(aqueue.ElementSpecError, match="cannot be stored"):
        await rsrv.fifo_queue(qname, 5, "datetime64[s]")
    with pytest.raises(aqueue.ElementSpecError, match="cannot be stored"):
        await rsrv.fifo_queue(qname, 5, np.dtype([("a", "i4")]))
    with pytest.raises(aqueue.ElementSpecError, match="queue name"):
        await rsrv.fifo_queue("a{b}", 5, np.int64)
    with pytest.raises(aqueue.ElementSpecError, match="not fully defined"):
        await rsrv.fifo_queue(qname, 5, np.int64, (None,))


async def test_element_forms_named_and_tuple(srv: Any, kind: str, qname: str) -> None:
    """Dict elements by names and tuple elements, several dtypes, as in-process."""
    if kind == "fifo":
        q = await srv.fifo_queue(
            qname,
            10,
            [np.uint8, "S3", ">f4", bool],
            [(2,), (), (), ()],
            names=["img", "tag", "w", "ok"],
        )
    else:
        q = await srv.random_shuffle_queue(
            qname,
            10,
            0,
            [np.uint8, "S3", ">f4", bool],
            [(2,), (), (), ()],
            names=["img", "tag", "w", "ok"],
        )
    await q.enqueue({"img": [1, 2], "tag": b"ab", "w": 0.5, "ok": True})
    await q.enqueue_many(
        {
            "img": np.ones((2, 2), np.uint8),
            "tag": [b"x", b"y"],
            "w": np.float32([1, 2]),
            "ok": [False, True],
        }
    )
    one = await q.dequeue()
    if kind == "fifo":
        assert one["img"].tolist() == [1, 2]
        assert one["tag"] == b"ab"
    assert set(one) == {"img", "tag", "w", "ok"}
    batch = await q.dequeue_many(2)
    assert batch["img"].shape == (2, 2)
    assert batch["w"].dtype == np.dtype(">f4")
    assert batch["ok"].dtype == np.bool_
    assert batch["img"].flags.writeable
    t = await srv.fifo_queue(qname + "t", 4, [np.int16, np.float64], [(), (3,)])
    await t.enqueue((1, [1.0, 2.0, 3.0]))
    a, b = await t.dequeue()
    assert (int(a), b.tolist()) == (1, [1.0, 2.0, 3.0])


async def test_shapeless_queue(srv: Any, qname: str) -> None:
    """shapes=None: elements keep their own shapes; batch dequeues are refused."""
    q = await srv.fifo_queue(qname, 10, np.float32)
    await q.enqueue(np.zeros((2, 3), np.float32))
    await q.enqueue(np.ones(5, np.float32))
    with pytest.raises(aqueue.ElementSpecError, match="declared shapes"):
        await q.dequeue_many(2)
    assert (await q.dequeue()).shape == (2, 3)
    assert (await q.dequeue()).shape == (5,)


async def test_iteration(srv: Any, kind: str, qname: str) -> None:
    q = await open_q(srv, kind, qname, 20)
    await q.enqueue_many(np.arange(7))
    it = q.batches(3)
    got = ints(await it.__anext__())
    await q.aclose()
    got += ints(await it.__anext__())
    with pytest.raises(StopAsyncIteration):
        await it.__anext__()
    got += [int(x) async for x in q]  # the leftover one
    check(kind, got, list(range(7)))
    r = await open_q(srv, kind, qname + "b", 20)
    await r.enqueue_many(np.arange(5))
    await r.aclose()
    sizes = [len(b) async for b in r.batches(2, allow_smaller_final_batch=True)]
    assert sizes == [2, 2, 1]


async def test_two_connections_share_the_queue(rsrv: Any, url: str, kind: str, qname: str) -> None:
    q1 = await open_q(rsrv, kind, qname, 10)
    async with aqueue.redis.connect(url) as other:
        q2 = await open_q(other, kind, qname, 10)
        await q1.enqueue_many(np.arange(4))
        check(kind, ints(await q2.dequeue_many(4)), [0, 1, 2, 3])
    assert not await q1.is_closed()  # leaving `async with` never closes a queue


async def test_producer_accounting(rsrv: Any, url: str, qname: str) -> None:
    """The queue closes when its last registered producer ends cleanly; clean=False
    closes it at once with cancel_pending_enqueues."""
    q = await rsrv.fifo_queue(qname, 10, np.int64, ())
    a = await q.register_producer()
    async with aqueue.redis.connect(url) as other:
        q2 = await other.fifo_queue(qname, 10, np.int64, ())
        b = await q2.register_producer()
        await q2.enqueue(1)
        await q2.producer_done(b)
    assert not await q.is_closed()
    await q.producer_done(a)
    assert await q.is_closed()
    assert int(await q.dequeue()) == 1
    r = await rsrv.fifo_queue(qname + "x", 1, np.int64, ())
    await r.register_producer()
    c = await r.register_producer()
    await r.enqueue(0)
    errors: list[BaseException] = []

    async def put() -> None:
        try:
            await r.enqueue(1)
        except aqueue.QueueClosedError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(put)
        await waiting(r, put=1)
        await r.producer_done(c, clean=False)
    assert len(errors) == 1
    assert await r.is_closed()


def test_producer_accounting_has_one_signature_on_both_backends() -> None:
    """Code written against ``aqueue.AsyncQueue`` (the distributed example's
    ``await q.producer_done(held)``) runs on either backend."""
    protocol = inspect.signature(aqueue.AsyncQueue.producer_done)
    for cls in (aqueue.FIFOQueue, aqueue.RandomShuffleQueue, aqueue.redis.RedisQueue):
        assert inspect.signature(cls.producer_done) == protocol, cls
        assert inspect.signature(cls.register_producer) == inspect.signature(
            aqueue.AsyncQueue.register_producer
        )
    assert protocol.parameters["clean"].default is True


async def test_delete_queue(rsrv: Any, qname: str) -> None:
    q = await rsrv.fifo_queue(qname, 10, np.int64, ())
    errors: list[BaseException] = []

    async def get() -> None:
        try:
            await q.dequeue()
        except aqueue.OutOfRangeError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(get)
        await waiting(q, get=1)
        assert await rsrv.delete_queue(qname)
    assert len(errors) == 1
    assert not await rsrv.delete_queue(qname)
    with pytest.raises(aqueue.QueueClosedError, match="deleted"):
        await q.enqueue(1)
    fresh = await rsrv.fifo_queue(qname, 5, np.float32)  # the name is free again
    assert fresh.capacity == 5


async def test_waiters_are_woken_not_polled(url: str, kind: str, qname: str) -> None:
    """With a 5 s retry timeout, a waiting dequeue and a waiting enqueue still finish
    at once when the other side acts: the wake-up token, not the retry, ends the wait."""
    async with aqueue.redis.connect(url, lease_time=30.0, wait_timeout=5.0) as srv:
        q = await open_q(srv, kind, qname, 1)
        got: list[int] = []

        async def get() -> None:
            got.append(int(await q.dequeue()))

        with anyio.fail_after(2.5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(get)
                await waiting(q, get=1)
                await q.enqueue(1)
            await q.enqueue(2)
            async with anyio.create_task_group() as tg:
                tg.start_soon(q.enqueue, 3)
                await waiting(q, put=1)
                got.append(int(await q.dequeue()))
            got.append(int(await q.dequeue()))
        assert got == [1, 2, 3]


async def test_a_runner_on_a_closed_queue_ends_cleanly(srv: Any, kind: str, qname: str) -> None:
    """Registering a producer on a closed queue raises QueueClosedError, and a runner
    started on one ends cleanly, its producers never run (a thread and a task)."""
    q = await open_q(srv, kind, qname, 4)
    await q.aclose()
    with pytest.raises(aqueue.QueueClosedError, match="closed"):
        await q.register_producer()
    calls: list[str] = []

    def from_thread() -> int:
        calls.append("thread")
        return 1

    async def from_task() -> int:
        calls.append("task")
        return 2

    target = q._q if isinstance(q, InProcess) else q
    runner = aqueue.QueueRunner(target, [from_thread, from_task])
    with anyio.fail_after(10):
        async with aqueue.Coordinator() as coord:
            coord.start(runner)
            await runner.join()
    assert calls == []
    assert runner.exceptions_raised == []
    assert [state for _, state in runner.producer_states()] == ["done", "done"]
    assert await q.size() == 0
