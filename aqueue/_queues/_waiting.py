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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio.lowlevel

from ._backend import make_waker
from ._requests import WAIT, Request

__all__ = ["Steps", "wait_task", "wait_thread"]


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


async def wait_task(steps: Steps, req: Request, *, checkpointed: bool = True) -> Any:
    """Wait until parked request ``req`` completes: its result.

    ``checkpointed`` is False for a request parked before its checkpoint (a batch
    dequeue that waits parks first, so that enqueues running meanwhile copy straight
    into its batch): its first wake-up is then also its checkpoint, and a cancellation
    that was pending since before the call is raised there, before the request takes
    anything (on asyncio an anyio scope does not cancel a task whose wake-up is already
    set, so the wait alone would not raise it).
    """
    try:
        while True:
            waker: Any = req.waker
            await waker.wait()
            if not checkpointed:
                await anyio.lowlevel.checkpoint_if_cancelled()
                checkpointed = True
            result = steps.retry(req, make_waker)
            if result is not WAIT:
                return result
    except BaseException:
        steps.leave(req)
        raise


def wait_thread(steps: Steps, req: Request, timeout: float | None, what: str) -> Any:
    """Block the calling thread until parked request ``req`` completes: its result.

    ``req.waker`` is a ``threading.Event``. The wake-ups a thread's step decides are
    sent after it releases the lock (see ``fire_all``).

    Raises:
        TimeoutError: ``timeout`` seconds passed first (the request has left, and
            changed nothing); the message names ``what``.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            event: Any = req.waker  # (a threading.Event)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"{what} timed out after {timeout} s")
            if not event.wait(remaining):
                continue
            result = steps.retry(req, threading.Event, [])
            if result is not WAIT:
                return result
    except BaseException:
        steps.leave(req)
        raise
