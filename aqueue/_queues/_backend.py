"""The few event-loop primitives the queues need, for asyncio and trio.

The queues park on one *waker* per wait: a one-shot object the waiter awaits and any
thread may set. On asyncio it is a future, set directly on the loop's thread; other
threads hand it to the loop's ``_Wakeups``, which delivers every wake-up sent while one
delivery is pending in a single ``call_soon_threadsafe`` callback. On trio it is a
``trio.Event``, set through the trio token from other threads. Setting a waker only
*notifies*: the woken task re-checks the queue itself, so a waiter cancelled after
being woken loses nothing (it passes the wake-up on instead).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import types
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, cast

__all__ = ["Waker", "checkpoint", "in_event_loop", "make_waker", "soon_threadsafe"]

_get_running_loop = asyncio._get_running_loop  # returns None instead of raising
_get_ident = threading.get_ident


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


_asyncio_first = True  # which backend checkpoint() tries first (see checkpoint)
_trio_checkpoint: Callable[[], Coroutine[Any, Any, None]] | None = None


@types.coroutine
def checkpoint() -> Generator[Any, Any, None]:
    """One cancellation and scheduling point on the event loop driving the caller.

    On asyncio this is a bare ``yield``: the task is rescheduled for the next loop
    iteration, and a pending cancellation is thrown in there, exactly as with
    ``asyncio.sleep(0)`` but without its two extra frames. Telling the backends apart
    per call would cost more than the yield on Python 3.11 (``_get_running_loop()``
    takes ~0.2 µs there), so the backend seen last is tried first: trio rejects a bare
    yield by throwing TypeError in at once (after rescheduling the task), and that
    switches this process to trio's checkpoint until an asyncio loop is seen again.
    """
    global _asyncio_first
    if _asyncio_first:
        try:
            yield
            return
        except TypeError:  # trio: "received unrecognized yield message None"
            if _get_running_loop() is not None:
                raise
            _asyncio_first = False
    elif _get_running_loop() is not None:
        _asyncio_first = True
        yield
        return
    global _trio_checkpoint
    if _trio_checkpoint is None:
        import trio  # optional: only reached when trio drives the caller

        _trio_checkpoint = trio.lowlevel.checkpoint
    yield from _trio_checkpoint().__await__()


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


class _Wakeups:
    """Wake-ups that other threads send to one asyncio event loop.

    A burst of them (16 pipeline threads handing back items, say) costs the loop one
    ``call_soon_threadsafe``, one self-pipe write and one callback instead of one of
    each per wake-up: a thread appends its future and schedules a delivery only when
    none is pending, and the delivery sets every future collected until it runs.
    Invariant: ``_pending`` is non-empty only while a delivery is scheduled (or about
    to be, by the thread that made it non-empty).
    """

    __slots__ = ("_lock", "_loop", "_pending")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: list[asyncio.Future[None]] = []

    def send(self, fut: asyncio.Future[None]) -> None:
        """Have ``fut`` set on the loop's thread (called from any other thread)."""
        with self._lock:
            pending = self._pending
            pending.append(fut)
            if len(pending) > 1:  # a delivery is already scheduled and will include it
                return
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the event loop is gone: nobody left to wake
            with self._lock:
                self._pending.clear()

    def _deliver(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for fut in pending:
            if not fut.done():
                fut.set_result(None)


_wakeups: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Wakeups] = (
    weakref.WeakKeyDictionary()
)
_last: tuple[asyncio.AbstractEventLoop | None, _Wakeups | None] = (None, None)


def _loop_wakeups(loop: asyncio.AbstractEventLoop) -> _Wakeups:
    """The ``_Wakeups`` of ``loop`` (called on the loop's own thread).

    One per loop, kept in a weak dictionary; the last one used is cached, since a
    process almost always runs one loop at a time (a dictionary lookup costs more than
    the rest of creating a waker).
    """
    global _last
    last_loop, last = _last
    if last_loop is loop and last is not None:
        return last
    w = _wakeups.get(loop)
    if w is None:
        w = _wakeups[loop] = _Wakeups(loop)
    _last = (loop, w)
    return w


class _AsyncioWaker(Waker):
    __slots__ = ("_fut", "_wakeups")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._thread = _get_ident()  # (Waker.__init__ inlined: one wait creates one)
        self._fut: asyncio.Future[None] = loop.create_future()
        self._wakeups = _loop_wakeups(loop)

    def wait(self) -> Awaitable[Any]:
        return self._fut

    def set(self) -> None:
        if _get_ident() == self._thread:
            if not self._fut.done():
                self._fut.set_result(None)
        else:
            self._wakeups.send(self._fut)


class _TrioWaker(Waker):
    __slots__ = ("_event", "_token")

    def __init__(self, event: Any, token: Any) -> None:
        super().__init__()
        self._event = event
        self._token = token

    def wait(self) -> Awaitable[Any]:
        return cast("Awaitable[Any]", self._event.wait())

    def set(self) -> None:
        if threading.get_ident() == self._thread:
            self._event.set()
        else:
            try:
                self._token.run_sync_soon(self._event.set)
            except RuntimeError:  # trio.RunFinishedError: nobody left to wake
                pass


def soon_threadsafe() -> Callable[[Callable[[], object]], None]:
    """A function that schedules a callback on the current event loop from any thread."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        import trio

        token = trio.lowlevel.current_trio_token()

        def trio_soon(fn: Callable[[], object]) -> None:
            try:
                token.run_sync_soon(fn)
            except trio.RunFinishedError:
                pass

        return trio_soon

    def asyncio_soon(fn: Callable[[], object]) -> None:
        try:
            loop.call_soon_threadsafe(fn)
        except RuntimeError:  # the loop is closed: nobody is left to run it
            pass

    return asyncio_soon


def make_waker() -> Waker:
    """Create a waker bound to the running event loop (asyncio or trio)."""
    loop = _get_running_loop()
    if loop is not None:
        return _AsyncioWaker(loop)
    import trio

    return _TrioWaker(trio.Event(), trio.lowlevel.current_trio_token())
