"""Requests, their waiting lists, and how a parked request waits: once, for every engine.

Both engines (a queue's ``Engine`` in ``aqueue/_queues/_engine.py``, a replay table's
``ReplayEngine`` in ``aqueue/_replay/_engine.py``) run their operations in this shape
(anyio's memory streams and trio's channels have it too):

1. check the arguments (nothing changes on bad input);
2. checkpoint (tasks only: ``_backend.checkpoint``);
3. the engine's *first step*, under its lock: it returns the operation's result, or
   the ``Request`` it *parked* (appended to one of its ``Waiters``) with a waker from
   ``arm`` (``make_waker`` for a task, ``threading.Event`` for a thread);
4. wait: ``wait_task`` or ``wait_thread`` sleep on the waker and, on each wake-up, take
   one more step (``Steps.retry``) until it returns a result or raises; on every way
   out that is an exception (cancellation, a timeout, an error), ``Steps.leave``
   removes the request, puts back what it held and passes its wake-up on, then the
   exception propagates.

The ``_nowait`` twins are step 3 without ``arm``: the step raises instead of parking.

A request's life (its fields change under its engine's lock only):

- *parked*: in its list (``registered``), with a ``waker``;
- *notified*: the engine decided it can progress and called ``wake``, which set
  ``notified`` and sets the waker. Waking only notifies: the woken side runs its own
  step, which completes it or re-arms it with a fresh waker (``notified`` false
  again). A wake-up carries no data, so one that arrives late is harmless;
- *done*: it completed, failed or left; its list no longer holds it, and whatever it
  held (a queue's claimed elements) is back. A request that leaves passes any wake-up
  on: the engine checks the new head.

``Waiters``: the parked requests of one direction, oldest first (a ``deque``: its
truth, length and head are read on every step), which also keeps the time during
which it was not empty (``blocked_s``; ``time_full_s``/``time_empty_s`` of a queue,
``insert_wait_s``/``sample_wait_s`` of a table).

Threads: a thread takes every step through ``thread_step``. The wake-ups it decides
under the engine's lock are collected in the thread's own list (``wake`` looks there)
and sent once the step has returned, its lock released: waking a task from another
thread is a system call that may hand the GIL to the event loop, and every other
thread would wait for the lock meanwhile. A wake-up is never lost: ``notified`` was
set under the lock. That is the one place deferred wake-ups are handled; an engine's
step takes its lock and nothing else.

Slow first waits: a layer above may register a ``SlowWaitWatch`` (``watch_slow_waits``;
the running layer does while a runner registered with ``add_queue_runner`` has not
started). While one is registered, a consumer's wait on a queue or table the watch
``watches`` gives its first sleep a deadline of ``SLOW_WAIT_S`` seconds: on expiry it
tells the watch (which warns), takes one more step (the deadline may have spent its
waker) and goes on waiting. No thread, task or timer otherwise: with no watch, a wait
reads one module global.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Generic, Protocol, TypeVar

import anyio
import anyio.lowlevel

from ._backend import make_waker

__all__ = [
    "SLOW_WAIT_S",
    "WAIT",
    "Request",
    "SlowWaitWatch",
    "Steps",
    "Waiters",
    "thread_step",
    "wait_task",
    "wait_thread",
    "wake",
    "watch_slow_waits",
]

X = TypeVar("X")
_monotonic = time.monotonic


class _Wait:
    """The type of ``WAIT``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WAIT"


WAIT: Final = _Wait()
"""What a retried step returns when its request must wait longer."""


class Request:
    """What every parked request has: its list state and how to wake it (the engines'
    requests extend it with what their operation needs)."""

    __slots__ = ("notified", "registered", "waker")

    def __init__(self) -> None:
        self.registered = False  # in its engine's list
        self.notified = False  # a wake-up was sent and not yet consumed
        self.waker: Any = None  # a task's Waker or a thread's threading.Event

    def fire(self) -> None:
        """Wake the waiting task or thread (its engine decided it can progress)."""
        self.waker.set()


R = TypeVar("R", bound=Request)


class Waiters(deque[R], Generic[R]):
    """Parked requests of one direction, oldest first, and how long there were any (see
    the module docstring)."""

    __slots__ = ("_since", "_total")

    def __init__(self, total_s: float = 0.0) -> None:
        super().__init__()
        self._since = 0.0
        self._total = total_s  # (a restored table's wait so far)

    def park(self, req: R) -> None:
        """Append ``req`` (registered from now on)."""
        if not self:
            self._since = _monotonic()
        req.registered = True
        self.append(req)

    def leave(self, req: R) -> bool:
        """Take ``req`` out of the list; True when it was the head. A request that is
        not registered (done already) is left alone (False)."""
        if not req.registered:
            return False
        req.registered = False
        was_head = self[0] is req
        if was_head:
            self.popleft()
        else:
            self.remove(req)
        if not self:
            self._total += _monotonic() - self._since
        return was_head

    def blocked_s(self, now: float) -> float:
        """Seconds during which the list was not empty, up to ``now``."""
        return self._total + (now - self._since if self else 0.0)

    def quiet(self) -> int:
        """Waiting requests with no wake-up pending (they cannot progress until their
        engine's state changes: every change wakes a head that can)."""
        return sum(1 for r in self if not r.notified)


class _Thread(threading.local):
    deferred: list[Request] | None = None  # while the thread takes a step


_thread = _Thread()


def wake(req: Request) -> None:
    """Notify ``req`` (its engine's lock held): now, or once the step of the thread
    that decided it has returned (see the module docstring)."""
    req.notified = True
    deferred = _thread.deferred
    if deferred is None:
        req.fire()
    else:
        deferred.append(req)


def thread_step(step: Callable[..., X], *args: Any) -> X:
    """``step(*args)``, an engine step taken by a thread: the wake-ups it decides are
    sent once it has returned (or raised), its lock released."""
    local = _thread
    deferred: list[Request] = []
    local.deferred = deferred
    try:
        return step(*args)
    finally:
        local.deferred = None
        for r in deferred:
            r.fire()


class Steps(Protocol):
    """What the wait functions need of an engine."""

    def retry(self, req: Any, arm: Callable[[], Any]) -> Any:
        """One more step of parked request ``req`` (after a wake-up): its result, or
        ``WAIT`` after re-arming it with a fresh waker from ``arm``. Raises what the
        operation raises (the request has then left)."""
        ...

    def leave(self, req: Any) -> None:
        """``req`` leaves on an exception: restore what it holds, pass wake-ups on."""
        ...


# -- slow first waits --------------------------------------------------------------------

SLOW_WAIT_S = 1.0
"""Seconds a watched consumer's first sleep lasts before the watch is told."""


class SlowWaitWatch(Protocol):
    """What a layer above registers to hear of consumers that waited long (see the
    module docstring)."""

    def watches(self, consumed: Any) -> bool:
        """Whether a wait of a consumer of ``consumed`` (a queue or table) is watched."""
        ...

    def waited(self, consumed: Any) -> None:
        """A consumer of ``consumed`` has waited ``SLOW_WAIT_S`` seconds (and waits on)."""
        ...


_watch: SlowWaitWatch | None = None


def watch_slow_waits(watch: SlowWaitWatch | None) -> None:
    """Register ``watch`` (None: none, and waits pay nothing for it)."""
    global _watch
    _watch = watch


async def _first_sleep_watched(waker: Any, watch: SlowWaitWatch, consumed: Any) -> None:
    """Sleep on ``waker`` for ``SLOW_WAIT_S`` at most; tell ``watch`` if the deadline
    passed first."""
    with anyio.move_on_after(SLOW_WAIT_S) as scope:
        await waker.wait()
    if scope.cancelled_caught:
        watch.waited(consumed)


# -- the waits ---------------------------------------------------------------------------


async def wait_task(
    steps: Steps, req: Request, consumed: Any = None, *, checkpointed: bool = True
) -> Any:
    """Wait until parked request ``req`` completes: its result.

    ``consumed`` is the queue or table a consumer's request takes from (None for a
    producer's): its first sleep may be watched (see the module docstring).
    ``checkpointed`` is False for a request parked before its checkpoint (a batch
    dequeue that waits parks first, so that enqueues running meanwhile copy straight
    into its batch): its first wake-up is then also its checkpoint, and a cancellation
    that was pending since before the call is raised there, before the request takes
    anything (on asyncio an anyio scope does not cancel a task whose wake-up is already
    set, so the wait alone would not raise it).
    """
    try:
        watch = _watch
        while True:
            waker: Any = req.waker
            if watch is None:
                await waker.wait()
            else:  # (a runner was registered and never started: see the module)
                if consumed is not None and watch.watches(consumed):
                    # on expiry the waker may be spent: the step below re-arms it
                    await _first_sleep_watched(waker, watch, consumed)
                watch = None
            if not checkpointed:
                await anyio.lowlevel.checkpoint_if_cancelled()
                checkpointed = True
            result = steps.retry(req, make_waker)
            if result is not WAIT:
                return result
    except BaseException:
        steps.leave(req)
        raise


def wait_thread(
    steps: Steps, req: Request, timeout: float | None, what: str, consumed: Any = None
) -> Any:
    """Block the calling thread until parked request ``req`` completes: its result.

    ``req.waker`` is a ``threading.Event``; every step is a ``thread_step``.
    ``consumed``: as for ``wait_task``.

    Raises:
        TimeoutError: ``timeout`` seconds passed first (the request has left, and
            changed nothing); the message names ``what``.
    """
    deadline = None if timeout is None else _monotonic() + timeout
    watch = _watch
    if watch is not None and (consumed is None or not watch.watches(consumed)):
        watch = None
    try:
        while True:
            event: Any = req.waker  # (a threading.Event)
            remaining = None if deadline is None else deadline - _monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"{what} timed out after {timeout} s")
            if watch is not None and (remaining is None or remaining > SLOW_WAIT_S):
                if not event.wait(SLOW_WAIT_S):
                    watch.waited(consumed)
                watch = None
                continue
            if not event.wait(remaining):
                continue
            result = thread_step(steps.retry, req, threading.Event)
            if result is not WAIT:
                return result
    except BaseException:
        thread_step(steps.leave, req)
        raise
