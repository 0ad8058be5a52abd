"""Fixtures of the replay-table tests.

``make_table`` builds an empty table for the contract tests: ``await make_table(max_size,
dtypes, shapes, names, **options)`` with the constructor's options. It is parametrised
over the backends that implement a replay table: the in-process ``aqueue.ReplayTable``,
and ``aqueue.redis``'s table on a private redis-server (one per session, started when a
test first needs it; each table gets a fresh name). On asyncio the Redis tables keep
every payload under its own key, on trio every payload inline (the items of these tests
are small), so one run covers both storages. Every contract test body runs over each
backend unchanged, so the bodies use only what every backend offers: awaited
operations, ``await table.statistics()``, the blocking view, and waits that poll the
statistics (``replay_support.waiting``) rather than ``settle()``, which cannot see a
waiter registered on a server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from replay_support import MakeTable, shared_tables

import aqueue


@pytest.fixture(scope="session")
def table_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server for the replay contract over Redis (skipped, or failed
    under CI=true, when none can start: see tests/redis_util.py)."""
    pytest.importorskip("redis", reason="aqueue[redis] is not installed")
    from redis_util import start_redis, stop_redis

    server = start_redis(Path(tmp_path_factory.mktemp("replay-redis")))
    yield server.url
    stop_redis(server)


@pytest.fixture(params=["in-process", "redis"])
async def make_table(
    request: pytest.FixtureRequest, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[MakeTable]:
    """A factory of empty tables of one backend."""
    if request.param == "in-process":

        async def make(
            max_size: int, dtypes: Any, shapes: Any = None, names: Any = None, **options: Any
        ) -> Any:
            return aqueue.ReplayTable(max_size, dtypes, shapes, names, **options)

        yield make
        return

    from aqueue.redis import connect
    from aqueue.redis._core import _shared

    url = request.getfixturevalue("table_redis_url")
    monkeypatch.setattr(_shared, "INLINE_MAX", 0 if anyio_backend == "asyncio" else 1 << 30)
    async with connect(url, lease_time=2.0, wait_timeout=0.1) as server:
        yield shared_tables(server)
