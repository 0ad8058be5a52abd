"""Waiting: how a parked request waits until its engine completes it.

Every operation that may have to wait has the same shape (anyio's memory streams and
trio's channels have it too):

1. check the arguments (nothing changes on bad input);
2. checkpoint (tasks only);
3. one engine step under the engine's lock, which returns the result, or a request it
   has *parked* (appended to its waiting list) with a waker from ``arm``;
4. wait (this module): sleep on the waker; on each wake-up, one more step
   (``Steps.retry``), until it returns a result or raises; on every way out that is an
   exception (cancellation, a timeout, an error) ``Steps.leave`` removes the request,
   puts back whatever it held and passes any wake-up on, then the exception propagates.

The ``_nowait`` twins are step 3 alone, without ``arm``: the step then raises instead of
parking. An engine is anything with the ``Steps`` methods: a queue's ``Engine``, and
a replay table's.

Wakers: a task's waker (``make_waker``) is awaited; a thread's is a
``threading.Event``. Waking only notifies: the woken side takes or admits for itself in
its own step, so a wake-up never carries data and one that arrives too late is
harmless.

Slow first waits: a layer above may register a ``SlowWaitWatch`` (``watch_slow_waits``;
the running layer does while a runner registered with ``add_queue_runner`` has not
started). While one is registered, a consumer's wait on a queue or table the watch
``watches`` gives its first sleep a deadline of ``SLOW_WAIT_S`` seconds: on expiry it
tells the watch (which warns), takes one more step (its waker may have been spent by
the deadline) and goes on waiting without one. No thread, no task, no timer otherwise:
with no watch registered a wait reads one module global.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio.lowlevel

from ._backend import make_waker
from ._requests import WAIT, Request

__all__ = [
    "SLOW_WAIT_S",
    "SlowWaitWatch",
    "Steps",
    "wait_task",
    "wait_thread",
    "watch_slow_waits",
]

SLOW_WAIT_S = 1.0
"""Seconds a watched consumer's first sleep lasts before the watch is told."""


class Steps(Protocol):
    """What the wait functions need of an engine."""

    def retry(self, req: Any, arm: Callable[[], Any], deferred: list[Request] | None = None) -> Any:
        """One more step of parked request ``req`` (after a wake-up): its result, or
        ``WAIT`` after re-arming it with a fresh waker from ``arm``. Raises what the
        operation raises (the request has then left)."""
        ...

    def leave(self, req: Any) -> None:
        """``req`` leaves on an exception: restore what it holds, pass wake-ups on."""
        ...


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

    ``req.waker`` is a ``threading.Event``. The wake-ups a thread's step decides are
    sent after it releases the lock (see ``fire_all``). ``consumed``: as for
    ``wait_task``.

    Raises:
        TimeoutError: ``timeout`` seconds passed first (the request has left, and
            changed nothing); the message names ``what``.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    watch = _watch
    if watch is not None and (consumed is None or not watch.watches(consumed)):
        watch = None
    try:
        while True:
            event: Any = req.waker  # (a threading.Event)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"{what} timed out after {timeout} s")
            if watch is not None and (remaining is None or remaining > SLOW_WAIT_S):
                if not event.wait(SLOW_WAIT_S):
                    watch.waited(consumed)
                watch = None
                continue
            if not event.wait(remaining):
                continue
            result = steps.retry(req, threading.Event, [])
            if result is not WAIT:
                return result
    except BaseException:
        steps.leave(req)
        raise
