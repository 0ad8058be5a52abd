"""ReplayEngine: one table's lock, its waiting inserts and samples, and their wake-ups.

The engine holds a ``TableCore`` (the items and what operations do to them) and owns
the waiting, written once for every engine in the waiting kernel
(``aqueue/_waiting/_wait.py``): requests are kernel ``Request``s, parked in two kernel
``Waiters`` (``inserters``, ``samplers``, with their blocked-time clocks), woken with
``wake``, driven by ``wait_task``/``wait_thread``. Every operation of the table is one
*step* under ``lock`` (a ``threading.Lock``: tasks of any event loop and threads share
it; nothing awaits while holding it). ``start`` runs a new request's first step and
returns its result, or the request itself, parked with a waker from ``arm``, as a
queue engine's first step does; ``retry`` (after a wake-up) and ``leave`` (on
cancellation, timeout or error) are the ``Steps`` the kernel's waits drive. A sample's
result is its ``ReplaySample``.

Invariants (``check_invariants`` tests them, and the core's, after every step of a
property test):

1. ``inserters`` and ``samplers`` list the parked requests of each direction, oldest
   first, each registered. Only the head of a list may complete: a new request parks
   behind any waiting one of its direction (arrival order per direction), even if it
   could complete.
2. An insert or a sample completes entirely inside one step, or changes nothing. A
   waiter that leaves therefore leaves no trace: no item inserted or evicted, no
   counter of the limiter moved, no ``times_sampled`` changed; a parked request holds
   nothing (a whole insert has inserted none of its items). The one exception is a
   *progressive* insert (``InsertRequest.progressive``: a sink's ``enqueue_many``, the
   queues' semantics): each of its steps inserts the longest prefix of what is left
   that the limiter admits (exactly what single inserts in a row would get in), it
   waits, at the head of the inserters, only while not one more item is admitted, and
   a waiter that leaves leaves that prefix in.
3. After every change (an insert, a sample, a delete, close, a waiter leaving) the head
   of each list is *notified* if it can now progress: an insert when the limiter
   admits its items, a sample when the limiter allows its n and the items can supply
   them, either when the table is closed (to fail). A notified waiter re-runs its own
   step; a wake-up carries nothing, so one that arrives late is harmless, and a waiter
   that leaves passes its wake-up on (the new head is checked).
4. A thread's step (``thread_step``) sends its wake-ups after the lock is released
   (waking a task from a thread is a system call); the loop's steps send them at once.
5. Closing fails every waiting insert (QueueClosedError: it inserted nothing, or a
   progressive one its prefix) and every sample that cannot be served now
   (OutOfRangeError): nothing can be inserted any more, so a sample that has to wait
   would wait for ever. Samples that can be served still are. A closed table's heads
   are therefore always notified.

A trajectory table's engine also holds its steps (``steps``, a ``StepSide``): an
``AppendRequest`` is an insert of the windows its steps complete, counted at each of
its steps; its step appends the steps and inserts those windows in one. One that
completes none never waits and, when new, goes ahead of waiting inserts (it inserts
nothing: invariant 1 is about what the limiter admits). ``check_invariants`` checks
the steps against the items held too.

``insert_wait_s`` (``sample_wait_s``) sums the time during which at least one insert
(sample) waited: the clocks of the two ``Waiters``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy.typing as npt

from .._errors import OutOfRangeError, QueueClosedError
from .._queues._declare import Components
from .._waiting._wait import WAIT, Request, Waiters, wake
from ._core import TableCore
from ._results import ReplaySample, ReplayStatistics

__all__ = ["AppendRequest", "InsertRequest", "ReplayEngine", "SampleRequest", "StepSide"]

_monotonic = time.monotonic


class InsertRequest(Request):
    """An insert of ``count`` items: ``comps`` (one batch array per component) and
    their ``priorities`` (float64, or None for the table's largest).

    A *progressive* request (a sink's ``enqueue_many``) goes in piece by piece: each
    step inserts the longest prefix of what is left that the rate limiter admits, and
    ``done`` counts the items in so far; it waits only while not one more is admitted
    (``least`` is 1, where a whole request needs ``count``)."""

    __slots__ = ("comps", "count", "done", "least", "priorities", "progressive")

    def __init__(
        self, comps: Components, count: int, priorities: Any, *, progressive: bool = False
    ) -> None:
        super().__init__()
        self.comps = comps
        self.count = count
        self.priorities = priorities
        self.progressive = progressive
        self.done = 0
        self.least = 1 if progressive else count


class AppendRequest(InsertRequest):
    """An append of ``count`` consecutive steps by writer ``wid`` to a trajectory
    table: an insert of the windows those steps complete (``StepSide.
    windows_completed``, computed at each step: other writers' evictions can drop
    this writer's pending windows while it waits, so the number only shrinks). An
    append that completes no window never waits for the limiter, and a new one goes
    at once, ahead of any waiting insert (it inserts nothing)."""

    __slots__ = ("wid",)

    def __init__(self, wid: int, comps: Components, count: int, priorities: Any) -> None:
        super().__init__(comps, count, priorities)
        self.wid = wid


class StepSide(Protocol):
    """What the engine asks of a trajectory table's steps (``StepStore``)."""

    def windows_completed(self, wid: int, k: int) -> int:
        """The windows an append of ``k`` steps by writer ``wid`` completes now."""
        ...

    def append(self, wid: int, comps: Components, k: int, priorities: Any) -> Any:
        """Append the steps (the windows they complete become items): the result of
        the append (the keys of those items)."""
        ...

    def check_invariants(self, keys: npt.NDArray[Any], rows: npt.NDArray[Any]) -> None:
        """Assert the steps' invariants, given the held items' keys and rows."""
        ...


class SampleRequest(Request):
    """A sample of ``n`` items."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n


class ReplayEngine:
    """The waiting side of one table (see the module docstring)."""

    __slots__ = ("closed", "core", "inserters", "lock", "name", "pack", "samplers", "steps", "what")

    def __init__(
        self,
        core: TableCore,
        name: str,
        pack: Callable[[Any], Any],
        steps: StepSide | None = None,
        what: str = "replay table",
    ) -> None:
        self.core = core
        self.name = name
        self.steps = steps  # a trajectory table's steps (appends), None otherwise
        self.what = what  # how messages name the table
        self.pack = pack  # a sample's components in the table's element form
        self.lock = threading.Lock()
        self.closed = False
        self.inserters: Waiters[InsertRequest] = Waiters()
        self.samplers: Waiters[SampleRequest] = Waiters()

    # -- the steps of a request ---------------------------------------------------------

    def start(self, req: InsertRequest | SampleRequest, arm: Callable[[], Any]) -> Any:
        """The first step of a new request: its result, or ``req`` itself after parking
        it with a waker from ``arm``. Raises what the operation raises (nothing
        changed)."""
        lock = self.lock
        lock.acquire()
        try:
            result = self._step(req)
            if result is WAIT:
                req.waker = arm()
                if type(req) is SampleRequest:
                    self.samplers.park(req)
                else:
                    assert isinstance(req, InsertRequest)
                    self.inserters.park(req)
                self._notify()
                return req
            return result
        finally:
            lock.release()

    def retry(self, req: Any, arm: Callable[[], Any]) -> Any:
        """One more step of parked request ``req`` (``Steps.retry``)."""
        lock = self.lock
        lock.acquire()
        try:
            result = self._step(req)
            if result is WAIT:
                req.notified = False
                req.waker = arm()
            return result
        finally:
            lock.release()

    def leave(self, req: Any) -> None:
        """``req`` leaves on an exception (``Steps.leave``): out of its list, and the
        wake-up passed on. It holds nothing to give back."""
        with self.lock:
            if req.registered:
                self._remove(req)
                self._notify()

    def _step(self, req: InsertRequest | SampleRequest) -> Any:
        if type(req) is SampleRequest:
            return self._try_sample(req)
        assert isinstance(req, InsertRequest)
        return self._try_insert(req)

    def _remove(self, req: InsertRequest | SampleRequest) -> None:
        if type(req) is SampleRequest:
            self.samplers.leave(req)
        else:
            assert isinstance(req, InsertRequest)
            self.inserters.leave(req)

    def _try_insert(self, req: InsertRequest) -> Any:
        if type(req) is AppendRequest:
            return self._try_append(req)
        if req.registered:
            if self.inserters[0] is not req:
                return WAIT
            if self.closed:
                self.inserters.leave(req)
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
            self.inserters.leave(req)
        self._notify()
        return keys

    def _try_append(self, req: AppendRequest) -> Any:
        """An append's step: what ``steps.append`` returns (the keys of the windows it
        inserted), or WAIT. One that
        completes no window goes at once when new (it inserts nothing); the others
        wait their turn among the inserts and for the limiter to admit their windows."""
        steps = self.steps
        assert steps is not None
        if self.closed:
            was = req.registered
            if was:
                self.inserters.leave(req)
                self._notify()
            raise QueueClosedError(
                f"{self.what} '{self.name}' "
                + ("was closed while this append waited" if was else "is closed")
                + " (nothing was written)"
            )
        m = steps.windows_completed(req.wid, req.count)
        if m and not req.registered:  # (m only shrinks: a first step's check holds)
            self.core.limiter.check_insert_count(
                m, f"{self.what} '{self.name}' (an append of {req.count} steps)"
            )
        if m or req.registered:
            if (self.inserters[0] is not req) if req.registered else bool(self.inserters):
                return WAIT
            if m and not self.core.can_insert(m):
                return WAIT
        keys = steps.append(req.wid, req.comps, req.count, req.priorities)
        if req.registered:
            self.inserters.leave(req)
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
            self.inserters.leave(req)
        self._notify()
        return None

    def _try_sample(self, req: SampleRequest) -> Any:
        if (self.samplers[0] is not req) if req.registered else bool(self.samplers):
            return WAIT
        n = req.n
        core = self.core
        if core.can_sample(n):
            data, keys, priorities, probabilities, times, size = core.sample(n)
            if req.registered:
                self.samplers.leave(req)
            self._notify()
            return ReplaySample(self.pack(data), keys, priorities, probabilities, times, size)
        if self.closed:
            if req.registered:
                self.samplers.leave(req)
                self._notify()
            size = core.store.size
            raise OutOfRangeError(
                f"{self.what} '{self.name}' is closed and cannot serve sample({n}) "
                f"(size {size}; the rate limiter or the items held do not allow it, and "
                "nothing can be inserted any more)",
                queue_name=self.name,
                requested=n,
                size=size,
            )
        return WAIT

    def _ready(self, req: InsertRequest | SampleRequest) -> bool:
        """Whether the head ``req`` can progress now (invariant 3)."""
        if self.closed:
            return True
        if type(req) is SampleRequest:
            return self.core.can_sample(req.n)
        assert isinstance(req, InsertRequest)
        if type(req) is AppendRequest:
            assert self.steps is not None
            m = self.steps.windows_completed(req.wid, req.count)
            return not m or self.core.can_insert(m)
        return self.core.can_insert(req.least)

    def _notify(self) -> None:
        """Notify the head of each list if it can progress now (invariant 3)."""
        for waiters in (self.inserters, self.samplers):
            if waiters:
                head = waiters[0]
                if not head.notified and self._ready(head):
                    wake(head)

    # -- operations that never wait -----------------------------------------------------

    def update(self, keys: npt.NDArray[Any], priorities: npt.NDArray[Any]) -> Any:
        """``update_priorities``'s step (it never waits, and wakes nobody)."""
        lock = self.lock
        lock.acquire()
        try:
            return self.core.update(keys, priorities)
        finally:
            lock.release()

    def delete(self, keys: npt.NDArray[Any]) -> Any:
        """``delete``'s step (it never waits; a delete can let an insert or a sample
        through)."""
        lock = self.lock
        lock.acquire()
        try:
            found = self.core.delete(keys)
            self._notify()
            return found
        finally:
            lock.release()

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
        return ReplayStatistics(
            size=core.store.size,
            max_size=core.max_size,
            inserts=core.inserts,
            samples=core.samples,
            deletes=core.deletes,
            evictions=core.evictions,
            insert_wait_s=self.inserters.blocked_s(now),
            sample_wait_s=self.samplers.blocked_s(now),
            inserts_waiting=len(self.inserters),
            samples_waiting=len(self.samplers),
            closed=self.closed,
        )

    def restore_waits(self, insert_wait_s: float, sample_wait_s: float) -> None:
        """Start the wait counters from a snapshot's (a fresh engine, nobody waiting)."""
        self.inserters = Waiters(insert_wait_s)
        self.samplers = Waiters(sample_wait_s)

    def check_invariants(self) -> None:
        """Raise AssertionError naming the first invariant of this module, or of the
        core's (``TableCore.check_invariants``), that does not hold now (for tests;
        takes the lock)."""
        with self.lock:
            for what, waiters in (("insert", self.inserters), ("sample", self.samplers)):
                for i, req in enumerate(waiters):
                    if not req.registered:
                        raise AssertionError(f"{self.name}: waiting {what} {i} is not registered")
                if waiters and not waiters[0].notified and self._ready(waiters[0]):
                    raise AssertionError(f"{self.name}: the head {what} can progress, not woken")
            for i, ins in enumerate(self.inserters):
                if ins.done and not (ins.progressive and i == 0):
                    raise AssertionError(
                        f"{self.name}: waiting insert {i} holds {ins.done} items in the table "
                        "(only a progressive head may)"
                    )
            self.core.check_invariants()
            if self.steps is not None:
                store = self.core.store
                slots = store.held_in_key_order()
                try:
                    self.steps.check_invariants(store.key[slots], store.data[0][slots])
                except AssertionError as exc:
                    raise AssertionError(f"{self.name}: the steps: {exc}") from None
