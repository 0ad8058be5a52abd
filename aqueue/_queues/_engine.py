"""Engine: one queue's state and the synchronous steps that change it.

Every queue holds one engine, which holds the parts (each in its own file):

- ``storage`` (``_storage.py``, ``_pool.py``, ``_tuples.py``): the stored elements;
- ``rules`` (``_rules.py``): capacity, floor and closed flag, the take rule and the
  put rule, and who can progress;
- ``claims`` (``_claims.py``): the elements waiting dequeues hold, and where enqueued
  elements go (a filling head getter's batch first);
- ``putters`` and ``getters`` (``_waiters.py``): the parked requests, oldest first.

Nothing here awaits or blocks. An operation is one step (``put``/``get``) that
completes it or parks a request armed with the caller's waker; a parked request takes
further steps (``retry``) when woken, and ``leave`` when it gives up. The ``_nowait``
twins are the first step without a waker. Wait loops are in ``_waiting.py``.

Invariants (``check_invariants`` tests them; all state is guarded by ``lock``, a
``threading.Lock``, so threads and the event loop can both take steps, and nothing
awaits or blocks while holding it):

1. Conservation: ``enqueued_total + loaded_total == dequeued_total + storage.size +``
   the elements the head getter holds. Elements claimed by a waiting dequeue have left
   the storage (``size`` does not count them) and go back if it fails or leaves.
2. Head of line: only the head of each list progresses; only the head getter holds
   claims; only the head putter may have admitted part of its batch. A new dequeue
   never passes the getters; a new enqueue passes the putters only under
   ``Rules.may_pass``.
3. No lost wake-up: after every step, a head that can progress has been notified.
   Notifying never hands data over (the woken side takes or admits in its own step)
   and a request leaving for any reason first puts back what it held, then notifies
   the new heads, so an element is never lost or duplicated.
4. A filling head getter that is not complete has emptied the ring: enqueues copy
   straight into its batch.
5. ``peak >= size``: raised wherever the size can grow (admission, restored claims,
   loads); sizes above the capacity included (restored claims, an all-or-nothing batch
   the head getter makes room for, snapshots loaded whole).
6. Final (closed, no putters): a dequeue that cannot be satisfied raises
   OutOfRangeError without consuming anything; ``dequeue_up_to`` returns what is left.

While a thread takes a step, ``deferred`` is a list: wake-ups are collected there and
sent by that thread once it has released the lock (``fire_all``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .._errors import OutOfRangeError, QueueClosedError, QueueEmpty, QueueFull
from ._claims import Claims, fill_rows, pending_elements
from ._declare import Components
from ._protocol import QueueStatistics
from ._requests import MANY, ONE, UP_TO, WAIT, GetRequest, PutRequest, Request, fire_all
from ._rules import Rules
from ._storage import FillableStorage, Storage
from ._waiters import Waiters

__all__ = ["Engine"]

_monotonic = time.monotonic
X = TypeVar("X")
Arm = Callable[[], Any]


class Engine:
    """The state of one queue and the synchronous steps that change it."""

    __slots__ = (
        "claims",
        "deferred",
        "dequeued_total",
        "enqueued_total",
        "getters",
        "loaded_total",
        "lock",
        "name",
        "peak",
        "putters",
        "rules",
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
        self.name = name
        self.lock = threading.Lock()
        self.storage = storage
        self.rules = Rules(capacity, min_after_dequeue)
        self.claims = Claims(storage, fill if min_after_dequeue == 0 else None)
        self.putters: Waiters[PutRequest] = Waiters()
        self.getters: Waiters[GetRequest] = Waiters()
        self.enqueued_total = 0
        self.dequeued_total = 0
        self.loaded_total = 0  # loaded whole from snapshots, not enqueued
        self.peak = 0
        self.deferred: list[Request] | None = None

    @property
    def closed(self) -> bool:
        return self.rules.closed

    # -- enqueue -------------------------------------------------------------------------

    def put(
        self,
        mode: int,
        comps: Components,
        count: int,
        arm: Arm | None = None,
        atomic: bool = False,
        deferred: list[Request] | None = None,
    ) -> PutRequest | None:
        """An enqueue's first step: None when it is done, else the PutRequest it parked
        with a waker from ``arm`` (having admitted what fit, unless ``atomic``).

        Raises:
            QueueClosedError: The queue is closed.
            QueueFull: ``arm`` is None (a ``_nowait`` twin: all or nothing) and the
                elements do not all fit now; nothing changed.
        """
        lock = self.lock
        lock.acquire()
        if deferred is not None:
            self.deferred = deferred
        try:
            rules = self.rules
            st = self.storage
            size = st.size
            if not self.putters and size + count <= rules.capacity and not rules.closed:
                # All of it fits (Rules.put_count's first clause, inlined: this runs
                # for every element).
                if mode == ONE and not self.getters:  # nobody to serve or wake
                    st.put_one(comps)
                    self.enqueued_total += 1
                    if size >= self.peak:
                        self.peak = size + 1
                else:
                    self._admit(mode, comps, 0, count)
                return None
            return self._put_rest(mode, comps, count, arm, atomic or arm is None)
        finally:
            if deferred is not None:
                self.deferred = None
                lock.release()
                fire_all(deferred)
            else:
                lock.release()

    def _put_rest(
        self, mode: int, comps: Components, count: int, arm: Arm | None, atomic: bool
    ) -> PutRequest | None:
        """``put`` where the elements do not simply fit (lock held)."""
        rules = self.rules
        if rules.closed:
            raise QueueClosedError(f"queue '{self.name}' is closed")
        putters = self.putters
        size = self.storage.size
        k = 0
        if not putters or rules.may_pass(count, putters, size):
            getters = self.getters
            k = rules.put_count(count, size, atomic, getters[0] if getters else None)
            if k == count:
                self._admit(mode, comps, 0, count)
                return None
        if arm is None:
            reason = (
                "earlier enqueues are waiting"
                if putters
                else f"needs room for {count}, has {max(0, rules.capacity - size)}"
            )
            raise QueueFull(f"queue '{self.name}': {reason}")
        req = PutRequest(mode, comps, count, atomic)
        if k:
            self._admit(mode, comps, 0, k)
            req.pos = k
        if mode == MANY and count - req.pos <= rules.whole_rest:
            req.atomic = True  # the rest goes in whole (see Rules.whole_rest)
        req.waker = waker = arm()
        if mode == MANY and isinstance(waker, threading.Event):
            req.least = rules.whole_rest  # (a thread: see Rules.whole_rest)
        putters.park(req)
        self._notify()
        return req

    def _admit(self, mode: int, comps: Components, start: int, stop: int) -> None:
        """Admit rows ``start:stop`` (an element for ONE), count them, notify."""
        getters = self.getters
        head = getters[0] if getters else None
        if head is None or head.out is None:  # no batch to fill: into the storage
            if mode == ONE:
                self.storage.put_one(comps)
            else:
                self.storage.put_rows(comps, start, stop)
        elif mode == ONE:
            self.claims.admit_one(head, comps)
        elif head.claimed + stop - start <= head.n:
            # All of it fills the head's batch: the only request this can make ready.
            fill_rows(head, comps, start, stop)
            self.enqueued_total += stop - start
            if head.claimed == head.n and not head.notified:
                self._wake(head)
            return
        else:
            self.claims.admit_rows(head, comps, start, stop)
        self.enqueued_total += stop - start if mode != ONE else 1
        size = self.storage.size
        if size > self.peak:
            self.peak = size
        if head is not None:
            self._notify()

    # -- dequeue -------------------------------------------------------------------------

    def get(
        self,
        mode: int,
        n: int,
        arm: Arm | None = None,
        park: bool = False,
        deferred: list[Request] | None = None,
    ) -> Any:
        """A dequeue's first step: its components (None for a batch of 0), else the
        GetRequest it parked with a waker from ``arm``. With ``park`` (a batch dequeue
        of ``n >= 1`` that has not checkpointed yet: ``parks_first``) it takes nothing
        and parks in any case.

        Raises:
            OutOfRangeError: The queue is final and cannot supply it; nothing consumed.
            QueueEmpty: ``arm`` is None (a ``_nowait`` twin) and it cannot complete now.
        """
        lock = self.lock
        lock.acquire()
        if deferred is not None:
            self.deferred = deferred
        try:
            st = self.storage
            if not self.getters and not park:
                rules = self.rules
                if st.size - (0 if rules.closed else rules.floor) >= n > 0:
                    # All of it is there (Rules.take_count's first clause, inlined: this
                    # runs for every element).
                    result = st.take_one() if mode == ONE else st.take_batch(n)
                    self.dequeued_total += n
                    if self.putters:
                        self._notify()
                    return result
            return self._get_rest(mode, n, arm, park)
        finally:
            if deferred is not None:
                self.deferred = None
                lock.release()
                fire_all(deferred)
            else:
                lock.release()

    def _get_rest(self, mode: int, n: int, arm: Arm | None, park: bool) -> Any:
        """``get`` where the elements are not simply there (lock held)."""
        if n == 0:
            return None
        getters = self.getters
        rules = self.rules
        st = self.storage
        size = st.size
        if not getters and not park:
            final = rules.closed and not self.putters
            take = rules.take_count(mode, n, 0, rules.available(size), final, arm is None)
            if take > 0:
                result = st.take_batch(take)  # (only batch modes take fewer than n)
                self.dequeued_total += take
                if self.putters:
                    self._notify()
                return result
            if final:
                raise OutOfRangeError(queue_name=self.name, requested=n, size=size)
        if arm is None:
            if getters:
                message = f"queue '{self.name}': earlier dequeues are waiting"
            else:
                message = (
                    f"queue '{self.name}' cannot supply {n} element(s) now "
                    f"(size {size}, floor {0 if rules.closed else rules.floor})"
                )
            raise QueueEmpty(message)
        req = GetRequest(mode, n, mode in (MANY, UP_TO) and n > rules.one_copy_limit)
        req.waker = arm()
        getters.park(req)
        self.claims.start(req)
        if len(getters) == 1:
            self.claims.claim_for_head(req)
        self._notify()
        return req

    def parks_first(self, n: int) -> bool:
        """Whether a batch dequeue of ``n`` will have to wait, guessed without the lock:
        it then parks before its checkpoint (see QueueBase). Either guess is safe: its
        step under the lock decides, and takes nothing before the checkpoint. A batch of
        0 never waits, so it never parks first: it checkpoints like every call."""
        rules = self.rules
        return (
            n > 0
            and not rules.closed
            and (bool(self.getters) or self.storage.size - rules.floor < n)
        )

    # -- parked requests -----------------------------------------------------------------

    def retry(self, req: Request, arm: Arm, deferred: list[Request] | None = None) -> Any:
        """One more step of parked request ``req`` (after a wake-up): a dequeue's
        components or an enqueue's None, or ``WAIT`` after re-arming it from ``arm``.

        Raises:
            OutOfRangeError: (a dequeue) The queue is final and cannot supply it; what
                it held is back in the queue and it has left.
            QueueClosedError: (an enqueue) The queue was closed with
                ``cancel_pending_enqueues``; it keeps what it admitted and has left.
        """
        lock = self.lock
        lock.acquire()
        if deferred is not None:
            self.deferred = deferred
        try:
            if type(req) is GetRequest:
                result = self._retry_get(req)
            else:
                assert isinstance(req, PutRequest)
                result = None if self._retry_put(req) else WAIT
            if result is WAIT:
                req.notified = False
                req.waker = arm()
            return result
        finally:
            if deferred is not None:
                self.deferred = None
                lock.release()
                fire_all(deferred)
            else:
                lock.release()

    def _retry_get(self, g: GetRequest) -> Any:
        getters = self.getters
        if getters[0] is not g:
            return WAIT
        rules = self.rules
        size = self.storage.size
        final = rules.closed and not self.putters
        avail = rules.available(size)
        take = rules.take_count(g.mode, g.n - g.claimed, g.claimed, avail, final, False)
        if take >= 0:
            total = g.claimed + take
            try:
                result = self.claims.finish(g, take)
            except BaseException:
                self._leave_get(g)
                raise
            self.dequeued_total += total
            self._leave_get(g)
            return result
        if final:
            self._give_back(g)
            size = self.storage.size
            self._leave_get(g)
            raise OutOfRangeError(queue_name=self.name, requested=g.n, size=size)
        if g.progressive and avail > 0:
            self.claims.claim_chunk(g, avail)
            self._notify()
        return WAIT

    def _retry_put(self, p: PutRequest) -> bool:
        if p.rejected:
            self._leave_put(p)
            raise QueueClosedError(
                f"queue '{self.name}' was closed with cancel_pending_enqueues=True: "
                f"pending enqueue cancelled after {p.pos} of {p.count} elements "
                "were admitted"
            )
        if self.putters[0] is not p:
            return False
        getters = self.getters
        put_count = self.rules.put_count
        while True:
            rest = p.count - p.pos
            k = put_count(
                rest, self.storage.size, p.atomic, getters[0] if getters else None, p.least
            )
            if k == 0:
                return False
            self._admit(p.mode, p.comps, p.pos, p.pos + k)
            p.pos += k
            if k == rest:
                break
            # Rows that went into a filling head getter's batch took no room: admit what
            # still fits now (it would wait un-woken otherwise; invariant 3).
        self._leave_put(p)
        return True

    def leave(self, req: Request) -> None:
        """``req`` leaves on an exception: restore what it held, pass wake-ups on."""
        with self.lock:
            if type(req) is GetRequest:
                self._leave_get(req)
            else:
                assert isinstance(req, PutRequest)
                self._leave_put(req)

    def _give_back(self, g: GetRequest) -> None:
        if g.claimed:
            self.claims.give_back(g)
            size = self.storage.size
            if size > self.peak:  # restores may exceed the capacity
                self.peak = size

    def _leave_get(self, g: GetRequest) -> None:
        self._give_back(g)
        getters = self.getters
        if getters.leave(g) and getters:
            self.claims.claim_for_head(getters[0])
        self._notify()

    def _leave_put(self, p: PutRequest) -> None:
        self.putters.leave(p)
        self._notify()

    def close(self, cancel_pending_enqueues: bool) -> None:
        """Close for new enqueues (idempotent); reject pending ones if asked; wake."""
        with self.lock:
            self.rules.closed = True
            if cancel_pending_enqueues:
                for p in self.putters:
                    if not p.rejected:
                        p.rejected = True
                        self._wake(p)
            self._notify()

    # -- wake-ups --------------------------------------------------------------------------

    def _notify(self) -> None:
        """Wake the head of each list if it can progress now."""
        size = self.storage.size
        getters = self.getters
        putters = self.putters
        rules = self.rules
        if getters:
            g = getters[0]
            if not g.notified and rules.getter_ready(g, size, rules.closed and not putters):
                self._wake(g)
        if putters:
            p = putters[0]
            if not p.notified and rules.putter_ready(p, size, getters[0] if getters else None):
                self._wake(p)

    def _wake(self, req: Request) -> None:
        req.notified = True
        deferred = self.deferred
        if deferred is None:
            req.fire()
        else:  # a thread's step: sent once it has released the lock
            deferred.append(req)

    # -- contents and counters -----------------------------------------------------------

    def dump(self, pending: bool = False) -> list[Components]:
        """Every element the queue holds, in the order takes would see them (what the
        head getter holds first: it would go back there); with ``pending``, then the
        elements waiting enqueues have still to admit (none of a rejected one).
        Private copies; nothing changes."""
        with self.lock:
            held = self._dump()
            if pending:
                for p in self.putters:
                    if not p.rejected:
                        held.extend(pending_elements(p.mode, p.comps, p.pos, p.count))
            return held

    def _dump(self) -> list[Components]:
        held = self.claims.held(self.getters[0]) if self.getters else []
        return held + self.storage.dump()

    def dump_with(self, read: Callable[[], X]) -> tuple[list[Components], bool, X]:
        """``dump()``, the closed flag and ``read()`` (state the storage's takes change,
        such as a random generator's), all under one acquisition of the lock."""
        with self.lock:
            return self._dump(), self.rules.closed, read()

    def load(self, elements: list[Components]) -> None:
        """Store ``elements`` after the queue's, in order, whatever the capacity."""
        with self.lock:
            self.storage.load(elements)
            self._loaded(len(elements))

    def load_rows(self, comps: Components, count: int) -> None:
        """Store the ``count`` rows of batch ``comps`` after the queue's, in order,
        whatever the capacity (one copy, no Python object per element)."""
        with self.lock:
            self.storage.put_rows(comps, 0, count)
            self._loaded(count)

    def _loaded(self, count: int) -> None:
        self.loaded_total += count
        if self.storage.size > self.peak:
            self.peak = self.storage.size
        if self.getters:  # a filling head getter takes them first (invariant 4)
            self.claims.claim_for_head(self.getters[0])
        self._notify()

    def quiet_getters(self) -> int:
        """Waiting dequeues that were not woken (they cannot progress until the queue
        changes)."""
        with self.lock:
            return self.getters.quiet()

    def quiet_putters(self) -> int:
        """Waiting enqueues that were not woken (they cannot progress until the queue
        changes)."""
        with self.lock:
            return self.putters.quiet()

    def statistics(self) -> QueueStatistics:
        """A consistent snapshot of the counters."""
        with self.lock:
            now = _monotonic()
            return QueueStatistics(
                size=self.storage.size,
                capacity=self.rules.capacity,
                closed=self.rules.closed,
                enqueued_total=self.enqueued_total,
                dequeued_total=self.dequeued_total,
                peak_size=self.peak,
                tasks_waiting_enqueue=len(self.putters),
                tasks_waiting_dequeue=len(self.getters),
                time_full_s=self.putters.blocked_s(now),
                time_empty_s=self.getters.blocked_s(now),
            )

    def check_invariants(self) -> None:
        """Raise AssertionError naming the first of the module's invariants that does
        not hold now (for tests; takes the lock)."""
        with self.lock:
            size = self.storage.size
            rules = self.rules
            getters, putters = self.getters, self.putters
            head = getters[0] if getters else None
            held = head.claimed if head is not None else 0
            stored = self.enqueued_total + self.loaded_total
            if stored != self.dequeued_total + size + held:
                raise AssertionError(
                    f"{self.name}: {stored} in != {self.dequeued_total} out + {size} stored "
                    f"+ {held} held"
                )
            for i, g in enumerate(getters):
                if not g.registered:
                    raise AssertionError(f"{self.name}: getter {i} is listed but not registered")
                if i and (g.claimed or g.claims or (g.out is not None and g.claimed)):
                    raise AssertionError(f"{self.name}: getter {i} holds claims behind the head")
            for i, p in enumerate(putters):
                if not p.registered or (i and p.pos):
                    raise AssertionError(f"{self.name}: putter {i} started behind the head")
            final = rules.closed and not putters
            if head is not None and not head.notified and rules.getter_ready(head, size, final):
                raise AssertionError(f"{self.name}: the head getter can progress, not woken")
            if putters:
                p = putters[0]
                if not p.notified and rules.putter_ready(p, size, head):
                    raise AssertionError(f"{self.name}: the head putter can progress, not woken")
            if head is not None and head.out is not None and head.claimed < head.n and size:
                raise AssertionError(f"{self.name}: a filling head getter left {size} in the ring")
            if self.peak < size:
                raise AssertionError(f"{self.name}: peak {self.peak} < size {size}")
