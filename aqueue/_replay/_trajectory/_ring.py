"""StepRing: where a trajectory table's timesteps live, once each.

Storage: one preallocated numpy array per field, of shape ``(max_steps, *shape)``
(untouched pages cost no memory until written), and per *slot* (row):

- ``sid``: the id of the step held there (ids are 0, 1, 2, ... in the order steps are
  stored, over all writers; -1 for a free slot);
- ``ref``: how many things need the step: the items (windows) containing it, plus 1
  while a writer's pending window may still use it (its *pin*);
- ``owner``: the writer that pins it, -1 if none;
- ``succ``: the slot of the step that followed it in its episode (-1 until one does),
  so that a window's row of slots can be rebuilt from its first slot.

Invariants (changed only by the table's core, under its lock):

- A slot is *held* iff ``ref > 0`` iff ``sid >= 0``; the other ``max_steps - held``
  slots are ``free[:nfree]``, a stack (``alloc`` pops from its end, ``release``
  pushes): which slot a step gets is a function of the history (a snapshot keeps the
  stack). A step leaves the ring the moment its ``ref`` reaches 0 (*freed*); its row
  keeps its data until the slot is reused.
- The *id log* ``log_ids[:log_n]`` / ``log_slots[:log_n]`` lists the stored steps in
  id order (strictly increasing) with their slots. An entry is *live* while
  ``sid[log_slots[i]] == log_ids[i]``; a freed step's entry just dies. Every held step
  has exactly one live entry, at or after ``head``: the oldest held step is the first
  live entry there (``oldest``, amortized O(1): ``head`` only moves forward over dead
  entries). Dead entries are dropped when the log would overflow its ``2 * max_steps``
  entries (``_compact``: at most ``max_steps`` live ones, so amortized O(1) per step).
- ``succ`` is right wherever it is read: for every held window, ``succ`` of each of
  its slots but the last is the next one (a window's steps are all held, so none of
  those slots was reused). Links out of freed or last steps may be stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..._queues._declare import FixedShape
from .._logs import first_live

__all__ = ["StepRing"]

Array = npt.NDArray[Any]
_EMPTY = np.empty(0, dtype=np.int64)


class StepRing:
    """The timesteps of one table (see the module docstring)."""

    __slots__ = (
        "data",
        "free",
        "head",
        "log_ids",
        "log_n",
        "log_slots",
        "max_steps",
        "next_id",
        "nfree",
        "owner",
        "ref",
        "sid",
        "succ",
    )

    def __init__(
        self, max_steps: int, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[FixedShape]
    ) -> None:
        self.max_steps = max_steps
        self.data = tuple(np.empty((max_steps, *s), dtype=dt) for dt, s in zip(dtypes, shapes))
        self.sid = np.full(max_steps, -1, dtype=np.int64)
        self.ref = np.zeros(max_steps, dtype=np.int64)
        self.owner = np.full(max_steps, -1, dtype=np.int64)
        self.succ = np.full(max_steps, -1, dtype=np.int64)
        self.free = np.arange(max_steps - 1, -1, -1, dtype=np.int64)  # slot 0 is popped first
        self.nfree = max_steps
        self.next_id = 0
        self.log_ids = np.empty(2 * max_steps, dtype=np.int64)
        self.log_slots = np.empty(2 * max_steps, dtype=np.int64)
        self.log_n = 0
        self.head = 0

    @property
    def held(self) -> int:
        """Steps held now."""
        return self.max_steps - self.nfree

    # -- storing and freeing ------------------------------------------------------------

    def store(self, comps: Sequence[Array], owner: int, after: int) -> Array:
        """Store ``k`` steps of one episode, pinned by writer ``owner`` (the caller
        checked that ``k`` slots are free): ``comps`` holds one array of ``k`` rows per
        field, in episode order, each step following the previous one (and the first
        following slot ``after``, -1 for none). Returns their slots."""
        k = len(comps[0])
        top = self.nfree
        self.nfree = top - k
        slots: Array = self.free[top - k : top][::-1].copy()
        if k == 1:
            s = int(slots[0])
            for store, c in zip(self.data, comps):
                store[s] = c[0]
        else:
            for store, c in zip(self.data, comps):
                store[slots] = c
        base = self.next_id
        ids = np.arange(base, base + k, dtype=np.int64)
        self.next_id = base + k
        self.sid[slots] = ids
        self.ref[slots] = 1
        self.owner[slots] = owner
        self.succ[slots] = -1
        if after >= 0:
            self.succ[after] = slots[0]
        if k > 1:
            self.succ[slots[:-1]] = slots[1:]
        n = self.log_n
        if n + k > len(self.log_ids):
            self._compact()
            n = self.log_n
        self.log_ids[n : n + k] = ids
        self.log_slots[n : n + k] = slots
        self.log_n = n + k
        return slots

    def release(self, slots: Array) -> None:
        """Free the distinct ``slots``, whose ``ref`` just reached 0."""
        k = len(slots)
        if not k:
            return
        self.sid[slots] = -1
        self.owner[slots] = -1
        self.free[self.nfree : self.nfree + k] = slots[::-1]
        self.nfree += k

    def drop(self, slots: Array, counts: Array | None = None) -> Array:
        """Take ``counts`` references (1 each if None) from the distinct ``slots``;
        free those left with none. Returns the slots freed."""
        if counts is None:
            self.ref[slots] -= 1
        else:
            self.ref[slots] -= counts
        gone: Array = slots[self.ref[slots] == 0]
        self.release(gone)
        return gone

    def rows(self, firsts: Array, length: int) -> Array:
        """The rows of slots of the held windows starting at ``firsts`` (``succ``
        followed ``length - 1`` times: one gather per step of the window)."""
        out = np.empty((len(firsts), length), dtype=np.int64)
        cur = firsts
        out[:, 0] = cur
        for j in range(1, length):
            cur = self.succ[cur]
            out[:, j] = cur
        return out

    # -- the id log ---------------------------------------------------------------------

    def _compact(self) -> None:
        n = self.log_n
        ids, slots = self.log_ids[:n], self.log_slots[:n]
        live = self.sid[slots] == ids
        m = int(np.count_nonzero(live))
        self.log_ids[:m] = ids[live]
        self.log_slots[:m] = slots[live]
        self.log_n = m
        self.head = 0

    def oldest(self, k: int) -> Array:
        """The slots of the ``k`` oldest held steps, oldest first (fewer if fewer are
        held). Moves ``head`` to the first live entry."""
        k = min(k, self.held)
        if k == 0:
            return _EMPTY
        found, self.head = first_live(
            self.log_slots, self.log_ids, self.sid, self.head, self.log_n, k
        )
        return found

    def held_in_id_order(self) -> Array:
        """The slots of every held step, by increasing id."""
        n = self.log_n
        slots = self.log_slots[self.head : n]
        held: Array = slots[self.sid[slots] == self.log_ids[self.head : n]]
        return held

    # -- reading ------------------------------------------------------------------------

    def gather(self, rows: Array) -> tuple[Array, ...]:
        """The steps of ``rows`` (an ``(n, length)`` array of slots): one array per
        field, of shape ``(n, length, *shape)``, by one gather each."""
        flat = rows.ravel()
        return tuple(d.take(flat, axis=0).reshape(*rows.shape, *d.shape[1:]) for d in self.data)

    def nbytes(self) -> int:
        """Bytes held by the ring's arrays (fields and bookkeeping)."""
        arrays = (*self.data, self.sid, self.ref, self.owner, self.succ, self.free)
        return sum(a.nbytes for a in arrays) + self.log_ids.nbytes + self.log_slots.nbytes

    # -- checks -------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Assert the invariants of the module docstring that the ring alone can see."""
        m = self.max_steps
        free = self.free[: self.nfree]
        assert len(np.unique(free)) == self.nfree, "a slot is free twice"
        held = self.sid >= 0
        assert not held[free].any(), "a free slot holds a step"
        assert np.count_nonzero(held) == m - self.nfree, "held + free != max_steps"
        assert ((self.ref > 0) == held).all(), "ref > 0 must mean held"
        assert (self.owner[~held] == -1).all(), "a free slot has an owner"
        n = self.log_n
        ids, slots = self.log_ids[:n], self.log_slots[:n]
        assert (np.diff(ids) > 0).all(), "the id log is not increasing"
        assert n == 0 or ids[-1] < self.next_id, "a logged id was never issued"
        live = self.sid[slots] == ids
        assert not live[: self.head].any(), "a live entry lies before the head"
        assert np.array_equal(np.sort(slots[live]), np.flatnonzero(held)), (
            "the live log entries are not exactly the held steps"
        )
