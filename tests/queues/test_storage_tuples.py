"""DequeStorage, HeapStorage, ``pad_stack`` and ``stack`` driven directly.

Queues without fully declared shapes keep one tuple per element: a deque (FIFO,
optionally padding ``None`` dimensions when a batch is assembled) or a heap ordered by
the int64 priority in component 0, ties in arrival order. ``pad_stack`` is the one
padding implementation: 0 for numbers, ``""`` for str and objects, ``b""`` for bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aqueue import ElementSpecError
from aqueue._queues._tuples import DequeStorage, HeapStorage, pad_stack, stack

I64 = np.dtype(np.int64)
F32 = np.dtype(np.float32)
OBJ = np.dtype(object)


def _scalar(v: Any, dtype: Any = np.int64) -> Any:
    """A component as the spec converts it: a 0-d array."""
    arr = np.empty((), dtype=dtype)
    arr[()] = v
    return arr


# --------------------------------------------------------------------------------------
# DequeStorage
# --------------------------------------------------------------------------------------


def test_deque_is_fifo_for_single_and_batch_operations() -> None:
    """put_one and put_rows append, take_one and take_chunk take from the front."""
    dq = DequeStorage((I64,), pad=False)
    dq.put_one((_scalar(0),))
    dq.put_rows((np.arange(1, 6, dtype=np.int64),), 0, 3)  # rows 0:3 of [1..5]
    dq.put_rows((np.arange(10, dtype=np.int64),), 4, 6)  # 4, 5
    assert dq.size == 6
    assert int(dq.take_one()[0]) == 0
    (batch,) = dq.assemble([dq.take_chunk(2), dq.take_chunk(3)])
    assert batch.dtype == I64
    assert batch.tolist() == [1, 2, 3, 4, 5]
    assert dq.size == 0


def test_deque_copies_what_it_is_given() -> None:
    """Later changes to a put element or batch do not leak into the deque."""
    dq = DequeStorage((I64,), pad=False)
    one = np.array([1, 2], dtype=np.int64)
    rows = np.array([[3, 4], [5, 6]], dtype=np.int64)
    dq.put_one((one,))
    dq.put_rows((rows,), 0, 2)
    one[:] = 0
    rows[:] = 0
    assert dq.take_batch(3)[0].tolist() == [[1, 2], [3, 4], [5, 6]]


def test_deque_without_pad_stacks_fixed_shape_elements() -> None:
    """A deque that does not pad stacks elements of one shape into (n, *shape)."""
    dq = DequeStorage((F32, I64), pad=False)
    for v in range(3):
        dq.put_one((np.full((2, 2), v, dtype=np.float32), _scalar(v)))
    x, y = dq.take_batch(3)
    assert x.shape == (3, 2, 2)
    assert x.dtype == F32
    assert x[:, 0, 0].tolist() == [0.0, 1.0, 2.0]
    assert y.tolist() == [0, 1, 2]


def test_deque_with_pad_pads_each_component_to_the_batch_maximum() -> None:
    """A padding deque pads None dimensions at the end: 0 for numbers, "" for str and
    objects, b"" for bytes; scalar components stay a plain vector."""
    dtypes = (I64, np.dtype("U3"), np.dtype("S3"), OBJ, I64)
    dq = DequeStorage(dtypes, pad=True)
    dq.put_one(
        (
            np.array([1, 2, 3], dtype=np.int64),
            np.array(["a"], dtype="U3"),
            np.array([[b"x", b"y"]], dtype="S3"),
            np.array(["o"], dtype=object),
            _scalar(7),
        )
    )
    dq.put_one(
        (
            np.array([4], dtype=np.int64),
            np.array(["b", "c"], dtype="U3"),
            np.array([[b"z"], [b"w"]], dtype="S3"),
            np.array(["p", "q"], dtype=object),
            _scalar(8),
        )
    )
    nums, strs, raw, objs, scal = dq.take_batch(2)
    assert nums.tolist() == [[1, 2, 3], [4, 0, 0]]
    assert strs.tolist() == [["a", ""], ["b", "c"]]
    assert raw.shape == (2, 2, 2)
    assert raw.tolist() == [[[b"x", b"y"], [b"", b""]], [[b"z", b""], [b"w", b""]]]
    assert objs.dtype == OBJ
    assert objs.tolist() == [["o", ""], ["p", "q"]]
    assert scal.tolist() == [7, 8]
    assert [a.dtype for a in (nums, strs, raw)] == list(dtypes[:3])


def test_deque_restore_puts_claims_back_at_the_front_in_order() -> None:
    """Restored chunks come out first, in their original order, before what stayed."""
    dq = DequeStorage((I64,), pad=False)
    dq.put_rows((np.arange(6, dtype=np.int64),), 0, 6)
    a, b = dq.take_chunk(2), dq.take_chunk(1)
    dq.put_one((_scalar(6),))
    dq.restore([a, b])
    assert dq.size == 7
    assert [int(dq.take_one()[0]) for _ in range(7)] == list(range(7))
    dq.restore([])
    assert dq.size == 0


# --------------------------------------------------------------------------------------
# HeapStorage
# --------------------------------------------------------------------------------------


def _heap_values(heap: HeapStorage, n: int) -> list[tuple[int, str]]:
    """Take ``n`` elements one at a time as (priority, label) pairs."""
    out = []
    for _ in range(n):
        p, label = heap.take_one()
        out.append((int(p), str(label)))
    return out


def test_heap_takes_ascending_priority_ties_in_arrival_order() -> None:
    """Lower priorities come first; equal priorities come out in the order they came
    in, for single puts and batch rows alike."""
    heap = HeapStorage((I64, np.dtype("U4")))
    heap.put_one((_scalar(5), np.array("a5")))
    heap.put_rows((np.array([3, 5, 3, 9]), np.array(["b3", "b5", "c3", "b9"])), 0, 4)
    heap.put_one((_scalar(3), np.array("d3")))
    heap.put_one((_scalar(-1), np.array("e-1")))
    assert heap.size == 7
    assert _heap_values(heap, 7) == [
        (-1, "e-1"),
        (3, "b3"),
        (3, "c3"),
        (3, "d3"),
        (5, "a5"),
        (5, "b5"),
        (9, "b9"),
    ]
    assert heap.size == 0


def test_heap_batch_is_in_priority_order() -> None:
    """take_batch and assemble give the chunks' elements by priority, then arrival."""
    heap = HeapStorage((I64, I64))
    heap.put_rows((np.array([4, 1, 4, 2]), np.arange(4)), 0, 4)
    a = heap.take_chunk(2)
    b = heap.take_chunk(2)
    p, v = heap.assemble([b, a])  # chunks in any order: entries carry their keys
    assert p.tolist() == [1, 2, 4, 4]
    assert v.tolist() == [1, 3, 0, 2]


def test_heap_restored_entries_keep_their_arrival_order() -> None:
    """Restored entries go back in their place: ahead of later arrivals of equal
    priority, behind earlier ones."""
    heap = HeapStorage((I64, np.dtype("U4")))
    heap.put_rows((np.array([1, 1, 1]), np.array(["x0", "x1", "x2"])), 0, 3)
    claimed = heap.take_chunk(2)  # x0, x1
    heap.put_one((_scalar(1), np.array("x3")))
    heap.put_one((_scalar(0), np.array("z")))
    heap.restore([claimed])
    assert heap.size == 5
    assert _heap_values(heap, 5) == [(0, "z"), (1, "x0"), (1, "x1"), (1, "x2"), (1, "x3")]


def test_heap_copies_what_it_is_given() -> None:
    """Later changes to a put element do not leak into the heap."""
    heap = HeapStorage((I64, I64))
    vec = np.array([1, 2], dtype=np.int64)
    heap.put_one((_scalar(0), vec))
    vec[:] = 0
    assert heap.take_one()[1].tolist() == [1, 2]


@pytest.mark.parametrize("kind", ["heap", "padding-deque"])
def test_scalar_object_component_holding_tuples_batches_one_object_per_element(
    kind: str,
) -> None:
    """A declared-scalar object component whose values are tuples of different
    lengths comes out of a batch as a vector of those tuples, unchanged."""
    if kind == "heap":
        storage: Any = HeapStorage((I64, OBJ))
    else:
        storage = DequeStorage((I64, OBJ), pad=True)
    storage.put_one((_scalar(1), _scalar(("a", 1), object)))
    storage.put_one((_scalar(2), _scalar(("b", 2, 3), object)))
    _, objs = storage.take_batch(2)
    assert objs.shape == (2,)
    assert list(objs) == [("a", 1), ("b", 2, 3)]


# --------------------------------------------------------------------------------------
# pad_stack and stack
# --------------------------------------------------------------------------------------


def test_pad_stack_refuses_different_ranks() -> None:
    """Arrays of different ranks cannot be padded together: ElementSpecError names both
    ranks and the owner."""
    with pytest.raises(ElementSpecError, match=r"myqueue.*\[1, 2\]"):
        pad_stack([np.zeros(2), np.zeros((2, 2))], F32, owner="myqueue")


@pytest.mark.parametrize(
    ("dtype", "values", "fill"),
    [
        (np.dtype(np.int32), [[1, 2], [3]], 0),
        (np.dtype(np.float64), [[1.5], [2.5, 3.5]], 0.0),
        (np.dtype(np.bool_), [[True], [True, True]], False),
        (np.dtype("U2"), [["ab"], ["c", "de"]], ""),
        (np.dtype("S2"), [[b"ab"], [b"c", b"de"]], b""),
        (OBJ, [[("t",)], [None, 5]], ""),
    ],
)
def test_pad_stack_pads_with_the_dtype_blank(dtype: Any, values: list[Any], fill: Any) -> None:
    """Shorter rows are padded at the end with 0 (numbers), "" (str, objects) or b""
    (bytes), in the requested dtype."""
    arrays = []
    for row in values:
        arr = np.empty(len(row), dtype=dtype)
        for j, v in enumerate(row):
            arr[j] = v
        arrays.append(arr)
    out = pad_stack(arrays, dtype)
    assert out.dtype == dtype
    assert out.shape == (2, 2)
    for i, row in enumerate(values):
        assert list(out[i, : len(row)]) == row
        pad = list(out[i, len(row) :])
        assert pad == [fill] * len(pad)
        if dtype == OBJ:
            assert all(type(x) is str for x in pad)


def test_pad_stack_pads_every_dimension_and_keeps_data_in_the_corner() -> None:
    """2-d arrays are padded at the end of both dimensions to the largest extent of each."""
    a = np.array([[9], [8], [7]], dtype=np.int64)
    b = np.arange(6, dtype=np.int64).reshape(2, 3)
    out = pad_stack([a, b], I64)
    assert out.shape == (2, 3, 3)
    assert out[0].tolist() == [[9, 0, 0], [8, 0, 0], [7, 0, 0]]
    assert out[1].tolist() == [[0, 1, 2], [3, 4, 5], [0, 0, 0]]


def test_pad_stack_of_equal_shapes_is_a_plain_stack() -> None:
    """Arrays of one shape are stacked unchanged; no arrays give an empty vector."""
    arrays = [np.array([i, i + 1], dtype=np.int64) for i in range(3)]
    out = pad_stack(arrays, I64)
    assert np.array_equal(out, np.stack(arrays))
    assert pad_stack([], I64).shape == (0,)


def test_stack_of_scalars_gives_vectors() -> None:
    """Scalar components (0-d arrays or plain values) stack into 1-d arrays of the
    component dtype, padding or not; an empty batch gives empty vectors."""
    elements = [(_scalar(i), _scalar(f"s{i}", OBJ), np.float32(i / 2)) for i in range(3)]
    dtypes = (I64, OBJ, F32)
    for pad in (False, True):
        ints, objs, floats = stack(elements, dtypes, pad)
        assert ints.shape == objs.shape == floats.shape == (3,)
        assert ints.tolist() == [0, 1, 2]
        assert objs.tolist() == ["s0", "s1", "s2"]
        assert floats.dtype == F32
        assert floats.tolist() == [0.0, 0.5, 1.0]
    empty = stack([], dtypes, False)
    assert [(a.shape, a.dtype) for a in empty] == [((0,), dt) for dt in dtypes]


def test_stack_without_pad_refuses_ragged_elements() -> None:
    """Without padding, elements of different shapes cannot be stacked."""
    with pytest.raises(ValueError, match="same shape"):
        stack([(np.zeros(2),), (np.zeros(3),)], (F32,), False)
