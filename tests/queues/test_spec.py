"""Element forms, dtype/shape normalisation, conversion and validation (docs/api/queues.md,
"Element forms"): a rejected element or batch changes nothing."""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest
from support import settle, spawn

import aqueue

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def _unchanged(q: Any, size: int, enqueued: int) -> None:
    stats = q.statistics()
    assert (q.size(), stats.enqueued_total, stats.dequeued_total) == (size, enqueued, 0)


# -- normalisation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtypes", "expected"),
    [
        (np.float32, (np.dtype(np.float32),)),
        ("int16", (np.dtype(np.int16),)),
        (float, (np.dtype(np.float64),)),
        ([np.int8, "U3", object], (np.dtype(np.int8), np.dtype("U3"), np.dtype(object))),
        ((np.bool_,), (np.dtype(np.bool_),)),
    ],
)
async def test_dtypes_normalised_to_tuple_of_dtype(dtypes: Any, expected: tuple[Any, ...]) -> None:
    """One dtype or a sequence becomes a tuple of np.dtype."""
    q = aqueue.FIFOQueue(3, dtypes)
    assert q.dtypes == expected
    assert all(isinstance(d, np.dtype) for d in q.dtypes)


@pytest.mark.parametrize(
    ("dtypes", "shapes", "expected"),
    [
        (np.float32, None, None),
        (np.float32, (), ((),)),
        (np.float32, (32, 32), ((32, 32),)),
        (np.float32, [3], ((3,),)),
        (np.float32, [(3,)], ((3,),)),
        ([np.float32, np.int8], [(2, 2), ()], ((2, 2), ())),
        ([np.float32, np.int8], [[2, 2], []], ((2, 2), ())),
        ([np.float32, np.int8], ((2,), (1, 1)), ((2,), (1, 1))),
    ],
)
async def test_shapes_normalised_like_tf(dtypes: Any, shapes: Any, expected: Any) -> None:
    """A tuple of ints is one shape; ``()`` is one scalar; lists become tuples."""
    q = aqueue.FIFOQueue(3, dtypes, shapes)
    assert q.shapes == expected


async def test_names_and_name_properties() -> None:
    """names becomes a tuple; name is kept; capacity is exposed."""
    q = aqueue.FIFOQueue(7, [np.int8, np.int8], [(), ()], ["a", "b"], name="pairs")
    assert q.names == ("a", "b")
    assert q.name == "pairs"
    assert q.capacity == 7
    assert aqueue.FIFOQueue(2, np.int8).names is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"capacity": 0, "dtypes": np.int8},
        {"capacity": -1, "dtypes": np.int8},
        {"capacity": 1.5, "dtypes": np.int8},
        {"capacity": 2, "dtypes": "not-a-dtype"},
        {"capacity": 2, "dtypes": [np.int8, np.int8], "shapes": [(), (), ()]},
        {"capacity": 2, "dtypes": np.int8, "shapes": [(None,)]},
        {"capacity": 2, "dtypes": np.int8, "shapes": [(-2,)]},
        {"capacity": 2, "dtypes": [np.int8, np.int8], "names": ["a"]},
        {"capacity": 2, "dtypes": [np.int8, np.int8], "names": ["a", "a"]},
    ],
    ids=[
        "zero-capacity",
        "negative-capacity",
        "float-capacity",
        "bad-dtype",
        "shapes-count",
        "none-dim-in-fifo",
        "negative-dim",
        "names-count",
        "duplicate-names",
    ],
)
async def test_bad_construction_arguments_raise(kwargs: dict[str, Any]) -> None:
    """Bad constructor arguments raise ElementSpecError (a ValueError)."""
    with pytest.raises(aqueue.ElementSpecError):
        aqueue.FIFOQueue(**kwargs)


# -- element forms ------------------------------------------------------------------------


async def test_single_component_takes_and_returns_bare_values() -> None:
    """One unnamed component: bare array in, bare array out; scalars come back as numpy
    scalars of the declared dtype."""
    q = aqueue.FIFOQueue(5, np.float32, (2,))
    await q.enqueue([1, 2])
    out = await q.dequeue()
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.float32
    assert out.tolist() == [1.0, 2.0]
    s = aqueue.FIFOQueue(5, np.int16, ())
    await s.enqueue(3)
    v = await s.dequeue()
    assert isinstance(v, np.generic)
    assert v.dtype == np.int16
    assert v == 3


async def test_several_components_use_tuples() -> None:
    """Several unnamed components: a tuple in component order, for elements and batches."""
    q = aqueue.FIFOQueue(5, [np.int32, np.float64], [(), (2,)])
    await q.enqueue((1, [0.5, 1.5]))
    await q.enqueue_many(([2, 3], [[1, 1], [2, 2]]))
    a, b = await q.dequeue()
    assert (int(a), b.tolist()) == (1, [0.5, 1.5])
    batch = await q.dequeue_many(2)
    assert isinstance(batch, tuple)
    assert batch[0].tolist() == [2, 3]
    assert batch[1].shape == (2, 2)


async def test_names_use_dicts() -> None:
    """names given: dicts with exactly those keys in and out, elements and batches."""
    q = aqueue.FIFOQueue(5, [np.int32, object], [(), ()], names=["label", "path"])
    await q.enqueue({"path": "a.png", "label": 1})
    await q.enqueue_many({"label": [2, 3], "path": ["b.png", "c.png"]})
    one = await q.dequeue()
    assert one == {"label": 1, "path": "a.png"}
    batch = await q.dequeue_many(2)
    assert set(batch) == {"label", "path"}
    assert batch["label"].tolist() == [2, 3]
    assert batch["path"].tolist() == ["b.png", "c.png"]


async def test_object_dtype_holds_python_objects() -> None:
    """dtype=object stores file names (or any object) and returns them as is."""
    q = aqueue.FIFOQueue(5, object, ())
    await q.enqueue("data/file-0001.bin")
    await q.enqueue_many(np.array(["x", "y"], dtype=object))
    marker = object()
    await q.enqueue(marker)
    assert await q.dequeue() == "data/file-0001.bin"
    assert (await q.dequeue_many(2)).tolist() == ["x", "y"]
    assert await q.dequeue() is marker


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        (np.float16, np.float16(1.5)),
        (np.float32, np.float32(-2.25)),
        (np.float64, 1e300),
        (np.int8, -128),
        (np.int16, 32767),
        (np.int32, -(2**31)),
        (np.int64, 2**62),
        (np.uint8, 255),
        (np.uint16, 65535),
        (np.bool_, True),
        (np.complex64, np.complex64(1 + 2j)),
        (np.complex128, 3 - 4j),
        ("U5", "hello"),
    ],
)
async def test_dtypes_round_trip_exactly(dtype: Any, value: Any) -> None:
    """TF testDtypes: each dtype round-trips exactly through single and batch ops."""
    q = aqueue.FIFOQueue(4, dtype, ())
    await q.enqueue(value)
    await q.enqueue_many(np.array([value, value], dtype=dtype))
    one = await q.dequeue()
    batch = await q.dequeue_many(2)
    assert one.dtype == np.dtype(dtype)
    assert batch.dtype == np.dtype(dtype)
    assert one == np.array(value, dtype=dtype)
    assert (batch == np.array(value, dtype=dtype)).all()


async def test_high_rank_elements() -> None:
    """TF testHighDimension: rank-5 elements round-trip."""
    shape = (2, 1, 3, 1, 2)
    q = aqueue.FIFOQueue(4, np.int32, shape)
    data = np.arange(4 * 12, dtype=np.int32).reshape(4, *shape)
    await q.enqueue_many(data)
    np.testing.assert_array_equal(await q.dequeue_many(4), data)


# -- conversion ------------------------------------------------------------------------------


async def test_python_values_are_converted_to_the_declared_dtype() -> None:
    """Python scalars and lists convert to the component dtype."""
    q = aqueue.FIFOQueue(5, [np.float32, np.int64], [(2,), ()])
    await q.enqueue(([1, 2], 3))
    a, b = await q.dequeue()
    assert a.dtype == np.float32
    assert b.dtype == np.int64


async def test_safe_numpy_casts_are_accepted() -> None:
    """numpy arrays are accepted when numpy's 'safe' casting allows it."""
    q = aqueue.FIFOQueue(5, np.float64, (3,))
    await q.enqueue(np.array([1, 2, 3], np.int32))
    await q.enqueue(np.array([1, 2, 3], np.float32))
    assert (await q.dequeue()).dtype == np.float64
    assert (await q.dequeue()).tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        (np.float32, np.array([1.0, 2.0], np.float64)),
        (np.int32, np.array([1, 2], np.int64)),
        (np.int64, np.array([1.0, 2.0], np.float32)),
        (np.uint8, np.array([1, 2], np.int8)),
        (np.int32, np.array(["1", "2"])),
    ],
    ids=["f64->f32", "i64->i32", "f32->i64", "i8->u8", "str->i32"],
)
async def test_unsafe_numpy_casts_are_rejected(dtype: Any, value: Any) -> None:
    """A numpy array that would need an unsafe cast raises ElementSpecError naming the
    expected and received dtypes; the queue is unchanged."""
    q = aqueue.FIFOQueue(5, dtype, (2,))
    with pytest.raises(aqueue.ElementSpecError) as info:
        await q.enqueue(value)
    msg = str(info.value)
    assert str(np.dtype(dtype)) in msg
    assert str(value.dtype) in msg
    with pytest.raises(aqueue.ElementSpecError):
        q.enqueue_many_nowait(value[None])
    _unchanged(q, 0, 0)


async def test_out_of_range_python_ints_are_rejected() -> None:
    """Python ints are never wrapped into a narrower dtype."""
    q = aqueue.FIFOQueue(5, np.int8, ())
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue(300)
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue_many([1, 2, 1000])
    _unchanged(q, 0, 0)


async def test_empty_python_list_batch_is_a_no_op() -> None:
    """TF testEnqueueManyEmptyTypeConversion: empty lists convert to the declared dtype."""
    q = aqueue.FIFOQueue(5, [np.int32, np.float32], [(), ()])
    await q.enqueue_many(([], []))
    _unchanged(q, 0, 0)


# -- validation leaves the queue unchanged ---------------------------------------------------


def _prefilled(names: list[str] | None = None) -> Any:
    q = aqueue.FIFOQueue(4, [np.int32, np.float32], [(), (3,)], names)
    if names:
        q.enqueue_nowait({names[0]: 1, names[1]: [1, 2, 3]})
    else:
        q.enqueue_nowait((1, [1, 2, 3]))
    return q


@pytest.mark.parametrize(
    ("element", "fragments"),
    [
        ((1, [1, 2, 3, 4]), ["component 1", "(3,)", "(4,)"]),
        ((1, [[1, 2, 3]]), ["component 1", "(3,)", "(1, 3)"]),
        (([1, 2], [1, 2, 3]), ["component 0", "()", "(2,)"]),
        ((1,), ["2"]),
        ((1, [1, 2, 3], 5), ["2", "3"]),
        ({"a": 1, "b": [1, 2, 3]}, ["names"]),
        (7, ["tuple"]),
        ((np.float64(1.5), [1, 2, 3]), ["int32", "float64"]),
    ],
    ids=[
        "shape",
        "rank",
        "scalar-shape",
        "too-few",
        "too-many",
        "dict-unnamed",
        "not-a-tuple",
        "dtype",
    ],
)
async def test_bad_element_raises_and_changes_nothing(element: Any, fragments: list[str]) -> None:
    """A bad element raises ElementSpecError naming component, expected and got; the
    queue is unchanged, for enqueue and enqueue_nowait."""
    q = _prefilled()
    with pytest.raises(aqueue.ElementSpecError) as info:
        await q.enqueue(element)
    for fragment in fragments:
        assert fragment in str(info.value)
    with pytest.raises(aqueue.ElementSpecError):
        q.enqueue_nowait(element)
    _unchanged(q, 1, 1)
    a, b = await q.dequeue()
    assert (int(a), b.tolist()) == (1, [1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    ("element", "fragments"),
    [
        ({"a": 1}, ["b"]),
        ({"a": 1, "b": [1, 2, 3], "c": 2}, ["c"]),
        ({}, ["a", "b"]),
        ((1, [1, 2, 3]), ["dict"]),
        ({"a": 1, "b": [1, 2]}, ["'b'", "(3,)", "(2,)"]),
    ],
    ids=["missing-key", "extra-key", "empty-dict", "tuple-for-named", "named-shape"],
)
async def test_bad_named_element_raises_and_changes_nothing(
    element: Any, fragments: list[str]
) -> None:
    """Named queues take dicts with exactly their keys; errors name the key."""
    q = _prefilled(["a", "b"])
    with pytest.raises(aqueue.ElementSpecError) as info:
        await q.enqueue(element)
    for fragment in fragments:
        assert fragment in str(info.value)
    _unchanged(q, 1, 1)


@pytest.mark.parametrize(
    "batch",
    [
        ([1, 2], np.zeros((3, 3))),
        ([1, 2], np.zeros((2, 4))),
        ([1, 2], np.zeros(3)),
        (1, np.zeros((1, 3))),
        ([1, 2],),
        ([1, 2], np.zeros((2, 3), np.float64)),
    ],
    ids=["batch-size-mismatch", "inner-shape", "no-batch-dim", "scalar-batch", "too-few", "dtype"],
)
async def test_bad_batch_raises_and_changes_nothing(batch: Any) -> None:
    """A bad batch raises ElementSpecError before anything is admitted (all or nothing)."""
    q = _prefilled()
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue_many(batch)
    with pytest.raises(aqueue.ElementSpecError):
        q.enqueue_many_nowait(batch)
    _unchanged(q, 1, 1)


async def test_batch_size_mismatch_names_both_sizes() -> None:
    """TF testBatchSizeMismatch: the message names each component's batch size."""
    q = _prefilled()
    with pytest.raises(aqueue.ElementSpecError) as info:
        await q.enqueue_many(([1, 2], np.zeros((3, 3), np.float32)))
    assert "2" in str(info.value)
    assert "3" in str(info.value)


async def test_validation_happens_before_waiting() -> None:
    """A bad element raises at once even when the queue is full (it never parks), and a
    bad batch never leaves a prefix behind."""
    q = aqueue.FIFOQueue(1, np.int32, ())
    q.enqueue_nowait(1)
    with anyio.fail_after(5):
        with pytest.raises(aqueue.ElementSpecError):
            await q.enqueue([1, 2])
        with pytest.raises(aqueue.ElementSpecError):
            await q.enqueue_many(np.zeros((5, 2), np.int32))
    assert q.statistics().tasks_waiting_enqueue == 0
    _unchanged(q, 1, 1)


async def test_validation_error_does_not_disturb_waiters() -> None:
    """A rejected element does not wake or satisfy a waiting dequeuer."""
    q = aqueue.FIFOQueue(2, np.int32, ())
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue)
        await settle()
        with pytest.raises(aqueue.ElementSpecError):
            q.enqueue_nowait([1, 2])
        await settle()
        assert op.pending
        q.enqueue_nowait(3)
        await settle()
        assert int(op.result()) == 3


@pytest.mark.parametrize(
    "make",
    [
        lambda: aqueue.FIFOQueue(3, np.float32, (2,)),
        lambda: aqueue.FIFOQueue(3, np.float32),
        lambda: aqueue.PaddingFIFOQueue(3, np.float32, [(None,)]),
        lambda: aqueue.RandomShuffleQueue(3, 0, np.float32, (2,), seed=1),
        lambda: aqueue.RandomShuffleQueue(3, 0, np.float32, seed=1),
    ],
    ids=["ring", "shape-less", "padding", "pool", "shape-less-pool"],
)
async def test_input_arrays_are_copied_on_enqueue(make: Any) -> None:
    """Mutating an array after enqueueing it does not change the stored element."""
    q = make()
    a = np.array([1.0, 2.0], np.float32)
    batch = np.full((2, 2), 3.0, np.float32)
    await q.enqueue(a)
    await q.enqueue_many(batch)
    a[:] = 9.0
    batch[:] = 9.0
    got = sorted([(await q.dequeue()).tolist() for _ in range(3)])
    assert got == [[1.0, 2.0], [3.0, 3.0], [3.0, 3.0]]


async def test_shape_less_queue_checks_component_count_and_dtype() -> None:
    """Without shapes, dtype and component count are still validated."""
    q = aqueue.FIFOQueue(3, [np.int32, np.int32])
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue((1,))
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue((np.float64(1.0), 1))
    with pytest.raises(aqueue.ElementSpecError):
        await q.enqueue_many(([1, 2], [1, 2, 3]))
    _unchanged(q, 0, 0)


def test_scalar_object_component_holds_tuples_and_lists_as_they_are() -> None:
    """A dtype=object, shape=() component stores any Python object, sequences included."""
    q = aqueue.FIFOQueue(4, object, ())
    q.enqueue_nowait((1, 2))
    q.enqueue_many_nowait([(3, 4), ["a", "b"]])
    assert q.dequeue_nowait() == (1, 2)
    batch = q.dequeue_many_nowait(2)
    assert batch.shape == (2,)
    assert batch[0] == (3, 4)
    assert batch[1] == ["a", "b"]


def test_scalar_object_component_takes_any_object_but_a_dict_or_array_of_another_shape() -> None:
    """A dtype=object, shape=() queue holds arbitrary objects (None, strings, instances)
    as they are; a dict (the form of named components) and an array whose shape is not
    () are refused with ElementSpecError, and nothing is admitted."""
    q = aqueue.FIFOQueue(8, object, ())

    class Item:
        pass

    item = Item()
    for value in (item, None, "path/a.jpg", 3.5):
        q.enqueue_nowait(value)
    got = [q.dequeue_nowait() for _ in range(4)]
    assert got[0] is item
    assert got[1:] == [None, "path/a.jpg", 3.5]
    with pytest.raises(aqueue.ElementSpecError, match="dict"):
        q.enqueue_nowait({"a": 1})
    with pytest.raises(aqueue.ElementSpecError, match="shape"):
        q.enqueue_nowait(np.zeros(3))
    assert q.size() == 0
    q.enqueue_nowait(np.array("zero-d", dtype=object))  # a 0-d array is one element
    assert q.dequeue_nowait() == "zero-d"
