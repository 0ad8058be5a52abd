"""TensorFlow's batching functions over one source: batch and shuffle_batch (the
``*_join`` ones, one producer per source, are in ``_batch_join.py``).

Each checks its arguments and hands them to ``plan_batches`` (``_batching.py``), which
builds the batch queue (or the stand-in that waits for the first example) and
registers the runner that fills it; each returns a ``Batches`` at once. The
difference between them is the queue kind (FIFO, or RandomShuffle with
``min_after_dequeue`` and a seed); both run ``num_threads`` concurrent producers over
their source.

Typing: the overloads give ``Batches`` the type of what comes out, as the queues and
pipelines have it: a queue's element type for a queue source; for other sources, a
tuple of arrays when the examples are tuples, a dict of arrays for dicts, otherwise
one array.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import Any, overload

import numpy.typing as npt

from .._errors import int_arg
from .._queues._declare import T
from .._queues._protocol import AsyncQueue
from ._batching import Batches, plan_batches

Array = npt.NDArray[Any]
# Sources whose examples are tuples (or dicts): their batches are tuples of arrays (or
# dicts of arrays), stacked per component; any other example gives one array. A queue
# gives batches of its own element type.
TupleSource = (
    Callable[[], tuple[Any, ...]]
    | Callable[[], Awaitable[tuple[Any, ...]]]
    | Iterable[tuple[Any, ...]]
    | AsyncIterable[tuple[Any, ...]]
)
DictSource = (
    Callable[[], dict[str, Any]]
    | Callable[[], Awaitable[dict[str, Any]]]
    | Iterable[dict[str, Any]]
    | AsyncIterable[dict[str, Any]]
)

__all__ = ["Array", "DictSource", "TupleSource", "batch", "shuffle_batch"]


def _threads_arg(num_threads: Any, owner: str) -> int:
    return int_arg(num_threads, "num_threads", owner, 1)


@overload
def batch(
    source: AsyncQueue[T],
    batch_size: int,
    *,
    num_threads: int = 1,
    capacity: int = 32,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[T]: ...
@overload
def batch(
    source: TupleSource,
    batch_size: int,
    *,
    num_threads: int = 1,
    capacity: int = 32,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[tuple[Array, ...]]: ...
@overload
def batch(
    source: DictSource,
    batch_size: int,
    *,
    num_threads: int = 1,
    capacity: int = 32,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[dict[str, Array]]: ...
@overload
def batch(
    source: Any,
    batch_size: int,
    *,
    num_threads: int = 1,
    capacity: int = 32,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[Array]: ...


def batch(
    source: Any,
    batch_size: int,
    *,
    num_threads: int = 1,
    capacity: int = 32,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[Any]:
    """Batch the examples of ``source`` through a FIFOQueue (TF ``train.batch``).

    Args:
        source: A producer as QueueRunner accepts it (async or sync callable returning
            one example, async or sync iterable of examples) or a queue whose elements
            are taken. An example is one value, a tuple of components or a dict.
        batch_size: Examples per batch.
        num_threads: Concurrent producers over ``source`` (an iterable is shared).
        capacity: Capacity of the batch queue, in examples.
        enqueue_many: Each produced value is a batch of examples.
        dtypes: dtypes of the components (a dict gives dict batches); with ``shapes``
            the queue is built up front, otherwise the missing part comes from the first
            example.
        shapes: Shapes of one example's components.
        dynamic_pad: Use a PaddingFIFOQueue: inferred dimensions are all variable and
            padded to the batch's largest with 0 (or ``""``).
        allow_smaller_final_batch: At the end, deliver the leftovers as one short batch
            instead of dropping them.
        name: Name of the batch queue and its runner (default ``"batch"``).

    Returns:
        A Batches; its runner is registered with ``add_queue_runner``.

    Raises:
        ElementSpecError: A bad size, capacity or spec.
        TypeError: ``source`` is not a producer or a queue.
    """
    owner = f"batch '{name or 'batch'}'"
    return plan_batches(
        "batch",
        [source],
        _threads_arg(num_threads, owner),
        batch_size,
        capacity=capacity,
        min_after_dequeue=0,
        seed=None,
        enqueue_many=enqueue_many,
        dtypes=dtypes,
        shapes=shapes,
        dynamic_pad=dynamic_pad,
        allow_smaller_final_batch=allow_smaller_final_batch,
        name=name,
    )


@overload
def shuffle_batch(
    source: AsyncQueue[T],
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    *,
    num_threads: int = 1,
    seed: int | None = None,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[T]: ...
@overload
def shuffle_batch(
    source: TupleSource,
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    *,
    num_threads: int = 1,
    seed: int | None = None,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[tuple[Array, ...]]: ...
@overload
def shuffle_batch(
    source: DictSource,
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    *,
    num_threads: int = 1,
    seed: int | None = None,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[dict[str, Array]]: ...
@overload
def shuffle_batch(
    source: Any,
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    *,
    num_threads: int = 1,
    seed: int | None = None,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[Array]: ...


def shuffle_batch(
    source: Any,
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    *,
    num_threads: int = 1,
    seed: int | None = None,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[Any]:
    """Batch the examples of ``source`` through a RandomShuffleQueue.

    As ``batch``, with ``capacity`` and ``min_after_dequeue`` of the shuffle queue (a
    batch is taken only while ``min_after_dequeue`` examples stay behind, until the
    sources end) and the queue's ``seed``. Default name ``"shuffle_batch"``.

    Raises:
        ElementSpecError: ``capacity <= min_after_dequeue``, or as ``batch``.
    """
    owner = f"shuffle_batch '{name or 'shuffle_batch'}'"
    return plan_batches(
        "shuffle_batch",
        [source],
        _threads_arg(num_threads, owner),
        batch_size,
        capacity=capacity,
        min_after_dequeue=min_after_dequeue,
        seed=seed,
        enqueue_many=enqueue_many,
        dtypes=dtypes,
        shapes=shapes,
        dynamic_pad=False,
        allow_smaller_final_batch=allow_smaller_final_batch,
        name=name,
    )
