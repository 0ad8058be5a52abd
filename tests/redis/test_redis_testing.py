"""aqueue.testing over a Redis queue: drain takes its elements (as a list or stacked
with the queue's declared spec); stall_guard, which watches in-process queues only,
still turns a hang on a Redis queue into StallError, saying it sees no waiter."""

from __future__ import annotations

import anyio
import numpy as np
import pytest

import aqueue.redis
from aqueue.testing import StallError, drain, stall_guard

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_drain_and_stall_guard_on_a_redis_queue(url: str, qname: str) -> None:
    async with aqueue.redis.connect(url, wait_timeout=0.05) as srv:
        q = await srv.fifo_queue(qname, 8, np.float32, (2,))
        await q.enqueue_many(np.arange(8, dtype=np.float32).reshape(4, 2))
        await q.aclose()
        got = [x.tolist() for x in await drain(q, timeout=30)]
        assert got == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
        other = await srv.fifo_queue(f"{qname}-2", 8, np.float32, (2,))
        await other.enqueue_many(np.ones((3, 2), dtype=np.float32))
        await other.aclose()
        batch = await drain(other, stack=True, timeout=30)
        assert (batch.shape, batch.dtype) == ((3, 2), np.float32)
        empty = await srv.fifo_queue(f"{qname}-3", 8, np.float32, (2,))
        with anyio.fail_after(30), pytest.raises(StallError) as info:
            async with stall_guard(0.3):
                await empty.dequeue()
        assert "no in-process queue has a task or thread waiting on it" in str(info.value)
        assert "queues of aqueue.redis are not watched" in str(info.value)
