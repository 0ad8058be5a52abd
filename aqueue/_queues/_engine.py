"""Engine: the synchronous steps of one queue (admission, claims, wake-up decisions).

Every queue owns one engine. Nothing here awaits or blocks: a queue operation first
tries ``*_now`` (a fast path that needs no request object), and when that cannot
complete, a driver (``_drivers.py``) runs a request through ``try_put``/``try_get``,
parking it and retrying when notified. Both paths change state only through the
engine, under ``lock``.

``Engine`` is assembled from mixins, one module each, which share its state:

- this module: the constructor, which sets the state, and the requests a driver
  runs (``park``, ``try_get``, ``try_put``, ``abandon``), and ``close``;
- ``_fast.py``: FastPaths, the ``*_now`` fast paths;
- ``_contents.py``: EngineContents, the elements read or loaded whole (``dump``,
  ``load``) and the counters (``quiet_*``, ``statistics``);
- ``_bookkeeping.py``: EngineCore, the steps all of them share (admission, claims,
  the lists, readiness, wake-ups) and the state's slots and declarations.

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
- A pending enqueue_many admits what fits at each step. On a queue with
  ``whole_rest`` > 0 (the queues between pipeline stages), once it parks with a rest of
  at most ``whole_rest`` rows, that rest goes in whole: it is woken when all of it
  fits, so a full queue wakes its producer once per burst instead of once per freed
  row.
- While a thread runs a step, ``deferred`` is a list: wake-ups are collected there and
  sent by the thread once it has released the lock (``fire_all``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from .._errors import OutOfRangeError, QueueClosedError
from ._contents import EngineContents
from ._fast import FastPaths
from ._requests import MANY, ONE, SOME, UP_TO, WAIT, GetRequest, PutRequest, Request
from ._storage import FillableStorage, Storage

__all__ = ["Engine"]

_monotonic = time.monotonic


class Engine(FastPaths, EngineContents):
    """The state of one queue and the synchronous steps that change it."""

    __slots__ = ()  # (the state's slots are EngineCore's)

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
        self.putters = deque()
        self.getters = deque()
        self.enqueued_total = 0
        self.dequeued_total = 0
        self.peak = 0
        self._time_full = 0.0
        self._time_empty = 0.0
        self._full_since = 0.0
        self._empty_since = 0.0
        self.deferred = None
        # A parked enqueue_many whose rest is at most this many rows waits until all of
        # the rest fits (one wake-up for it, not one per freed row). 0: rows are admitted
        # one by one as room frees, as TF does; queues between pipeline stages set it.
        self.whole_rest = 0

    def get_request(self, mode: int, n: int) -> GetRequest:
        """A dequeue request for ``n`` elements (progressive if it could never be served
        in one take)."""
        return GetRequest(mode, n, mode in (MANY, UP_TO) and n > self.one_copy_limit)

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
            if req.mode == MANY and req.count - req.pos <= self.whole_rest:
                req.atomic = True  # the rest goes in whole (see ``whole_rest``)
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
