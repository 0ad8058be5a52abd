"""QueueCore: the request machinery shared by every queue (waiting, claims, wake-ups).

Invariants (all state below is guarded by ``self._lock``, a ``threading.Lock``, so the
blocking view's threads and the event loop can both change it; nothing awaits while
holding it):

- ``storage.size`` elements are stored; enqueuers may admit while
  ``storage.size < capacity``. An all-or-nothing batch (``enqueue_many_nowait``, a
  timed thread ``enqueue_many``) goes in whole when it fits, or when the waiting head
  dequeue will then take enough to bring the size back within capacity
  (``_getter_makes_room``), so the two never wait for each other. Elements claimed by
  a waiting batch dequeue have left the storage (they are not counted by ``size()``)
  and are put back if that dequeue fails, is cancelled or times out. Both may push
  ``size`` above ``capacity`` for a while; enqueuers then stay blocked until it falls
  below.
- A dequeue may take an element only while ``storage.size - floor >= taken``, where
  ``floor`` is ``min_after_dequeue`` while the queue is open and 0 once it is closed.
- ``_putters`` and ``_getters`` are the pending requests, oldest first. Only the head of
  each list makes progress (head of line): a new dequeue queues behind the getters, and
  one pending enqueue_many's elements are contiguous. A new enqueue may pass the
  putters only if the queue has room for it and for all they still need and none of
  them has started (``_may_pass_putters``), so the queued ones never wait longer.
- Waiting never hands data to a waiter. Every change to the storage or to the lists
  *notifies* the head of each list if (and only if) it can now progress; the woken task
  or thread re-checks and takes or admits itself, synchronously, and returns without
  awaiting again. A waiter that leaves for any reason (success, error, cancellation,
  timeout) first puts back what it had claimed, then notifies the new heads, so a
  wake-up is never lost and an element is never lost or duplicated.
- A batch dequeue with ``n <= capacity - min_after_dequeue`` waits until it can take
  all ``n`` in one copy; a larger one claims progressively (it could never be satisfied
  at once) and returns when it holds ``n``. On a FIFO ring, a waiting batch dequeue
  instead *fills* its own output batch: at the head it claims what the ring holds (the
  ring is then empty) and enqueues copy straight into it (``_admit_rows``), one copy
  per element instead of two. Claimed elements have left the storage either way.
- The queue is *final* when it is closed and no enqueue is pending: nothing can arrive
  any more, so a dequeue that cannot be satisfied raises OutOfRangeError (without
  consuming anything) and dequeue_up_to returns what is left.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from ._args import int_arg
from ._backend import Waker, checkpoint, in_event_loop, make_waker
from ._errors import ElementSpecError, OutOfRangeError, QueueClosedError, QueueEmpty, QueueFull
from ._spec import Components, ElementSpec
from ._storage import RingStorage, Storage

__all__ = ["QueueCore"]

_ONE: Final = 0  # one element, element form
_MANY: Final = 1  # exactly n elements (batch form)
_UP_TO: Final = 2  # up to n elements once the queue is final (batch form)


class _Wait:
    """Sentinel: the request must wait."""


_WAIT: Final = _Wait()


class _Waiter:
    """One pending request, async (``waker``) or from a thread (``event``)."""

    __slots__ = (
        "atomic",
        "claimed",
        "claims",
        "comps",
        "count",
        "event",
        "mode",
        "n",
        "notified",
        "nowait",
        "out",
        "pos",
        "progressive",
        "registered",
        "rejected",
        "waker",
    )

    def __init__(self, mode: int, n: int) -> None:
        self.mode = mode
        self.n = n
        self.nowait = False
        self.registered = False
        self.notified = False
        self.progressive = False
        self.claims: list[Any] = []
        self.claimed = 0
        self.comps: Components = ()
        self.count = 0
        self.pos = 0
        self.atomic = False
        self.rejected = False  # a pending enqueue cancelled by close(cancel_pending_enqueues)
        self.waker: Waker | None = None
        self.event: threading.Event | None = None
        # A waiting batch dequeue on a FIFO ring fills its own output batch: it claims
        # what the ring holds when it reaches the head, and enqueues then copy straight
        # into it (one copy per element instead of two). See QueueCore._admit_rows.
        self.out: tuple[Any, ...] | None = None

    def fire(self) -> None:
        """Set the thread event or the async waker (see QueueCore._wake)."""
        if self.event is not None:
            self.event.set()
        elif self.waker is not None:
            self.waker.set()


def _fire(deferred: list[_Waiter]) -> None:
    """Send the wake-ups a thread's operation deferred (``QueueCore._wake``), after it
    released the lock: waking a task from a thread is a system call that may also hand
    the GIL to the event loop, and other threads would wait for the lock meanwhile. A
    wake-up is never lost: ``notified`` was set under the lock."""
    for w in deferred:
        w.fire()


class QueueCore:
    """State and request machinery; ``QueueBase`` adds the public operations."""

    _default_name = "queue"

    def __init__(
        self,
        capacity: int,
        spec: ElementSpec,
        storage: Storage,
        *,
        name: str,
        min_after_dequeue: int = 0,
    ) -> None:
        self._capacity = capacity
        self._spec = spec
        self._storage = storage
        self._name = name
        self._min_after = min_after_dequeue
        # Batch dequeues larger than this claim progressively (see module docstring).
        self._one_copy_limit = capacity - min_after_dequeue
        # Waiting batch dequeues fill their own batch (FIFO rings only: see _Waiter.out).
        self._fill_rows = isinstance(storage, RingStorage) and min_after_dequeue == 0
        self._lock = threading.Lock()
        self._closed = False
        self._putters: deque[_Waiter] = deque()
        self._getters: deque[_Waiter] = deque()
        self._enqueued_total = 0
        self._dequeued_total = 0
        self._peak = 0
        self._time_full = 0.0
        self._time_empty = 0.0
        self._full_since = 0.0
        self._empty_since = 0.0
        self._loop_thread: int | None = None
        self._deferred: list[_Waiter] | None = None  # wake-ups a thread's step sends later
        self._single = spec.names is None and len(spec.dtypes) == 1

    # -- bookkeeping (lock held) ---------------------------------------------------------

    def _add(self, waiters: deque[_Waiter], w: _Waiter, getter: bool) -> None:
        if not waiters:
            if getter:
                self._empty_since = time.monotonic()
            else:
                self._full_since = time.monotonic()
        w.registered = True
        waiters.append(w)
        if getter:
            if self._fill_rows and w.mode != _ONE and not w.progressive and w.out is None:
                w.out = self._storage.empty_batch(w.n)  # type: ignore[attr-defined]
            if len(waiters) == 1:
                self._claim_for_head()

    def _claim_for_head(self) -> None:
        """A filling getter that reaches the head claims what the ring holds, so the
        ring is empty while it waits and enqueues may copy straight into its batch."""
        g = self._getters[0]
        if g.out is not None:
            k = min(self._storage.size, g.n - g.claimed)
            if k > 0:
                self._storage.take_into(g.out, g.claimed, k)  # type: ignore[attr-defined]
                g.claimed += k

    def _admit_one(self, comps: Components) -> None:
        """Admit one element: into the head getter's batch if it is filling, else the storage."""
        if self._getters:
            g = self._getters[0]
            if g.out is not None and g.claimed < g.n:
                for o, c in zip(g.out, comps):
                    o[g.claimed, ...] = c
                g.claimed += 1
                return
        self._storage.put_one(comps)

    def _admit_rows(self, comps: Components, start: int, stop: int) -> None:
        """Admit rows ``start:stop`` of a batch, the head getter's batch first (see above)."""
        if self._getters:
            g = self._getters[0]
            if g.out is not None and g.claimed < g.n:
                k = min(stop - start, g.n - g.claimed)
                self._fill(g, comps, start, start + k)
                start += k
        if start < stop:
            self._storage.put_rows(comps, start, stop)

    @staticmethod
    def _fill(g: _Waiter, comps: Components, start: int, stop: int) -> None:
        """Copy rows ``start:stop`` of a batch into filling getter ``g``'s batch."""
        a = g.claimed
        k = stop - start
        whole = k == len(comps[0])  # the whole batch: no slice of it needed
        for o, c in zip(g.out, comps):  # type: ignore[arg-type]
            o[a : a + k] = c if whole else c[start:stop]
        g.claimed = a + k

    def _remove(self, waiters: deque[_Waiter], w: _Waiter, getter: bool) -> None:
        if not w.registered:
            return
        w.registered = False
        was_head = waiters[0] is w
        waiters.remove(w)
        if not waiters:
            if getter:
                self._time_empty += time.monotonic() - self._empty_since
            else:
                self._time_full += time.monotonic() - self._full_since
        elif getter and was_head:
            self._claim_for_head()

    def _final(self) -> bool:
        return self._closed and not self._putters

    def _available(self) -> int:
        return self._storage.size - (0 if self._closed else self._min_after)

    def _getter_ready(self, w: _Waiter) -> bool:
        # _final() and _available() inlined: this runs on every notify.
        if self._closed:
            if not self._putters:
                return True
            avail = self._storage.size
        else:
            avail = self._storage.size - self._min_after
        return avail >= w.n - w.claimed or (w.progressive and avail > 0)

    def _putter_ready(self, w: _Waiter) -> bool:
        if w.rejected:
            return True
        free = self._capacity - self._storage.size
        if w.mode == _MANY and w.atomic:
            return free >= w.count - w.pos or self._getter_makes_room(w.count - w.pos)
        return free >= 1

    def _getter_makes_room(self, k: int) -> bool:
        """Whether an all-or-nothing batch of ``k`` may go in although it does not fit.

        It may when the waiting head dequeue will then take enough to bring the size
        back within capacity. Otherwise a timed thread enqueue_many (all-or-nothing) and
        a batch dequeue that waits for its ``n`` would each wait for the other until the
        timeout. If that dequeue leaves before taking (cancelled, timed out), the size
        stays above capacity for a while, as after restored claims.
        """
        if not self._getters:
            return False
        g = self._getters[0]
        need = g.n - g.claimed
        # (rows a filling getter takes never reach the storage, so this holds for it too)
        return self._storage.size + k - need <= self._capacity and self._available() + k >= need

    def _notify(self) -> None:
        """Wake the head of each list if it can progress now."""
        if self._getters:
            g = self._getters[0]
            if not g.notified and self._getter_ready(g):
                self._wake(g)
        if self._putters:
            p = self._putters[0]
            if not p.notified and self._putter_ready(p):
                self._wake(p)

    def _wake(self, w: _Waiter) -> None:
        w.notified = True
        deferred = self._deferred
        if deferred is None:
            w.fire()
        else:  # a thread's step: sent by _fire once the lock is released
            deferred.append(w)

    def _admitted(self, k: int) -> None:
        self._enqueued_total += k
        if self._storage.size > self._peak:
            self._peak = self._storage.size

    # -- one step of a request (lock held) -----------------------------------------------

    def _step_get(self, w: _Waiter) -> Any:
        """Try to complete dequeue request ``w``; return the result or ``_WAIT``."""
        if w.registered:
            if self._getters[0] is not w:
                return _WAIT
        elif self._getters:
            return _WAIT
        st = self._storage
        n = w.n
        need = n - w.claimed
        avail = self._available()
        take = -1
        if avail >= need:
            take = need
        elif w.nowait and w.mode == _UP_TO and avail > 0:
            take = avail
        elif self._final() and w.mode == _UP_TO and w.claimed + max(avail, 0) > 0:
            take = max(avail, 0)
        if take >= 0:
            if w.out is not None:
                if take:
                    st.take_into(w.out, w.claimed, take)  # type: ignore[attr-defined]
                total = w.claimed + take
                out = w.out
                result = self._spec.pack(
                    out if total == n else tuple(o[:total].copy() for o in out)
                )
                self._dequeued_total += total
                w.out = None
                w.claimed = 0
                self._remove(self._getters, w, True)
                self._notify()
                return result
            if w.mode == _ONE:
                result = self._spec.pack(st.take_one())
            elif w.claimed:
                if take:
                    w.claims.append(st.take_chunk(take))
                result = self._spec.pack(st.assemble(w.claims))
            else:
                result = self._spec.pack(st.take_batch(take))
            self._dequeued_total += w.claimed + take
            w.claims = []
            w.claimed = 0
            self._remove(self._getters, w, True)
            self._notify()
            return result
        if self._final():
            self._give_back(w)
            size = st.size
            self._remove(self._getters, w, True)
            self._notify()
            raise OutOfRangeError(queue_name=self._name, requested=n, size=size)
        if w.registered and w.progressive and avail > 0:
            w.claims.append(st.take_chunk(avail))
            w.claimed += avail
            self._notify()
        return _WAIT

    def _step_put(self, w: _Waiter) -> bool:
        """Try to complete enqueue request ``w``; True when done, False to wait."""
        if w.rejected:
            self._remove(self._putters, w, False)
            self._notify()
            raise QueueClosedError(
                f"queue '{self._name}' was closed with cancel_pending_enqueues=True: "
                f"pending enqueue cancelled after {w.pos} of {w.count} elements were admitted"
            )
        if w.registered:
            if self._putters[0] is not w:
                return False
        else:
            if self._closed:
                raise QueueClosedError(f"queue '{self._name}' is closed")
            if self._putters and not self._may_pass_putters(w):
                return False
        st = self._storage
        free = self._capacity - st.size
        if w.mode == _ONE:
            if free <= 0:
                return False
            self._admit_one(w.comps)
            w.pos = 1
            k = 1
        else:
            remaining = w.count - w.pos
            if w.atomic:
                if free < remaining and not self._getter_makes_room(remaining):
                    return False
                k = remaining
            elif free <= 0:
                return False
            else:
                k = min(free, remaining)
            self._admit_rows(w.comps, w.pos, w.pos + k)
            w.pos += k
        self._admitted(k)
        done = w.pos == w.count
        if done:
            self._remove(self._putters, w, False)
        self._notify()
        return done

    def _may_pass_putters(self, w: _Waiter) -> bool:
        """Whether new request ``w`` may be admitted ahead of the queued enqueues.

        Only when the queue has room for ``w`` *and* for everything the queued enqueues
        still need, and none of them has started (so a pending enqueue_many's elements
        stay contiguous). The queued requests keep their room, so none of them waits
        longer because of ``w``; without this, producer threads that find the queue full
        form a convoy in which every element waits for a thread wake-up and a GIL
        hand-off.
        """
        reserved = 0
        for p in self._putters:
            if p.pos:
                return False
            reserved += p.count
        free = self._capacity - self._storage.size - reserved
        return free >= w.count - w.pos

    def _step_put_or_wait(self, w: _Waiter) -> Any:
        return None if self._step_put(w) else _WAIT

    def _give_back(self, w: _Waiter) -> None:
        if w.out is not None:
            if w.claimed:
                self._storage.restore([tuple(o[: w.claimed] for o in w.out)])
                w.claimed = 0
                if self._storage.size > self._peak:
                    self._peak = self._storage.size
            return
        if w.claims:
            self._storage.restore(w.claims)
            w.claims = []
            w.claimed = 0
            if self._storage.size > self._peak:  # restores may exceed the capacity
                self._peak = self._storage.size

    def _abandon(self, w: _Waiter, getter: bool) -> None:
        """A waiter leaves on an exception: restore its claims, pass the wake-up on."""
        with self._lock:
            if getter:
                self._give_back(w)
                self._remove(self._getters, w, True)
            else:
                self._remove(self._putters, w, False)
            self._notify()

    # -- request construction ------------------------------------------------------------

    def _getter(self, mode: int, n: int) -> _Waiter:
        w = _Waiter(mode, n)
        w.progressive = mode != _ONE and n > self._one_copy_limit
        return w

    @staticmethod
    def _putter(mode: int, comps: Components, count: int) -> _Waiter:
        """An enqueue request for converted components (``count`` elements)."""
        w = _Waiter(mode, 1 if mode == _ONE else 0)
        w.comps = comps
        w.count = count
        return w

    def _batch_op(self, n: Any, what: str) -> int:
        if type(n) is not int or n < 0:  # the message is only built for bad input
            n = int_arg(n, "n", f"{type(self).__name__} '{self._name}'.{what}", 0)
        if self._spec.shapes is None:
            raise ElementSpecError(
                f"{type(self).__name__} '{self._name}'.{what} requires the components to have "
                "declared shapes; pass shapes= when creating the queue"
            )
        return int(n)

    # -- drivers -------------------------------------------------------------------------

    async def _get(self, w: _Waiter, *, checkpointed: bool = False) -> Any:
        return await self._drive(w, True, self._step_get, checkpointed)

    async def _put(self, w: _Waiter, *, checkpointed: bool = False) -> None:
        await self._drive(w, False, self._step_put_or_wait, checkpointed)

    async def _drive(
        self, w: _Waiter, getter: bool, step: Callable[[_Waiter], Any], checkpointed: bool
    ) -> Any:
        """Run request ``w`` on the event loop: try, park, and retry when notified."""
        if not checkpointed:
            await checkpoint()
        with self._lock:
            result = step(w)
            if result is not _WAIT:
                return result
            self._park(w, getter)
        return await self._wait(w, getter, step)

    def _park(self, w: _Waiter, getter: bool) -> None:
        """Register ``w`` as a waiter on the running event loop (lock held)."""
        w.waker = make_waker()
        self._add(self._getters if getter else self._putters, w, getter)
        self._notify()

    def _park_batch_getter(self, mode: int, n: int) -> _Waiter | None:
        """Park a batch dequeue at once if it cannot complete now, else return None.

        Its wait is then its checkpoint. Parking before yielding matters on a FIFO
        ring: a filling getter registered before the producers' next enqueue receives
        their rows directly (one copy each), where a getter that first yielded would
        find them in the ring and copy them a second time.
        """
        w = self._getter(mode, n)
        with self._lock:
            if not self._getters and self._getter_ready(w):
                return None
            self._park(w, True)
        return w

    async def _wait(self, w: _Waiter, getter: bool, step: Callable[[_Waiter], Any]) -> Any:
        """Wait until parked request ``w`` completes (or fails); its wait is a checkpoint."""
        try:
            while True:
                assert w.waker is not None
                await w.waker.wait()
                with self._lock:
                    result = step(w)
                    if result is not _WAIT:
                        return result
                    w.notified = False
                    w.waker = make_waker()
        except BaseException:
            self._abandon(w, getter)
            raise

    def _get_nowait(self, w: _Waiter) -> Any:
        w.nowait = True
        with self._lock:
            result = self._step_get(w)
        if result is _WAIT:
            raise QueueEmpty(self._empty_message(w))
        return result

    def _empty_message(self, w: _Waiter) -> str:
        if self._getters:
            return f"queue '{self._name}': earlier dequeues are waiting"
        return (
            f"queue '{self._name}' cannot supply {w.n} element(s) now "
            f"(size {self._storage.size}, floor {0 if self._closed else self._min_after})"
        )

    def _put_nowait(self, w: _Waiter) -> None:
        w.nowait = True
        w.atomic = True
        with self._lock:
            done = self._step_put(w)
        if not done:
            reason = (
                "earlier enqueues are waiting"
                if self._putters
                else f"needs room for {w.count}, has {max(0, self._capacity - self._storage.size)}"
            )
            raise QueueFull(f"queue '{self._name}': {reason}")

    def _thread_check(self, what: str) -> None:
        loop_thread = self._loop_thread
        if threading.get_ident() == loop_thread if loop_thread is not None else in_event_loop():
            raise RuntimeError(
                f"BlockingQueue.{what}() of queue '{self._name}' was called on an event-loop "
                f"thread, where blocking would stall the loop; use `await q.{what}(...)` there"
            )

    def _thread_run(self, w: _Waiter, getter: bool, timeout: float | None, what: str) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        step = self._step_get if getter else self._step_put_or_wait
        result = self._thread_step(w, step, getter, True)
        if result is not _WAIT:
            return result
        try:
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(
                        f"BlockingQueue.{what}() on queue '{self._name}' "
                        f"timed out after {timeout} s"
                    )
                assert w.event is not None
                if not w.event.wait(remaining):
                    continue
                result = self._thread_step(w, step, getter, False)
                if result is not _WAIT:
                    return result
        except BaseException:
            self._abandon(w, getter)
            raise

    def _thread_step(
        self, w: _Waiter, step: Callable[[_Waiter], Any], getter: bool, first: bool
    ) -> Any:
        """One step of a thread's request under the lock; on ``_WAIT`` it is parked
        (``first``) or re-armed. Its wake-ups are sent after the lock is released."""
        deferred: list[_Waiter] = []
        try:
            with self._lock:
                self._deferred = deferred
                try:
                    result = step(w)
                    if result is _WAIT:
                        if first:
                            w.event = threading.Event()
                            self._add(self._getters if getter else self._putters, w, getter)
                            self._notify()
                        else:
                            w.notified = False
                            w.event.clear()  # type: ignore[union-attr]
                    return result
                finally:
                    self._deferred = None
        finally:
            _fire(deferred)
