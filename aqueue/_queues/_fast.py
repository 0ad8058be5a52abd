"""FastPaths: the engine's steps that complete a whole operation at once.

A queue operation first tries one of these (``put_one_now``, ``put_many_now``,
``take_one_now``, ``take_many_now``, ``take_some_now``). Each takes the lock once,
completes the operation if it can now, without a request object, and otherwise
changes nothing: it returns False (an enqueue) or ``WAIT`` (a dequeue), and the
queue hands a request to a driver (``try_put``/``try_get`` in ``_engine.py``).

Invariants:

- A fast path never passes anyone: it completes only when no request of its own
  side is queued (an enqueue: no putters; a dequeue: no getters), so the queued ones
  keep their turn. It respects the same limits as the requests: the capacity for
  enqueues, ``min_after_dequeue`` (0 once closed) for dequeues; nothing is admitted
  on a closed queue.
- An enqueue that finds waiting dequeues admits through ``_admit_one`` or
  ``_admit_rows`` (straight into the head's batch while it is filling), then
  notifies; a batch the filling head can take whole is copied into its batch and
  wakes that head only (no other request can progress). With nobody waiting, an
  enqueue only stores and counts. A dequeue notifies only when putters wait (it
  freed room for them).
- Each runs for every element of a busy queue: written flat, with ``acquire``/
  ``release`` instead of ``with`` and the common case first. A thread passes
  ``deferred`` (a list): the wake-ups its step decides are collected there while the
  lock is held and sent by ``fire_all`` after it is released.
"""

from __future__ import annotations

from typing import Any

from ._bookkeeping import EngineCore
from ._declare import Components
from ._requests import WAIT, Request, fire_all

__all__ = ["FastPaths"]


class FastPaths(EngineCore):
    """The whole operation under the lock, no request object (mixed into ``Engine``)."""

    __slots__ = ()

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
