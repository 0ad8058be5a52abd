"""ItemStore: where a replay table's items live, and how a key finds its item.

Storage: one preallocated numpy array per component, of shape ``(max_size, *shape)``
(untouched pages cost no memory until written), and per *slot* (row) the item's
``key`` (int64, -1 for a free slot), raw ``priority`` (float64, -inf for a free slot)
and ``times`` sampled (int64). An item is written into a slot by one fancy-index copy
per component and batch, and read by one ``np.take`` per component and batch.

Invariants (all changed under the table's lock, by the engine only):

- ``size`` slots hold items; the other ``max_size - size`` are ``free[:nfree]``, a
  stack: ``alloc`` pops from its end, ``release`` pushes (a batch reversed, so the
  next ``alloc`` of as many gives them back in their order), so allocation order is
  a function of the history (snapshots keep the stack to restore it exactly).
- Keys start at 0, grow by one per inserted item (``next_key``) and are never reused,
  also for items evicted the moment they were inserted.
- The *key log* ``log_keys[:log_n]``/``log_slots[:log_n]`` lists keys in insertion
  order (strictly increasing) with the slot each went to. An entry is *live* while
  ``key[log_slots[i]] == log_keys[i]``; a released item's entry just dies (its slot
  may be reused for a larger key). Dead entries are dropped when the log would
  overflow its ``2 * max_size`` entries (``_compact``: amortized O(1) per insert), or
  trimmed off its end. Every live item has exactly one live entry.
- ``direct[key & mask]`` (``mask + 1``, a power of two >= 2 * max_size) is the slot the
  latest stored key with those low bits went to. ``lookup`` tries it first (one gather
  and a check that the slot holds that key); only keys whose entry a later key took
  (an item that outlived ``mask + 1`` inserts) are searched in the log
  (``searchsorted``). No Python object per item either way.
- ``head`` is an index into the log before which every entry is dead: the oldest
  item (Fifo) is the first live entry at or after it.
- ``dense``: every entry from ``head`` on is live (so ``log_n - head == size``) and
  their keys are consecutive. It holds from the start, and for as long as items
  arrive with consecutive keys and leave oldest first, which is a Fifo table's whole
  life unless something is deleted or sampled out. While it holds, the oldest items
  are the entries at ``head`` (no liveness check), and the item of key ``k`` is the
  entry ``head + k - log_keys[head]`` (no ``direct`` index, no key check). Items
  leave oldest first only through ``oldest(k, leaving=True)``, whose result is
  handed straight back to ``release``/``reuse``; anything else leaving ends it, and
  so does a batch whose keys have a gap or do not follow the newest key held (a
  newcomer evicted on arrival while the others went in: inside the batch, or at its
  start). It starts again when the table empties.
- ``sampled_live`` is the sum of ``times`` over the items held (a table with
  ``max_times_sampled`` can serve ``size * max_times_sampled - sampled_live`` draws);
  kept only when ``track_sampled`` (a table without the limit never reads it).
- ``max_priority()``: the largest priority held, 1.0 when empty. Cached with how many
  items hold it (``_at_max``): adding and updating keep both, and only when the last
  item holding it leaves or is lowered is it recomputed (one ``max`` over
  ``priority``) when next asked for.

A ``watcher`` (``StoreWatcher``, a trajectory table's steps) is told of every item
that arrives or leaves, with its key and first component.

``check_invariants`` tests them (for tests: ``TableCore.check_invariants`` calls it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .._queues._declare import FixedShape
from ._logs import first_live

__all__ = ["ItemStore", "StoreWatcher"]

Array = npt.NDArray[Any]
_EMPTY = np.empty(0, dtype=np.int64)


class StoreWatcher(Protocol):
    """What sees every item arrive (``add``) and leave (``release``, ``reuse``),
    whatever the selectors: a trajectory table's steps (``load`` does not report)."""

    def held(self, keys: Array, rows: Array) -> None:
        """The items of ``keys`` (first components ``rows``) are now held."""

    def left(self, keys: Array, rows: Array) -> None:
        """The items of ``keys`` (first components ``rows``) left."""


class ItemStore:
    """The items of one table (see the module docstring)."""

    __slots__ = (
        "_at_max",
        "_max",
        "_max_valid",
        "_passing",
        "data",
        "dense",
        "direct",
        "free",
        "head",
        "key",
        "log_keys",
        "log_n",
        "log_slots",
        "mask",
        "max_size",
        "next_key",
        "nfree",
        "priority",
        "sampled_live",
        "size",
        "times",
        "track_sampled",
        "watcher",
    )

    def __init__(
        self,
        max_size: int,
        dtypes: Sequence[np.dtype[Any]],
        shapes: Sequence[FixedShape],
        *,
        track_sampled: bool = True,
    ) -> None:
        self.max_size = max_size
        self.track_sampled = track_sampled  # keep ``sampled_live`` (max_times_sampled)
        self.data = tuple(np.empty((max_size, *s), dtype=dt) for dt, s in zip(dtypes, shapes))
        self.key = np.full(max_size, -1, dtype=np.int64)
        self.priority = np.full(max_size, -np.inf, dtype=np.float64)
        self.times = np.zeros(max_size, dtype=np.int64)
        self.free = np.arange(max_size - 1, -1, -1, dtype=np.int64)  # slot 0 is popped first
        self.nfree = max_size
        self.size = 0
        self.next_key = 0
        self.log_keys = np.empty(2 * max_size, dtype=np.int64)
        self.log_slots = np.empty(2 * max_size, dtype=np.int64)
        self.log_n = 0
        self.head = 0
        self.dense = True
        self._passing: Array | None = None  # (what ``oldest(leaving=True)`` passed)
        self.mask = (1 << (2 * max_size - 1).bit_length()) - 1
        self.direct = np.full(self.mask + 1, -1, dtype=np.int64)
        self.sampled_live = 0
        self._max = -np.inf  # (valid: no item held)
        self._at_max = 0
        self._max_valid = True
        self.watcher: StoreWatcher | None = None

    # -- slots ----------------------------------------------------------------------

    def alloc(self, k: int) -> Array:
        """Take ``k`` free slots (the caller checked there are)."""
        top = self.nfree
        self.nfree = top - k
        slots: Array = self.free[top - k : top][::-1].copy()
        return slots

    def add(
        self,
        slots: Array,
        keys: Array,
        priorities: Array,
        comps: Sequence[Any],
        default: float | None = None,
    ) -> None:
        """Fill ``slots`` with new items: their keys (increasing, above every key held),
        priorities and components (one batch array each, rows in slot order).
        ``default``: every priority is this value (the default priority), known
        without a look."""
        k = len(slots)
        if k == 1:
            s = int(slots[0])
            for store, c in zip(self.data, comps):
                store[s] = c[0]
        else:
            for store, c in zip(self.data, comps):
                store[slots] = c
        self.key[slots] = keys
        self.priority[slots] = priorities
        self.times[slots] = 0
        self.size += k
        self._track_max(priorities, default)
        n = self.log_n
        if self.dense and (
            int(keys[-1]) - int(keys[0]) != k - 1
            or (n > self.head and int(keys[0]) != int(self.log_keys[n - 1]) + 1)
        ):
            # a newcomer was evicted on arrival, its neighbours not: inside the batch, or
            # at its start (the batch's keys are a run, but not the one after the items
            # held; the log's last entry is the newest of them while dense)
            self.dense = False
        if n + k > len(self.log_keys):
            self._compact()
            n = self.log_n
        self.log_keys[n : n + k] = keys
        self.log_slots[n : n + k] = slots
        self.log_n = n + k
        self.direct[keys & self.mask] = slots
        if self.watcher is not None:
            self.watcher.held(keys, comps[0])

    def release(self, slots: Array) -> None:
        """Free the (distinct, held) ``slots``; their rows keep their data until reused."""
        k = len(slots)
        if not k:
            return
        self._forget(slots)
        self.key[slots] = -1
        self.priority[slots] = -np.inf
        self.free[self.nfree : self.nfree + k] = slots[::-1]  # (alloc gives them back in order)
        self.nfree += k

    def reuse(self, slots: Array) -> Array:
        """``release(slots)`` then ``alloc(len(slots))`` in one, for a batch arriving as
        the same number leave: the same slots, in the order ``alloc`` would give them
        back (their own: ``release`` pushes them reversed), with no round trip through
        the free stack. ``add`` fills them next: a Fifo table's oldest items are mostly
        a run of increasing slots, and rows written in increasing order are faster to
        write (the hardware prefetches ahead) than the same rows backwards."""
        self._forget(slots)
        reused: Array = slots.copy()
        return reused

    def _forget(self, slots: Array) -> None:
        """The items of (distinct, held) ``slots`` leave the counts: the size, the
        largest priority's holders and ``sampled_live``; the watcher is told (keys and
        first components read before a reuse overwrites them)."""
        if self.watcher is not None:
            self.watcher.left(self.key[slots], self.data[0][slots])
        if slots is not self._passing:  # not the oldest, just passed by the head
            self.dense = False
        self._passing = None
        self._untrack_max(self.priority[slots])
        if self.track_sampled:
            self.sampled_live -= int(self.times[slots].sum())
        self.size -= len(slots)
        if self.size == 0:
            self._max, self._at_max, self._max_valid = -np.inf, 0, True
            self.head, self.dense = self.log_n, True  # (every entry is dead)

    def set_priorities(self, slots: Array, priorities: Array) -> None:
        """New priorities for held, distinct ``slots``."""
        self._untrack_max(self.priority[slots])
        self.priority[slots] = priorities
        self._track_max(priorities)

    def _track_max(self, values: Array, default: float | None = None) -> None:
        """``values`` are now held (the cached maximum follows); ``default``: every
        value is this one (known without a look)."""
        if not self._max_valid or not len(values):
            return
        # (argmax: a fraction of max's cost)
        top = float(values[values.argmax()]) if default is None else default
        if top < self._max:  # nothing changes (with no holder of the maximum left,
            return  # max_priority recomputes it when asked)
        count = len(values) if default is not None else int(np.count_nonzero(values == top))
        if top > self._max:
            self._max, self._at_max = top, count
        else:
            self._at_max += count

    def _untrack_max(self, values: Array) -> None:
        """``values`` are no longer held (or are about to change)."""
        if self._max_valid and len(values):
            self._at_max -= int(np.count_nonzero(values == self._max))

    def max_priority(self) -> float:
        """The largest priority held; 1.0 when the table is empty."""
        if self.size == 0:
            return 1.0
        if not self._max_valid or self._at_max <= 0:
            priority = self.priority
            self._max = float(priority.max())
            self._at_max = int((priority == self._max).sum())
            self._max_valid = True
        return self._max

    # -- the key log ----------------------------------------------------------------

    def _compact(self) -> None:
        n = self.log_n
        keys, slots = self.log_keys[:n], self.log_slots[:n]
        live = self.key[slots] == keys
        m = int(live.sum())
        self.log_keys[:m] = keys[live]
        self.log_slots[:m] = slots[live]
        self.log_n = m
        self.head = 0

    def lookup(self, keys: Array) -> tuple[Array, bool]:
        """The slot of each key (int64 array), -1 where the table holds no such item,
        and whether every key was found."""
        n = len(keys)
        if self.dense and n and self.size:
            first = int(self.log_keys[self.head])
            low, high = int(keys[keys.argmin()]), int(keys[keys.argmax()])
            if low >= first and high < first + self.size:  # all held: no check needed
                at: Array = self.log_slots[keys + (self.head - first)]
                return at, True
        slots: Array = self.direct[keys & self.mask]
        ok = self.key[slots] == keys  # (slot -1 reads the last row: checked like any)
        if np.count_nonzero(ok) == n and (not n or keys[keys.argmin()] >= 0):
            return slots, True  # (count_nonzero and argmin: numpy's reductions cost more)
        ok &= keys >= 0  # (a free slot's key is -1)
        found = np.where(ok, slots, -1)
        # a key whose direct entry a later key took may still be held: search the log
        miss = np.flatnonzero(~ok & (keys >= 0) & (keys < self.next_key))
        if miss.size and self.log_n:
            n = self.log_n
            idx = np.searchsorted(self.log_keys[:n], keys[miss])
            np.minimum(idx, n - 1, out=idx)
            logged = self.log_slots[idx]
            hit = (self.log_keys[idx] == keys[miss]) & (self.key[logged] == keys[miss])
            found[miss[hit]] = logged[hit]
        return found, False

    def oldest(self, k: int, *, leaving: bool = False) -> Array:
        """The slots of the ``k`` oldest items, oldest first (fewer if fewer are held).
        ``leaving``: the caller removes them now, so the head may pass them."""
        k = min(k, self.size)
        if k == 0:
            return _EMPTY
        pos = self.head
        if self.dense:  # (the next k entries are live)
            oldest: Array = self.log_slots[pos : pos + k].copy()
            if leaving:
                self.head = pos + k
                self._passing = oldest
            return oldest
        n = self.log_n
        while pos + k <= n:  # the usual cases: the next k entries are all live, or all
            window: Array = self.log_slots[pos : pos + k]  # dead (the k evicted last)
            alive = np.count_nonzero(self.key[window] == self.log_keys[pos : pos + k])
            if alive == k:
                self.head = pos + k if leaving else pos
                found: Array = window.copy()
                return found
            if alive:
                break
            pos += k
        found, self.head = first_live(self.log_slots, self.log_keys, self.key, pos, n, k)
        return found

    def newest(self, k: int) -> Array:
        """The slots of the ``k`` newest items, newest first (fewer if fewer are held)."""
        k = min(k, self.size)
        if k == 0:
            return _EMPTY
        parts: list[Array] = []
        need = k
        end = self.log_n
        last = True
        while need > 0 and end > self.head:
            pos = max(self.head, end - max(2 * need, 64))
            slots = self.log_slots[pos:end]
            live = np.flatnonzero(self.key[slots] == self.log_keys[pos:end])
            if last:  # dead entries at the end of the log are trimmed off
                self.log_n = pos + (int(live[-1]) + 1 if live.size else 0)
                last = not live.size
            take = live[::-1][:need]
            parts.append(slots[take])
            need -= len(take)
            end = pos
        self.head = min(self.head, self.log_n)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def held_in_key_order(self) -> Array:
        """The slots of every item held, by increasing key."""
        n = self.log_n
        slots = self.log_slots[self.head : n]
        held: Array = slots[self.key[slots] == self.log_keys[self.head : n]]
        return held

    def check_invariants(self) -> None:
        """Raise AssertionError naming the first invariant of the module docstring that
        does not hold now (for tests; the caller holds the table's lock)."""
        held = np.flatnonzero(self.key >= 0)
        free = self.free[: self.nfree]
        if self.size != len(held) or self.nfree + self.size != self.max_size:
            raise AssertionError(f"store: size {self.size}, {len(held)} held, {self.nfree} free")
        if not np.array_equal(np.sort(free), np.flatnonzero(self.key < 0)):
            raise AssertionError("store: the free stack is not the free slots")
        keys = self.key[held]
        if len(np.unique(keys)) != len(keys) or (len(keys) and keys.max() >= self.next_key):
            raise AssertionError("store: keys repeat, or one is not below next_key")
        if np.isinf(self.priority[held]).any() or np.isfinite(self.priority[free]).any():
            raise AssertionError("store: a held item without priority, or a free slot with one")
        n = self.log_n
        log_keys, log_slots = self.log_keys[:n], self.log_slots[:n]
        if n > 1 and (np.diff(log_keys) <= 0).any():
            raise AssertionError("store: the key log is not increasing")
        live = self.key[log_slots] == log_keys
        if live[: self.head].any() or not np.array_equal(np.sort(log_slots[live]), held):
            raise AssertionError("store: the key log's live entries are not one per item")
        if self.dense and self.size:
            run = log_keys[self.head : n]
            if n - self.head != self.size or not np.array_equal(
                run, np.arange(run[0], run[0] + self.size)
            ):
                raise AssertionError("store: dense, but its entries from head are not a run")
        slots, _ = self.lookup(keys)
        if not np.array_equal(slots, held):
            raise AssertionError("store: lookup does not find a held key's slot")
        if self.track_sampled and self.sampled_live != int(self.times[held].sum()):
            raise AssertionError("store: sampled_live is not the held items' times sampled")
        if self._max_valid and self._at_max > 0 and self.size:
            top = float(self.priority[held].max())
            count = int(np.count_nonzero(self.priority[held] == top))
            if (self._max, self._at_max) != (top, count):
                raise AssertionError("store: the cached largest priority is wrong")

    # -- whole state (snapshots) ----------------------------------------------------

    def load(
        self,
        slots: Array,
        keys: Array,
        priorities: Array,
        times: Array,
        items: Sequence[Array],
        free: Array,
        next_key: int,
    ) -> None:
        """Fill an empty store with the items of a snapshot (checked by the caller):
        each at its slot, in key order, and the free stack as it was."""
        for store, c in zip(self.data, items):
            store[slots] = c
        self.key[slots] = keys
        self.priority[slots] = priorities
        self.times[slots] = times
        self.size = len(slots)
        self.free[: len(free)] = free
        self.nfree = len(free)
        self.next_key = next_key
        self.log_keys[: len(keys)] = keys
        self.log_slots[: len(keys)] = slots
        self.log_n = len(keys)
        self.direct[keys & self.mask] = slots
        self.head = 0
        self.dense = not len(keys) or int(keys[-1]) - int(keys[0]) == len(keys) - 1
        self.sampled_live = int(times.sum())
        self._max_valid = False
