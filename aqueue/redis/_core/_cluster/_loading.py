"""aqueue's function library on every primary of a cluster.

Redis Cluster does not propagate functions between shards: each primary needs its
own ``FUNCTION LOAD`` (its replicas get it by replication, so a promoted replica has
it). ``ensure_library`` (async) and ``ensure_library_sync`` ask every primary the
clients know for ``aq_version`` (``FCALL_RO aq_version 0`` sent to that node) and,
where it is missing or of another version, load it (``FUNCTION LOAD REPLACE`` on
that node) or, for a client that may not (``load_functions=False``: an ACL user
without FUNCTION), raise ServerError naming the node and what to load. The
transports call them once at the start and again whenever a call meets "Function not
found": a primary that joined after the start, or one whose library was flushed.

The steps are written once (``_steps``, a generator yielding the command to send to
one node) and driven by the two functions.

Invariant: after ``ensure_library`` returns, every primary in the client's slot map
had the library of ``LIBRARY_VERSION`` when asked.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import redis

from .._clients import map_error
from .._errors import ServerError
from .._library import LIBRARY_SOURCE, library_problem
from ._routing import AsyncClusterClient, SyncClusterClient

__all__ = ["ensure_library", "ensure_library_sync"]

_CHECK = ("FCALL_RO", "aq_version", 0)
_LOAD = ("FUNCTION LOAD", "REPLACE", LIBRARY_SOURCE)
_Steps = Generator[tuple[tuple[Any, ...], Any], Any, list[str]]


def _steps(nodes: Sequence[Any], load: bool) -> _Steps:
    """Yield (command, node) and receive its reply (an error reply as the exception);
    return the names of the nodes the library was loaded on."""
    loaded = []
    for node in nodes:
        problem = library_problem((yield _CHECK, node))
        if problem is None:
            continue
        if not load:
            raise ServerError(
                f"Redis Cluster node {node.name}: {problem}; connect once as an admin with "
                "load_functions=True (or load aqueue's library on every primary: "
                "redis-cli --cluster-only-masters --cluster call HOST:PORT FUNCTION LOAD "
                "REPLACE ...)"
            )
        reply = yield _LOAD, node
        if isinstance(reply, BaseException):
            raise map_error(reply, f"loading aqueue's library on {node.name} ({problem})")
        loaded.append(node.name)
    return loaded


def _failed(exc: redis.RedisError, command: tuple[Any, ...], node: Any) -> Any:
    """An error reply is the step's reply; a lost connection ends the steps."""
    if isinstance(exc, redis.ResponseError):
        return exc
    raise map_error(exc, f"{command[0]} on Redis Cluster node {node.name}") from exc


async def ensure_library(client: AsyncClusterClient, load: bool) -> list[str]:
    """Check (and load where allowed) the library on every primary; the names of the
    nodes it was loaded on.

    Raises:
        ServerError: a primary lacks the library and ``load`` is False, or refused it.
        ServerConnectionError: a primary could not be reached.
    """
    await client.initialize()
    steps = _steps(client.get_primaries(), load)
    reply: Any = None
    while True:
        try:
            command, node = steps.send(reply)
        except StopIteration as done:
            return list(done.value)
        try:
            reply = await client.execute_command(*command, target_nodes=node)
        except redis.RedisError as exc:
            reply = _failed(exc, command, node)


def ensure_library_sync(client: SyncClusterClient, load: bool) -> list[str]:
    """``ensure_library`` for the synchronous client."""
    untyped: Any = client  # (redis-py's sync cluster client is not typed)
    steps = _steps(untyped.get_primaries(), load)
    reply: Any = None
    while True:
        try:
            command, node = steps.send(reply)
        except StopIteration as done:
            return list(done.value)
        try:
            reply = untyped.execute_command(*command, target_nodes=node)
        except redis.RedisError as exc:
            reply = _failed(exc, command, node)
