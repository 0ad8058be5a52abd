"""TensorFlow's batching functions: batch, shuffle_batch, batch_join, shuffle_batch_join.

Each checks its arguments and hands them to ``plan_batches`` (``_batching.py``), which
builds the batch queue (or the stand-in that waits for the first example) and
registers the runner that fills it; each returns a ``Batches`` at once. The
difference between them is the queue kind (FIFO, or RandomShuffle with
``min_after_dequeue`` and a seed) and the producers: ``batch``/``shuffle_batch`` run
``num_threads`` concurrent producers over one source, ``batch_join``/
``shuffle_batch_join`` one producer per source, so each source's own order is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import ElementSpecError, int_arg
from ._batching import Batches, plan_batches

__all__ = ["batch", "batch_join", "shuffle_batch", "shuffle_batch_join"]


def _threads_arg(num_threads: Any, owner: str) -> int:
    return int_arg(num_threads, "num_threads", owner, 1)


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
) -> Batches:
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
) -> Batches:
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


def _sources_arg(sources: Any, owner: str) -> list[Any]:
    if isinstance(sources, (str, bytes)) or not isinstance(sources, Sequence):
        raise ElementSpecError(
            f"{owner}: sources must be a list of sources, got {type(sources).__name__}"
        )
    return list(sources)


def batch_join(
    sources: Sequence[Any],
    batch_size: int,
    *,
    capacity: int = 32,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches:
    """Batch the examples of several sources, one producer per source.

    Each source's own order is kept in the output; how sources interleave is
    unspecified. Other arguments as for ``batch`` (default name ``"batch_join"``).
    """
    kind = "batch_join"
    return plan_batches(
        kind,
        _sources_arg(sources, f"{kind} '{name or kind}'"),
        1,
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


def shuffle_batch_join(
    sources: Sequence[Any],
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    *,
    seed: int | None = None,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches:
    """Shuffle-batch the examples of several sources, one producer per source.

    Arguments as for ``shuffle_batch`` (default name ``"shuffle_batch_join"``).
    """
    kind = "shuffle_batch_join"
    return plan_batches(
        kind,
        _sources_arg(sources, f"{kind} '{name or kind}'"),
        1,
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
