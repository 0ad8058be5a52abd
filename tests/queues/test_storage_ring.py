"""RingStorage driven directly: no queue, no engine, no event loop.

The ring is a FIFO of fixed-shape elements in preallocated arrays. These tests check
what comes out (order and contents) after the head and the tail have wrapped around,
after claimed chunks were restored at the front, and after the ring had to grow; the
arrays themselves are only seen through the public storage methods.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pytest
from support import Token, alive, int_batch, multi_batch, multi_values

from aqueue._queues._storage import RingStorage

I64 = np.dtype(np.int64)
F32 = np.dtype(np.float32)
OBJ = np.dtype(object)


def int_ring(capacity: int) -> RingStorage:
    """A ring of int64 scalars."""
    return RingStorage(capacity, (I64,), ((),), "ring")


def multi_ring(capacity: int) -> RingStorage:
    """A ring of (int64 scalar, float32[2] = [v, -v], object = ("tag", v)) elements."""
    return RingStorage(capacity, (I64, F32, OBJ), ((), (2,), ()), "multi")


def multi_elem(v: int) -> tuple[Any, ...]:
    """One ``multi_ring`` element as the spec converts it (0-d object array)."""
    obj = np.empty((), dtype=object)
    obj[()] = ("tag", v)
    return (np.array(v, dtype=np.int64), np.array([v, -v], dtype=np.float32), obj)


def drain(ring: RingStorage) -> list[int]:
    """Take every element of an int ring, one at a time."""
    out = []
    while ring.size:
        out.append(int(ring.take_one()[0]))
    return out


def test_put_one_take_one_across_the_wrap() -> None:
    """Single puts and takes come out in FIFO order while head and tail wrap many times."""
    ring = int_ring(3)
    expected: list[int] = []
    got: list[int] = []
    nxt = 0
    # Keep 1-3 elements in the ring so the positions go round several times.
    for step in range(20):
        while ring.size < 1 + step % 3:
            ring.put_one((np.array(nxt, dtype=np.int64),))
            expected.append(nxt)
            nxt += 1
        got.append(int(ring.take_one()[0]))
    got += drain(ring)
    assert got == expected
    assert ring.size == 0


def test_take_one_of_vector_elements_returns_independent_copies() -> None:
    """A taken vector element does not change when its slot is written again."""
    ring = RingStorage(1, (I64,), ((2,),), "vec")
    ring.put_one((np.array([1, 2], dtype=np.int64),))
    (first,) = ring.take_one()
    ring.put_one((np.array([7, 8], dtype=np.int64),))
    assert first.tolist() == [1, 2]
    assert ring.take_one()[0].tolist() == [7, 8]


@pytest.mark.parametrize("offset", range(5))
@pytest.mark.parametrize("k", [1, 2, 4])
def test_put_rows_and_take_chunk_across_the_wrap(offset: int, k: int) -> None:
    """A run of rows written and read at any head position (wrapping or not) keeps its
    order, behind what was queued before it."""
    ring = int_ring(5)
    ring.put_rows(int_batch(100, 101 + offset), 0, offset + 1)
    assert ring.take_chunk(offset)[0].size == offset  # one left, at slot `offset`
    ring.put_rows(int_batch(0, 5), 0, 4 - k)  # rows 0:4-k of one batch ...
    ring.put_rows(int_batch(0, 10), 4 - k, 4)  # ... then rows 4-k:4 of another
    assert ring.size == 5
    assert int(ring.take_one()[0]) == 100 + offset
    first = ring.take_chunk(k)
    rest = ring.take_batch(4 - k)
    assert first[0].tolist() == list(range(k))
    assert rest[0].tolist() == list(range(k, 4))
    assert ring.size == 0


def test_take_chunk_returns_a_copy() -> None:
    """A taken chunk does not change when the ring reuses its slots."""
    ring = int_ring(4)
    ring.put_rows(int_batch(0, 4), 0, 4)
    chunk = ring.take_chunk(4)
    ring.put_rows(int_batch(10, 14), 0, 4)
    assert chunk[0].tolist() == [0, 1, 2, 3]


def test_put_rows_of_nothing_is_a_no_op() -> None:
    """put_rows with an empty range stores nothing."""
    ring = int_ring(2)
    ring.put_rows(int_batch(0, 3), 2, 2)
    ring.put_rows(int_batch(0, 3), 3, 1)
    assert ring.size == 0


@pytest.mark.parametrize("offset", range(6))
def test_emptied_ring_takes_a_full_run_wherever_it_was_emptied(offset: int) -> None:
    """A ring emptied at any head position accepts a full-capacity run in one put_rows
    and keeps FIFO order across the next wrap."""
    ring = int_ring(6)
    ring.put_rows(int_batch(0, offset + 1), 0, offset + 1)
    ring.take_batch(offset)
    ring.take_one()  # empty now, after taking up to position `offset`
    assert ring.size == 0
    ring.put_rows(int_batch(50, 56), 0, 6)
    assert ring.take_chunk(2)[0].tolist() == [50, 51]
    ring.put_rows(int_batch(56, 58), 0, 2)  # wraps if the run started at slot 0
    assert drain(ring) == [52, 53, 54, 55, 56, 57]


@pytest.mark.parametrize("offset", range(5))
def test_take_into_fills_a_batch_in_place_across_the_wrap(offset: int) -> None:
    """take_into writes the next k elements at out[pos:pos + k] and leaves the other
    rows of the batch alone, at any head position."""
    ring = int_ring(5)
    ring.put_rows(int_batch(100, 101 + offset), 0, offset + 1)
    ring.take_chunk(offset)  # one left, at slot `offset`
    ring.put_rows(int_batch(10, 14), 0, 4)
    (out,) = ring.empty_batch(7)
    assert out.shape == (7,)
    assert out.dtype == I64
    out[:] = -1
    ring.take_into((out,), 1, 3)
    ring.take_into((out,), 4, 2)
    assert out.tolist() == [-1, 100 + offset, 10, 11, 12, 13, -1]
    assert ring.size == 0


def test_empty_batch_has_the_element_shapes_and_dtypes() -> None:
    """empty_batch gives one fresh array per component, of shape (n, *shape)."""
    ring = multi_ring(3)
    batch = ring.empty_batch(4)
    assert [a.shape for a in batch] == [(4,), (4, 2), (4,)]
    assert [a.dtype for a in batch] == [I64, F32, OBJ]
    assert ring.empty_batch(4)[0] is not batch[0]


def test_multi_component_elements_round_trip_across_the_wrap() -> None:
    """Every component of an element moves with it through one-at-a-time and batch
    operations, wrapped or not."""
    ring = multi_ring(4)
    ring.put_rows(multi_batch([0, 1, 2]), 0, 3)
    assert multi_values(ring.take_chunk(2)) == [0, 1]
    ring.put_one(multi_elem(3))
    ring.put_rows(multi_batch([4, 5]), 0, 2)  # wraps to slots 0-1
    v, x, obj = ring.take_one()
    assert (int(v), x.tolist(), obj) == (2, [2.0, -2.0], ("tag", 2))
    (out_a, out_x, out_o) = ring.empty_batch(3)
    ring.take_into((out_a, out_x, out_o), 0, 3)  # slots 3, 0, 1
    assert multi_values((out_a, out_x, out_o)) == [3, 4, 5]
    assert ring.size == 0


def test_restore_puts_chunks_back_at_the_front_in_order() -> None:
    """Restored chunks come out first, in their original order, before what stayed,
    also when the front they go back to wraps backwards past slot 0."""
    ring = int_ring(6)
    ring.put_rows(int_batch(0, 6), 0, 6)
    ring.take_batch(4)  # head at slot 4
    ring.put_rows(int_batch(6, 9), 0, 3)  # 4, 5 | 6, 7, 8 in slots 0-2
    a = ring.take_chunk(2)
    b = ring.take_chunk(1)
    assert (a[0].tolist(), b[0].tolist()) == ([4, 5], [6])
    ring.restore([a, b])  # back into slots 5, 0, 1
    assert ring.size == 5
    assert drain(ring) == [4, 5, 6, 7, 8]


def test_restore_into_an_empty_ring_wraps_before_slot_zero() -> None:
    """Restoring into an emptied ring (head at slot 0) puts the rows before it, wrapping
    round the end, and later puts land after them."""
    ring = int_ring(4)
    ring.put_rows(int_batch(0, 3), 0, 3)
    chunk = ring.take_chunk(3)
    assert ring.size == 0
    ring.restore([chunk])
    ring.put_one((np.array(3, dtype=np.int64),))
    assert ring.take_batch(4)[0].tolist() == [0, 1, 2, 3]


def test_restore_of_nothing_changes_nothing() -> None:
    """Restoring no chunks, or an empty chunk, leaves the ring as it was."""
    ring = int_ring(3)
    ring.put_rows(int_batch(0, 2), 0, 2)
    ring.restore([])
    ring.restore([ring.take_chunk(0)])
    assert drain(ring) == [0, 1]


def test_restore_beyond_capacity_grows_and_keeps_order() -> None:
    """Restored claims that no longer fit grow the ring; nothing is lost or reordered,
    and the grown ring keeps working across its own wrap."""
    ring = int_ring(4)
    ring.put_rows(int_batch(0, 4), 0, 4)
    claimed = [ring.take_chunk(1), ring.take_chunk(2)]
    ring.put_rows(int_batch(4, 7), 0, 3)  # full again, and wrapped
    ring.restore(claimed)
    assert ring.size == 7
    assert ring.take_chunk(3)[0].tolist() == [0, 1, 2]
    ring.put_rows(int_batch(7, 10), 0, 3)  # the grown ring (7 slots) is full again
    assert ring.take_batch(7)[0].tolist() == list(range(3, 10))


def test_put_rows_beyond_capacity_grows_and_keeps_order() -> None:
    """A batch admitted above capacity grows the ring after its wrapped contents."""
    ring = int_ring(4)
    ring.put_rows(int_batch(0, 3), 0, 3)
    ring.take_chunk(2)
    ring.put_rows(int_batch(3, 6), 0, 3)  # head at 2: the ring wraps, 4 stored
    ring.put_rows(int_batch(6, 9), 0, 3)  # 7 > 4 slots
    assert ring.size == 7
    assert drain(ring) == list(range(2, 9))


def test_grown_single_component_ring_reads_the_new_arrays() -> None:
    """After growing, one-at-a-time takes and puts (the single-component fast paths)
    use the grown arrays."""
    for dtype, make in ((I64, int), (OBJ, Token)):
        ring = RingStorage(2, (dtype,), ((),), "grow")
        ring.put_rows((np.array([make(0), make(1)], dtype=dtype),), 0, 2)
        ring.put_rows((np.array([make(2), make(3)], dtype=dtype),), 0, 2)  # grows to 4
        got = [ring.take_one()[0], ring.take_one()[0]]
        for v in (4, 5):  # wrap round the grown ring
            elem = np.empty((), dtype=dtype)
            elem[()] = make(v)
            ring.put_one((elem,))
        got += [ring.take_one()[0] for _ in range(4)]
        values = [g.v if isinstance(g, Token) else int(g) for g in got]
        assert values == [0, 1, 2, 3, 4, 5], dtype


def _watched(n: int) -> tuple[list[Token], list[weakref.ref[Token]]]:
    tokens = [Token(i) for i in range(n)]
    return tokens, [weakref.ref(t) for t in tokens]


def _objects(tokens: list[Token]) -> Any:
    arr = np.empty(len(tokens), dtype=object)
    for j, t in enumerate(tokens):
        arr[j] = t
    return arr


def test_single_object_component_drops_references_when_taken() -> None:
    """A ring of Python objects holds no reference to an element once it was taken:
    one at a time, as a chunk across the wrap, and into a batch."""
    ring = RingStorage(4, (OBJ,), ((),), "objs")
    tokens, refs = _watched(6)
    first, later = _objects(tokens[:3]), _objects(tokens[3:])
    del tokens
    ring.put_rows((first,), 0, 3)  # slots 0-2
    del first
    assert [ring.take_one()[0].v for _ in range(2)] == [0, 1]  # head at slot 2
    assert alive(refs) == [2, 3, 4, 5]  # (3-5 are still held by `later`)
    ring.put_rows((later,), 0, 3)  # slots 3, 0, 1
    del later
    chunk = ring.take_chunk(3)  # slots 2, 3, 0
    assert [t.v for t in chunk[0]] == [2, 3, 4]
    del chunk
    assert alive(refs) == [5]
    (out,) = ring.empty_batch(1)
    ring.take_into((out,), 0, 1)  # slot 1
    assert out[0].v == 5
    del out
    assert alive(refs) == []


def test_take_into_across_the_wrap_drops_object_references() -> None:
    """take_into releases the slots of both of its copies when the run wraps."""
    ring = RingStorage(3, (OBJ,), ((),), "objs")
    tokens, refs = _watched(4)
    first, later = _objects(tokens[:2]), _objects(tokens[2:])
    del tokens
    ring.put_rows((first,), 0, 2)  # slots 0, 1
    del first
    assert ring.take_one()[0].v == 0  # head at slot 1
    ring.put_rows((later,), 0, 2)  # slots 2, 0
    del later
    (out,) = ring.empty_batch(3)
    ring.take_into((out,), 0, 3)  # slots 1, 2, 0
    assert [t.v for t in out] == [1, 2, 3]
    del out
    assert alive(refs) == []


def test_object_in_a_multi_component_ring_is_released_when_taken() -> None:
    """An object component of a multi-component element is released by take_one,
    take_chunk across the wrap, and take_into across the wrap."""
    ring = RingStorage(3, (I64, OBJ), ((), ()), "pairs")
    tokens, refs = _watched(8)
    batches: list[Any] = [
        (np.arange(lo, hi, dtype=np.int64), _objects(tokens[lo:hi]))
        for lo, hi in ((0, 3), (3, 4), (4, 6), (6, 8))
    ]
    del tokens

    def put(i: int) -> None:
        n = len(batches[i][0])
        ring.put_rows(batches[i], 0, n)
        batches[i] = None

    put(0)  # slots 0-2
    v, t = ring.take_one()
    assert (int(v), t.v) == (0, 0)
    del v, t
    assert alive(refs) == [1, 2, 3, 4, 5, 6, 7]
    put(1)  # slot 0
    chunk = ring.take_chunk(3)  # slots 1, 2, 0
    assert chunk[0].tolist() == [1, 2, 3]
    assert [t.v for t in chunk[1]] == [1, 2, 3]
    del chunk
    assert alive(refs) == [4, 5, 6, 7]
    put(2)  # emptied: slots 0, 1
    assert ring.take_one()[1].v == 4  # head at slot 1
    put(3)  # slots 2, 0
    out = ring.empty_batch(3)
    ring.take_into(out, 0, 3)  # slots 1, 2, 0
    assert out[0].tolist() == [5, 6, 7]
    assert [t.v for t in out[1]] == [5, 6, 7]
    del out
    assert alive(refs) == []
    assert ring.size == 0


def test_restored_objects_come_back_and_are_released_again() -> None:
    """Objects of a restored chunk are held again by the ring (and come out in order),
    then released once taken for good."""
    ring = RingStorage(3, (OBJ,), ((),), "objs")
    tokens, refs = _watched(3)
    ring.put_rows((_objects(tokens),), 0, 3)
    chunk = ring.take_chunk(2)
    ring.restore([chunk])
    del tokens, chunk
    assert alive(refs) == [0, 1, 2]
    got = [ring.take_one()[0].v for _ in range(3)]
    assert got == [0, 1, 2]
    del got
    assert alive(refs) == []
