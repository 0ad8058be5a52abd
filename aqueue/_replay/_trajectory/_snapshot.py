"""TrajectorySnapshot: a trajectory table at one moment, its checks and its file form.

``table.snapshot()`` takes one under the table's lock (one acquisition, for as long as
copies of the held steps and items take) and changes nothing. It holds:

- the step settings: ``name``, ``max_steps``, ``dtypes``, ``shapes``, ``names``,
  ``length``, ``stride``, ``max_size``;
- ``items``: a ``ReplaySnapshot`` of the windows (settings, keys, priorities, times
  sampled, counters, selector states, the random generator), whose one component is
  each window's row of *step indices* (positions in ``ids``), not slots;
- the held steps in id order: ``ids``, ``fields`` (one array per field, ``(held,
  *shape)``), ``next_id``, and where they were: ``slots`` and the ``free`` stack;
- ``writers``: per open writer ``(id, pos, start, pinned step indices)``, and
  ``next_writer``; the step counters (``counters``).

``TrajectoryTable.from_snapshot(snap)`` builds a table that goes on exactly as the
original would (the same layout, the same samples for the same operations); its
writers are restored *detached*: ``table.writer(resume=id)`` takes one up where it
was, and the pending windows of those never resumed age out as the oldest steps.

``save(path)`` writes one state file (``_queues._files``); ``load(path)`` checks the
container, the format and version, the items (``check_snapshot``) and the steps: ids
increasing below ``next_id``; slots and free slots that partition ``max_steps``; rows
of held steps in increasing order, no two starting at one step; writers whose pins
match ``start .. pos``; every held step needed by an item or a pin; counters that add
up (``stored == held + evicted + freed``). Anything else raises CheckpointError.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from ..._queues._declare import FixedShape, normalize_dtypes, normalize_names, normalize_shapes
from ..._queues._files import read_state_file, write_state_file
from .._snapshot import (
    ReplaySnapshot,
    check_snapshot,
    checked_array,
    decode_snapshot,
    encode_snapshot,
    header_field,
    snapshot_error,
)
from ._state import COUNTERS

__all__ = ["TrajectorySnapshot", "check_steps"]

Array = npt.NDArray[Any]
Writer = tuple[int, int, int, Array]
FORMAT = "aqueue.TrajectorySnapshot"
VERSION = 1


@dataclass(frozen=True, eq=False)
class TrajectorySnapshot:
    """A trajectory table at one moment (see ``aqueue._replay._trajectory._snapshot``).

    Take one with ``table.snapshot()``; restore it with
    ``aqueue.TrajectoryTable.from_snapshot(snap)``; keep it with ``snap.save(path)`` and
    ``aqueue.TrajectorySnapshot.load(path)``. ``len(snap)`` is its item count.
    """

    name: str
    """The table's name."""
    max_steps: int
    """The most steps held at once."""
    dtypes: tuple[np.dtype[Any], ...]
    """One dtype per field."""
    shapes: tuple[FixedShape, ...]
    """One shape per field."""
    names: tuple[str, ...] | None
    """Field names, or None."""
    length: int
    """The steps in a window."""
    stride: int
    """A window starts every ``stride`` steps of an episode."""
    max_size: int | None
    """The item cap, or None."""
    items: ReplaySnapshot[Any]
    """The windows, each a row of step indices (positions in ``ids``)."""
    ids: Array
    """The held steps' ids, increasing."""
    fields: tuple[Array, ...]
    """One array per field, ``(held, *shape)``: the held steps in id order."""
    next_id: int
    """The id the next stored step gets."""
    next_writer: int
    """The id the next writer gets."""
    counters: dict[str, int]
    """The step counters (appended, stored, evicted, freed, ...)."""
    writers: tuple[Writer, ...]
    """Per open writer: id, position in its episode, start of its earliest pending
    window, and the step indices it pins."""
    slots: Array
    """Each held step's slot."""
    free: Array
    """The free slots (a stack: the next step stored takes the last)."""

    restored_by: ClassVar[str] = "aqueue.TrajectoryTable.from_snapshot"

    def __post_init__(self) -> None:
        for arr in (self.ids, *self.fields, self.slots, self.free, *(w[3] for w in self.writers)):
            arr.flags.writeable = False

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return (
            f"<TrajectorySnapshot of trajectory table '{self.name}': {len(self.items)} items, "
            f"{len(self.ids)} steps of {self.max_steps}>"
        )

    def steps_state(self) -> dict[str, Any]:
        """What ``load_steps`` takes (``_state.py``)."""
        return {
            "ids": self.ids,
            "fields": self.fields,
            "next_id": self.next_id,
            "next_writer": self.next_writer,
            "counters": self.counters,
            "writers": self.writers,
            "layout": {"slots": self.slots, "free": self.free},
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the snapshot to ``path`` atomically.

        Raises:
            CheckpointError: It cannot be written (the message names ``path`` and why).
        """
        items_header, items_arrays = encode_snapshot(self.items)
        arrays: dict[str, Array] = {f"i.{k}": v for k, v in items_arrays.items()}
        arrays.update({"s.ids": self.ids, "s.slots": self.slots, "s.free": self.free})
        arrays.update({f"s.f{i}": f for i, f in enumerate(self.fields)})
        arrays.update({f"s.pins{j}": w[3] for j, w in enumerate(self.writers)})
        header = {
            "format": FORMAT,
            "version": VERSION,
            "name": self.name,
            "max_steps": self.max_steps,
            "dtypes": [dt.str for dt in self.dtypes],
            "shapes": [list(s) for s in self.shapes],
            "names": None if self.names is None else list(self.names),
            "length": self.length,
            "stride": self.stride,
            "max_size": self.max_size,
            "next_id": self.next_id,
            "next_writer": self.next_writer,
            "counters": dict(self.counters),
            "writers": [[int(w[0]), int(w[1]), int(w[2])] for w in self.writers],
            "items": items_header,
        }
        write_state_file(path, header, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TrajectorySnapshot:
        """Read a snapshot that ``save`` wrote, checked whole.

        Raises:
            CheckpointError: The file is missing, corrupt, not a trajectory snapshot, of
                a newer version, or inconsistent; the message names the file and why.
        """
        source = str(path)
        header, arrays = read_state_file(path, FORMAT, VERSION)
        snap = _decode(header, arrays, source)
        check_steps(snap, source)
        return snap


def _decode(header: dict[str, Any], arrays: dict[str, Array], source: str) -> TrajectorySnapshot:
    def get(key: str, *types: type) -> Any:
        return header_field(header, key, types, source)

    items_arrays = {k[2:]: v for k, v in arrays.items() if k.startswith("i.")}
    items = decode_snapshot(get("items", dict), items_arrays, source)
    owner = f"trajectory table '{get('name', str)}'"
    try:
        dtypes = normalize_dtypes(get("dtypes", list), owner=owner)
        raw = [tuple(s) if isinstance(s, list) else s for s in get("shapes", list)]
        shapes = normalize_shapes(raw, len(dtypes), owner=owner, allow_unknown_dims=False)
        names = normalize_names(get("names", list, type(None)), len(dtypes), owner)
    except ValueError as exc:
        raise snapshot_error(source, f"bad settings in the header: {exc}") from exc
    assert shapes is not None
    writers = []
    for j, w in enumerate(get("writers", list)):
        if not (isinstance(w, list) and len(w) == 3 and all(type(x) is int for x in w)):
            raise snapshot_error(source, f"writer {j} must be [id, pos, start] ints, got {w!r:.80}")
        pins = arrays.get(f"s.pins{j}")
        if pins is None:
            raise snapshot_error(source, f"array 's.pins{j}' is missing")
        writers.append((w[0], w[1], w[2], pins))
    for key in ("s.ids", "s.slots", "s.free", *(f"s.f{i}" for i in range(len(dtypes)))):
        if key not in arrays:
            raise snapshot_error(source, f"array {key!r} is missing")
    return TrajectorySnapshot(
        name=get("name", str),
        max_steps=get("max_steps", int),
        dtypes=dtypes,
        shapes=tuple(tuple(int(d) for d in s if d is not None) for s in shapes),
        names=names,
        length=get("length", int),
        stride=get("stride", int),
        max_size=get("max_size", int, type(None)),
        items=items,
        ids=arrays["s.ids"],
        fields=tuple(arrays[f"s.f{i}"] for i in range(len(dtypes))),
        next_id=get("next_id", int),
        next_writer=get("next_writer", int),
        counters=get("counters", dict),
        writers=tuple(writers),
        slots=arrays["s.slots"],
        free=arrays["s.free"],
    )


def check_steps(snap: TrajectorySnapshot, where: str) -> None:
    """Check that ``snap`` describes a table that could exist (see the module docstring).

    Raises:
        CheckpointError: It does not; the message starts with ``where``.
    """
    m, length, stride = snap.max_steps, snap.length, snap.stride
    for what, value in (("max_steps", m), ("length", length), ("stride", stride)):
        if type(value) is not int or value < 1:
            raise snapshot_error(where, f"{what} must be an int >= 1, got {value!r}")
    if length > m:
        raise snapshot_error(where, f"length {length} must be <= max_steps {m}")
    items = snap.items
    check_snapshot(items, where)
    capacity = m // min(stride, length)
    if snap.max_size is not None:
        capacity = min(capacity, snap.max_size)
    if items.max_size != capacity or items.dtypes != (np.dtype(np.int64),):
        raise snapshot_error(where, f"the items must be int64 rows, at most {capacity} of them")
    held = len(snap.ids) if isinstance(snap.ids, np.ndarray) else -1
    if not 0 <= held <= m:
        raise snapshot_error(where, f"it holds {held} steps, outside 0..max_steps ({m})")
    ids = checked_array(snap.ids, np.int64, (held,), "ids", where)
    if held and (ids[0] < 0 or bool((np.diff(ids) <= 0).any()) or ids[-1] >= snap.next_id):
        raise snapshot_error(
            where, f"ids must increase, from >= 0 to below next_id ({snap.next_id})"
        )
    if len(snap.fields) != len(snap.dtypes):
        raise snapshot_error(where, f"fields must hold {len(snap.dtypes)} arrays")
    for i, (dt, shape) in enumerate(zip(snap.dtypes, snap.shapes)):
        checked_array(snap.fields[i], dt, (held, *shape), f"fields[{i}]", where)
    slots = checked_array(snap.slots, np.int64, (held,), "slots", where)
    free = checked_array(snap.free, np.int64, (m - held,), "free", where)
    both = np.concatenate([slots, free])
    if len(both) and (both.min() < 0 or both.max() >= m or len(np.unique(both)) != m):
        raise snapshot_error(where, "slots and free slots must cover 0..max_steps-1 once each")
    rows = items.items[0]
    needed = np.zeros(held, dtype=bool)
    if len(rows):
        if rows.min() < 0 or rows.max() >= held or bool((np.diff(rows, axis=1) <= 0).any()):
            raise snapshot_error(where, "an item's row must name held steps in increasing order")
        if len(np.unique(rows[:, 0])) != len(rows):
            raise snapshot_error(where, "two items start at one step")
        needed[rows.ravel()] = True
    _check_writers(snap, held, needed, where)
    if not needed.all():
        raise snapshot_error(where, "a held step is needed by no item and no writer")
    c = snap.counters
    if set(c) != set(COUNTERS) or not all(type(v) is int and v >= 0 for v in c.values()):
        raise snapshot_error(where, f"counters must be ints >= 0 named {list(COUNTERS)}")
    if c["stored"] != held + c["evicted"] + c["freed"]:
        raise snapshot_error(
            where, "the step counters do not add up (stored != held + evicted + freed)"
        )


def _check_writers(snap: TrajectorySnapshot, held: int, needed: Array, where: str) -> None:
    pinned = np.zeros(held, dtype=bool)
    seen: set[int] = set()
    for wid, pos, start, pins in snap.writers:
        what = f"writer {wid}"
        if not 0 <= wid < snap.next_writer or wid in seen or pos < 0 or start < 0:
            raise snapshot_error(where, f"{what}: ids distinct below next_writer, pos, start >= 0")
        seen.add(wid)
        n = max(0, pos - start)
        pins = checked_array(pins, np.int64, (n,), f"{what}'s pins", where)
        if start % snap.stride or n >= snap.length:
            raise snapshot_error(where, f"{what}: start on the stride, fewer than length pins")
        if n and (pins.min() < 0 or pins.max() >= held or bool((np.diff(pins) <= 0).any())):
            raise snapshot_error(where, f"{what}: its pins must be held steps, in order")
        if pinned[pins].any():
            raise snapshot_error(where, f"{what}: a step is pinned twice")
        pinned[pins] = True
    needed |= pinned
