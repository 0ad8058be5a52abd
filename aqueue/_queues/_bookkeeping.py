"""EngineCore: the engine's state and the steps every operation shares (lock held).

The fast paths (``_fast.py``), the requests (``_engine.py``) and the contents
(``_contents.py``) change a queue only through these steps:

- admission: ``_admit_one``/``_admit_rows`` put elements into the head getter's batch
  while it is filling, the rest into the storage; ``_admitted`` counts them;
- claims: ``_claim_for_head`` lets a filling getter that reaches the head take what
  the ring holds; ``_give_back`` puts a leaving getter's claims back, in order;
- the lists: ``_remove`` takes a request out of its list (a new head may then claim);
- readiness: ``_getter_ready``/``_putter_ready`` (whether a head can progress now),
  ``_getter_makes_room`` and ``_may_pass_putters`` (the two ways past a full queue or
  the queued enqueues, explained on each);
- wake-ups: ``_notify`` wakes the head of each list if it can progress, ``_wake``
  sends one wake-up.

Invariants (besides the engine's, listed in ``_engine.py``):

- Every step runs with ``lock`` held and never releases it, awaits or blocks.
- ``_notify`` looks at the heads only, and sends a head a wake-up only when it can
  progress now and has none pending (``notified``).
- While ``deferred`` is a list (a thread's step), ``_wake`` appends to it instead of
  firing: the thread sends those wake-ups once it has released the lock.
- ``peak`` is raised wherever the size can grow (admission, restored claims, loads):
  it is the largest size ever stored, sizes beyond the capacity included.
- The time-full (time-empty) clock runs while ``putters`` (``getters``) is not empty:
  ``park`` starts it when that list becomes non-empty, ``_remove`` adds the elapsed
  time when it becomes empty again.

The state's slots are declared here, once, with their types, so that every mixin
(each with empty ``__slots__``) may use them; ``Engine``'s constructor sets them.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from ._declare import Components
from ._requests import MANY, GetRequest, PutRequest, Request
from ._storage import FillableStorage, Storage

__all__ = ["EngineCore"]

_monotonic = time.monotonic


class EngineCore:
    """The state of one queue (declared here, set by ``Engine``) and the shared steps."""

    __slots__ = (
        "_empty_since",
        "_full_since",
        "_time_empty",
        "_time_full",
        "capacity",
        "closed",
        "deferred",
        "dequeued_total",
        "enqueued_total",
        "fill",
        "getters",
        "lock",
        "min_after",
        "name",
        "one_copy_limit",
        "peak",
        "putters",
        "storage",
        "whole_rest",
    )

    capacity: int
    storage: Storage
    fill: FillableStorage | None  # the storage, when waiting batches fill their output
    name: str
    min_after: int
    one_copy_limit: int
    lock: threading.Lock
    closed: bool
    putters: deque[PutRequest]
    getters: deque[GetRequest]
    enqueued_total: int
    dequeued_total: int
    peak: int
    _time_full: float
    _time_empty: float
    _full_since: float
    _empty_since: float
    deferred: list[Request] | None
    whole_rest: int

    def _claim_for_head(self) -> None:
        """A filling getter that reaches the head claims what the ring holds, so the
        ring is empty while it waits and enqueues may copy straight into its batch."""
        g = self.getters[0]
        if g.out is not None:
            k = min(self.storage.size, g.n - g.claimed)
            if k > 0:
                assert self.fill is not None
                self.fill.take_into(g.out, g.claimed, k)
                g.claimed += k

    def _admit_one(self, comps: Components) -> None:
        """Admit one element: into the head getter's batch if it is filling, else the storage."""
        if self.getters:
            g = self.getters[0]
            out = g.out
            if out is not None and g.claimed < g.n:
                for o, c in zip(out, comps):
                    o[g.claimed, ...] = c
                g.claimed += 1
                return
        self.storage.put_one(comps)

    def _admit_rows(self, comps: Components, start: int, stop: int) -> None:
        """Admit rows ``start:stop`` of a batch, the head getter's batch first (see above)."""
        if self.getters:
            g = self.getters[0]
            if g.out is not None and g.claimed < g.n:
                k = min(stop - start, g.n - g.claimed)
                self._fill(g, comps, start, start + k)
                start += k
        if start < stop:
            self.storage.put_rows(comps, start, stop)

    @staticmethod
    def _fill(g: GetRequest, comps: Components, start: int, stop: int) -> None:
        """Copy rows ``start:stop`` of a batch into filling getter ``g``'s batch."""
        out = g.out
        assert out is not None
        a = g.claimed
        k = stop - start
        whole = k == len(comps[0])  # the whole batch: no slice of it needed
        for o, c in zip(out, comps):
            o[a : a + k] = c if whole else c[start:stop]
        g.claimed = a + k

    def _remove(self, req: Request) -> None:
        if not req.registered:
            return
        req.registered = False
        if isinstance(req, GetRequest):
            getters = self.getters
            was_head = getters[0] is req
            getters.remove(req)
            if not getters:
                self._time_empty += _monotonic() - self._empty_since
            elif was_head:
                self._claim_for_head()
        else:
            assert isinstance(req, PutRequest)
            self.putters.remove(req)
            if not self.putters:
                self._time_full += _monotonic() - self._full_since

    def _give_back(self, req: GetRequest) -> None:
        out = req.out
        if out is not None:
            if req.claimed:
                self.storage.restore([tuple(o[: req.claimed] for o in out)])
                req.claimed = 0
        elif req.claims:
            self.storage.restore(req.claims)
            req.claims = []
            req.claimed = 0
        else:
            return
        if self.storage.size > self.peak:  # restores may exceed the capacity
            self.peak = self.storage.size

    def _final(self) -> bool:
        return self.closed and not self.putters

    def _available(self) -> int:
        return self.storage.size - (0 if self.closed else self.min_after)

    def _getter_ready(self, g: GetRequest) -> bool:
        # _final() and _available() inlined: this runs on every notify.
        if self.closed:
            if not self.putters:
                return True
            avail = self.storage.size
        else:
            avail = self.storage.size - self.min_after
        return avail >= g.n - g.claimed or (g.eager and avail > 0)

    def _putter_ready(self, p: PutRequest) -> bool:
        if p.rejected:
            return True
        free = self.capacity - self.storage.size
        if p.mode == MANY and p.atomic:
            return free >= p.count - p.pos or self._getter_makes_room(p.count - p.pos)
        return free >= 1

    def _getter_makes_room(self, k: int) -> bool:
        """Whether an all-or-nothing batch of ``k`` may go in although it does not fit.

        It may when the waiting head dequeue will then take enough to bring the size
        back within capacity. Otherwise a timed thread enqueue_many (all-or-nothing) and
        a batch dequeue that waits for its ``n`` would each wait for the other until the
        timeout. If that dequeue leaves before taking (cancelled, timed out), the size
        stays above capacity for a while, as after restored claims.
        """
        if not self.getters:
            return False
        g = self.getters[0]
        need = g.n - g.claimed
        # (rows a filling getter takes never reach the storage, so this holds for it too)
        return self.storage.size + k - need <= self.capacity and self._available() + k >= need

    def _may_pass_putters(self, req: PutRequest) -> bool:
        """Whether new request ``req`` may be admitted ahead of the queued enqueues.

        Only when the queue has room for ``req`` *and* for everything the queued
        enqueues still need, and none of them has started (so a pending enqueue_many's
        elements stay contiguous). The queued requests keep their room, so none of them
        waits longer because of ``req``; without this, producer threads that find the
        queue full form a convoy in which every element waits for a thread wake-up and
        a GIL hand-off.
        """
        reserved = 0
        for p in self.putters:
            if p.pos:
                return False
            reserved += p.count
        free = self.capacity - self.storage.size - reserved
        return free >= req.count - req.pos

    def _notify(self) -> None:
        """Wake the head of each list if it can progress now."""
        if self.getters:
            g = self.getters[0]
            if not g.notified and self._getter_ready(g):
                self._wake(g)
        if self.putters:
            p = self.putters[0]
            if not p.notified and self._putter_ready(p):
                self._wake(p)

    def _wake(self, req: Request) -> None:
        req.notified = True
        deferred = self.deferred
        if deferred is None:
            req.fire()
        else:  # a thread's step: sent by fire_all once the lock is released
            deferred.append(req)

    def _admitted(self, k: int) -> None:
        self.enqueued_total += k
        if self.storage.size > self.peak:
            self.peak = self.storage.size
