"""Helpers for the tests that need a Redis server (tests/redis, and the replay-table
contract over Redis in tests/replay; imported by their conftests and test modules).

``start_redis``/``stop_redis`` run a private redis-server; ``until`` polls an async
predicate (threads and other processes are invisible to ``wait_all_tasks_blocked``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
import redis


@dataclass
class RedisProc:
    """A private redis-server: its process, port, password and URL."""

    proc: subprocess.Popen[bytes]
    port: int
    password: str
    dir: Path

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        """A raw admin client (tests only)."""
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)

    def url_for(self, user: str, password: str) -> str:
        return f"redis://{user}:{password}@127.0.0.1:{self.port}/0"

    def kill(self) -> None:
        """kill -9 the server."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(5)


def _binary() -> str | None:
    env = os.environ.get("AQUEUE_REDIS_SERVER")
    if env:
        return env
    return shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(tmp: Path) -> RedisProc:
    """Start a private redis-server and wait (2 s at most) until it answers PING."""
    binary = _binary()
    if binary is None:
        msg = "no redis-server: set AQUEUE_REDIS_SERVER or put redis-server on PATH"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    password = secrets.token_hex(16)
    for _attempt in range(5):
        port = _free_port()
        proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--protected-mode",
                "yes",
                "--save",
                "",
                "--appendonly",
                "no",
                "--maxmemory",
                "256mb",
                "--maxmemory-policy",
                "noeviction",
                "--requirepass",
                password,
                "--dir",
                str(tmp),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server = RedisProc(proc, port, password, tmp)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with server.client() as c:
                    if c.ping():
                        return server
            except redis.ConnectionError:
                time.sleep(0.01)
        stop_redis(server)  # port taken meanwhile, or a slow start: try another port
    pytest.fail("redis-server did not answer PING within 2 s (5 attempts)")


def stop_redis(server: RedisProc) -> None:
    """SIGTERM, then SIGKILL after 2 s (by PID)."""
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(2)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(2)


async def until(predicate: Callable[[], Awaitable[bool]], *, limit_s: float = 10.0) -> None:
    """Poll ``predicate`` every 10 ms until it holds; fail after ``limit_s`` seconds."""
    with anyio.fail_after(limit_s):
        while not await predicate():  # noqa: ASYNC110 - the state lives on the server
            await anyio.sleep(0.01)


def payload_keys(server: RedisProc, name: str) -> list[bytes]:
    """The payload keys (``aq:{name}:e:*``) of queue ``name`` on the server."""
    with server.client() as c:
        return sorted(c.scan_iter(match=f"aq:{{{name}}}:e:*", count=1000))


def queue_keys(server: RedisProc, name: str) -> list[bytes]:
    """Every key of queue ``name`` (``aq:{name}:*``)."""
    with server.client() as c:
        return sorted(c.scan_iter(match=f"aq:{{{name}}}:*", count=1000))
