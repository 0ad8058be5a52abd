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


def _server_argv(binary: str, port: int, password: str, tmp: Path) -> list[str]:
    return [
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
    ]


def _answers(server: RedisProc) -> bool:
    """Wait (2 s at most) until ``server`` answers PING."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and server.proc.poll() is None:
        try:
            with server.client() as c:
                if c.ping():
                    return True
        except redis.ConnectionError:
            time.sleep(0.01)
    return False


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
            _server_argv(binary, port, password, tmp),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server = RedisProc(proc, port, password, tmp)
        if _answers(server):
            return server
        stop_redis(server)  # port taken meanwhile, or a slow start: try another port
    pytest.fail("redis-server did not answer PING within 2 s (5 attempts)")


def restart_redis(server: RedisProc) -> None:
    """kill -9 ``server`` and start it again on the same port, empty (no persistence:
    its data and its function library are gone), as a restarted server would be."""
    server.kill()
    binary = _binary()
    assert binary is not None
    server.proc = subprocess.Popen(
        _server_argv(binary, server.port, server.password, server.dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert _answers(server), "redis-server did not restart"


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


def wait_dropped(client: redis.Redis, client_name: str, *, limit_s: float = 10.0) -> None:
    """Block until the server holds no connection named ``client_name`` (a killed
    process's, named with ``?client_name=`` in its URL): then it has read, and run or
    discarded, everything that process sent. A process's last bytes can still be
    unread in the server's socket buffer after it died; a transaction among them runs
    then, whole. Asks with ``client`` (a raw client of the server) every 10 ms; fails
    after ``limit_s`` seconds."""
    deadline = time.monotonic() + limit_s
    while any(x.get("name") == client_name for x in client.client_list()):
        assert time.monotonic() < deadline, f"the server still serves {client_name!r}"
        time.sleep(0.01)


def queue_keys(server: RedisProc, name: str) -> list[bytes]:
    """Every key of queue ``name`` (``aq:{name}:*``)."""
    with server.client() as c:
        return sorted(c.scan_iter(match=f"aq:{{{name}}}:*", count=1000))


# -- replay tables: their whole state on the server, and its invariants ---------------------


def table_state(client: redis.Redis, name: str) -> dict[str, object]:
    """Everything table ``name`` keeps on the server but its wake-up lists, comparable:
    every key of the table (type-aware), so an operation that changed nothing leaves
    this equal."""
    state: dict[str, object] = {}
    for key in sorted(client.scan_iter(match=f"aq:{{{name}}}:*", count=1000)):
        k = key.decode()
        if ":wk:" in k:
            continue
        kind = client.type(key).decode()
        if kind == "hash":
            fields = client.hgetall(key)
            if k.endswith(":meta"):  # the wait clocks move with time, not with operations,
                # and the waiters' arrival numbers with each registration
                fields = {f: v for f, v in fields.items() if not f.endswith(b"w_since")}
                fields = {f: v for f, v in fields.items() if not f.endswith(b"w_tot")}
                fields.pop(b"arr", None)
            state[k] = fields
        elif kind == "zset":
            state[k] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            state[k] = client.lrange(key, 0, -1)
        else:
            state[k] = client.get(key)
    return state


def check_table(client: redis.Redis, name: str) -> list[str]:
    """The invariants of ``_replay.lua`` that table ``name`` breaks (empty: none)."""
    import json
    import struct

    p = f"aq:{{{name}}}:"
    meta = {k.decode(): v.decode() for k, v in client.hgetall(p + "meta").items()}
    problems: list[str] = []
    size = int(meta["inserts"]) - int(meta["deletes"])
    recs = {int(k): struct.unpack("<ddddB", v) for k, v in client.hgetall(p + "it").items()}
    dense = {int(k): int(v) for k, v in client.hgetall(p + "dense").items()}
    if len(recs) != size or len(dense) != size:
        problems.append(f"size {size}, {len(recs)} records, {len(dense)} dense entries")
    if sorted(dense) != list(range(len(dense))):
        problems.append("dense positions are not 0..size-1")
    for pos, key in dense.items():
        if key not in recs or int(recs[key][3]) != pos:
            problems.append(f"dense {pos} -> {key} disagrees with its record")
    pz = dict(client.zrange(p + "pz", 0, -1, withscores=True))
    if len(pz) != size:
        problems.append(f"pz holds {len(pz)} members for {size} items")
    small = client.hgetall(p + "pl")
    times = 0
    for key, (prio, t, seq, _pos, inl) in recs.items():
        member = f"{int(seq):015d}:{key}".encode()
        if pz.get(member) != prio:
            problems.append(f"key {key}: pz member {member!r} missing or not {prio}")
        times += int(t)
        has = str(key).encode() in small if inl else client.exists(f"{p}d:{key}") == 1
        if not has:
            problems.append(f"key {key}: payload missing")
    payload_keys = list(client.scan_iter(match=p + "d:*", count=1000))
    if len(payload_keys) + len(small) != size:
        problems.append(f"{len(payload_keys)} payload keys and {len(small)} small payloads")
    for pattern in ("st:*", "o:*"):
        left = list(client.scan_iter(match=p + pattern, count=1000))
        if left:
            problems.append(f"{len(left)} {pattern} keys left behind")
    if int(meta["mts"]) and int(meta["sl"]) != times:
        problems.append(f"sl {meta['sl']} but the records' times add up to {times}")
    roles = [("s", meta["skind"], float(meta["sexp"])), ("r", meta["rkind"], float(meta["rexp"]))]
    fanout, max_size = int(meta["fanout"]), int(meta["max_size"])
    for tree, kind, exp in roles:
        if kind != "prioritized" or (tree == "r" and roles[0][1:] == (kind, exp)):
            continue
        sizes = [max_size]
        while sizes[-1] > 1:
            sizes.append(-(-sizes[-1] // fanout))
        levels = []
        for j, n in enumerate(sizes):
            raw = client.get(f"{p}t:{tree}:{j}") or b""
            vals = list(struct.unpack(f"<{len(raw) // 8}d", raw)) + [0.0] * (n - len(raw) // 8)
            levels.append(vals[:n])
        for pos in range(max_size):
            key = dense.get(pos)
            want = 0.0 if key is None else _weight(recs[key][0], exp)
            if levels[0][pos] != want:
                problems.append(f"tree {tree}: leaf {pos} is {levels[0][pos]}, not {want}")
        for j in range(1, len(sizes)):
            for i in range(sizes[j]):
                total = 0.0
                for v in levels[j - 1][i * fanout : (i + 1) * fanout]:
                    total += v
                if levels[j][i] != total:
                    problems.append(f"tree {tree}: node {j}:{i} is not the sum of its children")
    for setting in ("sampler", "remover"):
        json.loads(meta[setting])
    return problems


def _weight(priority: float, exponent: float) -> float:
    if priority == 0:
        return 0.0
    return priority if exponent == 1 else priority**exponent
