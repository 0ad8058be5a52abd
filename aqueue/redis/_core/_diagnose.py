"""What ``connect()`` tells the user about a server before and as it connects: a URL that
is not one (refused before anything connects), why the first call could not connect
(nothing listening, a password missing or refused), and a ``maxmemory-policy`` that
can evict aqueue's keys. Pure functions over what redis-py reports; no I/O.

Invariant: a message never carries the URL's password (``safe_url`` masks it).
"""

from __future__ import annotations

import socket
import urllib.parse
from typing import Any

import redis
import redis.connection

from ._errors import (
    AuthenticationFailedError,
    ConnectFailedError,
    PasswordRequiredError,
    ServerConnectionError,
)

__all__ = ["connect_error", "eviction", "safe_url", "url_problem"]

OWNER = "aqueue.redis.connect"


def safe_url(url: str) -> str:
    """``url`` with its password (everything before the last ``@``) masked."""
    head, sep, tail = url.rpartition("@")
    return f"{head.split('//')[0]}//***@{tail}" if sep else url


def url_problem(url: str) -> str | None:
    """What makes ``url`` no Redis URL (None: it is one), checked before anything
    connects; redis-py would raise a bare ValueError, or not notice at all."""
    parts = urllib.parse.urlsplit(url)
    # A '/', '?' or '#' in a password ends the URL's host part early: what follows
    # holds the rest of the secret and its '@', so the message does not quote it. (A
    # unix:/// socket's own path may hold an '@'.)
    path = parts.path if parts.netloc or parts.scheme.lower() != "unix" else ""
    if "@" in path + parts.query + parts.fragment:
        return "'/', '?' or '#' in the password must be percent-encoded (%2F, %3F, %23)"
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "unix"):
        # (a scheme starts with a letter: Python 3.10 reads '127.0.0.1:6379' as one)
        got = f"{parts.scheme!r}" if parts.scheme[:1].isalpha() else "none"
        return f"the scheme must be redis://, rediss:// or unix://, got {got}"
    try:
        parts.port  # noqa: B018 - urllib checks the port when it is read
    except ValueError:
        port = parts.netloc.rpartition(":")[2]
        return f"the port must be a number from 0 to 65535, got {port!r}"
    if scheme == "unix":
        if not parts.path:
            return "a unix:// URL must name the socket's path (unix:///path/to/socket)"
    elif parts.path not in ("", "/") and not parts.path[1:].isdigit():
        return f"the database must be a number (/0, /1, ...), got {parts.path[1:]!r}"
    parse: Any = redis.connection.parse_url  # (untyped in redis-py)
    try:
        parse(url)
    except ValueError as exc:
        return str(exc)
    return None


def connect_error(cause: BaseException, where: str, kw: dict[str, Any]) -> ServerConnectionError:
    """The error ``connect()`` raises when its first call to the server at ``where``
    (connection arguments ``kw``) failed with ``cause``."""
    text = str(cause).strip()
    if isinstance(cause, redis.AuthenticationError) or text.startswith(("NOAUTH", "WRONGPASS")):
        if not kw.get("password"):
            return PasswordRequiredError(
                f"{OWNER}: the server at {where} requires a password (the URL gives "
                f"none; pass it as redis://[user]:PASSWORD@{where}/db)"
            )
        user = kw.get("username") or "default"
        return AuthenticationFailedError(
            f"{OWNER}: the server at {where} refused the credentials in the URL (user "
            f"'{user}' with the URL's password): {text}"
        )
    return ConnectFailedError(f"{OWNER}: could not connect to {where}: {_reason(cause)}")


def _reason(cause: BaseException) -> str:
    """Why a connection attempt failed, in a few words (redis-py's error says it with
    an errno: "Error 111 connecting to ...")."""
    seen: list[BaseException] = []
    e: BaseException | None = cause
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    for e in seen:
        if isinstance(e, ConnectionRefusedError):
            return "connection refused (is a Redis server listening there?)"
        if isinstance(e, socket.gaierror):
            return "unknown host"
        if isinstance(e, (TimeoutError, redis.TimeoutError)):
            return "timed out"
    text = str(cause)
    if "Connection refused" in text:
        return "connection refused (is a Redis server listening there?)"
    return text


def eviction(policy: str, maxmemory: int) -> str | None:
    """What a server's ``maxmemory-policy`` does to aqueue's keys when the server is
    full, or None (``noeviction``, or no memory limit: nothing is evicted)."""
    if maxmemory == 0 or policy in ("", "noeviction"):
        return None
    head = f"runs with maxmemory-policy {policy} (maxmemory {maxmemory} bytes): when full it"
    fix = (
        "set maxmemory-policy noeviction (a full server then refuses what adds data "
        "with ServerFullError and keeps everything stored)"
    )
    if policy.startswith("volatile"):
        return (
            f"{head} evicts keys that have an expiry, among them its wake-up lists and lease "
            "markers: a waiter then waits up to wait_timeout for a wake-up that was "
            f"dropped, and a late take of a cancelled dequeue holds its elements until "
            f"lease_time; {fix}"
        )
    return (
        f"{head} evicts any key: queues lose elements, tables lose items, and either may "
        f"vanish whole (their calls then say they are gone from the server); {fix}"
    )
