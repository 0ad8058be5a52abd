"""``aqueue.redis.connect(url, cluster=True)``: what entering the block does on a
cluster (the library on every primary, the memory-policy warning per primary), and the
clear errors of a bad argument, a server that is no cluster and no reachable node. The
queue and table contracts over it are in ``test_cluster_queue_contract.py`` and
``tests/replay/test_replay_cluster_contract.py``."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import numpy as np
import pytest
from redis_cluster_util import ClusterProc

import aqueue
import aqueue.redis
from aqueue.redis._core._library import LIBRARY_VERSION

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def _versions(cluster: ClusterProc) -> dict[int, bytes | None]:
    out: dict[int, bytes | None] = {}
    for port in cluster.primaries():
        with cluster.client(port) as c:
            libs = c.execute_command("FUNCTION LIST LIBRARYNAME aqueue")
            out[port] = None
            if libs:
                out[port] = c.execute_command("FCALL_RO", "aq_version", 0)
    return out


async def test_entering_loads_the_library_on_every_primary(redis_cluster: ClusterProc) -> None:
    for port in redis_cluster.primaries():
        with redis_cluster.client(port) as c:
            c.execute_command("FUNCTION FLUSH")
    assert set(_versions(redis_cluster).values()) == {None}
    async with aqueue.redis.connect(redis_cluster.url, cluster=True) as server:
        assert set(_versions(redis_cluster).values()) == {LIBRARY_VERSION.encode()}
        # one queue per primary: each one's calls reach the primary of its hash tag
        names = {}
        while len(set(names.values())) < len(redis_cluster.primaries()):
            name = f"c-{uuid.uuid4().hex[:8]}"
            names[name] = redis_cluster.owner(f"aq:{{{name}}}:meta")
        for i, name in enumerate(names):
            q = await server.fifo_queue(name, 4, np.int64, ())
            await q.enqueue_many(np.arange(i, i + 3))
            assert (await q.dequeue_many(3)).tolist() == [i, i + 1, i + 2]
            await server.delete_queue(name)


async def test_a_primary_that_may_evict_is_named(redis_cluster: ClusterProc) -> None:
    port = redis_cluster.primaries()[1]
    with redis_cluster.client(port) as c:
        c.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with pytest.warns(RuntimeWarning, match=f"127.0.0.1:{port}.*allkeys-lru"):
            async with aqueue.redis.connect(redis_cluster.url, cluster=True):
                pass
    finally:
        with redis_cluster.client(port) as c:
            c.config_set("maxmemory-policy", "noeviction")


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"cluster": "yes"}, "cluster must be a bool, got 'yes'"),
        ({"cluster": True, "failover_timeout": 0}, "failover_timeout"),
    ],
)
def test_bad_cluster_arguments_are_refused_before_connecting(
    kw: dict[str, Any], match: str
) -> None:
    with pytest.raises(aqueue.ElementSpecError, match=match):
        aqueue.redis.connect("redis://127.0.0.1:1/0", **kw)


async def test_a_server_without_cluster_mode_is_told_apart(url: str) -> None:
    server = aqueue.redis.connect(url, cluster=True)
    with pytest.raises(aqueue.redis.ServerError, match="Cluster mode is not enabled"):
        async with server:
            pass
    with pytest.raises(aqueue.redis.ServerClosedError):
        await server.fifo_queue("never", 4, np.int64, ())


async def test_no_reachable_node_is_a_connection_error() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(aqueue.redis.ServerConnectionError, match=f"127.0.0.1:{port}"):
        async with aqueue.redis.connect(f"redis://127.0.0.1:{port}/0", cluster=True):
            pass
