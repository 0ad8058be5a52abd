"""What the failover tests share: the hang guard, a worker's log of what its calls
did, one logged call, and the kill of a primary followed by its replica's promotion
(the workers going on afterwards)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
from redis_cluster_util import ClusterProc

import aqueue.redis

FAILOVER_TIMEOUT = 6.0  # the failover cluster's node timeout (1 s) plus 5 s
HANG_GUARD = FAILOVER_TIMEOUT + 30.0  # (a hang guard for one call, not a speed check)


@dataclass
class Log:
    """What one worker saw: the batches its calls sent that were acknowledged (with
    the time), the errors with the time they came, and when each call returned."""

    acked: list[tuple[float, np.ndarray]] = field(default_factory=list)
    errors: list[tuple[float, BaseException]] = field(default_factory=list)
    returned: list[float] = field(default_factory=list)

    def after(self, t: float) -> int:
        return sum(1 for r in self.returned if r > t)


async def call(log: Log, fn: Any, *args: Any, guard: bool = True, **kw: Any) -> Any:
    """One call (under the hang guard unless it may wait for data): its reply, or None
    once its error is logged (check ``log.returned`` to tell a None reply)."""
    try:
        with anyio.fail_after(HANG_GUARD if guard else None):
            reply = await fn(*args, **kw)
    except aqueue.redis.ServerConnectionError as exc:
        log.errors.append((time.monotonic(), exc))
        await anyio.sleep(0.05)  # (the slot map is read again meanwhile)
        return None
    log.returned.append(time.monotonic())
    return reply


async def until(predicate: Callable[[], bool]) -> None:
    while not predicate():  # noqa: ASYNC110 - set by the workers' results
        await anyio.sleep(0.02)


async def kill_and_promote(
    cluster: ClusterProc, victim: int, workers: Sequence[Log]
) -> tuple[float, float]:
    """SIGKILL primary ``victim``, wait until its replica serves its slots and every
    worker has returned ten calls since; when it was killed and when promoted."""
    kill_at = time.monotonic()
    await anyio.to_thread.run_sync(cluster.kill, victim)
    await anyio.to_thread.run_sync(cluster.wait_promoted, victim)
    promoted_at = time.monotonic()
    await until(lambda: min(w.after(promoted_at) for w in workers) >= 10)
    return kill_at, promoted_at
