"""A step store's state as plain arrays (what a trajectory table's snapshot keeps), and
back: ``dump_steps`` and ``load_steps``.

Kept, in terms of *step indices* (positions in the held steps' id order), so that the
state reads the same whatever the layout:

- ``ids``: the held steps' ids, increasing, and ``fields``: one array per field of
  shape ``(held, *shape)``, in that order;
- ``next_id``, ``next_writer`` and the counters (``appended``, ``stored``, ``evicted``,
  ``freed``, ``item_evictions``, ``windows_dropped``);
- ``writers``: per open writer ``(id, pos, start, pinned step indices)``;
- ``layout``: ``slots`` (each held step's slot) and ``free`` (the free stack, which slot
  the next step takes), so a restored store lays out steps as the original would.

The items (kept by the item side, with their keys, priorities and selector state) name
their steps by index: ``index_of`` turns a row of slots into indices, and a row of
indices read back is ``layout["slots"][row]``. Rebuilt on load: ``sid``, ``ref`` (the
items containing each step, plus its pin), ``owner``, ``succ`` (along every item's row
and every writer's pinned steps, the only links ever read), the id log and
``first_key``. ``load_steps`` trusts its input: the snapshot file's checks come first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._episodes import Episode
from ._steps import StepStore

__all__ = ["dump_steps", "index_of", "load_steps"]

Array = npt.NDArray[Any]
COUNTERS = ("appended", "stored", "evicted", "freed", "item_evictions", "windows_dropped")


def index_of(store: StepStore) -> Array:
    """Slot -> its step's index in a dump taken now (-1 for a free slot)."""
    held = store.ring.held_in_id_order()
    out = np.full(store.ring.max_steps, -1, dtype=np.int64)
    out[held] = np.arange(len(held))
    return out


def dump_steps(store: StepStore) -> dict[str, Any]:
    """Everything a snapshot keeps of the steps (see the module docstring), copied."""
    ring = store.ring
    held = ring.held_in_id_order()
    where = index_of(store)
    writers = [
        (ep.wid, ep.pos, ep.start, where[ep.pend])
        for ep in sorted(store.writers.values(), key=lambda e: e.wid)
    ]
    return {
        "ids": ring.sid[held],
        "fields": tuple(np.take(d, held, axis=0) for d in ring.data),
        "next_id": ring.next_id,
        "next_writer": store.next_writer,
        "counters": {name: getattr(store, name) for name in COUNTERS},
        "writers": writers,
        "layout": {"slots": held, "free": ring.free[: ring.nfree].copy()},
    }


def load_steps(store: StepStore, state: dict[str, Any], keys: Array, rows: Array) -> None:
    """Fill an empty store with a dump's steps and writers, given the held items' keys
    and rows of step indices (checked by the caller)."""
    ring = store.ring
    slots = state["layout"]["slots"]
    free = state["layout"]["free"]
    ids = state["ids"]
    for d, f in zip(ring.data, state["fields"]):
        d[slots] = f
    ring.sid[slots] = ids
    ring.free[: len(free)] = free
    ring.nfree = len(free)
    ring.next_id = int(state["next_id"])
    n = len(ids)
    ring.log_ids[:n] = ids
    ring.log_slots[:n] = slots
    ring.log_n, ring.head = n, 0
    item_rows = slots[rows] if len(rows) else np.empty((0, store.length), dtype=np.int64)
    np.add.at(ring.ref, item_rows.ravel(), 1)
    store.first_key[item_rows[:, 0]] = keys
    ring.succ[item_rows[:, :-1].ravel()] = item_rows[:, 1:].ravel()
    store.next_writer = int(state["next_writer"])
    for wid, pos, start, pend in state["writers"]:
        ep = Episode(int(wid), store.length, store.stride)
        ep.pos, ep.start, ep.pend = int(pos), int(start), slots[pend]
        store.writers[ep.wid] = ep
        ring.ref[ep.pend] += 1
        ring.owner[ep.pend] = ep.wid
        ring.succ[ep.pend[:-1]] = ep.pend[1:]
    for name in COUNTERS:
        setattr(store, name, int(state["counters"][name]))
