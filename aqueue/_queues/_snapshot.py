"""QueueSnapshot: what one queue holds at one moment, and how it comes back.

``queue.snapshot()`` takes one under the queue's lock: it is consistent even while tasks
and threads enqueue and dequeue, and taking it changes nothing. It holds:

- the spec: ``kind`` (which of the four aqueue kinds), ``name``, ``capacity``,
  ``dtypes``, ``shapes``, ``names`` (as the queue's properties report them: a
  PriorityQueue's component 0 is its int64 priority), ``min_after_dequeue``, ``seed``;
- ``closed``;
- ``elements``: every element held, each a tuple of its components, in the order
  dequeues would see them. FIFOQueue and PaddingFIFOQueue: arrival order;
  PriorityQueue: ascending priority, ties in arrival order; RandomShuffleQueue: its
  pool in the pool's dense order (the order its random draws index). Elements claimed
  by a waiting batch dequeue are still held: they come first (a dequeue that fails puts
  them back there; in a PriorityQueue they are sorted in by priority). Elements of
  pending enqueues are not admitted yet: not included;
- ``rng_state``: a RandomShuffleQueue's ``generator.bit_generator.state`` (JSON-able),
  so a restored seeded queue continues with exactly the order the original would have.

Its arrays are private read-only copies (restoring twice gives two equal queues); object
components refer to the same Python objects as the queue did.

``QueueBase.from_snapshot`` builds a fresh queue of the snapshot's kind and spec, checks
every element against that spec (``checked_contents``: small fixed-shape elements as
one batch, the others one by one), loads them whatever the capacity (claims can make a
snapshot hold more), sets the generator's state and closes the queue if the snapshot
was closed. Statistics start afresh. Loading keeps the order: a pool's dense order too,
so its draws pick the same elements as the original's.

``save``/``load`` keep a snapshot in one file: the format and what loading checks are
described in ``_snapshot_file.py``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np

from .._errors import ElementSpecError
from ._declare import Components, Shape
from ._files import read_state_file, write_state_file
from ._snapshot_file import FORMAT, VERSION, decode, encode
from ._spec import ElementSpec

__all__ = ["QueueSnapshot", "checked_contents", "frozen_elements", "snapshot_expected"]

if TYPE_CHECKING:  # a snapshot whose element type is not known (a loaded one) holds Any
    from typing_extensions import TypeVar as _DefaultTypeVar

    T = _DefaultTypeVar("T", default=Any)
else:
    T = TypeVar("T")


@dataclass(frozen=True, eq=False, repr=False)
class QueueSnapshot(Generic[T]):
    """What a queue held at one moment: its spec, its elements, whether it was closed
    and its random generator's state.

    Take one with ``queue.snapshot()``; build an equal queue with
    ``aqueue.<Kind>.from_snapshot(snap)`` (``aqueue.QueueBase.from_snapshot`` builds
    whichever kind it is); keep it with ``snap.save(path)`` and
    ``aqueue.QueueSnapshot.load(path)``. ``T`` is the element type of the queue it was
    taken from (``Any`` once loaded from a file). ``len(snap)`` is its element count.
    """

    kind: str
    """The queue's kind: "FIFOQueue", "PaddingFIFOQueue", "PriorityQueue" or
    "RandomShuffleQueue" (a subclass reports the kind it derives from)."""
    name: str
    """The queue's name."""
    capacity: int
    """Maximum number of elements the queue holds, in elements (``elements`` may hold
    more: those a waiting batch dequeue had claimed)."""
    dtypes: tuple[np.dtype[Any], ...]
    """One numpy dtype per component (a PriorityQueue's first is its int64 priority)."""
    shapes: tuple[Shape, ...] | None
    """One shape per component, None for an unknown dimension; None when the queue
    did not declare shapes."""
    names: tuple[str, ...] | None
    """Component names, or None."""
    min_after_dequeue: int
    """Elements a dequeue leaves behind while the queue is open (0 but for a
    RandomShuffleQueue)."""
    seed: int | None
    """The seed the queue was created with (RandomShuffleQueue), else None."""
    closed: bool
    """Whether the queue was closed for enqueues."""
    elements: tuple[Components, ...]
    """Every element held, each a tuple of components (numpy scalars, read-only arrays,
    or the Python objects of object components), in the order dequeues would see them
    (a RandomShuffleQueue: its pool's order); see ``aqueue._queues._snapshot``."""
    rng_state: dict[str, Any] | None = None
    """A RandomShuffleQueue's ``generator.bit_generator.state`` (plain JSON data), else
    None. A restored queue's generator continues from it."""

    restored_by: ClassVar[str] = "aqueue.QueueBase.from_snapshot"
    """What builds an object from a snapshot of this class (for messages)."""

    def __len__(self) -> int:
        return len(self.elements)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"<QueueSnapshot of {self.kind} '{self.name}': {len(self.elements)} elements, "
            f"capacity {self.capacity}, {state}>"
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the snapshot to ``path`` atomically (see the module docstring for the
        format): a crash or an error leaves ``path`` as it was.

        Raises:
            CheckpointError: An object component holds something other than str, bytes,
                int, float, bool, None or tuples and lists of these (the message names
                the component, the element and the type), a dtype has no file form,
                or the system refused the file (the message names ``path`` and why).
        """
        header, arrays = encode(self, str(path))
        write_state_file(path, header, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> QueueSnapshot[Any]:
        """Read a snapshot that ``save`` wrote.

        Raises:
            CheckpointError: The file is missing, truncated, corrupt, not a queue
                snapshot, of a newer format version, or inconsistent (its arrays do not
                match its header); the message names the file and the problem.
        """
        header, arrays = read_state_file(path, FORMAT, VERSION)
        fields = decode(header, arrays, str(path))
        fields["elements"] = frozen_elements(fields["elements"])
        snap: QueueSnapshot[Any] = QueueSnapshot(**fields)
        return snap


def snapshot_expected(where: str, expected: type, got: Any) -> str:
    """The message of a ``from_snapshot`` given something other than an ``expected``
    snapshot: what it got, and what to do with it (load a path first; restore another
    object's snapshot with what its class names in ``restored_by``)."""
    message = f"{where}: expected a {expected.__name__}, got {type(got).__name__}"
    if isinstance(got, (str, os.PathLike)):
        return f"{message} {str(got)!r}; load a file first: aqueue.{expected.__name__}.load(path)"
    restored_by = getattr(type(got), "restored_by", None)
    if isinstance(restored_by, str):
        return f"{message}; restore that snapshot with {restored_by}"
    return message


def frozen_elements(elements: list[Components]) -> tuple[Components, ...]:
    """``elements`` (private copies) as a tuple with every array made read-only."""
    for comps in elements:
        for c in comps:
            if isinstance(c, np.ndarray):
                c.flags.writeable = False
    return tuple(elements)


def checked_contents(
    spec: ElementSpec, elements: Sequence[Components], where: str
) -> list[Components] | tuple[Components, int]:
    """A snapshot's ``elements`` checked and converted by ``spec`` (of the queue being
    restored): one batch (components, count) when they can go in as one, else a list
    of converted elements.

    Raises:
        ElementSpecError: An element does not fit; the message names it (``where``,
            then its index).
    """
    batch = _as_batch(spec, elements)
    if batch is not None:
        return batch
    converted = []
    width = len(spec.dtypes)
    for j, comps in enumerate(elements):
        try:
            if not isinstance(comps, tuple) or len(comps) != width:
                raise ElementSpecError(f"expected a tuple of {width} components")
            converted.append(spec.element(spec.pack(comps)))
        except ElementSpecError as exc:
            raise ElementSpecError(f"{where}: element {j} does not fit: {exc}") from exc
    return converted


def _as_batch(spec: ElementSpec, elements: Sequence[Components]) -> tuple[Components, int] | None:
    """A snapshot's elements as one checked batch, when the spec has fixed shapes, the
    elements are small and they stack: a million scalars restore in 60 ms instead of 2 s
    of checks one by one. None otherwise, or if anything does not fit (then each element
    is checked). Large elements go one by one: there the stacking copy would cost more
    than the checks."""
    fixed = spec.fixed_shapes
    if fixed is None or not elements:
        return None
    if sum(math.prod(s) * dt.itemsize for s, dt in zip(fixed, spec.dtypes)) > 1024:
        return None
    try:
        columns: list[Any] = []
        for i, dt in enumerate(spec.dtypes):
            column = [comps[i] for comps in elements]
            # (np.array keeps the elements' own dtype: the batch check casts only safely)
            columns.append(column if dt.kind == "O" else np.array(column))
        return spec.batch(spec.pack(columns))
    except (ElementSpecError, ValueError, TypeError, IndexError):
        return None
