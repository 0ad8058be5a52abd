"""aqueue's function library on a cluster: loaded on every primary at the start; a
client that may not load is told which node lacks it; a primary whose library was
flushed, or that joined the cluster later, gets it back on the first call that meets
"Function not found", and that call then runs."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis
from redis_cluster_util import ClusterProc, start_cluster, stop_cluster

import aqueue.redis
from aqueue.redis._core._cluster import ClusterAsyncio, ClusterSync
from aqueue.redis._core._cluster._routing import slot_of
from aqueue.redis._core._library import LIBRARY_VERSION
from aqueue.redis._core._transport import Call

pytestmark = pytest.mark.timeout(60)


def _versions(cluster: ClusterProc) -> dict[int, str | None]:
    """The aqueue library version each primary holds (None: not loaded)."""
    out: dict[int, str | None] = {}
    for port in cluster.primaries():
        with cluster.client(port) as c:
            try:
                out[port] = c.execute_command("FCALL_RO", "aq_version", 0).decode()
            except redis.ResponseError as exc:
                if "Function not found" not in str(exc):
                    raise
                out[port] = None
    return out


def _flush(cluster: ClusterProc, port: int) -> None:
    with cluster.client(port) as c:
        c.execute_command("FUNCTION FLUSH")


def _version_call(tag: str) -> Call:
    return Call("aq_version", f"aq:{{{tag}}}:meta", [], ro=True)


def test_start_loads_the_library_on_every_primary(redis_cluster: ClusterProc) -> None:
    for port in redis_cluster.primaries():
        _flush(redis_cluster, port)
    assert set(_versions(redis_cluster).values()) == {None}
    transport = ClusterSync(redis_cluster.url)
    try:
        transport.start()
    finally:
        transport.close()
    assert set(_versions(redis_cluster).values()) == {LIBRARY_VERSION}


def test_a_client_that_may_not_load_names_the_node(redis_cluster: ClusterProc) -> None:
    port = redis_cluster.primaries()[1]
    _flush(redis_cluster, port)
    transport = ClusterSync(redis_cluster.url, load_functions=False)
    try:
        with pytest.raises(aqueue.redis.ServerError, match=f":{port}: .*not loaded") as err:
            transport.start()
        assert "load_functions=True" in str(err.value)
        assert _versions(redis_cluster)[port] is None  # (it changed nothing)
    finally:
        transport.close()
        ClusterSync(redis_cluster.url).start()  # (the admin loads it back)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_flushed_primary_gets_the_library_back(redis_cluster: ClusterProc) -> None:
    tag = uuid.uuid4().hex[:8]
    owner = redis_cluster.owner(f"{{{tag}}}")
    actor = ClusterAsyncio(redis_cluster.url, load_functions=False)
    admin = ClusterAsyncio(redis_cluster.url)
    try:
        await actor.start()
        await admin.start()
        _flush(redis_cluster, owner)
        with pytest.raises(aqueue.redis.ServerError, match="Function not found"):
            await actor.call(_version_call(tag))
        assert _versions(redis_cluster)[owner] is None
        assert (await admin.call(_version_call(tag))).decode() == LIBRARY_VERSION
        assert _versions(redis_cluster)[owner] == LIBRARY_VERSION
        assert (await actor.call(_version_call(tag))).decode() == LIBRARY_VERSION
    finally:
        await actor.aclose()
        await admin.aclose()


def test_a_primary_that_joins_later_gets_the_library(tmp_path: Path) -> None:
    """A node joins with CLUSTER MEET (no functions copied) and takes a slot from a
    running cluster; a client that started before it follows MOVED there, meets
    "Function not found", loads the library on it and runs the call."""
    cluster = start_cluster(tmp_path, node_timeout_ms=2000)
    transport = ClusterSync(cluster.url)
    try:
        transport.start()
        tag = uuid.uuid4().hex[:8]
        assert transport.call(_version_call(tag)).decode() == LIBRARY_VERSION
        newcomer = cluster.add_node()
        cluster.move_slot(slot_of(tag), newcomer)
        with cluster.client(newcomer) as c:
            assert c.function_list() == []
        assert transport.call(_version_call(tag)).decode() == LIBRARY_VERSION
        assert _versions(cluster)[newcomer] == LIBRARY_VERSION
    finally:
        transport.close()
        stop_cluster(cluster)
