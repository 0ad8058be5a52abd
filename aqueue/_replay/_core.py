"""TableCore: a table's items, selectors, limiter and counters, and what each operation
does to them. Synchronous, called under the engine's lock, never waiting: the engine
(``_engine.py``) decides *whether* an operation may run now (``can_insert``,
``can_sample``), this module *runs* it, completely, in one call.

What a batch means (the semantics, chosen to equal single operations in a row):

- ``insert(k items)`` = k inserts in a row. Each new item gets the next key; at
  ``max_size`` the remover evicts one item per insert, after the new item is in (so a
  new item can evict itself: a Lifo remover always does). For a deterministic remover
  the k evictions are chosen at once (``SelectorState.evictions``); a random remover (Uniform,
  Prioritized) chooses one at a time among the held items and the newcomer.
- ``sample(n)`` = n samples in a row, taken at once: the limiter allowed all n
  beforehand, and the table can supply them. Without ``max_times_sampled`` the n draws
  are independent (with replacement). With it, an item leaves the table the moment
  its count reaches ``max_times_sampled``, so a batch never draws it more often than
  it had left; later draws of the batch pick among the remaining items, with their
  probabilities (``probabilities`` reports each draw's probability at its moment).
  Random samplers do this by rejection, which is exact: draws are made in rounds; a
  draw of an item that has no draws left in this batch is discarded (it would not have
  been drawn from the remaining items), and the items used up are taken out of the
  sampler before the next round. Deterministic samplers take the first item until it
  is used up, then the next. ``times_sampled`` counts each draw in order (an item
  drawn twice reports t + 1, then t + 2).
- ``update``/``delete`` of keys not held report False; repeated keys: an update applies
  the last value (and counts as updated last, for heap ties); a delete reports True
  for the first occurrence only.

Counters (since creation; a restored table continues its snapshot's): ``inserts``,
``samples`` (items), ``deletes`` (items removed for any reason) and ``evictions``
(removed by the remover, or with their first step by ``evict``: a trajectory
table's). ``inserts - deletes == size`` always.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._queues._declare import Components, FixedShape
from ._limiter import RateLimiter
from ._repeats import count_draws, last_of_each, occurrences
from ._selection import SelectorState, make_state
from ._selectors import Selector
from ._store import ItemStore

__all__ = ["Sampled", "TableCore"]

Array = npt.NDArray[Any]
Sampled = tuple[tuple[Array, ...], Array, Array, Array, Array, int]
"""What ``sample`` returns: components, keys, priorities, probabilities,
times_sampled, table size."""


class TableCore:
    """The state of one table and the operations on it (see the module docstring)."""

    __slots__ = (
        "deletes",
        "evictions",
        "inserts",
        "keeping",
        "limiter",
        "max_size",
        "mts",
        "remover",
        "rng",
        "sampler",
        "samples",
        "store",
        "taken",
    )

    def __init__(
        self,
        max_size: int,
        dtypes: Sequence[np.dtype[Any]],
        shapes: Sequence[FixedShape],
        *,
        sampler: Selector,
        remover: Selector,
        limiter: RateLimiter,
        max_times_sampled: int,
        rng: np.random.Generator,
    ) -> None:
        self.max_size = max_size
        self.store = store = ItemStore(
            max_size, dtypes, shapes, track_sampled=max_times_sampled > 0
        )
        self.sampler = make_state(sampler, store)
        self.remover = make_state(remover, store)
        # the states with records of their own to keep as items come, go and change
        # priority (Fifo and Lifo read the store's key log and keep none)
        self.keeping = tuple(s for s in (self.sampler, self.remover) if not s.reads_store)
        self.limiter = limiter
        self.mts = max_times_sampled
        # (scratch of _draw_with_budget, only with max_times_sampled)
        self.taken = np.zeros(max_size if max_times_sampled else 0, dtype=np.int64)
        self.rng = rng
        self.inserts = 0
        self.samples = 0
        self.deletes = 0
        self.evictions = 0

    # -- readiness --------------------------------------------------------------------

    def can_insert(self, k: int) -> bool:
        """Whether the limiter admits ``k`` items now."""
        return self.limiter.can_insert(self.inserts, self.samples, self.deletes, k)

    def admitted(self, k: int) -> int:
        """How many of ``k`` items in a row the limiter admits now (0..k)."""
        return self.limiter.admitted(self.inserts, self.samples, self.deletes, k)

    def can_sample(self, n: int) -> bool:
        """Whether the limiter allows ``n`` samples now and the items held can supply
        them (with ``max_times_sampled``, n draws must be left among them)."""
        if not self.limiter.can_sample(self.inserts, self.samples, self.deletes, n):
            return False
        store = self.store
        if self.mts:
            return store.size * self.mts - store.sampled_live >= n
        return store.size > 0

    # -- operations ---------------------------------------------------------------

    def _add(
        self, comps: Sequence[Array], keys: Array, priorities: Array, default: float | None = None
    ) -> None:
        slots = self.store.alloc(len(keys))
        self.store.add(slots, keys, priorities, comps, default)
        for state in self.keeping:
            state.insert(slots, priorities)

    def _replace(
        self,
        old: Array,
        comps: Sequence[Array],
        keys: Array,
        priorities: Array,
        default: float | None = None,
    ) -> None:
        """``_drop(old)`` then ``_add(...)``; a prioritized state does both in one pass
        over its tree. When as many leave as arrive (a full table), the new items take
        the slots just freed, as the free stack would give them back (``reuse``).
        ``default``: as ``ItemStore.add``'s."""
        store = self.store
        same = len(old) == len(keys)
        if same:
            slots = store.reuse(old)
        else:
            store.release(old)
            slots = store.alloc(len(keys))
        store.add(slots, keys, priorities, comps, default)
        for state in self.keeping:
            if same:
                state.refill(slots, priorities)  # (the same slots, held again)
            else:
                state.replace(old, slots, priorities)

    def _drop(self, slots: Array, *, in_sampler: bool = True) -> None:
        if in_sampler:
            self.sampler.remove(slots)
        self.remover.remove(slots)
        self.store.release(slots)

    def insert(self, comps: Components, k: int, priorities: Array | None) -> Array:
        """Insert ``k`` items (one batch array per component): their keys."""
        store = self.store
        default = None  # (every priority is the default: the store need not look)
        if priorities is None:
            default = store.max_priority()
            priorities = np.empty(k)
            priorities.fill(default)  # (np.full: a Python function around these two)
        base = store.next_key
        keys = np.arange(base, base + k, dtype=np.int64)
        store.next_key = base + k
        excess = store.size + k - self.max_size
        remover = self.remover
        if excess <= 0:
            self._add(comps, keys, priorities, default)
        elif remover.deterministic:  # (the evictions are chosen at once)
            old, gone = remover.evictions(excess, priorities)
            if gone.size:
                self._drop(old)
                keep = np.ones(k, dtype=bool)
                keep[gone] = False
                if keep.any():
                    self._add([c[keep] for c in comps], keys[keep], priorities[keep])
            else:
                self._replace(old, comps, keys, priorities, default)
        else:
            room = self.max_size - store.size
            if room:
                self._add([c[:room] for c in comps], keys[:room], priorities[:room])
            rng = self.rng
            for j in range(room, k):  # one eviction per insert, the newcomer included
                victim = remover.victim(float(priorities[j]), rng)
                if victim >= 0:
                    self._drop(np.array([victim], dtype=np.int64))
                    self._add([c[j : j + 1] for c in comps], keys[j : j + 1], priorities[j : j + 1])
        self.inserts += k
        if excess > 0:
            self.evictions += excess
            self.deletes += excess
        return keys

    def sample(self, n: int) -> Sampled:
        """Sample ``n`` items (``can_sample(n)`` holds)."""
        store = self.store
        size = store.size
        sampler = self.sampler
        mts = self.mts
        out_of_sampler: Array | None = None
        if not mts:  # n independent draws (of the first item, for an ordered sampler)
            slots, weights, total = sampler.draw(n, self.rng)
            if len(weights):
                probabilities = weights / total
            else:  # (every weight 1)
                probabilities = np.empty(n)
                probabilities.fill(1.0 / total)
        elif sampler.deterministic:  # the first items in turn, each until used up
            first = sampler.first(n)
            left = mts - store.times[first]
            reach = np.cumsum(left)
            cut = int(np.searchsorted(reach, n)) + 1  # items needed
            takes = left[:cut].copy()
            takes[-1] -= int(reach[cut - 1]) - n
            slots = np.repeat(first[:cut], takes)
            probabilities = np.ones(n)
        else:
            slots, probabilities, out_of_sampler = self._draw_with_budget(n, sampler)
        # times_sampled, counting each draw in order (a repeated slot: t + 1, t + 2, ...)
        times, twice = count_draws(store.times, slots)
        if mts:
            store.sampled_live += n
        self.samples += n
        gathered = []  # (a loop: a comprehension costs a frame per sample)
        for d in store.data:
            gathered.append(d.take(slots, axis=0))
        data = tuple(gathered)
        result = (data, store.key[slots], store.priority[slots], probabilities, times, size)
        if mts:
            distinct = np.unique(slots) if twice else slots
            used_up = distinct[store.times[distinct] >= mts]
            if used_up.size:
                if out_of_sampler is not None:
                    self._drop(used_up, in_sampler=False)
                else:
                    self._drop(used_up)
                self.deletes += len(used_up)
        return result

    def _draw_with_budget(self, n: int, sampler: SelectorState) -> tuple[Array, Array, Array]:
        """n draws of a random sampler when items may be drawn ``mts`` times at most
        (rounds with rejection; see the module docstring): slots, probabilities, and
        the slots taken out of the sampler (used up)."""
        store, rng, mts = self.store, self.rng, self.mts
        taken = self.taken  # draws accepted per slot in this batch (zero outside it)
        parts: list[Array] = []
        probs: list[Array] = []
        out: list[Array] = []
        left = n
        while left:
            slots, weights, total = sampler.draw(left, rng)
            if not len(weights):
                weights = np.ones(len(slots))
            occ = occurrences(slots)
            remaining = mts - store.times[slots] - taken[slots]
            accept = occ < remaining
            last = accept & (occ == remaining - 1)  # the draw that uses an item up
            gone_mass = np.where(last, weights, 0.0)
            removed_before = np.cumsum(gone_mass) - gone_mass
            chosen = slots[accept]
            parts.append(chosen)
            probs.append(weights[accept] / (total - removed_before[accept]))
            np.add.at(taken, chosen, 1)
            used_up = slots[last]
            if used_up.size:
                sampler.remove(used_up)
                out.append(used_up)
            left -= len(chosen)
        cat = np.concatenate
        drawn = cat(parts)
        taken[drawn] = 0
        return drawn, cat(probs), cat(out) if out else np.empty(0, dtype=np.int64)

    def update(self, keys: Array, priorities: Array) -> Array:
        """New priorities for the items of ``keys``: which were held."""
        store = self.store
        slots, complete = store.lookup(keys)
        if complete:
            found, held, values = np.empty(len(keys), dtype=bool), slots, priorities
            found.fill(True)
        else:
            found = slots >= 0
            held, values = slots[found], priorities[found]
        if held.size:
            keep = None if held.size == 1 else last_of_each(held)
            if keep is not None:  # a key given twice: its last value counts
                held, values = held[keep], values[keep]
            store.set_priorities(held, values)
            for state in self.keeping:
                state.update(held, values)
        return found

    def delete(self, keys: Array) -> Array:
        """Remove the items of ``keys``: which were held (a repeated key: its first)."""
        slots, _ = self.store.lookup(keys)
        found = slots >= 0
        if found.any():
            where = np.flatnonzero(found)
            distinct, first = np.unique(slots[where], return_index=True)
            if len(distinct) < len(where):
                found[:] = False
                found[where[first]] = True
            self._drop(distinct)
            self.deletes += len(distinct)
        return found

    def evict(self, keys: Array) -> Array:
        """``delete(keys)`` that counts the removals as evictions too (a trajectory
        table's items whose first step was evicted): which were held."""
        found = self.delete(keys)
        self.evictions += int(np.count_nonzero(found))
        return found

    def check_invariants(self) -> None:
        """Raise AssertionError naming the first invariant that does not hold now: the
        counters' (``inserts - deletes == size``), the store's and the states' (for
        tests; the caller holds the table's lock)."""
        store = self.store
        if self.inserts - self.deletes != store.size or self.evictions > self.deletes:
            raise AssertionError(
                f"core: inserts {self.inserts} - deletes {self.deletes} != size "
                f"{store.size}, or evictions {self.evictions} > deletes"
            )
        store.check_invariants()
        if self.mts and (store.times[store.key >= 0] >= self.mts).any():
            raise AssertionError("core: an item used up by its draws is still held")
        if self.mts and self.taken.any():
            raise AssertionError("core: the draw scratch is not clear between samples")
        for role, state in (("sampler", self.sampler), ("remover", self.remover)):
            try:
                state.check(store)
            except AssertionError as exc:
                raise AssertionError(f"core: the {role}'s state: {exc}") from None

    # -- whole state (snapshots) ------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        """Everything a snapshot keeps, copied (see ``_snapshot.py``)."""
        store = self.store
        slots = store.held_in_key_order()
        index_of = np.full(self.max_size, -1, dtype=np.int64)
        index_of[slots] = np.arange(len(slots))
        return {
            "keys": store.key[slots],
            "priorities": store.priority[slots],
            "times_sampled": store.times[slots],
            "items": tuple(np.take(d, slots, axis=0) for d in store.data),
            "next_key": store.next_key,
            "counters": (self.inserts, self.samples, self.deletes, self.evictions),
            "rng_state": self.rng.bit_generator.state,
            "layout": {
                "slots": slots,
                "free": store.free[: store.nfree].copy(),
                **{f"sampler.{k}": v for k, v in self.sampler.dump(index_of).items()},
                **{f"remover.{k}": v for k, v in self.remover.dump(index_of).items()},
            },
        }

    def load(self, state: dict[str, Any]) -> None:
        """Fill an empty core with a snapshot's state (checked by the caller)."""
        layout = state["layout"]
        slots = layout["slots"]
        priorities = state["priorities"]
        self.store.load(
            slots,
            state["keys"],
            priorities,
            state["times_sampled"],
            state["items"],
            layout["free"],
            state["next_key"],
        )
        for role, selector in (("sampler", self.sampler), ("remover", self.remover)):
            own = {k.split(".", 1)[1]: v for k, v in layout.items() if k.startswith(role + ".")}
            selector.load(slots, priorities, own)
        self.inserts, self.samples, self.deletes, self.evictions = state["counters"]
        self.rng.bit_generator.state = state["rng_state"]
