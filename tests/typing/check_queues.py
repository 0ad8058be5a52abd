"""Checked by mypy (``mypy aqueue tests/typing``), never run: the queues' result types.

Each ``assert_type`` holds only if mypy infers exactly that type; the lines marked
``# type: ignore[...]`` must be errors (with ``warn_unused_ignores`` an ignore that is
not needed is itself an error), so a queue whose results became ``Any`` fails here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import aqueue
import aqueue.redis

Array = npt.NDArray[Any]


async def inferred() -> None:
    frames = aqueue.FIFOQueue(100, np.uint8, (84, 84, 4))
    assert_type(frames, aqueue.FIFOQueue[Array])
    assert_type(await frames.dequeue(), Array)
    assert_type(await frames.dequeue_many(32), Array)
    assert_type(frames.dequeue_up_to_nowait(4), Array)
    async for frame in frames:
        assert_type(frame, Array)
    async for batch in frames.batches(8):
        assert_type(batch, Array)
    assert_type(frames.blocking().dequeue(), Array)

    pairs = aqueue.FIFOQueue(10, (np.float32, np.int64), ((3,), ()))
    assert_type(await pairs.dequeue(), tuple[Array, Array])
    triples = aqueue.RandomShuffleQueue(10, 2, (np.float32, np.int64, "int8"), seed=0)
    assert_type(await triples.dequeue_many(2), tuple[Array, Array, Array])

    named = aqueue.FIFOQueue(10, [np.float32, np.int64], [(3,), ()], names=["x", "y"])
    assert_type(await named.dequeue(), dict[str, Array])
    padded = aqueue.PaddingFIFOQueue(10, np.int32, (None,), ["tokens"])
    assert_type(await padded.dequeue_many(2), dict[str, Array])

    ranked = aqueue.PriorityQueue(10, np.float32, (2,))
    assert_type(await ranked.dequeue(), tuple[Array, Array])


class Record(NamedTuple):
    path: str
    size: int


async def explicit() -> None:
    records = aqueue.FIFOQueue[Record](10, [object, object], [(), ()])
    assert_type(await records.dequeue(), Record)
    assert_type(records.dequeue_nowait(), Record)


async def rejected() -> None:
    q = aqueue.FIFOQueue(4, np.int64, ())
    n: str = await q.dequeue_many(2)  # type: ignore[assignment]
    m: int = await q.dequeue()  # type: ignore[assignment]
    del n, m


async def not_inferred() -> None:
    names = aqueue.FIFOQueue(10, object, ())  # Python objects: not inferred, Any
    assert_type(names, aqueue.FIFOQueue[Any])


def snapshots() -> None:
    # A snapshot carries its queue's element type; from_snapshot on a kind gives that
    # kind with it. A loaded snapshot's element type is not known: Any.
    frames = aqueue.FIFOQueue(100, np.uint8, (84, 84, 4))
    snap = frames.snapshot()
    assert_type(snap, aqueue.QueueSnapshot[Array])
    assert_type(aqueue.FIFOQueue.from_snapshot(snap), aqueue.FIFOQueue[Array])
    assert_type(aqueue.QueueBase.from_snapshot(snap), aqueue.QueueBase[Array])
    pairs = aqueue.RandomShuffleQueue(10, 2, (np.float32, np.int64), seed=0)
    assert_type(
        aqueue.RandomShuffleQueue.from_snapshot(pairs.snapshot()),
        aqueue.RandomShuffleQueue[tuple[Array, Array]],
    )
    ranked = aqueue.PriorityQueue(10, np.float32, (2,))
    assert_type(
        aqueue.PriorityQueue.from_snapshot(ranked.snapshot()),
        aqueue.PriorityQueue[tuple[Array, Array]],
    )
    padded = aqueue.PaddingFIFOQueue(10, np.int32, (None,), ["tokens"])
    assert_type(
        aqueue.PaddingFIFOQueue.from_snapshot(padded.snapshot()),
        aqueue.PaddingFIFOQueue[dict[str, Array]],
    )
    loaded = aqueue.QueueSnapshot.load("queue.snap")
    assert_type(loaded, aqueue.QueueSnapshot[Any])
    assert_type(aqueue.FIFOQueue.from_snapshot(loaded), aqueue.FIFOQueue[Any])
    assert_type(len(loaded), int)
    bad: aqueue.FIFOQueue[str] = aqueue.FIFOQueue.from_snapshot(snap)  # type: ignore[arg-type]
    del bad


async def statistics_on_every_backend(shared: aqueue.AsyncQueue[Any]) -> None:
    # In process the call returns the record; awaiting it works too, as on any queue
    # of the protocol (a shared queue's statistics() is a coroutine).
    frames = aqueue.FIFOQueue(100, np.uint8, (84, 84, 4))
    assert_type(frames.statistics(), aqueue.QueueStatistics)
    assert_type(await frames.statistics(), aqueue.QueueStatistics)
    assert_type(await shared.statistics(), aqueue.QueueStatistics)
    size: str = (await shared.statistics()).size  # type: ignore[assignment]
    del size


async def shared_through_redis(server: aqueue.redis.RedisServer) -> None:
    # Redis queues infer their element type as the in-process ones do.
    frames = await server.fifo_queue("frames", 100, np.uint8, (84, 84, 4))
    assert_type(frames, aqueue.redis.RedisFIFOQueue[Array])
    assert_type(await frames.dequeue(), Array)
    assert_type(await frames.dequeue_many(32), Array)
    assert_type(await frames.dequeue_up_to(4), Array)
    assert_type(await frames.dequeue_burst(4), Array)
    async for frame in frames:
        assert_type(frame, Array)
    async for batch in frames.batches(8):
        assert_type(batch, Array)
    view = frames.blocking()
    assert_type(view, aqueue.redis.BlockingRedisQueue[Array])
    assert_type(view.dequeue(timeout=1.0), Array)
    assert_type(view.dequeue_many(2), Array)
    assert_type(view.queue, aqueue.redis.RedisQueue[Array])

    pairs = await server.fifo_queue("pairs", 10, (np.float32, np.int64), ((3,), ()))
    assert_type(await pairs.dequeue(), tuple[Array, Array])
    triples = await server.random_shuffle_queue(
        "triples", 10, 2, (np.float32, np.int64, "int8"), seed=0
    )
    assert_type(triples, aqueue.redis.RedisRandomShuffleQueue[tuple[Array, Array, Array]])
    assert_type(await triples.dequeue_many(2), tuple[Array, Array, Array])
    named = await server.fifo_queue("named", 10, [np.float32, np.int64], [(3,), ()], ["x", "y"])
    assert_type(await named.dequeue(), dict[str, Array])
    keyword = await server.random_shuffle_queue(
        "kw", 10, 2, [np.float32, np.int64], [(3,), ()], names=["x", "y"]
    )
    assert_type(keyword.blocking().dequeue(), dict[str, Array])
    shared: aqueue.AsyncQueue[Array] = frames
    n: str = await frames.dequeue_many(2)  # type: ignore[assignment]
    m: int = await pairs.dequeue()  # type: ignore[assignment]
    del shared, n, m
