"""StepStore: a trajectory table's timesteps, stored once, and the windows made of them.

The design of aqueue's trajectory tables (``TrajectoryTable``, in process and on Redis).

**Model.** A table holds *timesteps* (one value per field: ``dtypes``/``shapes``/
``names``, as a replay table's items) appended by *writers*, one per actor stream,
each inside its current *episode*. Its *items* are *windows*: the ``length``
consecutive steps of one episode that start at positions 0, ``stride``, 2 * ``stride``,
... (a position counts the steps its writer appended since the episode began). A
window becomes an item when its last step is appended, with the priority given with
that step (or the table's default), and never crosses an episode end: a window that
does not fit before ``end_episode`` never exists (an episode shorter than ``length``
makes none). A frame stack is ``length=4``; R2D2's sequences ``length=80, stride=40``;
with ``stride > length`` the steps between windows are never stored. A writer keeps
three things (``_episodes.py``): its position in the episode, the start of its earliest
pending window, and the slots of the steps its pending windows have so far (at most
``length - 1``); a window's row is read off them the moment its last step is stored.

**Storage** (``_ring.py``). One preallocated array per field, ``(max_steps, *shape)``:
a step is written once, into a free slot, however many windows contain it. An item is
an int64 row of ``length`` slots (its steps in order), so writers interleave freely,
and a sample of ``n`` items is ONE gather per field: ``field.take(rows.ravel())``
reshaped to ``(n, length, *shape)``.

**Who needs a step.** A step is *held* while an item contains it or a *pending window*
of its writer (begun, not complete, not dropped) does; ``ref`` counts them (the items,
plus 1 for the writer's *pin*, ``_episodes.py``). When nothing needs it any more the
step is *freed*: its slot returns to the free stack and the next step stored may take
it. Steps are freed when the items containing them leave for any reason but the step's
own eviction (the remover at the item cap, ``max_times_sampled``, ``delete``), when
their writer's pending windows end (``end_episode``, a closed writer, a dropped
window), or are never stored (a position no pending window contains).

**Capacity and eviction.** ``max_steps`` bounds the held steps. A step to be stored
when no slot is free makes room: the *oldest held step* (smallest id) is evicted with
everything that needs it: every item containing it (only the one starting there can:
another would contain an older held step) and its writer's pending window (again only
the earliest one). Never a window with a hole: a pending window whose first step was
evicted never becomes an item (its writer's later windows may). Their other steps are
freed if nothing else needs them. Freed slots are reused before anything held is
evicted, so a table whose items leave early (an item cap, ``max_times_sampled``)
keeps its older windows longer than a bare ring would.

**Batches.** ``append(k steps)`` = k single appends in a row, done in bulk: the room
for its steps is made first, by evicting the oldest held steps one after another,
exactly as single appends would, as long as they belong to other writers and no
item leaves as windows are inserted (no item cap): the steps this batch's windows use
are its writer's pins and its own, so nothing else differs. The evictions themselves
are one step for the common case (the ``m`` oldest steps free exactly ``m`` slots,
and none is pinned), else one at a time. Otherwise the batch goes in chunks that fit
the free slots, evicting one step between chunks.

**remover, max_size, max_times_sampled.** A full ring always evicts the oldest held
steps first; the ``remover`` orders the evictions of an optional item cap,
``max_size=None`` (the most items held; None: no cap). Over the cap, as in a replay
table, one item per window inserted is evicted (the remover's pick, possibly the new
window itself) and its steps freed if no other window needs them; their room is then
reused before any older step is evicted, so a ``MinHeap`` remover keeps the windows
with the largest priorities while the ring turns over. Letting the remover choose
what a full ring loses instead fails with overlapping windows: evicting one item
frees no step (its steps belong to its neighbours too), so a Uniform or Prioritized
remover would evict about ``length / stride`` items per step stored and shred the
table into isolated windows, while a Fifo one would do what oldest-first does anyway.
``max_times_sampled`` retires an item after that many draws, freeing its steps the
same way. Without a cap the remover never runs: ``max_steps`` held steps hold at most
``max_steps // min(stride, length)`` windows (each window owns ``min(stride, length)``
steps no earlier window of its episode has), and the item store is sized for that.

**Integration with the replay core** (checked against ``TableCore`` and ``ItemStore``).
The items live in an ``ItemStore`` of one int64 component of shape ``(length,)`` (the
rows), so selectors, priorities, the rate limiter (which counts items), times sampled,
update/delete by key, snapshots of the items and cancellation (a step is whole or not
at all) apply unchanged; the ``StepStore`` sits beside it, sharing the table's lock.
It works with four changes. (1) The steps must see every item come and go: all
arrivals pass ``ItemStore.add`` and all departures ``ItemStore.release``/``reuse``
(``_forget``), whatever the selector, so an observer there calls ``held(keys, rows)``
and ``left(keys, rows)`` (rows read before ``reuse`` lets them be overwritten); a
window evicted on arrival never reaches the store and was never counted. (2) Evicting
the items whose first step went needs ``TableCore.evict(keys)``: ``delete`` that also
counts ``evictions``. (3) The item store is sized ``min(max_size, max_steps //
min(stride, length))``. (4) An append is an insert request of ``windows_completed(w,
k)`` items (0: it never waits) whose engine step runs ``StepStore.append``; a sample's
step gathers the rows before it returns (slots freed by ``max_times_sampled`` inside
it keep their data until a later store reuses them).

**Snapshots** (``_state.py``). Steps: the held ones in id order (ids, one array per
field, their slots, the free stack, ``next_id``); items: the replay snapshot's keys,
priorities, times sampled and selector state, with rows as indices into those steps;
writers: for each open writer its id, ``pos``, ``start`` and pinned steps (indices),
restored detached (``table.writer(resume=id)`` re-attaches one; the others' pins age
out as the oldest); the counters. ``ref``, ``owner``, ``succ``, the id log and
``first_key`` are rebuilt; a restored store lays steps out exactly as the original.

**On Redis** (one key prefix per table): ``s:<id>`` one step's fields packed (written
by the append's MULTI and renamed into place, freed by DEL: on a server, freeing
returns memory); ``ref`` hash id -> count; ``held`` list of ids (oldest first, dead ids
skipped); ``w:<wid>`` hash pos/start/pinned ids; ``first`` hash id -> item key; the
replay table's item keys with each payload the row of step ids. Per append, one
function call: the limiter's ``can_insert(windows completed)``, the room made (oldest
ids, their items deleted through the replay table's own removal, counts decremented,
freed ids deleted), the steps renamed into place, the windows inserted as items, the
pins moved. Per sample, the replay table's function (limiter, selector, times sampled,
retirements freeing steps) COPYs the ``n * length`` step payloads to the sample's own
keys, read and deleted by the MGET/DEL queued behind it: one round trip, and a cancelled
call changed nothing or everything.

Invariants (``check_invariants``), beside those of ``_ring.py`` and ``_episodes.py``:
``ref[slot]`` = the held items whose row contains ``slot`` + 1 if a writer pins it;
``first_key[slot]`` is the key of the held item whose row starts at ``slot``, -1 if
none (distinct first slots); an item's steps are held, with increasing ids, linked by
``succ``; ``stored == held + evicted + freed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ..._queues._declare import FixedShape
from ._episodes import Episode
from ._ring import StepRing

__all__ = ["StepStatistics", "StepStore", "WindowItems"]

Array = npt.NDArray[Any]


class WindowItems(Protocol):
    """What a step store asks of the items (in process: the table's core)."""

    def insert_windows(self, rows: Array, priorities: Array | None) -> None:
        """Insert one item per row of slots, in order, as that many inserts in a row.
        Every item stored is reported with ``StepStore.held``, every item leaving (an
        item cap's eviction) with ``StepStore.left``."""

    def evict_windows(self, keys: Array) -> None:
        """Remove the held items of ``keys`` (their first step was evicted), reporting
        them with ``StepStore.left``."""


@dataclass(frozen=True)
class StepStatistics:
    """A step store's counters (since it was created)."""

    max_steps: int
    """The most steps held at once."""
    held: int
    """Steps held now (needed by an item or a pending window)."""
    appended: int
    """Steps appended by the writers, stored or not."""
    stored: int
    """Steps written into the ring (``held + evicted + freed``)."""
    evicted: int
    """Held steps evicted to make room (with the items and windows that needed them)."""
    freed: int
    """Steps released because nothing needed them any more."""
    item_evictions: int
    """Items evicted because their first step was."""
    windows_dropped: int
    """Pending windows that never became items (a step evicted, or the episode ended)."""
    writers: int
    """Writers open now."""


class StepStore:
    """The timesteps of one trajectory table and its writers' pending windows (see the
    module docstring)."""

    __slots__ = (
        "appended",
        "evicted",
        "first_key",
        "freed",
        "frees_on_insert",
        "item_evictions",
        "items",
        "length",
        "next_writer",
        "offsets",
        "ring",
        "stored",
        "stride",
        "windows_dropped",
        "writers",
    )

    def __init__(
        self,
        max_steps: int,
        dtypes: Sequence[np.dtype[Any]],
        shapes: Sequence[FixedShape],
        *,
        length: int,
        stride: int,
        items: WindowItems,
        frees_on_insert: bool = False,
    ) -> None:
        self.ring = StepRing(max_steps, dtypes, shapes)
        self.length = length
        self.stride = stride
        self.offsets = np.arange(length, dtype=np.int64)
        self.items = items
        # (inserting windows may evict items, and free steps: an item cap is set)
        self.frees_on_insert = frees_on_insert
        self.first_key = np.full(max_steps, -1, dtype=np.int64)
        self.writers: dict[int, Episode] = {}
        self.next_writer = 0
        self.appended = self.stored = self.evicted = self.freed = 0
        self.item_evictions = self.windows_dropped = 0

    # -- writers --------------------------------------------------------------------------

    def open_writer(self) -> int:
        """A new writer, at the start of an episode: its id."""
        wid = self.next_writer
        self.next_writer = wid + 1
        self.writers[wid] = Episode(wid, self.length, self.stride)
        return wid

    def close_writer(self, wid: int) -> None:
        """End writer ``wid``'s episode and forget it."""
        self.end_episode(wid)
        del self.writers[wid]

    def end_episode(self, wid: int) -> None:
        """End writer ``wid``'s episode: its pending windows are dropped, the steps only
        they needed freed; its next step starts a new episode."""
        unpinned, dropped = self.writers[wid].end()
        self.windows_dropped += dropped
        self._unpin(unpinned)

    def windows_completed(self, wid: int, k: int) -> int:
        """How many windows an append of ``k`` steps by writer ``wid`` completes (the
        items it inserts, unless it evicts its writer's own pending steps)."""
        return len(self.writers[wid].completed(k))

    # -- appending ------------------------------------------------------------------------

    def append(self, wid: int, comps: Sequence[Array], k: int, priorities: Array | None) -> None:
        """Append ``k`` consecutive steps of writer ``wid``'s episode (one array of ``k``
        rows per field, checked), with one priority per step (the priority of the window
        that step completes) or None (the items' default)."""
        ep = self.writers[wid]
        ring = self.ring
        self.appended += k
        need = int(np.count_nonzero(ep.stored(k)))
        if ring.nfree < need and not self.frees_on_insert:
            self._make_room(need, guard=wid)
        if ring.nfree >= need:
            self._put(ep, comps, k, priorities)
            return
        done = 0
        while done < k:  # chunks that fit the free slots, one eviction between them
            fits = np.cumsum(ep.stored(k - done))
            j = int(np.searchsorted(fits, ring.nfree, side="right"))
            if j == 0:
                self._make_room(1, guard=-1)
                continue
            part = tuple(c[done : done + j] for c in comps)
            prios = None if priorities is None else priorities[done : done + j]
            self._put(ep, part, j, prios)
            done += j

    def _put(self, ep: Episode, comps: Sequence[Array], k: int, priorities: Array | None) -> None:
        """Append ``k`` steps whose stored ones fit the free slots."""
        ring = self.ring
        mask = ep.stored(k)
        n = int(np.count_nonzero(mask))
        starts = ep.completed(k)
        if n:
            kept = comps if n == k else tuple(c[mask] for c in comps)
            slots = ring.store(kept, ep.wid, ep.last_slot() if mask[0] else -1)
            self.stored += n
        else:
            slots = np.empty(0, dtype=np.int64)
        span = ep.span(k, mask, slots)
        if len(starts):
            rows = span[(starts - ep.start)[:, np.newaxis] + self.offsets]
            prios = None if priorities is None else priorities[starts + (self.length - 1 - ep.pos)]
            self.items.insert_windows(rows, prios)
        self._unpin(ep.advance(k, span, starts))

    def _unpin(self, slots: Array) -> None:
        if len(slots):
            self.ring.owner[slots] = -1
            self.freed += len(self.ring.drop(slots))

    # -- eviction -------------------------------------------------------------------------

    def _make_room(self, need: int, guard: int) -> None:
        """Evict the oldest held steps, one after another, until ``need`` slots are
        free, or until the oldest is pinned by writer ``guard`` (-1: none), or nothing
        is held; then remove the items evicted with them, in one call."""
        ring = self.ring
        keys: list[Array] = []
        while ring.nfree < need:
            cands = ring.oldest(need - ring.nfree)
            if not len(cands) or (guard >= 0 and ring.owner[cands[0]] == guard):
                break
            if not self._evict_many(cands, keys):
                self._evict_one(int(cands[0]), keys)
        if keys:
            self.items.evict_windows(np.concatenate(keys))

    def _evict_many(self, cands: Array, keys: list[Array]) -> bool:
        """Evict the steps ``cands`` (the oldest held, oldest first) at once if that is
        exactly what evicting them one by one would do: none is pinned, and together
        they free no other step (so none of them frees room early). False otherwise,
        with nothing changed."""
        ring = self.ring
        if np.count_nonzero(ring.owner[cands] >= 0):
            return False
        fk = self.first_key[cands]
        has = fk >= 0
        firsts = cands[has]
        # every candidate lies in an item starting at one of them (an item containing
        # it starts at an older held step), so each one's references all go
        slots, counts = np.unique(ring.rows(firsts, self.length), return_counts=True)
        if not np.array_equal(slots[ring.ref[slots] == counts], np.sort(cands)):
            return False
        self.first_key[firsts] = -1
        ring.ref[slots] -= counts
        ring.release(cands)
        keys.append(fk[has])
        # one by one, a candidate starting no item is freed by an older one's eviction
        # before its turn comes: only those starting an item are evicted themselves
        self.evicted += len(firsts)
        self.freed += len(cands) - len(firsts)
        self.item_evictions += len(firsts)
        return True

    def _evict_one(self, x: int, keys: list[Array]) -> None:
        """Evict the oldest held step, slot ``x``, with the item starting there and its
        writer's earliest pending window; free what only they needed."""
        ring = self.ring
        touched = [np.array([x], dtype=np.int64)]
        key = int(self.first_key[x])
        if key >= 0:
            row = ring.rows(touched[0], self.length)[0]
            self.first_key[x] = -1
            ring.ref[row] -= 1
            touched.append(row)
            keys.append(np.array([key], dtype=np.int64))
            self.item_evictions += 1
        wid = int(ring.owner[x])
        if wid >= 0:
            unpinned = self.writers[wid].drop_first()
            ring.owner[unpinned] = -1
            ring.ref[unpinned] -= 1
            touched.append(unpinned)
            self.windows_dropped += 1
        cand = np.unique(np.concatenate(touched))
        gone = cand[ring.ref[cand] == 0]
        ring.release(gone)
        self.evicted += 1
        self.freed += len(gone) - 1

    # -- what the items report ------------------------------------------------------------

    def held(self, keys: Array, rows: Array) -> None:
        """Items of ``keys`` (rows of slots) are now held: their steps are needed."""
        if len(rows) == 1:
            self.ring.ref[rows[0]] += 1
        else:
            np.add.at(self.ring.ref, rows.ravel(), 1)
        self.first_key[rows[:, 0]] = keys

    def left(self, keys: Array, rows: Array) -> None:
        """Items of ``keys`` (rows of slots) left: their steps are freed if nothing else
        needs them. Items evicted with their first step were accounted already."""
        mine = self.first_key[rows[:, 0]] == keys
        if not mine.all():
            rows = rows[mine]
        if not len(rows):
            return
        self.first_key[rows[:, 0]] = -1
        slots, counts = np.unique(rows, return_counts=True)
        self.freed += len(self.ring.drop(slots, counts))

    # -- reading --------------------------------------------------------------------------

    def gather(self, rows: Array) -> tuple[Array, ...]:
        """The steps of the windows of ``rows``: per field ``(n, length, *shape)``."""
        return self.ring.gather(rows)

    def statistics(self) -> StepStatistics:
        """The counters now."""
        return StepStatistics(
            max_steps=self.ring.max_steps,
            held=self.ring.held,
            appended=self.appended,
            stored=self.stored,
            evicted=self.evicted,
            freed=self.freed,
            item_evictions=self.item_evictions,
            windows_dropped=self.windows_dropped,
            writers=len(self.writers),
        )

    def check_invariants(self, keys: Array, rows: Array) -> None:
        """Assert the invariants, given the keys and rows of every held item."""
        ring = self.ring
        ring.check_invariants()
        m, length = ring.max_steps, self.length
        pinned = np.zeros(m, dtype=bool)
        for ep in self.writers.values():
            pend = ep.pend
            assert ep.start % self.stride == 0, "a window starts off the stride"
            assert len(pend) == max(0, ep.pos - ep.start), "pins do not match start..pos"
            assert len(pend) < length, "a complete window is still pending"
            assert (ring.owner[pend] == ep.wid).all(), "a pinned step names another owner"
            assert (np.diff(ring.sid[pend]) > 0).all(), "pinned steps out of order"
            assert (ring.succ[pend[:-1]] == pend[1:]).all(), "pinned steps not linked"
            assert not pinned[pend].any(), "a step is pinned twice"
            pinned[pend] = True
        assert np.array_equal(ring.owner >= 0, pinned), "an owner without a pin"
        expect = pinned.astype(np.int64)
        np.add.at(expect, rows.ravel(), 1)
        assert np.array_equal(ring.ref, expect), "ref != items containing it + pin"
        assert rows.shape == (len(keys), length), "rows of the wrong shape"
        if len(rows):
            assert (ring.sid[rows] >= 0).all(), "an item holds a free step"
            assert (np.diff(ring.sid[rows], axis=1) > 0).all(), "an item's steps out of order"
            assert np.array_equal(ring.rows(rows[:, 0], length), rows), "an item not linked"
        firsts = np.full(m, -1, dtype=np.int64)
        firsts[rows[:, 0]] = keys
        assert len(np.unique(rows[:, 0])) == len(rows), "two items start at one step"
        assert np.array_equal(self.first_key, firsts), "first_key != the items' first steps"
        assert self.stored == ring.held + self.evicted + self.freed, "steps unaccounted"

    def nbytes(self) -> int:
        """Bytes held by the steps and their bookkeeping (not the items)."""
        return self.ring.nbytes() + self.first_key.nbytes
