"""``drain``: everything a queue, a Batches, an iterator or a pipeline still gives.

A source is anything with ``__aiter__``: a queue (its elements), a ``Batches`` (its
batches), ``q.batches(n)`` or ``aiter(q)``, the ``items`` of ``async with
pipe.open() as items``, any async iterable. ``drain`` iterates it until
StopAsyncIteration (or OutOfRangeError, for async iterators written by hand), so an
*open* queue is drained only once it is closed: what ends a drain is the end of the
input (the last producer of a runner closes its queue), not a momentarily empty queue.

Stacking (``stack=True``) builds one batch in the form the queue's own batches take:
an array for one unnamed component, a tuple of arrays for several, a dict of arrays
for named components, stacking each component along a new axis 0. Batch sources
(``Batches`` and ``q.batches(n)``, or ``batched=True``) are concatenated along axis 0
instead, so the result holds every element once. When the source is a queue (or an
iterator of one, or a Batches whose queue exists) its declared dtypes, names and shapes
decide the form: a component declared with a None dimension (PaddingFIFOQueue) is
padded as ``dequeue_many`` pads it, a Python-object component becomes a 1-d object
array; otherwise the first item decides (dict: per key; tuple: per position; anything
else: one component) and items of different shapes are refused. No items give the
queue's own empty batch (``dequeue_many(0)``), or ValueError when no queue is known.

The timeout bounds the whole drain (not the wait for one item). It is a stall guard
that fires once, at the deadline, while the drain still waits, so its report shows the
queue the drain was blocked on (a cancelled dequeue has already left it); it releases
nothing. Items drained before the deadline are lost with the StallError (the message
says how many).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, Sequence
from typing import Any, Literal, TypeVar, overload

import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError, OutOfRangeError
from .._input._batching import Batches
from .._queues._protocol import AsyncQueue
from .._queues._tuples import pad_stack, pad_value
from .._queues._views import BatchIterator, ElementIterator
from ._stall import StallGuard, seconds_arg

__all__ = ["drain"]

T = TypeVar("T")


@overload
async def drain(
    source: AsyncIterable[T],
    *,
    timeout: float | None = None,
    stack: Literal[False] = False,
    batched: bool | None = None,
) -> list[T]: ...


@overload
async def drain(
    source: AsyncIterable[T],
    *,
    timeout: float | None = None,
    stack: Literal[True],
    batched: bool | None = None,
) -> T: ...


async def drain(
    source: AsyncIterable[Any],
    *,
    timeout: float | None = None,
    stack: bool = False,
    batched: bool | None = None,
) -> Any:
    """Everything ``source`` gives until its end, as a list (or as one batch).

    Args:
        source: A queue, a ``Batches``, an element or batch iterator, a running
            pipeline's ``items``, or any async iterable.
        timeout: Seconds the whole drain may take (None: no limit). On expiry it raises
            StallError naming the source, how many items it had drained, and the queues
            tasks or threads wait on (as ``stall_guard`` reports them); nothing drained
            is put back.
        stack: Return one batch instead of a list (see the module docstring).
        batched: Whether the items are batches to concatenate (default: True for a
            ``Batches`` and ``q.batches(n)``, False otherwise).

    Raises:
        TypeError: ``source`` is not async iterable, or ``stack``/``batched`` are not
            bools.
        ValueError: ``timeout`` is not a number > 0; with ``stack``, the items cannot
            form one batch (different forms or shapes, or no items and no declared
            shapes to build an empty batch from).
        StallError: ``timeout`` expired.
    """
    if not hasattr(source, "__aiter__"):
        raise TypeError(
            "drain: expected a queue, a Batches, an async iterator or a pipeline's items, "
            f"got {type(source).__name__}"
        )
    limit = None if timeout is None else seconds_arg(timeout, "drain: timeout")
    if not isinstance(stack, bool):
        raise TypeError(f"drain: stack must be a bool, got {type(stack).__name__}")
    if batched is not None and not isinstance(batched, bool):
        raise TypeError(f"drain: batched must be a bool or None, got {type(batched).__name__}")
    items: list[Any] = []
    iterator = source.__aiter__()
    async with _Deadline(source, items, limit) if limit is not None else _NO_LIMIT:
        while True:
            try:
                items.append(await iterator.__anext__())
            except (StopAsyncIteration, OutOfRangeError):
                break
    if not stack:
        return items
    who = f"drain({source!r}, stack=True)"
    queue = _queue_of(source)
    if not items and queue is not None:
        try:
            return await queue.dequeue_many(0)  # the queue's own empty batch
        except ElementSpecError as exc:
            raise ValueError(
                f"{who}: no items, and queue '{queue.name}' declares no shapes to build an "
                "empty batch from"
            ) from exc
    if batched is None:
        batched = isinstance(source, (Batches, BatchIterator))
    return stack_items(items, queue, batched, who)


class _Deadline(StallGuard):
    """drain's timeout: a stall guard that fires once ``seconds`` have passed (reporting
    the queues waited on while the drain still waits) and releases nothing."""

    _deadline = True

    def __init__(self, source: object, items: list[Any], seconds: float) -> None:
        super().__init__(seconds, release=False)
        self._source = source
        self._items = items

    def _header(self, stalled: float) -> str:
        n = len(self._items)  # (read from the watcher thread: a list's len is atomic)
        return (
            f"drain({self._source!r}) did not end within {self.seconds:g} s (timeout): "
            f"{n} item{'s' if n != 1 else ''} drained, then it waited"
        )


_NO_LIMIT = contextlib.nullcontext()


def _queue_of(source: object) -> AsyncQueue[Any] | None:
    """The queue whose declared spec describes ``source``'s elements, if known."""
    if isinstance(source, (ElementIterator, BatchIterator)):
        return source.queue
    if isinstance(source, Batches):
        try:
            return source.queue
        except RuntimeError:  # its spec comes from the first example, not produced yet
            return None
    if isinstance(source, AsyncQueue):
        return source
    return None


def stack_items(items: list[Any], queue: AsyncQueue[Any] | None, batched: bool, who: str) -> Any:
    """``items`` (at least one, when ``queue`` is given) as one batch (see the module
    docstring)."""
    if queue is not None:
        names, dtypes, shapes = queue.names, queue.dtypes, queue.shapes
        single = names is None and len(dtypes) == 1
        ragged = [None in s for s in shapes] if shapes is not None else [False] * len(dtypes)
        typed: list[np.dtype[Any] | None] = list(dtypes)
    else:
        if not items:
            raise ValueError(f"{who}: no items, and no queue to build an empty batch from")
        first = items[0]
        names = tuple(first) if isinstance(first, dict) else None
        single = names is None and not isinstance(first, tuple)
        count = 1 if single else len(first)
        ragged = [False] * count
        typed = [None] * count
    columns = _columns(items, names, single, len(typed), who)
    joined = [
        _join(col, dt, pad, batched, f"{who}: component {i}")
        for i, (col, dt, pad) in enumerate(zip(columns, typed, ragged))
    ]
    return _pack(joined, names, single, items)


def _columns(
    items: list[Any], names: tuple[str, ...] | None, single: bool, count: int, who: str
) -> list[list[Any]]:
    """The items split into one list per component (checking that their forms agree)."""
    if single:
        return [items]
    for j, item in enumerate(items):
        if names is not None:
            ok = isinstance(item, dict) and tuple(item) == names
        else:
            ok = isinstance(item, tuple) and len(item) == count
        if not ok:
            want = f"a dict with keys {list(names)}" if names else f"a tuple of {count}"
            raise ValueError(f"{who}: item {j} is not {want}: {type(item).__name__}")
    if names is not None:
        return [[item[k] for item in items] for k in names]
    return [[item[i] for item in items] for i in range(count)]


_SCALARS = (np.ndarray, np.generic, bool, int, float, complex, str, bytes)


def _join(
    values: Sequence[Any], dtype: np.dtype[Any] | None, pad: bool, batched: bool, who: str
) -> npt.NDArray[Any]:
    """One component's values stacked (elements) or concatenated (batches)."""
    objects = dtype is not None and dtype.kind == "O"
    if not batched and (
        (objects and not all(isinstance(v, np.ndarray) for v in values))
        or (dtype is None and not all(isinstance(v, _SCALARS) for v in values))
    ):
        column = np.empty(len(values), dtype=object)
        for j, v in enumerate(values):
            column[j] = v  # one Python object per element (a tuple stays one object)
        return column
    arrays = [np.asarray(v) if dtype is None else np.asarray(v, dtype=dtype) for v in values]
    if batched:
        tails = {a.shape[1:] for a in arrays}
        if len(tails) > 1 and pad:
            width = tuple(max(a.shape[d] for a in arrays) for d in range(1, arrays[0].ndim))
            arrays = [_pad_to(a, width) for a in arrays]
        try:
            return np.concatenate(arrays)
        except ValueError as exc:
            raise ValueError(f"{who}: batches of different shapes {sorted(tails)}") from exc
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        if not pad:
            raise ValueError(f"{who}: elements of different shapes {sorted(shapes)}")
        return pad_stack(arrays, arrays[0].dtype, owner=who)
    return np.stack(arrays)


def _pad_to(batch: npt.NDArray[Any], width: tuple[int, ...]) -> npt.NDArray[Any]:
    if batch.shape[1:] == width:
        return batch
    out = np.full((batch.shape[0], *width), pad_value(batch.dtype), dtype=batch.dtype)
    where: tuple[slice, ...] = (slice(None), *(slice(0, n) for n in batch.shape[1:]))
    out[where] = batch
    return out


def _pack(
    components: list[npt.NDArray[Any]],
    names: tuple[str, ...] | None,
    single: bool,
    items: list[Any],
) -> Any:
    """The components in the items' form."""
    if names is not None:
        return dict(zip(names, components))
    if single:
        return components[0]
    kind = type(items[0])
    if kind is not tuple and hasattr(kind, "_fields"):  # a NamedTuple keeps its type
        return kind(*components)
    return tuple(components)
