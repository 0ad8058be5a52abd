"""Engine: one queue's state, its rules, and the synchronous steps that change it.

One concept in one file on purpose (the queue's state machine, as Reverb's ``Table`` is
one class): the admission state and the rules that read it, the steps that change it,
its contents and counters, and its invariants, checked by ``check_invariants``. It
holds two parts that are concepts of their own: the ``storage`` (``_storage.py``,
``_pool.py``, ``_tuples.py``: the stored elements) and the ``claims``
(``_requests.py``: the elements waiting dequeues hold, and where enqueued elements go,
a filling head getter's batch first); its parked requests wait in two ``Waiters`` of
the waiting kernel (``aqueue/_waiting/_wait.py``), ``putters`` and ``getters``.

Nothing here awaits or blocks. An operation is one first step (``put``/``get``) that
completes it or parks a request armed with the caller's waker and returns it; a parked
request takes further steps (``retry``) when woken, and ``leave`` when it gives up
(the kernel's ``wait_task``/``wait_thread`` drive them). The ``_nowait`` twins are the
first step without a waker. Every step takes the queue's ``lock`` (a
``threading.Lock``, so threads and the event loop both take steps) and nothing else:
the wake-ups a thread's step decides are sent after it by the kernel's
``thread_step``.

The rules (the admission state ``capacity``, ``floor`` = ``min_after_dequeue`` and
``closed``, and the decisions read from it; aqueue.redis's server-side functions keep
their own copy, in Lua, and a test runs one table of cases through both):

- Free room is ``capacity - size``; an enqueue admits while there is room
  (``put_count``).
- A dequeue may take while ``size - floor`` stays >= 0, with the floor 0 once the
  queue is closed (``available``, ``take_count``).
- The queue is *final* when it is closed and no enqueue is pending: nothing can arrive
  any more.

``take_count`` and ``put_count`` decide for a first step and a parked request alike;
their first clause ("all of it is there", "all of it fits") is also written into
``get`` and ``put``, the steps every element takes, to spare them a call.

Invariants (``check_invariants`` tests them; all state is guarded by ``lock``, and
nothing awaits or blocks while holding it):

1. Conservation: ``enqueued_total + loaded_total == dequeued_total + storage.size +``
   the elements the head getter holds. Elements claimed by a waiting dequeue have left
   the storage (``size`` does not count them) and go back if it fails or leaves.
2. Head of line: only the head of each list progresses; only the head getter holds
   claims; only the head putter may have admitted part of its batch. A new dequeue
   never passes the getters; a new enqueue passes the putters only under
   ``may_pass``.
3. No lost wake-up: after every step, a head that can progress has been notified.
   Notifying never hands data over (the woken side takes or admits in its own step;
   for a filling head getter, enqueues copy rows into its batch, which it owns, and
   notify it once the batch is complete), and a request leaving for any reason first
   puts back what it held, then notifies the new heads, so an element is never lost
   or duplicated.
4. A filling head getter that is not complete has emptied the ring: enqueues copy
   straight into its batch.
5. ``peak >= size``: raised wherever the size can grow (admission, restored claims,
   loads); sizes above the capacity included (restored claims, an all-or-nothing batch
   the head getter makes room for, snapshots loaded whole).
6. Final (closed, no putters): a dequeue that cannot be satisfied raises
   OutOfRangeError without consuming anything; ``dequeue_up_to`` returns what is left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .._errors import OutOfRangeError, QueueClosedError, QueueEmpty, QueueFull
from .._waiting._wait import WAIT, Request, Waiters, wake
from ._declare import Components
from ._protocol import QueueStatistics
from ._requests import (
    MANY,
    ONE,
    SOME,
    UP_TO,
    Claims,
    GetRequest,
    PutRequest,
    fill_rows,
    pending_elements,
)
from ._storage import FillableStorage, Storage

__all__ = ["Engine"]

_monotonic = time.monotonic
X = TypeVar("X")
Arm = Callable[[], Any]


class Engine:
    """The state of one queue, its rules and the synchronous steps that change it."""

    __slots__ = (
        "capacity",
        "claims",
        "closed",
        "dequeued_total",
        "enqueued_total",
        "floor",
        "getters",
        "loaded_total",
        "lock",
        "name",
        "one_copy_limit",
        "peak",
        "putters",
        "storage",
        "whole_rest",
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
        self.capacity = capacity
        self.floor = min_after_dequeue
        self.closed = False
        # Batch dequeues larger than this claim progressively: they could never be
        # served in one take.
        self.one_copy_limit = capacity - min_after_dequeue
        # A parked enqueue_many whose rest is at most this many rows waits until all of
        # the rest fits (one wake-up for it, not one per freed row), and a longer one
        # parked by a thread, while no dequeue waits, until at least this many fit (a
        # thread's wake-up costs a system call and a GIL hand-off; a task's, one loop
        # turn). 0: rows go in one by one as room frees, as TF does; queues between
        # pipeline stages set it.
        self.whole_rest = 0
        self.claims = Claims(storage, fill if min_after_dequeue == 0 else None)
        self.putters: Waiters[PutRequest] = Waiters()
        self.getters: Waiters[GetRequest] = Waiters()
        self.enqueued_total = 0
        self.dequeued_total = 0
        self.loaded_total = 0  # loaded whole from snapshots, not enqueued
        self.peak = 0

    # -- enqueue -------------------------------------------------------------------------

    def put(
        self,
        mode: int,
        comps: Components,
        count: int,
        arm: Arm | None = None,
        atomic: bool = False,
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
        try:
            st = self.storage
            size = st.size
            if not self.putters and size + count <= self.capacity and not self.closed:
                # All of it fits (put_count's first clause: see the module docstring).
                if mode == ONE and not self.getters:  # nobody to serve or wake
                    st.put_one(comps)
                    self.enqueued_total += 1
                    if size >= self.peak:
                        self.peak = size + 1
                else:
                    self._admit(mode, comps, 0, count)
                return None
            if self.closed:
                raise QueueClosedError(f"queue '{self.name}' is closed")
            putters = self.putters
            atomic = atomic or arm is None
            k = 0
            if not putters or self.may_pass(count, putters, size):
                getters = self.getters
                k = self.put_count(count, size, atomic, getters[0] if getters else None)
                if k == count:
                    self._admit(mode, comps, 0, count)
                    return None
            if arm is None:
                reason = (
                    "earlier enqueues are waiting"
                    if putters
                    else f"needs room for {count}, has {max(0, self.capacity - size)}"
                )
                raise QueueFull(f"queue '{self.name}': {reason}")
            req = PutRequest(mode, comps, count, atomic)
            if k:
                self._admit(mode, comps, 0, k)
                req.pos = k
            if mode == MANY and count - req.pos <= self.whole_rest:
                req.atomic = True  # the rest goes in whole (see whole_rest)
            req.waker = waker = arm()
            if mode == MANY and isinstance(waker, threading.Event):
                req.least = self.whole_rest  # (a thread: see whole_rest)
            putters.park(req)
            self._notify()
            return req
        finally:
            lock.release()

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
                wake(head)
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

    def get(self, mode: int, n: int, arm: Arm | None = None, park: bool = False) -> Any:
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
        try:
            st = self.storage
            getters = self.getters
            size = st.size
            avail = size - (0 if self.closed else self.floor)
            if not getters and not park and avail >= n > 0:
                # All of it is there (take_count's first clause: see the module docstring).
                result = st.take_one() if mode == ONE else st.take_batch(n)
                self.dequeued_total += n
                if self.putters:
                    self._notify()
                return result
            if n == 0:
                return None
            if not getters and not park:
                final = self.closed and not self.putters
                take = self.take_count(mode, n, 0, avail, final, arm is None)
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
                        f"(size {size}, floor {0 if self.closed else self.floor})"
                    )
                raise QueueEmpty(message)
            req = GetRequest(mode, n, mode in (MANY, UP_TO) and n > self.one_copy_limit)
            req.waker = arm()
            getters.park(req)
            claims = self.claims
            if claims.fill is not None:  # (only a filling request holds from the start)
                claims.start(req)
                if len(getters) == 1:
                    claims.claim_for_head(req)
            self._notify()
            return req
        finally:
            lock.release()

    def parks_first(self, n: int) -> bool:
        """Whether a batch dequeue of ``n`` will have to wait, guessed without the lock:
        it then parks before its checkpoint (see QueueBase). Either guess is safe: its
        step under the lock decides, and takes nothing before the checkpoint. A batch of
        0 never waits, so it never parks first: it checkpoints like every call."""
        return (
            n > 0 and not self.closed and (bool(self.getters) or self.storage.size - self.floor < n)
        )

    # -- parked requests -----------------------------------------------------------------

    def retry(self, req: Request, arm: Arm) -> Any:
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
            lock.release()

    def _retry_get(self, g: GetRequest) -> Any:
        getters = self.getters
        if getters[0] is not g:
            return WAIT
        st = self.storage
        size = st.size
        final = self.closed and not self.putters
        avail = size - (0 if self.closed else self.floor)
        take = self.take_count(g.mode, g.n - g.claimed, g.claimed, avail, final, False)
        if take >= 0:
            total = g.claimed + take
            try:
                if g.out is None and not g.claimed:  # it holds nothing: as a first step
                    result = st.take_one() if g.mode == ONE else st.take_batch(take)
                else:
                    result = self.claims.finish(g, take)
            except BaseException:
                self._leave_get(g)
                raise
            self.dequeued_total += total
            self._leave_get(g)
            return result
        if final:
            if g.claimed:
                self._give_back(g)
            size = st.size
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
        while True:
            rest = p.count - p.pos
            head = getters[0] if getters else None
            k = self.put_count(rest, self.storage.size, p.atomic, head, p.least)
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
        self.claims.give_back(g)
        size = self.storage.size
        if size > self.peak:  # restores may exceed the capacity
            self.peak = size

    def _leave_get(self, g: GetRequest) -> None:
        """``g`` leaves its list (done, failed or gone): what it holds goes back first."""
        if g.claimed:
            self._give_back(g)
        getters = self.getters
        if getters.leave(g) and getters and self.claims.fill is not None:
            self.claims.claim_for_head(getters[0])
        self._notify()

    def _leave_put(self, p: PutRequest) -> None:
        self.putters.leave(p)
        self._notify()

    def set_capacity(self, capacity: int, whole_rest: int) -> None:
        """Change the capacity of a queue whose enqueues are untimed (a stage queue).

        Growing admits the waiting head enqueue at once, as far as it now fits.
        Shrinking takes nothing back: the queue drains below the new capacity as
        dequeues take, and a waiting enqueue that no longer fits keeps waiting and is
        woken when there is room for it. So that none waits for more room than the
        queue will ever have, the waiting enqueues' ``least`` follows ``whole_rest``
        and a rest larger than the new capacity is no longer all-or-nothing (for an
        untimed enqueue, all-or-nothing only spared wake-ups).
        """
        with self.lock:
            self.capacity = capacity
            self.one_copy_limit = capacity - self.floor
            self.whole_rest = whole_rest
            for p in self.putters:
                p.least = min(p.least, whole_rest)
                if p.atomic and p.count - p.pos > capacity:
                    p.atomic = False
            self._notify()

    def close(self, cancel_pending_enqueues: bool) -> None:
        """Close for new enqueues (idempotent); reject pending ones if asked; wake."""
        with self.lock:
            self.closed = True
            if cancel_pending_enqueues:
                for p in self.putters:
                    if not p.rejected:
                        p.rejected = True
                        wake(p)
            self._notify()

    def _notify(self) -> None:
        """Wake the head of each list if it can progress now (invariant 3)."""
        size = self.storage.size
        getters = self.getters
        putters = self.putters
        if getters:
            g = getters[0]
            if not g.notified and self.getter_ready(g, size, self.closed and not putters):
                wake(g)
        if putters:
            p = putters[0]
            if not p.notified and self.putter_ready(p, size, getters[0] if getters else None):
                wake(p)

    # -- the rules (see the module docstring) --------------------------------------------

    def take_count(
        self, mode: int, need: int, claimed: int, avail: int, final: bool, nowait: bool
    ) -> int:
        """The take rule: how many elements a dequeue takes now; -1 if it cannot.

        ``need`` more are wanted (``claimed`` held already), ``avail`` may be taken.
        All of ``need`` when they are there; what is there for a SOME dequeue (and
        ``dequeue_up_to_nowait``); once the queue is final, what is left for an UP_TO
        dequeue that gets anything at all.
        """
        if avail >= need or need == 0:
            return need
        if avail > 0 and (mode == SOME or (nowait and mode == UP_TO)):
            return avail
        if final and mode == UP_TO and claimed + max(avail, 0) > 0:
            return max(avail, 0)
        return -1

    def put_count(
        self, rest: int, size: int, atomic: bool, head: GetRequest | None, least: int = 0
    ) -> int:
        """The put rule: how many of ``rest`` elements an enqueue admits now (0: none).

        As many as there is room for; an atomic one (``_nowait``, a timed thread
        ``enqueue_many``) all or nothing: all when they fit, or when the waiting head
        dequeue ``head`` will then take enough to bring the size back within capacity
        (``makes_room``). None while fewer than ``least`` fit and no dequeue waits (a
        waiting thread's ``PutRequest.least``: see ``whole_rest``).
        """
        free = self.capacity - size
        if free >= rest:
            return rest
        if atomic:
            return rest if self.makes_room(rest, size, head) else 0
        if free < least and head is None:
            return 0  # (a stage queue's waiting thread: see whole_rest)
        return free if free > 0 else 0

    def makes_room(self, k: int, size: int, head: GetRequest | None) -> bool:
        """Whether an all-or-nothing batch of ``k`` may go in although it does not fit.

        It may when the waiting head dequeue will then take enough to bring the size
        back within capacity. Otherwise a timed thread enqueue_many (all-or-nothing) and
        a batch dequeue that waits for its ``n`` would each wait for the other until the
        timeout. If that dequeue leaves before taking (cancelled, timed out), the size
        stays above capacity for a while, as after restored claims.
        """
        if head is None:
            return False
        need = head.n - head.claimed
        # (rows a filling getter takes never reach the storage, so this holds for it too)
        avail = size - (0 if self.closed else self.floor)
        return size + k - need <= self.capacity and avail + k >= need

    def may_pass(self, count: int, putters: Iterable[PutRequest], size: int) -> bool:
        """Whether a new enqueue of ``count`` may be admitted ahead of the queued ones.

        Only when the queue has room for it *and* for everything the queued enqueues
        still need, and none of them has started (so a pending enqueue_many's elements
        stay contiguous). The queued requests keep their room, so none of them waits
        longer; without this, producer threads that find the queue full form a convoy
        in which every element waits for a thread wake-up and a GIL hand-off.
        """
        reserved = 0
        for p in putters:
            if p.pos:
                return False
            reserved += p.count
        return self.capacity - size - reserved >= count

    def getter_ready(self, g: GetRequest, size: int, final: bool) -> bool:
        """Whether parked dequeue ``g`` can progress now (complete, claim, or fail)."""
        if final:
            return True
        avail = size - (0 if self.closed else self.floor)
        return avail >= g.n - g.claimed or (g.eager and avail > 0)

    def putter_ready(self, p: PutRequest, size: int, head: GetRequest | None) -> bool:
        """Whether parked enqueue ``p`` can progress now (admit, or fail)."""
        if p.rejected:
            return True
        return self.put_count(p.count - p.pos, size, p.atomic, head, p.least) > 0

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
            return self._dump(), self.closed, read()

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
                capacity=self.capacity,
                closed=self.closed,
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
            final = self.closed and not putters
            if head is not None and not head.notified and self.getter_ready(head, size, final):
                raise AssertionError(f"{self.name}: the head getter can progress, not woken")
            if putters:
                p = putters[0]
                if not p.notified and self.putter_ready(p, size, head):
                    raise AssertionError(f"{self.name}: the head putter can progress, not woken")
            if head is not None and head.out is not None and head.claimed < head.n and size:
                raise AssertionError(f"{self.name}: a filling head getter left {size} in the ring")
            if self.peak < size:
                raise AssertionError(f"{self.name}: peak {self.peak} < size {size}")
