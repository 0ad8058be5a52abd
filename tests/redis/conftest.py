"""Fixtures for the Redis backend's tests: a private redis-server per session.

The binary comes from ``$AQUEUE_REDIS_SERVER``, else PATH. Without one the tests are
skipped with the reason, except under ``CI=true``, where that is a failure. The server
listens on 127.0.0.1 on a free port with a random password, without persistence and
with ``noeviction`` (a full server refuses writes instead of dropping queue keys).
Tests that kill the server use the function-scoped ``own_redis`` instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("redis", reason="aqueue[redis] is not installed")
pytest.importorskip("msgpack", reason="aqueue[redis] is not installed")

from redis_util import RedisProc, start_redis, stop_redis


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProc]:
    """One private server for the whole session (queues get unique names)."""
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    stop_redis(server)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisProc]:
    """A private server for one test (for tests that kill it)."""
    server = start_redis(tmp_path)
    yield server
    stop_redis(server)


@pytest.fixture
def url(redis_server: RedisProc) -> str:
    return redis_server.url


@pytest.fixture
def qname() -> str:
    """A unique queue name."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["keys", "inline"])
def payload_storage(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with every payload stored under its own key, then with every payload
    inline in the queue's list or hash (in this process; the size threshold decides
    otherwise)."""
    from aqueue.redis._core import _shared

    monkeypatch.setattr(_shared, "INLINE_MAX", 0 if request.param == "keys" else 1 << 30)
    return str(request.param)
