"""TensorFlow-style input producers and ``limit_epochs``.

Each producer function builds a FIFOQueue and a QueueRunner that fills it, registers
the runner with ``add_queue_runner`` and returns the queue at once;
``coord.start_queue_runners()`` inside ``async with Coordinator() as coord:`` starts it,
as in TensorFlow (``tf.compat.v1.train``, reference section 7):

    names = string_input_producer(files, num_epochs=2, seed=0)
    batches = shuffle_batch(read_one, 32, capacity=2000, min_after_dequeue=1000, num_threads=4)
    async with Coordinator() as coord:
        coord.start_queue_runners()
        async for images, labels in batches:
            ...

A producer enqueues one epoch at a time (``enqueue_many``), permuted within the epoch
when ``shuffle`` is true (one ``numpy.random.Generator`` per producer, seeded by
``seed``: a fixed seed gives a fixed order), ``num_epochs`` times (None: forever), read
through ``Epochs``; then its runner closes the queue and consumers get OutOfRangeError
once it is drained.
The batching helpers live in ``_batching.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError, epochs_arg, int_arg, name_arg, seed_arg
from .._queues._fifo import FIFOQueue
from .._running._registry import add_queue_runner
from .._running._runner import QueueRunner
from ._epochs import Epochs

__all__ = [
    "input_producer",
    "limit_epochs",
    "range_input_producer",
    "slice_input_producer",
    "string_input_producer",
]

# -- limit_epochs -------------------------------------------------------------------------


class _EpochIterator:
    """The async iterator returned by ``limit_epochs`` (a class, not a generator)."""

    __slots__ = ("_epochs", "_num_epochs")

    def __init__(self, values: Sequence[Any], num_epochs: int | None) -> None:
        self._epochs = Epochs(values, num_epochs)
        self._num_epochs = num_epochs

    def __aiter__(self) -> _EpochIterator:
        return self

    async def __anext__(self) -> Any:
        await anyio.lowlevel.checkpoint()
        items = self._epochs.take(1)
        if not items:
            raise StopAsyncIteration
        return items[0]

    def __repr__(self) -> str:
        return f"<limit_epochs epoch={self._epochs.epoch} num_epochs={self._num_epochs}>"


def limit_epochs(values: Any, num_epochs: int | None) -> _EpochIterator:
    """Yield every item of ``values`` in order, ``num_epochs`` times, then stop.

    TF's ``limit_epochs(tensor, n)`` yields one tensor n times; pass ``[value]`` for
    that. The result is an async iterator, so it can be a producer of a QueueRunner or
    the source of ``batch``; as such its end closes the queue (OutOfRangeError
    downstream once drained).

    Args:
        values: A non-empty sequence (or numpy array: its rows) of items.
        num_epochs: Number of passes, or None to repeat forever.

    Raises:
        ElementSpecError: ``num_epochs <= 0``, or ``values`` is empty, a str or bytes.
    """
    owner = "limit_epochs"
    epochs = epochs_arg(num_epochs, owner)
    if isinstance(values, (str, bytes)):
        raise ElementSpecError(
            f"{owner}: values must be a sequence of items, got a {type(values).__name__}; "
            "pass [value] to repeat one value"
        )
    items: Any = values if isinstance(values, np.ndarray) else list(values)
    if len(items) == 0:
        raise ElementSpecError(f"{owner}: values must not be empty")
    return _EpochIterator(items, epochs)


# -- producers over arrays ----------------------------------------------------------------


class _EpochFeeder:
    """Async iterator of whole epochs (batches), each optionally permuted."""

    __slots__ = ("_comps", "_epochs", "_names", "_shuffle")

    def __init__(
        self,
        comps: tuple[npt.NDArray[Any], ...],
        names: tuple[str, ...] | None,
        num_epochs: int | None,
        shuffle: bool,
        seed: int | None,
    ) -> None:
        self._comps = comps
        self._names = names
        self._shuffle = shuffle
        self._epochs = Epochs(range(len(comps[0])), num_epochs, shuffle=shuffle, seed=seed)

    def __aiter__(self) -> _EpochFeeder:
        return self

    async def __anext__(self) -> Any:
        await anyio.lowlevel.checkpoint()
        order = self._epochs.take_indices()
        if order is None:
            raise StopAsyncIteration
        comps = tuple(c[order] for c in self._comps) if self._shuffle else self._comps
        if self._names is not None:
            return dict(zip(self._names, comps))
        return comps[0] if len(comps) == 1 else comps


def _as_rows(value: Any, what: str, owner: str) -> npt.NDArray[Any]:
    """``value`` as an array of at least one row; strings become object arrays."""
    try:
        arr = np.asarray(value)
    except ValueError as exc:  # ragged nested sequences
        raise ElementSpecError(
            f"{owner}: {what} must have rows of one fully defined shape: {exc}"
        ) from exc
    if arr.ndim == 0:
        raise ElementSpecError(f"{owner}: {what} must have at least one dimension, got a scalar")
    if len(arr) == 0:
        raise ElementSpecError(f"{owner}: {what} must not be empty")
    if arr.dtype.kind in "SU":
        arr = arr.astype(object)
    return arr


@dataclass(frozen=True)
class _ProducerArgs:
    """The checked arguments every ``*_input_producer`` shares."""

    name: str
    owner: str
    num_epochs: int | None
    shuffle: bool
    seed: int | None
    capacity: int


def _producer_args(
    kind: str, name: Any, num_epochs: Any, shuffle: Any, seed: Any, capacity: Any
) -> _ProducerArgs:
    qname = name_arg(name, kind, f"{kind}: name")
    owner = f"{kind} '{qname}'"
    return _ProducerArgs(
        qname,
        owner,
        epochs_arg(num_epochs, owner),
        bool(shuffle),
        seed_arg(seed, owner),
        int_arg(capacity, "capacity", owner, 1),
    )


def _producer_queue(
    comps: tuple[npt.NDArray[Any], ...], names: tuple[str, ...] | None, args: _ProducerArgs
) -> FIFOQueue[Any]:
    queue = FIFOQueue(
        args.capacity,
        [c.dtype for c in comps],
        [tuple(c.shape[1:]) for c in comps],
        names,
        name=args.name,
    )
    feeder = _EpochFeeder(comps, names, args.num_epochs, args.shuffle, args.seed)
    add_queue_runner(QueueRunner(queue, [feeder], enqueue_many=True, name=args.name))
    return queue


def input_producer(
    input_array: Any,
    *,
    element_shape: Sequence[int] | None = None,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    name: str | None = None,
) -> FIFOQueue[Any]:
    """A FIFOQueue fed with the rows of ``input_array``, epoch after epoch.

    Args:
        input_array: An array (or nested sequence) with at least one row.
        element_shape: The shape of one row, checked against ``input_array``.
        num_epochs: Number of passes over the rows, or None for no limit.
        shuffle: Permute the rows within each epoch.
        seed: Seed of the permutations (a fixed seed gives a fixed order).
        capacity: Capacity of the queue.
        name: Name of the queue and its runner (default ``"input_producer"``).

    Returns:
        The queue; its runner is registered with ``add_queue_runner``.

    Raises:
        ElementSpecError: Empty or ragged input, a row shape other than
            ``element_shape``, or a bad ``num_epochs``, ``seed`` or ``capacity``.
    """
    args = _producer_args("input_producer", name, num_epochs, shuffle, seed, capacity)
    owner = args.owner
    arr = _as_rows(input_array, "input_array", owner)
    if element_shape is not None:
        want = tuple(int(d) for d in element_shape)
        if want != arr.shape[1:]:
            raise ElementSpecError(
                f"{owner}: element_shape {want} does not match the rows of input_array, "
                f"which have shape {arr.shape[1:]}"
            )
    return _producer_queue((arr,), None, args)


def string_input_producer(
    strings: Sequence[str | bytes | os.PathLike[str]],
    *,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    name: str | None = None,
) -> FIFOQueue[Any]:
    """A FIFOQueue of strings (e.g. file names), one epoch after another.

    Elements are Python ``str`` (or ``bytes``) objects; path-like objects become
    ``str``. Arguments as for ``input_producer`` (default name
    ``"string_input_producer"``).

    Raises:
        ElementSpecError: ``strings`` is empty, a single str, or holds a non-string.
    """
    args = _producer_args("string_input_producer", name, num_epochs, shuffle, seed, capacity)
    owner = args.owner
    if isinstance(strings, (str, bytes)):
        raise ElementSpecError(
            f"{owner}: strings must be a sequence of strings, got a single "
            f"{type(strings).__name__}; wrap it in a list"
        )
    items = list(strings)
    if not items:
        raise ElementSpecError(f"{owner}: strings must not be empty")
    arr = np.empty(len(items), dtype=object)
    for i, s in enumerate(items):
        if isinstance(s, os.PathLike):
            s = os.fspath(s)
        if not isinstance(s, (str, bytes)):
            raise ElementSpecError(
                f"{owner}: strings[{i}] must be a str, bytes or path, got {type(s).__name__}"
            )
        arr[i] = s
    return _producer_queue((arr,), None, args)


def range_input_producer(
    limit: int,
    *,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    name: str | None = None,
) -> FIFOQueue[Any]:
    """A FIFOQueue of the int64 scalars ``0 .. limit-1``, one epoch after another.

    Arguments as for ``input_producer`` (default name ``"range_input_producer"``).

    Raises:
        ElementSpecError: ``limit < 1`` or not an int.
    """
    args = _producer_args("range_input_producer", name, num_epochs, shuffle, seed, capacity)
    limit = int_arg(limit, "limit", args.owner, 1)
    arr = np.arange(limit, dtype=np.int64)
    return _producer_queue((arr,), None, args)


def slice_input_producer(
    arrays: Sequence[Any] | Mapping[str, Any],
    *,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    name: str | None = None,
) -> FIFOQueue[Any]:
    """A FIFOQueue of slices: element i is ``(arrays[0][i], arrays[1][i], ...)``.

    All arrays are sliced at the same (per-epoch permuted) index. A dict of arrays
    gives dict elements with the same keys. Other arguments as for ``input_producer``
    (default name ``"slice_input_producer"``).

    Raises:
        ElementSpecError: ``arrays`` is empty, or the arrays differ in length.
    """
    args = _producer_args("slice_input_producer", name, num_epochs, shuffle, seed, capacity)
    owner = args.owner
    names: tuple[str, ...] | None = None
    if isinstance(arrays, Mapping):
        names = tuple(arrays)
        values = [arrays[k] for k in names]
    elif isinstance(arrays, (str, bytes)) or not isinstance(arrays, Sequence):
        raise ElementSpecError(
            f"{owner}: arrays must be a list of arrays, got {type(arrays).__name__}"
        )
    else:
        values = list(arrays)
    if not values:
        raise ElementSpecError(f"{owner}: arrays must not be empty")
    comps = tuple(_as_rows(v, f"arrays[{i}]", owner) for i, v in enumerate(values))
    lengths = [len(c) for c in comps]
    if len(set(lengths)) > 1:
        raise ElementSpecError(f"{owner}: the arrays must have the same length, got {lengths}")
    return _producer_queue(comps, names, args)
