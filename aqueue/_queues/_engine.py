"""Engine: the synchronous steps of one queue (admission, claims, wake-up decisions).

Every queue owns one engine. Nothing here awaits or blocks: a queue operation first
tries ``*_now`` (a fast path that needs no request object), and when that cannot
complete, a driver (``_drivers.py``) runs a request through ``try_put``/``try_get``,
parking it and retrying when notified. Both paths change state only here, under
``lock``.

Invariants (all state is guarded by ``lock``, a ``threading.Lock``, so threads and the
event loop can both change it; nothing awaits while holding it):

- ``storage.size`` elements are stored; enqueuers may admit while
  ``storage.size < capacity``. An all-or-nothing batch (``enqueue_many_nowait``, a
  timed thread ``enqueue_many``) goes in whole when it fits, or when the waiting head
  dequeue will then take enough to bring the size back within capacity
  (``_getter_makes_room``), so the two never wait for each other. Elements claimed by
  a waiting batch dequeue have left the storage (they are not counted by ``size``)
  and are put back if that dequeue fails, is cancelled or times out. Both may push
  ``size`` above ``capacity`` for a while; enqueuers then stay blocked until it falls
  below.
- A dequeue may take an element only while ``storage.size - floor >= taken``, where
  ``floor`` is ``min_after_dequeue`` while the queue is open and 0 once it is closed.
- ``putters`` and ``getters`` are the pending requests, oldest first. Only the head of
  each list makes progress (head of line): a new dequeue queues behind the getters, and
  one pending enqueue_many's elements are contiguous. A new enqueue may pass the
  putters only if the queue has room for it and for all they still need and none of
  them has started (``_may_pass_putters``), so the queued ones never wait longer.
- Waiting never hands data to a waiter. Every change to the storage or to the lists
  *notifies* the head of each list if (and only if) it can now progress; the woken task
  or thread re-checks and takes or admits itself, synchronously, and returns without
  awaiting again. A request that leaves for any reason (success, error, cancellation,
  timeout) first puts back what it had claimed, then notifies the new heads, so a
  wake-up is never lost and an element is never lost or duplicated.
- A SOME dequeue (``dequeue_burst``) progresses as soon as one element can be taken
  and returns 1..n: what it could take. A batch dequeue with
  ``n <= capacity - min_after_dequeue`` waits until it can take all ``n`` in one copy;
  a larger one claims progressively (it could never be satisfied at once) and returns
  when it holds ``n``. On a ``FillableStorage`` (a FIFO ring with
  no floor) a waiting batch dequeue instead *fills* its own output batch: whenever it
  reaches the head it claims what the ring holds (the ring is then empty) and enqueues
  copy straight into it (``_admit_rows``), one copy per element instead of two.
- The queue is *final* when it is closed and no enqueue is pending: nothing can arrive
  any more, so a dequeue that cannot be satisfied raises OutOfRangeError (without
  consuming anything) and dequeue_up_to returns what is left.
- While a thread runs a step, ``deferred`` is a list: wake-ups are collected there and
  sent by the thread once it has released the lock (``fire_all``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from .._errors import OutOfRangeError, QueueClosedError
from ._declare import Components
from ._protocol import QueueStatistics
from ._requests import MANY, ONE, SOME, UP_TO, WAIT, GetRequest, PutRequest, Request, fire_all
from ._storage import FillableStorage, Storage

__all__ = ["Engine"]

_monotonic = time.monotonic
X = TypeVar("X")


def _rows_of(cols: Components) -> list[Components]:
    """Per-element tuples (private copies) of batch columns."""
    copies = [c.copy() for c in cols]
    return [tuple(c[j] for c in copies) for j in range(len(copies[0]))]


class Engine:
    """The state of one queue and the synchronous steps that change it."""

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
    )

    def __init__(
        self,
        capacity: int,
        storage: Storage,
        *,
        name: str,
        fill: FillableStorage | None = None,
        min_after_dequeue: int = 0,
    ) -> None:
        self.capacity = capacity
        self.storage = storage
        self.fill = fill if min_after_dequeue == 0 else None
        self.name = name
        self.min_after = min_after_dequeue
        # Batch dequeues larger than this claim progressively (see the module docstring).
        self.one_copy_limit = capacity - min_after_dequeue
        self.lock = threading.Lock()
        self.closed = False
        self.putters: deque[PutRequest] = deque()
        self.getters: deque[GetRequest] = deque()
        self.enqueued_total = 0
        self.dequeued_total = 0
        self.peak = 0
        self._time_full = 0.0
        self._time_empty = 0.0
        self._full_since = 0.0
        self._empty_since = 0.0
        self.deferred: list[Request] | None = None

    def get_request(self, mode: int, n: int) -> GetRequest:
        """A dequeue request for ``n`` elements (progressive if it could never be served
        in one take)."""
        return GetRequest(mode, n, mode in (MANY, UP_TO) and n > self.one_copy_limit)

    # -- fast paths: the whole operation under the lock, no request object ---------------

    def put_one_now(self, comps: Components, deferred: list[Request] | None = None) -> bool:
        """Admit one element if there is room now and nobody is queued ahead; False
        (nothing changed) otherwise. A thread passes ``deferred``: its wake-ups are then
        sent after the lock is released."""
        lock = self.lock
        lock.acquire()  # (acquire/release: half the cost of `with` here)
        if deferred is not None:
            self.deferred = deferred
        try:
            st = self.storage
            size = st.size
            if size < self.capacity and not self.closed and not self.putters:
                if self.getters:  # a waiting batch dequeue may take it directly
                    self._admit_one(comps)
                    self._admitted(1)
                    self._notify()
                    return True
                st.put_one(comps)
                self.enqueued_total += 1
                if size >= self.peak:
                    self.peak = size + 1
                return True
            return False
        finally:
            if deferred is not None:
                self.deferred = None
                lock.release()
                fire_all(deferred)
            else:
                lock.release()

    def put_many_now(self, comps: Components, count: int) -> bool:
        """Admit a whole batch if it fits now and nobody is queued ahead; else False."""
        lock = self.lock
        lock.acquire()
        try:
            st = self.storage
            if self.closed or self.putters or st.size + count > self.capacity:
                return False
            if self.getters:  # a waiting batch dequeue may take rows directly
                g = self.getters[0]
                if g.out is not None and g.claimed + count <= g.n:
                    # It fills that batch: the only request this can make ready.
                    self._fill(g, comps, 0, count)
                    self.enqueued_total += count
                    if g.claimed == g.n and not g.notified:
                        self._wake(g)
                    return True
                self._admit_rows(comps, 0, count)
                self._admitted(count)
                self._notify()
                return True
            st.put_rows(comps, 0, count)
            self._admitted(count)
            return True
        finally:
            lock.release()

    def take_one_now(self, deferred: list[Request] | None = None) -> Any:
        """Take one element if one can be taken now and nobody is queued ahead: its
        components, or ``WAIT`` (nothing changed). ``deferred`` as for put_one_now."""
        lock = self.lock
        lock.acquire()
        if deferred is not None:
            self.deferred = deferred
        try:
            st = self.storage
            if not self.getters and st.size > (0 if self.closed else self.min_after):
                comps = st.take_one()
                self.dequeued_total += 1
                if self.putters:
                    self._notify()
                return comps
            return WAIT
        finally:
            if deferred is not None:
                self.deferred = None
                lock.release()
                fire_all(deferred)
            else:
                lock.release()

    def take_many_now(self, n: int) -> Any:
        """Take exactly ``n`` in one copy if they are there now and nobody is queued
        ahead: the batch components, or ``WAIT`` (nothing changed)."""
        lock = self.lock
        lock.acquire()
        try:
            st = self.storage
            if not self.getters and st.size - (0 if self.closed else self.min_after) >= n:
                comps = st.take_batch(n)
                self.dequeued_total += n
                if self.putters:
                    self._notify()
                return comps
            return WAIT
        finally:
            lock.release()

    def take_some_now(self, n: int, deferred: list[Request] | None = None) -> Any:
        """Take 1..n (as many as can be taken, at most ``n``) if at least one can be
        taken now and nobody is queued ahead: the batch components, or ``WAIT``.
        ``deferred`` as for put_one_now."""
        lock = self.lock
        lock.acquire()
        if deferred is not None:
            self.deferred = deferred
        try:
            st = self.storage
            avail = st.size - (0 if self.closed else self.min_after)
            if not self.getters and avail > 0:
                k = n if avail >= n else avail
                comps = st.take_batch(k)
                self.dequeued_total += k
                if self.putters:
                    self._notify()
                return comps
            return WAIT
        finally:
            if deferred is not None:
                self.deferred = None
                lock.release()
                fire_all(deferred)
            else:
                lock.release()

    # -- requests (lock held) ---------------------------------------------------------

    def can_get_now(self, req: GetRequest) -> bool:
        """Whether ``req`` would complete if tried now."""
        return not self.getters and self._getter_ready(req)

    def park(self, req: Request) -> None:
        """Append ``req`` (given its waker or event already) to its list and notify."""
        if isinstance(req, GetRequest):
            getters = self.getters
            if not getters:
                self._empty_since = _monotonic()
            req.registered = True
            getters.append(req)
            fill = self.fill
            filling = fill is not None and req.mode in (MANY, UP_TO) and not req.progressive
            if filling and req.out is None:
                assert fill is not None
                req.out = fill.empty_batch(req.n)
            if len(getters) == 1:
                self._claim_for_head()
        else:
            assert isinstance(req, PutRequest)
            if not self.putters:
                self._full_since = _monotonic()
            req.registered = True
            self.putters.append(req)
        self._notify()

    def try_get(self, req: GetRequest) -> Any:
        """Try to complete dequeue request ``req``: its components, or ``WAIT``.

        Raises:
            OutOfRangeError: The queue is final and cannot supply ``req``; what it had
                claimed is back in the queue and it has left the list.
        """
        getters = self.getters
        if req.registered:
            if getters[0] is not req:
                return WAIT
        elif getters:
            return WAIT
        st = self.storage
        n = req.n
        need = n - req.claimed
        avail = self._available()
        take = -1
        if avail >= need:
            take = need
        elif avail > 0 and (req.mode == SOME or (req.nowait and req.mode == UP_TO)):
            take = avail  # (a SOME request never fills a batch: it holds no claims)
        elif self._final() and req.mode == UP_TO and req.claimed + max(avail, 0) > 0:
            take = max(avail, 0)
        if take >= 0:
            out = req.out
            total = req.claimed + take
            if out is not None:
                if take:
                    assert self.fill is not None
                    self.fill.take_into(out, req.claimed, take)
                result = out if total == n else tuple(o[:total].copy() for o in out)
                req.out = None
            elif req.mode == ONE:
                result = st.take_one()
            elif req.claimed:
                if take:
                    req.claims.append(st.take_chunk(take))
                try:
                    result = st.assemble(req.claims)
                except BaseException:  # the request fails: its claims go back first
                    self._give_back(req)
                    self._remove(req)
                    self._notify()
                    raise
                req.claims = []
            else:
                result = st.take_batch(take)
            self.dequeued_total += total
            req.claimed = 0
            self._remove(req)
            self._notify()
            return result
        if self._final():
            self._give_back(req)
            size = st.size
            self._remove(req)
            self._notify()
            raise OutOfRangeError(queue_name=self.name, requested=n, size=size)
        if req.registered and req.progressive and avail > 0:
            req.claims.append(st.take_chunk(avail))
            req.claimed += avail
            self._notify()
        return WAIT

    def try_put(self, req: PutRequest) -> bool:
        """Try to complete enqueue request ``req``; True when done, False to wait.

        Raises:
            QueueClosedError: The queue is closed (a new request), or it was closed with
                ``cancel_pending_enqueues`` (a pending one, which then leaves the list).
        """
        if req.rejected:
            self._remove(req)
            self._notify()
            raise QueueClosedError(
                f"queue '{self.name}' was closed with cancel_pending_enqueues=True: "
                f"pending enqueue cancelled after {req.pos} of {req.count} elements "
                "were admitted"
            )
        if req.registered:
            if self.putters[0] is not req:
                return False
        else:
            if self.closed:
                raise QueueClosedError(f"queue '{self.name}' is closed")
            if self.putters and not self._may_pass_putters(req):
                return False
        free = self.capacity - self.storage.size
        if req.mode == ONE:
            if free <= 0:
                return False
            self._admit_one(req.comps)
            req.pos = 1
            k = 1
        else:
            remaining = req.count - req.pos
            if req.atomic:
                if free < remaining and not self._getter_makes_room(remaining):
                    return False
                k = remaining
            elif free <= 0:
                return False
            else:
                k = min(free, remaining)
            self._admit_rows(req.comps, req.pos, req.pos + k)
            req.pos += k
        self._admitted(k)
        done = req.pos == req.count
        if done:
            self._remove(req)
        self._notify()
        return done

    def abandon(self, req: Request) -> None:
        """``req`` leaves on an exception: restore its claims, pass the wake-up on."""
        with self.lock:
            if isinstance(req, GetRequest):
                self._give_back(req)
            self._remove(req)
            self._notify()

    def close(self, cancel_pending_enqueues: bool) -> None:
        """Close for new enqueues (idempotent); reject pending ones if asked; wake."""
        with self.lock:
            self.closed = True
            if cancel_pending_enqueues:
                for p in self.putters:
                    if not p.rejected:
                        p.rejected = True
                        self._wake(p)
            self._notify()

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

    def dump_with(self, read: Callable[[], X]) -> tuple[list[Components], bool, X]:
        """``dump()``, the closed flag and ``read()`` (state the storage's takes change,
        such as a random generator's), all under one acquisition of the lock."""
        with self.lock:
            return self._dump(), self.closed, read()

    def load_rows(self, comps: Components, count: int) -> None:
        """Store the ``count`` rows of batch ``comps`` after the queue's, in order,
        whatever the capacity (``load`` for a converted batch: one copy, no Python
        object per element for fixed shapes)."""
        with self.lock:
            self.storage.put_rows(comps, 0, count)
            if self.storage.size > self.peak:
                self.peak = self.storage.size
            self._notify()

    def _dump(self) -> list[Components]:
        claimed: list[Components] = []
        if self.getters:
            g = self.getters[0]
            if g.out is not None and g.claimed:
                claimed = _rows_of(tuple(o[: g.claimed] for o in g.out))
            for chunk in g.claims:
                claimed.extend(self.storage.chunk_elements(chunk))
        return claimed + self.storage.dump()

    def load(self, elements: list[Components]) -> None:
        """Store ``elements`` after the queue's, in order, whatever the capacity."""
        with self.lock:
            self.storage.load(elements)
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

    # -- bookkeeping (lock held) ------------------------------------------------------

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
