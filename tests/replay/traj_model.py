"""A plain-Python model of a trajectory table's steps and windows, and a stand-in for
its items (``from traj_model import ...``).

``Model`` states the rules in the most direct form, one step at a time, with lists,
dicts and sets (no slots, no counts, no batching): a step is *needed* while an item or
a live pending window contains it; a step is stored only if a live pending window
contains it; with ``max_steps`` needed steps, storing one more first evicts the oldest
needed step, every item containing it, and every pending window containing it. The
store under test must agree with it after every operation.

``Items`` is the items side a ``StepStore`` talks to (``WindowItems``): a dict of rows
by key with an optional cap and a Fifo or Lifo remover (or "never": the cap is the
capacity a table without one sizes its item store for, and must never be reached),
reporting arrivals and
departures in batches as an ``ItemStore`` would (the items leaving, then the newcomers
kept; a newcomer evicted on arrival is never reported).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ModelWriter:
    """One writer's episode: its positions' step ids and the windows dropped."""

    def __init__(self) -> None:
        self.pos = 0
        self.ids: dict[int, int] = {}  # position -> step id, for stored positions
        self.dropped: set[int] = set()  # starts of windows that lost a step


class Model:
    """The reference (see the module docstring)."""

    def __init__(self, max_steps: int, length: int, stride: int, cap: int | None, remover: str):
        self.max_steps, self.length, self.stride = max_steps, length, stride
        self.cap, self.remover = cap, remover
        self.tags: dict[int, int] = {}  # needed step id -> its tag
        self.next_id = 0
        self.items: dict[int, tuple[int, ...]] = {}  # key -> step ids, in key order
        self.priority: dict[int, float | None] = {}  # key -> the priority it came with
        self.next_key = 0
        self.writers: dict[int, ModelWriter] = {}
        self.next_writer = 0
        self.counts = dict.fromkeys(
            ("appended", "stored", "evicted", "freed", "item_evictions", "windows_dropped"), 0
        )

    # -- the rules ----------------------------------------------------------------------

    def pending(self, w: ModelWriter) -> list[int]:
        """Starts of the live windows begun and not complete."""
        return [
            st
            for st in range(0, w.pos, self.stride)
            if st + self.length > w.pos and st not in w.dropped
        ]

    def live_containing(self, w: ModelWriter, p: int) -> list[int]:
        lo = max(0, p - self.length + 1)
        return [st for st in range(lo, p + 1) if st % self.stride == 0 and st not in w.dropped]

    def needed(self) -> set[int]:
        out = {i for ids in self.items.values() for i in ids}
        for w in self.writers.values():
            for st in self.pending(w):
                out.update(w.ids[q] for q in range(st, w.pos))
        return out

    def collect(self) -> None:
        needed = self.needed()
        for i in [i for i in self.tags if i not in needed]:
            del self.tags[i]
            self.counts["freed"] += 1

    def evict_oldest(self) -> None:
        x = min(self.needed())
        gone = [k for k, ids in self.items.items() if x in ids]
        for k in gone:
            del self.items[k]
        self.counts["item_evictions"] += len(gone)
        for w in self.writers.values():
            for st in self.pending(w):
                if any(w.ids.get(q) == x for q in range(st, w.pos)):
                    w.dropped.add(st)
                    self.counts["windows_dropped"] += 1
        del self.tags[x]
        self.counts["evicted"] += 1
        self.collect()

    def insert_item(self, ids: tuple[int, ...], priority: float | None) -> None:
        key = self.next_key
        self.next_key += 1
        if self.cap is not None and len(self.items) >= self.cap:
            if self.remover == "lifo":
                return  # the newcomer evicts itself
            del self.items[min(self.items)]
        self.items[key] = ids
        self.priority[key] = priority

    # -- operations ---------------------------------------------------------------------

    def open_writer(self) -> int:
        wid = self.next_writer
        self.next_writer += 1
        self.writers[wid] = ModelWriter()
        return wid

    def append(self, wid: int, tag: int, priority: float | None) -> None:
        w = self.writers[wid]
        p = w.pos
        self.counts["appended"] += 1
        if self.live_containing(w, p) and len(self.needed()) == self.max_steps:
            self.evict_oldest()
        if self.live_containing(w, p):
            i = self.next_id
            self.next_id += 1
            self.tags[i] = tag
            w.ids[p] = i
            self.counts["stored"] += 1
            st = p - self.length + 1
            if st >= 0 and st % self.stride == 0 and st not in w.dropped:
                self.insert_item(tuple(w.ids[q] for q in range(st, p + 1)), priority)
        w.pos = p + 1
        self.collect()

    def end_episode(self, wid: int) -> None:
        w = self.writers[wid]
        self.counts["windows_dropped"] += len(self.pending(w))
        self.writers[wid] = ModelWriter()
        self.collect()

    def close_writer(self, wid: int) -> None:
        self.end_episode(wid)
        del self.writers[wid]

    def remove(self, keys: list[int]) -> None:
        for k in keys:
            del self.items[k]
        self.collect()

    # -- what a store must agree with ---------------------------------------------------

    def item_tags(self) -> dict[int, tuple[int, ...]]:
        return {k: tuple(self.tags[i] for i in ids) for k, ids in self.items.items()}


class Items:
    """The items side of the tests (see the module docstring)."""

    def __init__(self, cap: int | None, remover: str) -> None:
        self.cap, self.remover = cap, remover
        self.rows: dict[int, np.ndarray] = {}
        self.priority: dict[int, float | None] = {}
        self.next_key = 0
        self.steps: Any = None  # the StepStore, set once both exist

    def _report_left(self, keys: list[int]) -> None:
        if keys:
            rows = np.stack([self.rows.pop(k) for k in keys])
            for k in keys:
                del self.priority[k]
            self.steps.left(np.array(keys, dtype=np.int64), rows)

    def insert_windows(self, rows: np.ndarray, priorities: np.ndarray | None) -> None:
        m = len(rows)
        keys = list(range(self.next_key, self.next_key + m))
        self.next_key += m
        kept = list(range(m))
        leaving: list[int] = []
        if self.cap is not None:
            excess = len(self.rows) + m - self.cap
            assert excess <= 0 or self.remover != "never", "more windows than the capacity"
            if excess > 0 and self.remover == "lifo":
                kept = kept[: m - excess]  # the last ones evict themselves
            elif excess > 0:
                held = list(self.rows)
                leaving = held[:excess]
                kept = kept[max(0, excess - len(held)) :]  # evicted on arrival
        self._report_left(leaving)
        for j in kept:
            self.rows[keys[j]] = rows[j].copy()
            self.priority[keys[j]] = None if priorities is None else float(priorities[j])
        if kept:
            self.steps.held(np.array([keys[j] for j in kept], dtype=np.int64), rows[kept])

    def evict_windows(self, keys: np.ndarray) -> None:
        self._report_left([int(k) for k in keys])

    def remove(self, keys: list[int]) -> None:
        """Items leaving on the items' own account (max_times_sampled, delete)."""
        self._report_left(keys)

    def held_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        keys = np.array(list(self.rows), dtype=np.int64)
        length = self.steps.length
        rows = np.stack(list(self.rows.values())) if self.rows else np.empty((0, length), np.int64)
        return keys, rows.astype(np.int64)
