"""The server killed (kill -9) while producers and consumers wait: every waiter, async
or thread, raises ServerConnectionError within a bounded time; nothing hangs."""

from __future__ import annotations

import time
from typing import Any

import anyio
import numpy as np
import pytest
from redis_util import RedisProc, until

import aqueue
import aqueue.redis

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_server_killed_while_waiting(own_redis: RedisProc, qname: str) -> None:
    errors: list[BaseException] = []

    async def run(fn: Any, *args: Any) -> None:
        try:
            await fn(*args)
        except aqueue.redis.ServerConnectionError as exc:
            errors.append(exc)

    def thread_run(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except aqueue.redis.ServerConnectionError as exc:
            errors.append(exc)

    async with aqueue.redis.connect(own_redis.url, wait_timeout=0.1, socket_timeout=2.0) as srv:
        empty = await srv.fifo_queue(qname, 4, np.int64, ())
        full = await srv.random_shuffle_queue(qname + "f", 1, 0, np.int64, ())
        await full.enqueue(0)

        async def all_waiting() -> bool:
            a, b = await empty.statistics(), await full.statistics()
            return a.tasks_waiting_dequeue >= 3 and b.tasks_waiting_enqueue >= 2

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, empty.dequeue_many, 2)
            tg.start_soon(run, empty.dequeue)
            tg.start_soon(run, full.enqueue, 1)
            tg.start_soon(anyio.to_thread.run_sync, thread_run, empty.blocking().dequeue)
            tg.start_soon(anyio.to_thread.run_sync, thread_run, full.blocking().enqueue, 2)
            await until(all_waiting)
            t0 = time.monotonic()
            own_redis.kill()
            with anyio.fail_after(10):
                await until(_count(errors, 5))
            elapsed = time.monotonic() - t0
        assert len(errors) == 5
        assert elapsed < 10
        assert all("connection" in str(e).lower() for e in errors)
        with pytest.raises(aqueue.redis.ServerConnectionError):
            await empty.size()


def _count(items: list[Any], n: int) -> Any:
    async def ok() -> bool:
        return len(items) >= n

    return ok
