"""Security: a password, and a least-privilege ACL user that can run the queues but
not EVAL, KEYS, FLUSHALL, FUNCTION LOAD, CONFIG or touch keys outside ``aq:*``."""

from __future__ import annotations

import re
import secrets
import socket
from pathlib import Path

import anyio
import numpy as np
import pytest
import redis
from redis_util import RedisProc

import aqueue
import aqueue.redis
from aqueue.redis._core._acl import ACL_SETUSER, FUNCTION_COMMANDS
from aqueue.redis._core._library import PARTS

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_acl_covers_every_command_the_functions_call() -> None:
    folder = Path(aqueue.redis.__file__).parent
    src = "".join((folder / part).read_text() for part in PARTS)
    assert sorted(PARTS) == sorted(str(p.relative_to(folder)) for p in folder.rglob("*.lua"))
    calls = r"(?:redis\.p?call|push_all|call_pairs)\('([A-Z]+)'"
    called = {c.lower() for c in re.findall(calls, src)}
    assert called == set(FUNCTION_COMMANDS)


def make_actor(server: RedisProc) -> tuple[str, str]:
    user, password = f"actor-{secrets.token_hex(4)}", secrets.token_hex(8)
    line = ACL_SETUSER.replace("aqueue-actor", user).replace("PASSWORD", password)
    with server.client() as admin:
        admin.execute_command(*line.split())
    return user, password


async def test_acl_user_runs_queues_and_nothing_else(redis_server: RedisProc, qname: str) -> None:
    async with aqueue.redis.connect(redis_server.url):  # an admin loads the library
        pass
    user, password = make_actor(redis_server)
    url = redis_server.url_for(user, password)
    async with aqueue.redis.connect(url, load_functions=False, wait_timeout=0.05) as srv:
        q = await srv.random_shuffle_queue(qname, 10, 1, np.int64, (), seed=0)
        await q.enqueue_many(np.arange(4))
        got = q_ints(await q.dequeue_many(3))
        assert len(set(got)) == 3
        assert set(got) <= {0, 1, 2, 3}
        pid = await q.register_producer()
        await q.producer_done(pid)
        assert await q.is_closed()
        assert (await q.statistics()).size == 1
        assert await srv.delete_queue(qname)
    with redis.Redis(
        host="127.0.0.1", port=redis_server.port, username=user, password=password
    ) as actor:
        assert actor.ping()
        for cmd in (
            ["EVAL", "return 1", "0"],
            ["KEYS", "*"],
            ["FLUSHALL"],
            ["FUNCTION", "LOAD", "REPLACE", "#!lua name=x\n"],
            ["CONFIG", "GET", "*"],
            ["GET", "other"],
            ["SET", "other", "1"],
            ["FCALL", "aq_close", "1", "other"],
            ["SCRIPT", "FLUSH"],
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                actor.execute_command(*cmd)


def q_ints(batch: object) -> list[int]:
    return [int(v) for v in np.asarray(batch)]


async def test_actor_cannot_load_the_library(redis_server: RedisProc) -> None:
    """load_functions=True with a user that may not: a clear ServerError, not a crash."""
    user, password = make_actor(redis_server)
    with redis_server.client() as admin:
        admin.function_delete("aqueue")
    url = redis_server.url_for(user, password)
    with pytest.raises(aqueue.redis.ServerError, match=r"not loaded"):
        async with aqueue.redis.connect(url, load_functions=False):
            pass
    with pytest.raises(aqueue.redis.ServerError, match=r"NOPERM|permission"):
        async with aqueue.redis.connect(url):
            pass
    async with aqueue.redis.connect(redis_server.url):  # the admin loads it again
        pass


async def test_wrong_password_is_a_clear_error(redis_server: RedisProc) -> None:
    bad = f"redis://:wrong@127.0.0.1:{redis_server.port}/0"
    with pytest.raises(aqueue.redis.ServerError):
        async with aqueue.redis.connect(bad):
            pass


def _connect_failure(url: str, backend: str) -> Exception:
    """What ``connect(url)`` raises on ``backend``."""

    async def attempt() -> None:
        async with aqueue.redis.connect(url):
            pass

    with pytest.raises(aqueue.redis.ServerConnectionError) as info:
        anyio.run(attempt, backend=backend)
    return info.value


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_connect_says_why_it_could_not_connect(redis_server: RedisProc, backend: str) -> None:
    """Nothing listening, a wrong password and a missing one are three distinct errors,
    raised by connect(), naming the server and not aqueue's internals; old ``except
    ServerConnectionError`` clauses still catch them."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    port = redis_server.port
    cases: list[tuple[str, type[Exception], str]] = [
        (
            f"redis://127.0.0.1:{free}/0",
            aqueue.redis.ConnectFailedError,
            f"could not connect to 127.0.0.1:{free}: connection refused",
        ),
        (
            f"redis://:wrong@127.0.0.1:{port}/0",
            aqueue.redis.AuthenticationFailedError,
            f"the server at 127.0.0.1:{port} refused the credentials in the URL (user 'default'",
        ),
        (
            f"redis://127.0.0.1:{port}/0",
            aqueue.redis.PasswordRequiredError,
            f"the server at 127.0.0.1:{port} requires a password",
        ),
    ]
    for url, cls, text in cases:
        exc = _connect_failure(url, backend)
        assert type(exc) is cls, (url, repr(exc))
        assert text in str(exc), str(exc)
        assert "lost the connection" not in str(exc)
        assert "aq_" not in str(exc)
        assert "aq:" not in str(exc)
        assert "wrong" not in str(exc)  # the password is not repeated
        assert isinstance(exc, ConnectionError)


def test_docstring_and_the_redis_guide_quote_the_acl_line() -> None:
    """The line users copy is the one the ACL test runs (a stale copy locks actors out,
    a longer one grants what actors need not have): each text holds it once, whole."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "redis.md").read_text()
    for text in (aqueue.redis.__doc__ or "", guide):
        lines = [ln.strip() for ln in text.splitlines() if "ACL SETUSER aqueue-actor" in ln]
        assert lines == [ACL_SETUSER]


def test_without_the_extra_the_import_error_says_what_to_install() -> None:
    import subprocess
    import sys

    code = "import sys; sys.modules['redis'] = None; import aqueue.redis"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "pip install 'aqueue[redis]'" in done.stderr
    base = subprocess.run(
        [sys.executable, "-c", "import aqueue, sys; assert 'redis' not in sys.modules"], check=False
    )
    assert base.returncode == 0  # the base package never imports redis
