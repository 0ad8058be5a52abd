"""Checked by mypy (``mypy aqueue tests/typing``), never run: the replay table's types,
and a table as a sink of runners and pipelines (``aqueue.Sink``, ``AsyncReplayTable``).

Each ``assert_type`` holds only if mypy infers exactly that type; the lines marked
``# type: ignore[...]`` must be errors (``warn_unused_ignores`` makes an unneeded one
an error itself), so a result that became ``Any`` fails here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import aqueue
import aqueue.redis

Array = npt.NDArray[Any]
Keys = npt.NDArray[np.int64]
Found = npt.NDArray[np.bool_]


async def inferred() -> None:
    frames = aqueue.ReplayTable(1000, np.float32, (84, 84), sampler=aqueue.Prioritized(0.6))
    assert_type(frames, aqueue.ReplayTable[Array])
    assert_type(await frames.insert(np.zeros((84, 84), np.float32)), int)
    assert_type(await frames.insert_many(np.zeros((4, 84, 84), np.float32)), Keys)
    s = await frames.sample(32)
    assert_type(s, aqueue.ReplaySample[Array])
    assert_type(s.data, Array)
    assert_type(s.keys, Keys)
    assert_type(s.priorities, npt.NDArray[np.float64])
    assert_type(s.probabilities, npt.NDArray[np.float64])
    assert_type(s.times_sampled, Keys)
    assert_type(s.table_size, int)
    assert_type(s.weights(0.4), npt.NDArray[np.float64])
    assert_type(await frames.update_priorities(s.keys, np.ones(32)), Found)
    assert_type(await frames.delete(s.keys), Found)
    async for batch in frames.samples(8):
        assert_type(batch, aqueue.ReplaySample[Array])
    assert_type(frames.size(), int)
    view = frames.blocking()
    assert_type(view, aqueue.BlockingReplayTable[Array])
    assert_type(view.sample(4, timeout=1.0).data, Array)
    assert_type(view.insert(np.zeros((84, 84), np.float32), timeout=1.0), int)

    pairs = aqueue.ReplayTable(10, (np.float32, np.int64), ((3,), ()))
    assert_type((await pairs.sample(2)).data, tuple[Array, Array])
    named = aqueue.ReplayTable(10, [np.float32, np.int64], [(3,), ()], names=["obs", "step"])
    assert_type((await named.sample(2)).data, dict[str, Array])
    queue = aqueue.ReplayTable.queue(10, np.int64, ())
    assert_type(queue, aqueue.ReplayTable[Array])
    stack = aqueue.ReplayTable.stack(10, [np.int64, np.int64], [(), ()], ["a", "b"])
    assert_type(stack, aqueue.ReplayTable[dict[str, Array]])


async def records() -> None:
    table = aqueue.ReplayTable(10, np.int64, ())
    stats = table.statistics()
    assert_type(stats, aqueue.ReplayStatistics)
    assert_type(await table.statistics(), aqueue.ReplayStatistics)
    assert_type(stats.insert_wait_s, float)
    assert_type(stats.evictions, int)
    snap = table.snapshot()
    assert_type(snap, aqueue.ReplaySnapshot[Array])
    assert_type(aqueue.ReplayTable.from_snapshot(snap), aqueue.ReplayTable[Array])
    loaded = aqueue.ReplaySnapshot.load("table.npz")
    assert_type(aqueue.ReplayTable.from_snapshot(loaded), aqueue.ReplayTable[Any])
    limiter: aqueue.RateLimiter = aqueue.SampleToInsertRatio(4.0, 1000, 400.0)
    assert_type(limiter.can_sample(10, 20, 0, 1), bool)
    assert_type(aqueue.MinSize(1).max_diff, float)


def act() -> Array:
    return np.zeros(3, np.float32)


async def as_a_sink() -> None:
    table = aqueue.ReplayTable(100, np.float32, (3,), name="transitions")
    runner = aqueue.QueueRunner(table, [act, act], name="actors")
    assert_type(runner, aqueue.QueueRunner[aqueue.ReplayTable[Array]])
    assert_type(runner.queue, aqueue.ReplayTable[Array])
    assert_type(await table.enqueue(act()), None)
    assert_type(await table.enqueue_many(np.zeros((4, 3), np.float32)), None)
    assert_type(await table.register_producer(), str)
    table.blocking().enqueue_many(np.zeros((4, 3), np.float32), timeout=1.0)
    # a queue's runner still knows its queue
    frames = aqueue.FIFOQueue(8, np.float32, (3,))
    fills = aqueue.QueueRunner(frames, [range(3)])
    assert_type(fills.queue, aqueue.FIFOQueue[Array])
    assert_type(await fills.queue.dequeue(), Array)
    runners: list[aqueue.QueueRunner] = [runner, fills]  # any sink's runner
    sinks: list[aqueue.Sink] = [table, frames]
    view: aqueue.SinkView = table.blocking()
    # the protocol a shared table will implement too
    shared: aqueue.AsyncReplayTable[Array] = table
    assert_type(await shared.sample(4), aqueue.ReplaySample[Array])
    assert_type(await shared.statistics(), aqueue.ReplayStatistics)
    assert_type(shared.blocking(), aqueue.ReplayView[Array])
    assert_type(shared.blocking().sample(4, timeout=1.0).data, Array)
    pipe = aqueue.Pipeline(range(10)).map(lambda i: act()).to_queue(table)
    assert_type(pipe, aqueue.Pipeline[Array])
    async with aqueue.Coordinator() as coord:
        coord.watch(table, frames)
        coord.start(runner)
    print(runners, sinks, view)


async def shared_through_redis(server: aqueue.redis.RedisServer) -> None:
    table = await server.replay_table("transitions", 100, np.float32, (3,))
    assert_type(table, aqueue.redis.RedisReplayTable[Array])
    s = await table.sample(8)
    assert_type(s, aqueue.ReplaySample[Array])
    assert_type(s.data, Array)
    assert_type(s.weights(0.4), npt.NDArray[np.float64])
    async for batch in table.samples(8):
        assert_type(batch.data, Array)
    assert_type(table.blocking(), aqueue.redis.BlockingRedisReplayTable[Array])
    assert_type(table.blocking().sample(4, timeout=1.0).data, Array)
    pairs = await server.replay_table("pairs", 10, (np.float32, np.int64), ((3,), ()))
    assert_type((await pairs.sample(2)).data, tuple[Array, Array])
    triples = await server.replay_table("t3", 10, (np.float32, np.int64, "i1"), ((3,), (), ()))
    assert_type((await triples.sample(2)).data, tuple[Array, Array, Array])
    named = await server.replay_table("named", 10, [np.float32, np.int64], [(3,), ()], ["o", "r"])
    assert_type((await named.sample(2)).data, dict[str, Array])
    keyword = await server.replay_table(
        "kw", 10, [np.float32, np.int64], [(3,), ()], names=["o", "r"], seed=0
    )
    assert_type(keyword, aqueue.redis.RedisReplayTable[dict[str, Array]])
    wrong: int = (await table.sample(2)).data  # type: ignore[assignment]
    del wrong
    assert_type(await table.insert(act()), int)
    assert_type(await table.insert_many(np.zeros((4, 3), np.float32)), Keys)
    assert_type(await table.size(), int)
    assert_type(await table.statistics(), aqueue.ReplayStatistics)
    shared: aqueue.AsyncReplayTable[Any] = table
    sink: aqueue.Sink = table
    view: aqueue.ReplayView[Any] = table.blocking()
    assert_type(table.blocking().insert(act(), timeout=1.0), int)
    runner = aqueue.QueueRunner(table, [act], name="actors")
    assert_type(runner.queue, aqueue.redis.RedisReplayTable[Array])
    await aqueue.Pipeline(range(3)).map(lambda i: act()).to_queue(table).run()
    async with aqueue.Coordinator() as coord:
        coord.watch(table)
    print(shared, sink, view)


async def not_sinks() -> None:
    aqueue.QueueRunner(object(), [range(3)])  # type: ignore[type-var]
    aqueue.Pipeline(range(3)).to_queue(object())  # type: ignore[arg-type]
    async with aqueue.Coordinator() as coord:
        coord.watch(object())  # type: ignore[arg-type]
    table = aqueue.ReplayTable(4, np.int64, ())
    q: aqueue.AsyncQueue[Array] = table  # type: ignore[assignment]
    del q


class Step(NamedTuple):
    obs: Array
    reward: Array


async def explicit() -> None:
    steps = aqueue.ReplayTable[Step](10, [np.float32, np.float32], [(3,), ()])
    assert_type((await steps.sample(2)).data, Step)


async def rejected() -> None:
    t = aqueue.ReplayTable(4, np.int64, ())
    key: str = await t.insert(1)  # type: ignore[assignment]
    data: str = (await t.sample(1)).data  # type: ignore[assignment]
    print(key, data)
    aqueue.ReplayTable(4, np.int64, (), sampler="uniform")  # type: ignore[call-overload]
