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
from collections.abc import Awaitable
from typing import Any

__all__ = ["Waker", "checkpoint", "in_event_loop", "make_waker", "trio_checkpoint"]

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


_sleep = asyncio.sleep


def checkpoint() -> Awaitable[None]:
    """One cancellation and scheduling point on the current event loop.

    The hot paths inline this as ``_sleep(0) if _get_running_loop() else
    trio_checkpoint()``: asyncio.sleep(0) is the cheapest asyncio yield measured here
    (cheaper than a bare generator ``yield``), and a call layer costs ~0.2 µs per
    operation.
    """
    if _get_running_loop() is not None:
        return _sleep(0)
    return trio_checkpoint()


def trio_checkpoint() -> Awaitable[None]:
    """trio's checkpoint (imported lazily: trio is optional)."""
    import trio

    return trio.lowlevel.checkpoint()  # noqa: ASYNC105 - the caller awaits it


class Waker:
    """A one-shot notification a task awaits (``await waker.wait()``) and any thread may
    set (``waker.set()``)."""

    __slots__ = ("_thread",)

    def __init__(self) -> None:
        self._thread = threading.get_ident()

    def wait(self) -> Awaitable[Any]:
        """An awaitable that completes once ``set()`` was called."""
        raise NotImplementedError

    def set(self) -> None:
        """Notify the waiting task (from any thread)."""
        raise NotImplementedError


class _AsyncioWaker(Waker):
    __slots__ = ("_fut", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self._fut: asyncio.Future[None] = loop.create_future()

    def wait(self) -> Awaitable[Any]:
        return self._fut

    def set(self) -> None:
        if threading.get_ident() == self._thread:
            if not self._fut.done():
                self._fut.set_result(None)
        else:
            try:
                self._loop.call_soon_threadsafe(_set_future, self._fut)
            except RuntimeError:  # the event loop is gone: nobody left to wake
                pass


class _TrioWaker(Waker):
    __slots__ = ("_event", "_token")

    def __init__(self, event: Any, token: Any) -> None:
        super().__init__()
        self._event = event
        self._token = token

    def wait(self) -> Awaitable[Any]:
        return self._event.wait()  # type: ignore[no-any-return]

    def set(self) -> None:
        if threading.get_ident() == self._thread:
            self._event.set()
        else:
            try:
                self._token.run_sync_soon(self._event.set)
            except RuntimeError:  # trio.RunFinishedError: nobody left to wake
                pass


def _set_future(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def make_waker() -> Waker:
    """Create a waker bound to the running event loop (asyncio or trio)."""
    loop = _get_running_loop()
    if loop is not None:
        return _AsyncioWaker(loop)
    import trio

    return _TrioWaker(trio.Event(), trio.lowlevel.current_trio_token())
