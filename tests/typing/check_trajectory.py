"""Checked by mypy (``mypy aqueue tests/typing``), never run: the types of the trajectory
tables (``aqueue.TrajectoryTable``, its writers and samples) and helpers
(``aqueue.n_step_returns``).

Each ``assert_type`` holds only if mypy infers exactly that type; the lines marked
``# type: ignore[...]`` must be errors (``warn_unused_ignores`` makes an unneeded one
an error itself), so a result that became ``Any`` fails here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import aqueue
import aqueue.redis

Floats = npt.NDArray[np.floating[Any]]


def returns() -> None:
    rewards = np.ones((32, 3), np.float32)
    ret, boot = aqueue.n_step_returns(rewards, np.ones((32, 3), np.float32), 0.99)
    assert_type(ret, Floats)
    assert_type(boot, Floats)
    target = ret + boot * np.ones(32, np.float32)
    print(target)


def rejected() -> None:
    aqueue.n_step_returns([1.0], [1.0], "0.99")  # type: ignore[arg-type]
    one: float = aqueue.n_step_returns([1.0], [1.0], 0.9)  # type: ignore[assignment]
    print(one)


async def tables() -> None:
    named = aqueue.TrajectoryTable(
        100, (np.uint8, np.float32), ((84, 84), ()), ("frame", "reward"), length=4
    )
    assert_type(named, aqueue.TrajectoryTable[dict[str, npt.NDArray[Any]]])
    frames = aqueue.TrajectoryTable(100, np.uint8, (84, 84), length=4)
    assert_type(frames, aqueue.TrajectoryTable[npt.NDArray[Any]])
    w = frames.writer()
    assert_type(w, aqueue.TrajectoryWriter)
    assert_type(await w.append(np.zeros((84, 84), np.uint8)), npt.NDArray[np.int64])
    assert_type(w.blocking(), aqueue.BlockingTrajectoryWriter)
    s = await named.sample(32)
    assert_type(s, aqueue.ReplaySample[dict[str, npt.NDArray[Any]]])
    assert_type(frames.statistics(), aqueue.TrajectoryStatistics)
    assert_type(frames.snapshot(), aqueue.TrajectorySnapshot)
    view = named.blocking()
    assert_type(view, aqueue.BlockingTrajectoryTable[dict[str, npt.NDArray[Any]]])
    assert_type(view.table, aqueue.TrajectoryTable[dict[str, npt.NDArray[Any]]])
    assert_type(view.sample(32, timeout=1.0), aqueue.ReplaySample[dict[str, npt.NDArray[Any]]])
    for got in view.samples(32):
        assert_type(got, aqueue.ReplaySample[dict[str, npt.NDArray[Any]]])
    assert_type(view.update_priorities(s.keys, s.priorities), npt.NDArray[np.bool_])
    assert_type(view.delete(s.keys), npt.NDArray[np.bool_])
    assert_type(view.statistics(), aqueue.TrajectoryStatistics)
    view.sample("32")  # type: ignore[arg-type]
    frames.writer(resume="0")  # type: ignore[arg-type]
    aqueue.TrajectoryTable(100, np.uint8, (84, 84))  # type: ignore[call-overload]


def shared_through_redis_threads(table: aqueue.redis.RedisTrajectoryTable[Any]) -> None:
    view = table.blocking()
    assert_type(view, aqueue.redis.BlockingRedisTrajectoryTable[Any])
    assert_type(view.table, aqueue.redis.RedisTrajectoryTable[Any])
    assert_type(view.sample(32, timeout=1.0), aqueue.ReplaySample[Any])
    for got in view.samples(32, timeout=1.0):
        assert_type(got, aqueue.ReplaySample[Any])
    assert_type(view.update_priorities([0], [1.0]), npt.NDArray[np.bool_])
    assert_type(view.statistics(), aqueue.TrajectoryStatistics)
    view.insert(np.zeros(3))  # type: ignore[attr-defined]
    w = table.writer().blocking()
    assert_type(w, aqueue.redis.BlockingRedisTrajectoryWriter)
    assert_type(w.append(np.zeros(3), timeout=1.0), npt.NDArray[np.int64])
    assert_type(w.append_many(np.zeros((2, 3)), [1.0, 2.0]), npt.NDArray[np.int64])
    w.append(np.zeros(3), timeout="1")  # type: ignore[arg-type]
    w.end_episode()
    w.close()
