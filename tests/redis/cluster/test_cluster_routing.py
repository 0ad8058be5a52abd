"""Routing on a real cluster: aqueue computes a call's slot from its hash tag, so no
node is asked ``COMMAND GETKEYS``; each call (plain, with staged payloads, with the
payloads fetched behind it) runs on the primary serving its tag's slot, and a call
whose slot moved meanwhile follows redis-py's MOVED handling to the new owner."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from redis.exceptions import RedisClusterException
from redis_cluster_util import ClusterProc

from aqueue.redis._core._cluster import ClusterAsyncio, ClusterSync
from aqueue.redis._core._cluster._routing import fcall_slot, known_slot, slot_of
from aqueue.redis._core._transport import Call

pytestmark = pytest.mark.timeout(60)


def _stats(cluster: ClusterProc) -> dict[int, dict[str, int]]:
    """Per node: calls of FCALL, FCALL_RO, MSET, MGET and COMMAND GETKEYS so far, and
    the FCALL_RO calls refused before they ran (MOVED)."""
    out = {}
    for port in cluster.primaries():
        with cluster.client(port) as c:
            st = c.info("commandstats")
        out[port] = {
            k: int(st.get(f"cmdstat_{k}", {}).get("calls", 0))
            for k in ("fcall", "fcall_ro", "mset", "mget", "command|getkeys")
        }
        out[port]["moved"] = int(st.get("cmdstat_fcall_ro", {}).get("rejected_calls", 0))
    return out


def _tags(cluster: ClusterProc) -> Iterator[tuple[str, int]]:
    """Fresh hash tags, each with the port of the primary serving it."""
    while True:
        tag = uuid.uuid4().hex[:8]
        yield tag, cluster.owner(f"aq:{{{tag}}}:meta")


def _calls(tag: str) -> list[Call]:
    """One call of each shape, all under ``tag``: plain, staged, fetching."""
    key = f"aq:{{{tag}}}:meta"
    payload = (f"aq:{{{tag}}}:e:x", b"p" * 2000)
    return [
        Call("aq_version", key, [], ro=True),
        Call("aq_version", key, [], stage=[payload]),
        Call("aq_version", key, [], fetch=[payload[0]], drop=[payload[0]]),
    ]


def _check_routing(cluster: ClusterProc, before: dict[int, dict[str, int]], owner: int) -> None:
    after = _stats(cluster)
    for port in after:
        delta = {k: after[port][k] - before[port].get(k, 0) for k in after[port]}
        assert delta["command|getkeys"] == 0, port
        if port == owner:
            shapes = (delta["fcall_ro"], delta["fcall"], delta["mset"], delta["mget"])
            assert shapes == (1, 2, 1, 1), delta
        else:
            assert delta == dict.fromkeys(delta, 0), (port, delta)


def test_slot_of_matches_the_server(redis_cluster: ClusterProc) -> None:
    keys = ["aq:{q}:meta", "aq:{q}:e:abc.1", "plain", "{}x", "a{b}c{d}", "aq:{q:2}:meta"]
    with redis_cluster.client(redis_cluster.primaries()[0]) as c:
        for key in keys:
            assert slot_of(key) == c.execute_command("CLUSTER KEYSLOT", key), key
    assert slot_of("aq:{q}:meta") == slot_of(b"aq:{q}:leases")


def test_fcall_slot_reads_the_keys_of_an_fcall_only() -> None:
    keys = ("aq:{t}:meta", "aq:{t}:items")
    assert fcall_slot(("FCALL", "aq_take", 2, *keys, "x")) == slot_of("{t}")
    assert fcall_slot((b"fcall_ro", "aq_stats", 1, keys[0])) == slot_of("{t}")
    assert 0 <= (fcall_slot(("FCALL", "aq_version", 0)) or 0) < 16384
    assert fcall_slot(("MGET", *keys)) is None
    assert fcall_slot(("GET",)) is None
    with pytest.raises(RedisClusterException, match="one slot"):
        fcall_slot(("FCALL", "aq_take", 2, "aq:{a}:meta", "aq:{b}:meta"))


def test_known_slot_routes_aqueue_payload_commands_by_their_first_key() -> None:
    keys = ("aq:{t}:e:x.1", "aq:{t}:e:x.2")
    assert known_slot(("MGET", *keys)) == slot_of("{t}")
    assert known_slot((b"mset", keys[0], b"v", keys[1], b"w")) == slot_of("{t}")
    assert known_slot(("DEL", keys[1].encode())) == slot_of("{t}")
    assert known_slot(("FCALL", "aq_take", 1, keys[0])) == slot_of("{t}")
    # Not aqueue's keys, or not a keyed command: redis-py decides.
    assert known_slot(("MGET", "plain", "{t}x")) is None
    assert known_slot(("GET", keys[0])) is None
    assert known_slot(("MGET",)) is None


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_async_calls_reach_their_slot_without_key_lookups(
    redis_cluster: ClusterProc,
) -> None:
    transport = ClusterAsyncio(redis_cluster.url)
    try:
        await transport.start()
        tags = _tags(redis_cluster)
        for _ in range(3):
            tag, owner = next(tags)
            before = _stats(redis_cluster)
            for call in _calls(tag):
                await transport.call(call)
            _check_routing(redis_cluster, before, owner)
        assert await transport.read([f"aq:{{{tag}}}:e:x"]) == [None]
    finally:
        await transport.aclose()


def test_sync_calls_reach_their_slot_without_key_lookups(redis_cluster: ClusterProc) -> None:
    transport = ClusterSync(redis_cluster.url)
    try:
        transport.start()
        tags = _tags(redis_cluster)
        for _ in range(3):
            tag, owner = next(tags)
            before = _stats(redis_cluster)
            for call in _calls(tag):
                transport.call(call)
            _check_routing(redis_cluster, before, owner)
    finally:
        transport.close()


def _empty_slot_elsewhere(cluster: ClusterProc) -> tuple[str, int, int]:
    """A fresh tag whose slot holds no key, its owner and another primary."""
    for tag, owner in _tags(cluster):
        with cluster.client(owner) as c:
            if c.execute_command("CLUSTER COUNTKEYSINSLOT", slot_of(tag)) == 0:
                other = next(p for p in cluster.primaries() if p != owner)
                return tag, owner, other
    raise AssertionError("unreachable")


@pytest.mark.parametrize("client", ["async", "sync"])
def test_a_moved_slot_is_followed(redis_cluster: ClusterProc, client: str) -> None:
    """The transport learned the slot map at its start; the tag's slot then moves to
    another primary: the next call gets MOVED, follows it, and runs there."""
    tag, owner, other = _empty_slot_elsewhere(redis_cluster)
    call = Call("aq_version", f"aq:{{{tag}}}:meta", [], ro=True)

    async def on_async() -> Any:
        transport = ClusterAsyncio(redis_cluster.url)
        try:
            await transport.start()
            await transport.call(call)
            redis_cluster.move_slot(slot_of(tag), other)
            return await transport.call(call)
        finally:
            await transport.aclose()

    def on_sync() -> Any:
        transport = ClusterSync(redis_cluster.url)
        try:
            transport.start()
            transport.call(call)
            redis_cluster.move_slot(slot_of(tag), other)
            return transport.call(call)
        finally:
            transport.close()

    try:
        before = _stats(redis_cluster)
        reply = anyio.run(on_async) if client == "async" else on_sync()
        after = _stats(redis_cluster)
        assert reply.decode().startswith("2:")
        # Each primary answered the library check at the start; then the owner ran
        # the first call and refused the second (MOVED), which the new owner ran.
        delta = {p: {k: after[p][k] - before[p][k] for k in after[p]} for p in (owner, other)}
        assert (delta[owner]["fcall_ro"], delta[owner]["moved"]) == (2, 1)
        assert (delta[other]["fcall_ro"], delta[other]["moved"]) == (2, 0)
    finally:
        redis_cluster.move_slot(slot_of(tag), owner)
        with redis_cluster.client(owner) as c:
            assert c.execute_command("CLUSTER COUNTKEYSINSLOT", slot_of(tag)) == 0


def test_a_cross_slot_call_fails_before_anything_is_sent(redis_cluster: ClusterProc) -> None:
    transport = ClusterSync(redis_cluster.url)
    try:
        with pytest.raises(RedisClusterException, match="one slot"):
            transport.client.execute_command("FCALL", "aq_version", 2, "{a}x", "{b}y")
    finally:
        transport.close()
