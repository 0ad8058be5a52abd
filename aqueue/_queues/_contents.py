"""EngineContents: what a queue holds, read or loaded whole, and its counters.

Snapshots (``QueueSnapshot``), a pipeline's checkpoints and the stall reports of
``aqueue.testing`` read a queue through these steps; restoring loads it through them.
Every step takes the lock once, so what it reads is one consistent state, even while
tasks and threads enqueue and dequeue.

Invariants:

- Reading changes nothing (``dump``, ``dump_with``, ``quiet_*``, ``statistics``).
- ``dump`` lists the elements in the order takes would see them. Elements a waiting
  batch dequeue has claimed have left the storage but are still the queue's: they
  come first, where they would go back if that dequeue failed (rows of a filling
  batch, then claimed chunks). With ``pending``, the elements waiting enqueues have
  still to admit follow, in the order they will be admitted (none of a rejected
  enqueue). Elements are per-element tuples of components; rows copied out of a batch
  are private copies.
- ``load``/``load_rows`` append after what the queue holds, in order, whatever the
  capacity (a snapshot taken while claims were out may hold more than the capacity),
  raise ``peak`` if need be and notify: a waiting dequeue may now progress.
- ``quiet_*`` count the waiting requests with no wake-up pending: those cannot
  progress until the queue changes (every change wakes a head that can).
- ``statistics`` includes the time the current wait has lasted so far in
  ``time_full_s``/``time_empty_s``.

Who reads what:

- ``dump_with``: ``QueueBase.snapshot`` (the elements, the closed flag and a
  RandomShuffleQueue's generator state, read together);
- ``dump(pending=True)``: ``StageQueue.items``, a pipeline checkpoint's capture of a
  stage queue (a worker parked on a full queue is at rest: what it still has to admit
  is captured with the queue's items);
- ``load``/``load_rows``: ``QueueBase.from_snapshot`` (``load_rows`` for small
  fixed-shape elements checked as one batch: one copy, no Python object per element)
  and ``StageQueue.load_items``;
- ``quiet_getters``/``quiet_putters``: ``StageQueue.quiet_takers``/``quiet_putters``,
  a checkpoint's test of rest;
- ``statistics``: ``QueueBase.statistics``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from ._bookkeeping import EngineCore
from ._declare import Components
from ._protocol import QueueStatistics
from ._requests import ONE

__all__ = ["EngineContents"]

_monotonic = time.monotonic
X = TypeVar("X")


def _rows_of(cols: Components) -> list[Components]:
    """Per-element tuples (private copies) of batch columns."""
    copies = [c.copy() for c in cols]
    return [tuple(c[j] for c in copies) for j in range(len(copies[0]))]


class EngineContents(EngineCore):
    """Dump, load and counters, each under one acquisition of the lock (mixed into
    ``Engine``)."""

    __slots__ = ()

    def dump(self, pending: bool = False) -> list[Components]:
        """Every element the queue holds, in the order takes would see them, claims
        of a waiting batch dequeue first (they would go back there on close); with
        ``pending``, then the elements waiting enqueues have still to admit, in the
        order they will be admitted. Nothing changes (consistent: taken under the
        lock)."""
        with self.lock:
            held = self._dump()
            if pending:
                for p in self.putters:
                    if p.rejected:
                        continue
                    if p.mode == ONE:  # an element: as a batch of one, so in dump's form
                        if p.pos == 0:
                            held.extend(_rows_of(tuple(c.reshape(1, *c.shape) for c in p.comps)))
                    else:
                        held.extend(_rows_of(tuple(c[p.pos : p.count] for c in p.comps)))
            return held

    def _dump(self) -> list[Components]:
        claimed: list[Components] = []
        if self.getters:
            g = self.getters[0]
            if g.out is not None and g.claimed:
                claimed = _rows_of(tuple(o[: g.claimed] for o in g.out))
            for chunk in g.claims:
                claimed.extend(self.storage.chunk_elements(chunk))
        return claimed + self.storage.dump()

    def dump_with(self, read: Callable[[], X]) -> tuple[list[Components], bool, X]:
        """``dump()``, the closed flag and ``read()`` (state the storage's takes change,
        such as a random generator's), all under one acquisition of the lock."""
        with self.lock:
            return self._dump(), self.closed, read()

    def load(self, elements: list[Components]) -> None:
        """Store ``elements`` after the queue's, in order, whatever the capacity."""
        with self.lock:
            self.storage.load(elements)
            if self.storage.size > self.peak:
                self.peak = self.storage.size
            self._notify()

    def load_rows(self, comps: Components, count: int) -> None:
        """Store the ``count`` rows of batch ``comps`` after the queue's, in order,
        whatever the capacity (``load`` for a converted batch: one copy, no Python
        object per element for fixed shapes)."""
        with self.lock:
            self.storage.put_rows(comps, 0, count)
            if self.storage.size > self.peak:
                self.peak = self.storage.size
            self._notify()

    def quiet_getters(self) -> int:
        """Waiting dequeues that were not woken (they cannot progress until the queue
        changes: every change wakes a head that can)."""
        with self.lock:
            return sum(1 for g in self.getters if not g.notified)

    def quiet_putters(self) -> int:
        """Waiting enqueues that were not woken (they cannot progress until the queue
        changes)."""
        with self.lock:
            return sum(1 for p in self.putters if not p.notified)

    def statistics(self) -> QueueStatistics:
        """A consistent snapshot of the counters."""
        with self.lock:
            now = _monotonic()
            full = self._time_full + (now - self._full_since if self.putters else 0.0)
            empty = self._time_empty + (now - self._empty_since if self.getters else 0.0)
            return QueueStatistics(
                size=self.storage.size,
                capacity=self.capacity,
                closed=self.closed,
                enqueued_total=self.enqueued_total,
                dequeued_total=self.dequeued_total,
                peak_size=self.peak,
                tasks_waiting_enqueue=len(self.putters),
                tasks_waiting_dequeue=len(self.getters),
                time_full_s=full,
                time_empty_s=empty,
            )
