"""The four queue kinds. They differ only in their element spec and storage.

===================  ===============================  =============================
kind                 declared, fully defined shapes   otherwise
===================  ===============================  =============================
FIFOQueue            RingStorage (fills batches)      DequeStorage
PaddingFIFOQueue     RingStorage (fills batches)      DequeStorage, padded batches
RandomShuffleQueue   PoolStorage                      ListPoolStorage
PriorityQueue        HeapStorage                      HeapStorage
===================  ===============================  =============================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

import numpy as np
import numpy.typing as npt

from .._errors import CheckpointError, ElementSpecError, int_arg, name_arg, seed_arg
from ._declare import Components, normalize_dtypes, normalize_shapes
from ._pool import ListPoolStorage, PoolStorage
from ._queue import QueueBase
from ._snapshot import QueueSnapshot
from ._spec import PrioritySpec, declare_spec
from ._storage import RingStorage
from ._tuples import DequeStorage, HeapStorage

__all__ = ["FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "RandomShuffleQueue", "StageQueue"]

if TYPE_CHECKING:  # a queue whose element type is neither inferred nor given holds Any
    from typing_extensions import TypeVar as _DefaultTypeVar

    T = _DefaultTypeVar("T", default=Any)
else:
    T = TypeVar("T")
U = TypeVar("U")
Array = npt.NDArray[Any]
NumericDType = type[np.generic] | np.dtype[Any] | str
"""A dtype whose elements come back as numpy values (``object`` is not one of them)."""


def _identity(queue: QueueBase[Any], name: Any, capacity: Any) -> tuple[str, str, int]:
    """The queue's name, its description for messages, and its checked capacity."""
    qname = name_arg(name, type(queue).default_name, "queue name")
    owner = f"{type(queue).__name__} '{qname}'"
    return qname, owner, int_arg(capacity, "capacity", owner, 1)


class FIFOQueue(QueueBase[T]):
    """A first-in first-out queue of numpy elements.

    Args:
        capacity: maximum number of elements held.
        dtypes: one dtype, or one per component.
        shapes: one fully defined shape, or one per component; None leaves shapes
            undeclared (elements may differ in shape, batch dequeues are refused).
        names: component names; elements are then dicts with exactly these keys.
        name: used in error messages and reports (default ``"fifo_queue"``).

    With declared shapes the elements live in one preallocated array per component of
    shape ``(capacity, *shape)``.
    """

    default_name = "fifo_queue"
    _kind = "FIFOQueue"

    @overload
    def __init__(
        self: FIFOQueue[dict[str, Array]],
        capacity: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: FIFOQueue[dict[str, Array]],
        capacity: int,
        dtypes: Any,
        shapes: Any = None,
        *,
        names: Sequence[str],
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: FIFOQueue[tuple[Array, Array]],
        capacity: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any = None,
        names: None = None,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: FIFOQueue[tuple[Array, Array, Array]],
        capacity: int,
        dtypes: tuple[NumericDType, NumericDType, NumericDType],
        shapes: Any = None,
        names: None = None,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: FIFOQueue[Array],
        capacity: int,
        dtypes: NumericDType,
        shapes: Any = None,
        names: None = None,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: FIFOQueue[T],
        capacity: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        name: str | None = None,
    ) -> None: ...

    def __init__(
        self,
        capacity: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        name: str | None = None,
    ) -> None:
        qname, owner, capacity = _identity(self, name, capacity)
        spec = declare_spec(owner, dtypes, shapes, names)
        fixed = spec.fixed_shapes
        if fixed is not None:
            ring = RingStorage(capacity, spec.dtypes, fixed, owner)
            super().__init__(capacity, spec, ring, name=qname, fill=ring)
        else:
            super().__init__(capacity, spec, DequeStorage(spec.dtypes, pad=False), name=qname)

    @classmethod
    def from_snapshot(cls, snap: QueueSnapshot[U]) -> FIFOQueue[U]:
        """A FIFOQueue equal to the one ``snap`` was taken from (see
        ``QueueBase.from_snapshot``)."""
        return cast("FIFOQueue[U]", cls._restore(snap))

    @classmethod
    def _empty_like(cls, snap: QueueSnapshot[Any]) -> FIFOQueue[Any]:
        return cls(snap.capacity, snap.dtypes, snap.shapes, snap.names, name=snap.name)


class PaddingFIFOQueue(QueueBase[T]):
    """A FIFO queue whose shapes may have None dimensions, padded in batch dequeues.

    ``dequeue`` returns an element as enqueued; ``dequeue_many``/``dequeue_up_to`` pad
    every None dimension to the largest in the batch, with 0 (numbers) or ``""``
    (strings and objects). Ranks are fixed and known dimensions are checked.
    """

    default_name = "padding_fifo_queue"
    _kind = "PaddingFIFOQueue"

    @overload
    def __init__(
        self: PaddingFIFOQueue[dict[str, Array]],
        capacity: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: PaddingFIFOQueue[dict[str, Array]],
        capacity: int,
        dtypes: Any,
        shapes: Any,
        *,
        names: Sequence[str],
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: PaddingFIFOQueue[tuple[Array, Array]],
        capacity: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any,
        names: None = None,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: PaddingFIFOQueue[tuple[Array, Array, Array]],
        capacity: int,
        dtypes: tuple[NumericDType, NumericDType, NumericDType],
        shapes: Any,
        names: None = None,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: PaddingFIFOQueue[Array],
        capacity: int,
        dtypes: NumericDType,
        shapes: Any,
        names: None = None,
        *,
        name: str | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: PaddingFIFOQueue[T],
        capacity: int,
        dtypes: Any,
        shapes: Any,
        names: Any = None,
        *,
        name: str | None = None,
    ) -> None: ...

    def __init__(
        self,
        capacity: int,
        dtypes: Any,
        shapes: Any,
        names: Any = None,
        *,
        name: str | None = None,
    ) -> None:
        qname, owner, capacity = _identity(self, name, capacity)
        spec = declare_spec(
            owner, dtypes, shapes, names, allow_unknown_dims=True, require_shapes=True
        )
        fixed = spec.fixed_shapes
        if fixed is not None:
            ring = RingStorage(capacity, spec.dtypes, fixed, owner)
            super().__init__(capacity, spec, ring, name=qname, fill=ring)
        else:
            super().__init__(capacity, spec, DequeStorage(spec.dtypes, pad=True), name=qname)

    @classmethod
    def from_snapshot(cls, snap: QueueSnapshot[U]) -> PaddingFIFOQueue[U]:
        """A PaddingFIFOQueue equal to the one ``snap`` was taken from (see
        ``QueueBase.from_snapshot``)."""
        return cast("PaddingFIFOQueue[U]", cls._restore(snap))

    @classmethod
    def _empty_like(cls, snap: QueueSnapshot[Any]) -> PaddingFIFOQueue[Any]:
        return cls(snap.capacity, snap.dtypes, snap.shapes, snap.names, name=snap.name)


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
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        seed: int | None = None,
        name: str | None = None,
    ) -> None:
        qname, owner, capacity = _identity(self, name, capacity)
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
        self._min_after = mad
        self._seed = seed
        self._rng = rng  # (the storage's: snapshots read and restore its state)

    @property
    def min_after_dequeue(self) -> int:
        """Elements a dequeue leaves behind while the queue is open."""
        return self._min_after

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
        dtypes: Any,
        shapes: Any = None,
        *,
        name: str | None = None,
    ) -> None:
        qname, owner, capacity = _identity(self, name, capacity)
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


class StageQueue(FIFOQueue[Any]):
    """The FIFO of Python objects between two pipeline stages.

    Besides the FIFOQueue operations, a pipeline checkpoint may open it beyond its
    capacity (``unbounded``: every enqueue is admitted at once, so no stage waits on a
    full queue while the others come to rest), read every item it holds without
    taking any (``items``: claims of a waiting batch dequeue first), and a restored
    pipeline loads items back (``load_items``).
    """

    default_name = "stage_queue"

    def __init__(self, capacity: int, *, name: str | None = None) -> None:
        super().__init__(capacity, object, (), name=name)

    def unbounded(self, on: bool) -> None:
        """Admit every enqueue at once (``on``), or go back to the capacity."""
        self._engine.unbounded(on, self._capacity)

    def quiet_takers(self) -> int:
        """Dequeues waiting on this queue that cannot progress now (a checkpoint's
        test of rest: they hold what they claimed, and will take nothing more until the
        queue changes)."""
        return self._engine.quiet_getters()

    def items(self) -> list[Any]:
        """Every item held, in the order they would be taken; nothing changes."""
        return [comps[0] for comps in self._engine.dump()]

    def load_items(self, items: list[Any]) -> None:
        """Store ``items`` after those held, in order, whatever the capacity."""
        elements = []
        for item in items:
            held = np.empty((), dtype=object)  # an object element holds the item as is
            held[()] = item
            elements.append((held,))
        self._engine.load(elements)
