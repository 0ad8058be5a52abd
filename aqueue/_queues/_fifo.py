"""The FIFO kinds: FIFOQueue, PaddingFIFOQueue, and StageQueue (between pipeline
stages). With declared, fully defined shapes they keep their elements in a preallocated
ring (a waiting batch dequeue fills its own batch); otherwise in a deque of per-element
tuples (padded in batches for PaddingFIFOQueue). See the table in
``aqueue/_queues/__init__.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast, overload

import numpy as np
from numpy.typing import DTypeLike

from .._errors import int_arg
from ._declare import (
    Array,
    NumericDType,
    T,
    U,
    identity,
)
from ._queue import QueueBase
from ._snapshot import QueueSnapshot
from ._spec import declare_spec
from ._storage import RingStorage
from ._tuples import DequeStorage

__all__ = ["FIFOQueue", "PaddingFIFOQueue", "StageQueue"]


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
        dtypes: DTypeLike | Sequence[DTypeLike],
        shapes: Sequence[int | None] | Sequence[Sequence[int | None]] | None = None,
        names: Sequence[str] | None = None,
        *,
        name: str | None = None,
    ) -> None:
        qname, owner, capacity = identity(self, name, capacity)
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
        dtypes: DTypeLike | Sequence[DTypeLike],
        shapes: Sequence[int | None] | Sequence[Sequence[int | None]],
        names: Sequence[str] | None = None,
        *,
        name: str | None = None,
    ) -> None:
        qname, owner, capacity = identity(self, name, capacity)
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


class StageQueue(FIFOQueue[Any]):
    """The FIFO of Python objects between two pipeline stages.

    Besides the FIFOQueue operations, a pipeline checkpoint counts the takers and
    putters that wait and cannot progress (``quiet_takers``, ``quiet_putters``) and reads
    every item it holds, and those its waiting enqueues will admit, without taking any
    (``items``: claims of a waiting batch dequeue first); a restored pipeline loads
    items back (``load_items``).
    """

    default_name = "stage_queue"

    def __init__(self, capacity: int, *, name: str | None = None) -> None:
        super().__init__(capacity, object, (), name=name)
        # A burst that waits for room goes in whole once half the queue is free at most:
        # a full queue then wakes its producer once per burst, not once per item taken.
        self._engine.whole_rest = capacity // 2

    def set_capacity(self, capacity: int) -> None:
        """Change the capacity while the queue is in use (the pipeline's tuner).

        Growing wakes a waiting enqueue at once; shrinking drops nothing and blocks no
        waiting enqueue for ever: the queue drains below the new capacity as items are
        taken, and an enqueue waiting for room is woken once its items fit (see
        ``Engine.set_capacity``). The storage grows when the items first need it.

        Raises:
            ElementSpecError: ``capacity`` is not an int >= 1; nothing changes.
        """
        cap = int_arg(capacity, "capacity", f"StageQueue {self.name!r}", 1)
        self._engine.set_capacity(cap, cap // 2)
        self._capacity = cap

    def sample(self) -> Any:
        """The next item to be taken, left in place (None: the queue is empty); for
        estimates of the bytes an item holds."""
        engine = self._engine
        storage = engine.storage
        assert isinstance(storage, RingStorage)  # (a stage queue's: see __init__)
        with engine.lock:
            comps = storage.peek()
        return None if comps is None else comps[0]

    def quiet_takers(self) -> int:
        """Dequeues waiting on this queue that cannot progress now (a checkpoint's
        test of rest: they hold what they claimed, and will take nothing more until the
        queue changes)."""
        return self._engine.quiet_getters()

    def quiet_putters(self) -> int:
        """Enqueues waiting on this (full) queue that cannot progress now: what they
        still have to admit is read by ``items``."""
        return self._engine.quiet_putters()

    def items(self) -> list[Any]:
        """Every item held, then every item its waiting enqueues will admit, in the
        order they would be taken; nothing changes."""
        return [comps[0] for comps in self._engine.dump(pending=True)]

    def load_items(self, items: list[Any]) -> None:
        """Store ``items`` after those held, in order, whatever the capacity."""
        elements = []
        for item in items:
            held = np.empty((), dtype=object)  # an object element holds the item as is
            held[()] = item
            elements.append((held,))
        self._engine.load(elements)
