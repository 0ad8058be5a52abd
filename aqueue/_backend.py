"""The few event-loop primitives the queues need, for asyncio and trio.

The queues park on one *waker* per wait: a one-shot object the waiter awaits and any
thread may set. On asyncio it is a future, set directly on the loop's thread or through
``call_soon_threadsafe`` from others; on trio a ``trio.Event``, set through the trio
token from other threads. Setting a waker only *notifies*: the woken task re-checks the
queue itself, so a waiter cancelled after being woken loses nothing (it passes the
wake-up on instead).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Waker", "checkpoint", "in_event_loop", "make_waker"]

_get_running_loop = asyncio._get_running_loop  # returns None instead of raising


def _current_trio_token() -> Any:
    trio = sys.modules.get("trio")
    if trio is None:  # trio cannot be running if it was never imported
        return None
    try:
        return trio.lowlevel.current_trio_token()
    except RuntimeError:
        return None


def in_event_loop() -> bool:
    """True when called from a thread that is running an asyncio or trio event loop."""
    return _get_running_loop() is not None or _current_trio_token() is not None


def checkpoint() -> Awaitable[None]:
    """One cancellation and scheduling point on the current event loop."""
    if _get_running_loop() is not None:
        return asyncio.sleep(0)  # measured faster than a bare generator yield
    import trio

    return trio.lowlevel.checkpoint()  # noqa: ASYNC105 - the caller awaits it


class Waker:
    """A one-shot notification a task awaits and any thread may set."""

    __slots__ = ("_set_here", "_set_remote", "_thread", "wait")

    def __init__(
        self,
        wait: Callable[[], Awaitable[Any]],
        set_here: Callable[[], Any],
        set_remote: Callable[[], Any],
    ) -> None:
        self.wait = wait
        self._set_here = set_here
        self._set_remote = set_remote
        self._thread = threading.get_ident()

    def set(self) -> None:
        """Notify the waiting task (from any thread)."""
        if threading.get_ident() == self._thread:
            self._set_here()
        else:
            try:
                self._set_remote()
            except RuntimeError:  # the event loop is gone: nobody left to wake
                pass


def _set_future(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def make_waker() -> Waker:
    """Create a waker bound to the running event loop (asyncio or trio)."""
    loop = _get_running_loop()
    if loop is not None:
        fut: asyncio.Future[None] = loop.create_future()
        return Waker(
            lambda: fut,
            lambda: _set_future(fut),
            lambda: loop.call_soon_threadsafe(_set_future, fut),
        )
    import trio

    event = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def set_remote() -> None:
        try:
            token.run_sync_soon(event.set)
        except trio.RunFinishedError:
            pass

    return Waker(event.wait, event.set, set_remote)
