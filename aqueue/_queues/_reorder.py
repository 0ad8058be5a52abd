"""The kinds that reorder: RandomShuffleQueue (uniformly random takes, with a floor
while open) and PriorityQueue (ascending int64 priority, ties in arrival order). See the
table in ``aqueue/_queues/__init__.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast, overload

import numpy as np
from numpy.typing import DTypeLike

from .._errors import CheckpointError, ElementSpecError, int_arg, seed_arg
from ._declare import (
    Array,
    Components,
    NumericDType,
    T,
    U,
    identity,
    normalize_dtypes,
    normalize_shapes,
)
from ._pool import ListPoolStorage, PoolStorage
from ._queue import QueueBase
from ._snapshot import QueueSnapshot
from ._spec import PrioritySpec, declare_spec
from ._tuples import HeapStorage

__all__ = ["PriorityQueue", "RandomShuffleQueue"]


class RandomShuffleQueue(QueueBase[T]):
    """A queue that dequeues elements in uniformly random order.

    Args:
        capacity: maximum number of elements held.
        min_after_dequeue: while the queue is open, a dequeue only takes elements that
            leave at least this many behind (0 <= min_after_dequeue < capacity); closing
            the queue lifts the floor so it can drain.
        dtypes, shapes, names, name: as for FIFOQueue.
        seed: seeds the queue's own ``numpy.random.Generator``; with a seed the output
            order is a pure function of the sequence of operations.
    """

    default_name = "random_shuffle_queue"
    _kind = "RandomShuffleQueue"

    @overload
    def __init__(
        self: RandomShuffleQueue[dict[str, Array]],
        capacity: int,
        min_after_dequeue: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
        *,
        seed: int | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: RandomShuffleQueue[dict[str, Array]],
        capacity: int,
        min_after_dequeue: int,
        dtypes: Any,
        shapes: Any = None,
        *,
        names: Sequence[str],
        seed: int | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: RandomShuffleQueue[tuple[Array, Array]],
        capacity: int,
        min_after_dequeue: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any = None,
        names: None = None,
        *,
        seed: int | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: RandomShuffleQueue[tuple[Array, Array, Array]],
        capacity: int,
        min_after_dequeue: int,
        dtypes: tuple[NumericDType, NumericDType, NumericDType],
        shapes: Any = None,
        names: None = None,
        *,
        seed: int | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: RandomShuffleQueue[Array],
        capacity: int,
        min_after_dequeue: int,
        dtypes: NumericDType,
        shapes: Any = None,
        names: None = None,
        *,
        seed: int | None = None,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: RandomShuffleQueue[T],
        capacity: int,
        min_after_dequeue: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        seed: int | None = None,
        name: str | None = None,
    ) -> None: ...

    def __init__(
        self,
        capacity: int,
        min_after_dequeue: int,
        dtypes: DTypeLike | Sequence[DTypeLike],
        shapes: Sequence[int | None] | Sequence[Sequence[int | None]] | None = None,
        names: Sequence[str] | None = None,
        *,
        seed: int | None = None,
        name: str | None = None,
    ) -> None:
        qname, owner, capacity = identity(self, name, capacity)
        mad = int_arg(min_after_dequeue, "min_after_dequeue", owner, 0)
        if mad >= capacity:
            raise ElementSpecError(
                f"{owner}: min_after_dequeue must be < capacity ({capacity}), got {mad}"
            )
        seed = seed_arg(seed, owner)
        spec = declare_spec(owner, dtypes, shapes, names)
        rng = np.random.default_rng(seed)
        fixed = spec.fixed_shapes
        storage: PoolStorage | ListPoolStorage
        if fixed is not None:
            storage = PoolStorage(capacity, spec.dtypes, fixed, owner, rng)
        else:
            storage = ListPoolStorage(spec.dtypes, rng)
        super().__init__(capacity, spec, storage, name=qname, min_after_dequeue=mad)
        self._seed = seed
        self._rng = rng  # (the storage's: snapshots read and restore its state)

    @property
    def seed(self) -> int | None:
        """The seed given at creation, or None."""
        return self._seed

    @classmethod
    def from_snapshot(cls, snap: QueueSnapshot[U]) -> RandomShuffleQueue[U]:
        """A RandomShuffleQueue equal to the one ``snap`` was taken from, its generator
        in the same state: a seeded queue continues with the same order (see
        ``QueueBase.from_snapshot``)."""
        return cast("RandomShuffleQueue[U]", cls._restore(snap))

    @classmethod
    def _empty_like(cls, snap: QueueSnapshot[Any]) -> RandomShuffleQueue[Any]:
        return cls(
            snap.capacity,
            snap.min_after_dequeue,
            snap.dtypes,
            snap.shapes,
            snap.names,
            seed=snap.seed,
            name=snap.name,
        )

    def _rng_state(self) -> dict[str, Any]:
        return dict(self._rng.bit_generator.state)  # (a new dict of plain values)

    def _set_rng_state(self, state: dict[str, Any], where: str) -> None:
        try:
            self._rng.bit_generator.state = state
        except (TypeError, ValueError, KeyError) as exc:
            raise CheckpointError(f"{where}: rng_state is not a generator state: {exc}") from exc


class PriorityQueue(QueueBase[T]):
    """A queue that dequeues elements in ascending int64 priority.

    An element is ``(priority, *components)``; ``dtypes`` and ``shapes`` describe the
    components only. Equal priorities come out in arrival order. A batch dequeue of
    ``n <= capacity`` waits until ``n`` elements are present, so the batch is globally
    sorted; elements come back as ``(priorities, *components)``.
    """

    default_name = "priority_queue"
    _kind = "PriorityQueue"

    @overload
    def __init__(
        self: PriorityQueue[tuple[Array, Array]],
        capacity: int,
        dtypes: NumericDType,
        shapes: Any = None,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: PriorityQueue[tuple[Array, Array, Array]],
        capacity: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any = None,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: PriorityQueue[T],
        capacity: int,
        dtypes: Any,
        shapes: Any = None,
        *,
        name: str | None = None,
    ) -> None: ...

    def __init__(
        self,
        capacity: int,
        dtypes: DTypeLike | Sequence[DTypeLike],
        shapes: Sequence[int | None] | Sequence[Sequence[int | None]] | None = None,
        *,
        name: str | None = None,
    ) -> None:
        qname, owner, capacity = identity(self, name, capacity)
        dts = normalize_dtypes(dtypes, owner=owner)
        shp = normalize_shapes(shapes, len(dts), owner=owner, allow_unknown_dims=False)
        all_dtypes = (np.dtype(np.int64), *dts)
        all_shapes = None if shp is None else ((), *shp)
        spec = PrioritySpec(all_dtypes, all_shapes, None, owner=owner)
        super().__init__(capacity, spec, HeapStorage(all_dtypes), name=qname)

    @classmethod
    def from_snapshot(cls, snap: QueueSnapshot[U]) -> PriorityQueue[U]:
        """A PriorityQueue equal to the one ``snap`` was taken from (see
        ``QueueBase.from_snapshot``)."""
        return cast("PriorityQueue[U]", cls._restore(snap))

    @classmethod
    def _empty_like(cls, snap: QueueSnapshot[Any]) -> PriorityQueue[Any]:
        # The snapshot reports the queue's dtypes and shapes: the int64 priority first.
        if (
            not snap.dtypes
            or snap.dtypes[0] != np.dtype(np.int64)
            or (snap.shapes is not None and snap.shapes[0] != ())
            or snap.names is not None
        ):
            raise ElementSpecError(
                f"PriorityQueue.from_snapshot: component 0 must be the int64 scalar "
                f"priority, without names; got dtypes {snap.dtypes}, shapes {snap.shapes}, "
                f"names {snap.names}"
            )
        shapes = None if snap.shapes is None else snap.shapes[1:]
        return cls(snap.capacity, snap.dtypes[1:], shapes, name=snap.name)

    def _in_dequeue_order(self, elements: list[Components]) -> list[Components]:
        # Claims come first, but an element admitted since may have a lower priority;
        # a stable sort keeps arrival order among equal priorities (claims arrived first).
        return sorted(elements, key=lambda comps: int(comps[0]))
