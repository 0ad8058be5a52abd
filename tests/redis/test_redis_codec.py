"""AQ1, the element wire format: round trips, refusals, and foreign or malformed
payloads (a clear PayloadError, nothing consumed)."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis_util import RedisProc

import aqueue
import aqueue.redis
from aqueue.redis._core._codec import Codec
from aqueue.redis._core._spec import make_spec


def codec(dtypes: Any, shapes: Any, names: Any = None) -> Codec:
    return Codec(make_spec("test", dtypes, shapes, names), "q")


def handmade(comps: list[tuple[str, list[int], bytes]], version: int = 1) -> bytes:
    """An AQ1 payload built by hand (another encoder: a map-free header packed with
    msgpack's defaults, then 8-aligned sections)."""
    header = msgpack.packb([[d, s] for d, s, _ in comps])
    out = b"AQ" + bytes([version]) + struct.pack("<I", len(header)) + header
    out += b"\0" * (-len(out) % 8)
    for _, _, raw in comps:
        out += raw + b"\0" * (-len(raw) % 8)
    return out


def test_round_trip_many_dtypes() -> None:
    c = codec(
        [np.uint8, ">i4", np.float16, np.complex64, "S3", "U2", bool],
        [(2, 3), (), (1,), (), (), (2,), ()],
    )
    rng = np.random.default_rng(0)
    batch = (
        rng.integers(0, 255, (4, 2, 3)).astype(np.uint8),
        np.arange(4, dtype=">i4"),
        np.ones((4, 1), np.float16),
        np.arange(4).astype(np.complex64),
        np.array([b"a", b"bc", b"", b"xyz"]),
        np.array([["a", "b"]] * 4),
        np.array([True, False, True, False]),
    )
    spec = make_spec(
        "test",
        [np.uint8, ">i4", np.float16, np.complex64, "S3", "U2", bool],
        [(2, 3), (), (1,), (), (), (2,), ()],
        None,
    )
    comps, count = spec.batch(batch)
    payloads = c.encode_batch(comps, count)
    assert all(len(p) % 8 == 0 for p in payloads)
    out = c.decode_batch(payloads)
    for a, b in zip(batch, out):
        assert np.array_equal(a, b)
    assert [b.dtype for b in out] == list(spec.dtypes)
    one = c.decode_one(payloads[1])
    assert one[1] == 1


def test_another_encoders_valid_payload_decodes() -> None:
    c = codec(np.int64, (2,))
    p = handmade([("<i8", [2], np.array([5, 6], "<i8").tobytes())])
    assert c.decode_batch([p, p])[0].tolist() == [[5, 6], [5, 6]]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "empty"),
        (b"pickle\x80\x04", "magic"),
        (b"AQ\x02\0\0\0\0", "version 2"),
        (b"AQ\x01\xff\xff\x00\x00", "header length"),
        (b"AQ\x01\x01\0\0\0\xc1" + b"\0" * 8, "msgpack"),
        (handmade([("|O", [], b"\0" * 8)]), "not allowed"),
        (handmade([("<f8", [2], b"\0" * 16)]), "dtype <f8"),
        (handmade([("<i8", [3], b"\0" * 24)]), "shape"),
        (handmade([("<i8", [2], b"\0" * 8)]), "too short"),
        (handmade([("<i8", [2], b"\0" * 16)]) + b"\0" * 8, "length"),
        (handmade([("<i8", [2], b"\0" * 16), ("<i8", [2], b"\0" * 16)]), "components"),
        (b"AQ\x01" + struct.pack("<I", 4) + msgpack.packb({"a": 1}) + b"\0" * 5, "list"),
    ],
)
def test_malformed_payloads_are_refused(payload: bytes, message: str) -> None:
    c = codec(np.int64, (2,))
    with pytest.raises(aqueue.redis.PayloadError, match=message):
        c.decode_batch([handmade([("<i8", [2], b"\0" * 16)]), payload])


def test_bad_boolean_bytes_are_refused() -> None:
    c = codec(bool, ())
    with pytest.raises(aqueue.redis.PayloadError, match="boolean"):
        c.decode_batch([handmade([("|b1", [], b"\x07")])])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_only_raise_payload_error(data: bytes) -> None:
    c = codec([np.int16, "S4"], [(2,), ()])
    for p in (data, b"AQ\x01" + data):
        try:
            c.decode_one(p)
        except aqueue.redis.PayloadError:
            pass


@pytest.fixture
async def srv(url: str) -> AsyncIterator[aqueue.redis.RedisServer]:
    async with aqueue.redis.connect(url, lease_time=2.0, wait_timeout=0.05) as server:
        yield server


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
@pytest.mark.parametrize("what", ["foreign", "missing"])
async def test_injected_payload_gives_a_clear_error_and_stays(
    srv: Any, redis_server: RedisProc, qname: str, kind: str, what: str, payload_storage: str
) -> None:
    """A raw client adds an element to the queue's storage whose payload is garbage
    (foreign) or absent (a ref to no key): the dequeue that meets it raises
    PayloadError naming the queue; the batch goes back, nothing is consumed."""
    if kind == "fifo":
        q = await srv.fifo_queue(qname, 10, np.int64, (2,))
    else:
        q = await srv.random_shuffle_queue(qname, 10, 0, np.int64, (2,), seed=0)
    await q.enqueue_many(np.arange(8).reshape(4, 2))
    with redis_server.client() as raw:
        if what == "foreign":
            raw.set(f"aq:{{{qname}}}:e:bad", b"\x80\x04garbage")
        if kind == "fifo":
            raw.rpush(f"aq:{{{qname}}}:items", "bad")
        else:
            raw.hset(f"aq:{{{qname}}}:slots", "4", "bad")
    with pytest.raises(aqueue.redis.PayloadError, match=qname) as info:
        await q.dequeue_many(5)
    assert ("magic" if what == "foreign" else "empty") in str(info.value)
    s = await q.statistics()
    assert (s.size, s.dequeued_total) == (5, 0)
    if kind == "fifo":
        good = await q.dequeue_many(4)  # the order was kept
        assert good[:, 0].tolist() == [0, 2, 4, 6]
