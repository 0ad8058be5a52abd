"""TensorFlow's batching functions over several sources: batch_join and
shuffle_batch_join, one producer per source, so each source's own order is kept (see
``_batch_fns.py`` for the rest, and for how the overloads type the batches).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from .._errors import ElementSpecError
from .._queues._declare import T
from .._queues._protocol import AsyncQueue
from ._batch_fns import Array, DictSource, TupleSource
from ._batching import Batches, plan_batches

__all__ = ["batch_join", "shuffle_batch_join"]


def _sources_arg(sources: Any, owner: str) -> list[Any]:
    if isinstance(sources, (str, bytes)) or not isinstance(sources, Sequence):
        raise ElementSpecError(
            f"{owner}: sources must be a list of sources, got {type(sources).__name__}"
        )
    return list(sources)


@overload
def batch_join(
    sources: Sequence[AsyncQueue[T]],
    batch_size: int,
    *,
    capacity: int = 32,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[T]: ...
@overload
def batch_join(
    sources: Sequence[TupleSource],
    batch_size: int,
    *,
    capacity: int = 32,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[tuple[Array, ...]]: ...
@overload
def batch_join(
    sources: Sequence[DictSource],
    batch_size: int,
    *,
    capacity: int = 32,
    enqueue_many: bool = False,
    dtypes: Any = None,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    name: str | None = None,
) -> Batches[dict[str, Array]]: ...
@overload
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
) -> Batches[Array]: ...


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
) -> Batches[Any]:
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


@overload
def shuffle_batch_join(
    sources: Sequence[AsyncQueue[T]],
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
) -> Batches[T]: ...
@overload
def shuffle_batch_join(
    sources: Sequence[TupleSource],
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
) -> Batches[tuple[Array, ...]]: ...
@overload
def shuffle_batch_join(
    sources: Sequence[DictSource],
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
) -> Batches[dict[str, Array]]: ...
@overload
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
) -> Batches[Array]: ...


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
) -> Batches[Any]:
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
