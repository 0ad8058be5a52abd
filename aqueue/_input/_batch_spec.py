"""The arguments of a batch queue's constructor: given, taken from a source queue, or
inferred from the first example.

``batch`` and friends build their queue from ``dtypes=``/``shapes=`` when both are
given, else from the source queues' declared spec, else from the first example the
sources produce (``first_value`` produces it the way a QueueRunner would). Inference
rules: a dict example gives named components (keys sorted by ``str``), a tuple several
components, anything else one component; each component's dtype and shape are those of
``numpy.asarray`` of it, strings become ``object``; with ``enqueue_many`` the leading
dimension is the batch; with ``dynamic_pad`` every inferred dimension is variable.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import anyio
import numpy as np

from .._errors import ElementSpecError, OutOfRangeError, QueueClosedError
from .._queues._protocol import AsyncQueue
from .._running._producers import is_async_callable

__all__ = ["QueueArgs", "args_from_example", "args_from_queue", "first_value", "user_args"]


class QueueArgs(NamedTuple):
    """The ``dtypes``, ``shapes`` and ``names`` arguments a batch queue will be built
    with, None where not known yet. Not a spec: the queue's constructor checks them and
    builds its ElementSpec."""

    dtypes: list[Any] | None
    shapes: list[Any] | None
    names: tuple[str, ...] | None

    @property
    def complete(self) -> bool:
        """Whether the queue can be built from these alone."""
        return self.dtypes is not None and self.shapes is not None


def user_args(dtypes: Any, shapes: Any, owner: str) -> QueueArgs:
    """The arguments given by ``dtypes=``/``shapes=`` (each may be None, a list or a dict)."""
    names: tuple[str, ...] | None = None
    dts: list[Any] | None = None
    shp: list[Any] | None = None
    if isinstance(dtypes, Mapping):
        names = tuple(sorted(dtypes, key=str))
        dts = [dtypes[k] for k in names]
    elif dtypes is not None:
        dts = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes]
    if isinstance(shapes, Mapping):
        keys = tuple(sorted(shapes, key=str))
        if names is not None and keys != names:
            raise ElementSpecError(
                f"{owner}: shapes has keys {list(keys)} but dtypes has {list(names)}"
            )
        names = keys
        shp = [tuple(shapes[k]) for k in names]
    elif shapes is not None:
        shp = _shape_list(shapes)
    return QueueArgs(dts, shp, names)


def _shape_list(shapes: Any) -> list[Any]:
    """One shape or a sequence of shapes (TF convention) as a list of shapes."""
    if isinstance(shapes, (list, tuple)) and all(
        d is None or isinstance(d, numbers.Integral) for d in shapes
    ):
        return [tuple(shapes)]
    return [tuple(s) for s in shapes]


def args_from_queue(source: AsyncQueue[Any], enqueue_many: bool) -> QueueArgs:
    """The dtypes, shapes and names of a source queue."""
    shapes = source.shapes
    if shapes is not None and enqueue_many:
        shapes = tuple(s[1:] for s in shapes)
    return QueueArgs(list(source.dtypes), None if shapes is None else list(shapes), source.names)


def args_from_example(
    example: Any, given: QueueArgs, *, enqueue_many: bool, dynamic_pad: bool, owner: str
) -> QueueArgs:
    """Complete ``given`` from one example (or one batch, with ``enqueue_many``)."""
    names: tuple[str, ...] | None = given.names
    if isinstance(example, Mapping):
        keys = tuple(sorted(example, key=str))
        if names is not None and set(keys) != set(names):
            raise ElementSpecError(
                f"{owner}: the first example has keys {list(keys)}, expected {list(names)}"
            )
        names = names if names is not None else keys
        parts = [example[k] for k in names]
    elif isinstance(example, tuple):
        parts = list(example)
    else:
        parts = [example]
    dtypes: list[Any] = []
    shapes: list[Any] = []
    for i, part in enumerate(parts):
        try:
            arr = np.asarray(part)
        except ValueError as exc:
            raise ElementSpecError(
                f"{owner}: component {i} of the first example has no regular shape: {exc}"
            ) from exc
        if enqueue_many and arr.ndim == 0:
            raise ElementSpecError(
                f"{owner}: with enqueue_many=True each produced value is a batch, but "
                f"component {i} of the first one is a scalar"
            )
        dt = np.dtype(object) if arr.dtype.kind in "SU" else arr.dtype
        shape = arr.shape[1:] if enqueue_many else arr.shape
        dtypes.append(dt)
        shapes.append(tuple(None for _ in shape) if dynamic_pad else tuple(shape))
    if given.dtypes is not None:
        if len(given.dtypes) != len(parts):
            raise ElementSpecError(
                f"{owner}: dtypes has {len(given.dtypes)} components but the first example "
                f"has {len(parts)}"
            )
        dtypes = list(given.dtypes)
    if given.shapes is not None:
        if len(given.shapes) != len(parts):
            raise ElementSpecError(
                f"{owner}: shapes has {len(given.shapes)} components but the first example "
                f"has {len(parts)}"
            )
        shapes = list(given.shapes)
    return QueueArgs(dtypes, shapes, names)


_END: Any = object()


def _next_or_end(it: Iterator[Any]) -> Any:
    # StopIteration cannot cross a thread boundary (futures refuse it): use a sentinel.
    try:
        return next(it)
    except StopIteration:
        return _END


async def first_value(producer: Any) -> tuple[bool, Any]:
    """One value of ``producer`` (as QueueRunner would produce it); (False, None) at end."""
    try:
        if hasattr(producer, "__anext__"):
            return True, await producer.__anext__()
        if hasattr(producer, "__next__"):
            value = await anyio.to_thread.run_sync(_next_or_end, producer)
            return (False, None) if value is _END else (True, value)
        if is_async_callable(producer):
            return True, await producer()
        return True, await anyio.to_thread.run_sync(producer)
    except (StopAsyncIteration, StopIteration, OutOfRangeError, QueueClosedError):
        return False, None
