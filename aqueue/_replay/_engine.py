"""ReplayEngine: one table's lock, its waiting inserts and samples, and their wake-ups.

The engine holds a ``TableCore`` (the items and what operations do to them) and owns
the waiting. Every operation of the table is one *step* under ``lock`` (a
``threading.Lock``: tasks of any event loop and threads share it; nothing awaits while
holding it). ``start`` runs a new request's first step and, if it cannot complete,
*parks* it with a waker; ``retry`` (after a wake-up) and ``leave`` (on cancellation,
timeout or error) are the ``Steps`` that ``_queues._waiting.wait_task`` and
``wait_thread`` drive; no other wait loop exists.

Invariants:

- ``inserters`` and ``samplers`` list the parked requests of each direction, oldest
  first. Only the head of a list may complete: a new request parks behind any waiting
  one of its direction (arrival order per direction), even if it could complete.
- An insert or a sample completes entirely inside one step, or changes nothing. A
  waiter that leaves therefore leaves no trace: no item inserted or evicted, no
  counter of the limiter moved, no ``times_sampled`` changed. The one exception is a
  *progressive* insert (``InsertRequest.progressive``: a sink's ``enqueue_many``, the
  queues' semantics): each of its steps inserts the longest prefix of what is left
  that the limiter admits (exactly what single inserts in a row would get in), it
  waits, at the head of the inserters, only while not one more item is admitted, and
  a waiter that leaves leaves that prefix in.
- After every change (an insert, a sample, a delete, close, a waiter leaving) the head
  of each list is *notified* if, and only if, it can now progress and was not notified
  yet: an insert when the limiter admits its items, a sample when the limiter allows
  its n and the items can supply them, either when the table is closed (to fail). A
  notified waiter re-runs its own step; a wake-up carries nothing, so one that
  arrives late is harmless, and a waiter that leaves passes its wake-up on (the new
  head is checked).
- While a thread runs a step, ``deferred`` is a list: wake-ups are collected and sent
  after the lock is released (waking a task from a thread is a system call).
- Closing fails every waiting insert (QueueClosedError: it inserted nothing) and every
  sample that cannot be served now (OutOfRangeError): nothing can be inserted any more,
  so a sample that has to wait would wait for ever. Samples that can be served still
  are.
- ``insert_wait_s`` (``sample_wait_s``) sums the time during which at least one insert
  (sample) waited.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .._errors import OutOfRangeError, QueueClosedError
from .._queues._requests import WAIT, fire_all
from ._core import TableCore
from ._requests import InsertRequest, ReplayRequest, SampleRequest
from ._results import ReplayStatistics

__all__ = ["ReplayEngine"]

_monotonic = time.monotonic


class ReplayEngine:
    """The waiting side of one table (see the module docstring)."""

    __slots__ = (
        "_insert_since",
        "_insert_wait",
        "_sample_since",
        "_sample_wait",
        "closed",
        "core",
        "deferred",
        "inserters",
        "lock",
        "name",
        "samplers",
    )

    def __init__(self, core: TableCore, name: str) -> None:
        self.core = core
        self.name = name
        self.lock = threading.Lock()
        self.closed = False
        self.inserters: deque[InsertRequest] = deque()
        self.samplers: deque[SampleRequest] = deque()
        self.deferred: list[ReplayRequest] | None = None
        self._insert_wait = 0.0
        self._sample_wait = 0.0
        self._insert_since = 0.0
        self._sample_since = 0.0

    # -- the steps of a request ---------------------------------------------------------

    def start(
        self,
        req: InsertRequest | SampleRequest,
        arm: Callable[[], Any],
        deferred: list[Any] | None = None,
    ) -> Any:
        """The first step of a new request: its result, or WAIT after parking it with
        a waker from ``arm``. Raises what the operation raises (nothing changed)."""
        try:
            with self.lock:
                self.deferred = deferred
                try:
                    result = self._step(req)
                    if result is WAIT:
                        req.waker = arm()
                        self._park(req)
                    return result
                finally:
                    self.deferred = None
        finally:
            if deferred:
                fire_all(deferred)  # (it only calls each request's fire())

    def retry(self, req: Any, arm: Callable[[], Any], deferred: list[Any] | None = None) -> Any:
        """One more step of parked request ``req`` (``Steps.retry``)."""
        try:
            with self.lock:
                self.deferred = deferred
                try:
                    result = self._step(req)
                    if result is WAIT:
                        req.notified = False
                        req.waker = arm()
                    return result
                finally:
                    self.deferred = None
        finally:
            if deferred:
                fire_all(deferred)  # (it only calls each request's fire())

    def leave(self, req: Any) -> None:
        """``req`` leaves on an exception (``Steps.leave``): out of its list, and the
        wake-up passed on. It holds nothing to give back."""
        with self.lock:
            if req.registered:
                self._remove(req)
                self._notify()

    def _step(self, req: InsertRequest | SampleRequest) -> Any:
        if isinstance(req, SampleRequest):
            return self._try_sample(req)
        return self._try_insert(req)

    def _try_insert(self, req: InsertRequest) -> Any:
        if req.registered:
            if self.inserters[0] is not req:
                return WAIT
            if self.closed:
                self._remove(req)
                self._notify()
                raise QueueClosedError(
                    f"replay table '{self.name}' was closed while this insert waited "
                    + (
                        f"({req.done} of its {req.count} items were inserted)"
                        if req.progressive
                        else "(nothing was inserted)"
                    )
                )
        else:
            if self.closed:
                raise QueueClosedError(f"replay table '{self.name}' is closed")
            if self.inserters:
                return WAIT
        core = self.core
        if req.progressive:
            return self._insert_prefix(req)
        if not core.can_insert(req.count):
            return WAIT
        keys = core.insert(req.comps, req.count, req.priorities)
        if req.registered:
            self._remove(req)
        self._notify()
        return keys

    def _insert_prefix(self, req: InsertRequest) -> Any:
        """A progressive insert's step (it is the head, or no insert waits): insert
        the longest prefix of what is left that the limiter admits; None once all is
        in, WAIT while some is left."""
        core = self.core
        start, left = req.done, req.count - req.done
        m = core.admitted(left)
        if m:
            stop = start + m
            prios = None if req.priorities is None else req.priorities[start:stop]
            core.insert(tuple(c[start:stop] for c in req.comps), m, prios)
            req.done = stop
        if m < left:
            if m:
                self._notify()  # (samples may go now)
            return WAIT
        if req.registered:
            self._remove(req)
        self._notify()
        return None

    def _try_sample(self, req: SampleRequest) -> Any:
        if (self.samplers[0] is not req) if req.registered else bool(self.samplers):
            return WAIT
        n = req.n
        core = self.core
        if core.can_sample(n):
            result = core.sample(n)
            if req.registered:
                self._remove(req)
            self._notify()
            return result
        if self.closed:
            if req.registered:
                self._remove(req)
                self._notify()
            size = core.store.size
            raise OutOfRangeError(
                f"replay table '{self.name}' is closed and cannot serve sample({n}) "
                f"(size {size}; the rate limiter or the items held do not allow it, and "
                "nothing can be inserted any more)",
                queue_name=self.name,
                requested=n,
                size=size,
            )
        return WAIT

    # -- the lists ----------------------------------------------------------------------

    def _park(self, req: ReplayRequest) -> None:
        req.registered = True
        if isinstance(req, SampleRequest):
            if not self.samplers:
                self._sample_since = _monotonic()
            self.samplers.append(req)
        else:
            assert isinstance(req, InsertRequest)
            if not self.inserters:
                self._insert_since = _monotonic()
            self.inserters.append(req)
        self._notify()

    def _remove(self, req: ReplayRequest) -> None:
        req.registered = False
        if isinstance(req, SampleRequest):
            samplers = self.samplers
            if samplers[0] is req:
                samplers.popleft()
            else:
                samplers.remove(req)
            if not samplers:
                self._sample_wait += _monotonic() - self._sample_since
        else:
            assert isinstance(req, InsertRequest)
            inserters = self.inserters
            if inserters[0] is req:
                inserters.popleft()
            else:
                inserters.remove(req)
            if not inserters:
                self._insert_wait += _monotonic() - self._insert_since

    def _notify(self) -> None:
        """Notify the head of each list if it can progress now (see the invariants)."""
        core = self.core
        if self.inserters:
            head = self.inserters[0]
            if not head.notified and (self.closed or core.can_insert(head.least)):
                head.notified = True
                self._wake(head)
        if self.samplers:
            sample = self.samplers[0]
            if not sample.notified and (self.closed or core.can_sample(sample.n)):
                sample.notified = True
                self._wake(sample)

    def _wake(self, req: ReplayRequest) -> None:
        if self.deferred is not None:
            self.deferred.append(req)
        else:
            req.fire()

    # -- operations that never wait -----------------------------------------------------

    def changed(self) -> None:
        """Notify after a change made under the lock by an operation that never
        waits (a delete can let an insert or a sample through)."""
        self._notify()

    def close(self) -> None:
        """Close for inserts (idempotent); wake the heads so they fail or complete."""
        with self.lock:
            self.closed = True
            self._notify()

    def statistics(self) -> ReplayStatistics:
        """The counters now (one acquisition of the lock)."""
        with self.lock:
            return self.statistics_locked()

    def statistics_locked(self) -> ReplayStatistics:
        """``statistics`` with the lock already held."""
        core = self.core
        now = _monotonic()
        insert_wait = self._insert_wait + (now - self._insert_since if self.inserters else 0.0)
        sample_wait = self._sample_wait + (now - self._sample_since if self.samplers else 0.0)
        return ReplayStatistics(
            size=core.store.size,
            max_size=core.max_size,
            inserts=core.inserts,
            samples=core.samples,
            deletes=core.deletes,
            evictions=core.evictions,
            insert_wait_s=insert_wait,
            sample_wait_s=sample_wait,
            inserts_waiting=len(self.inserters),
            samples_waiting=len(self.samplers),
            closed=self.closed,
        )

    def restore_waits(self, insert_wait_s: float, sample_wait_s: float) -> None:
        """Start the wait counters from a snapshot's (a fresh engine, nobody waiting)."""
        self._insert_wait = insert_wait_s
        self._sample_wait = sample_wait_s
