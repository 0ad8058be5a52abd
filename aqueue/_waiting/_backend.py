"""The few event-loop primitives waiting needs, for asyncio and trio.

``checkpoint()`` is one cancellation and scheduling point; ``make_waker()`` creates the
one-shot *waker* a parked task awaits and any thread may set. On asyncio a waker is a
future, set directly on the loop's thread; other threads hand it to the loop's
``_Wakeups``, which delivers every wake-up sent while one delivery is pending in a
single ``call_soon_threadsafe`` callback. On trio it is a ``trio.Event``, set through
the trio token from other threads. Setting a waker only *notifies*: the woken task
re-checks the queue itself, so a waiter cancelled after being woken loses nothing (it
passes the wake-up on instead).

Which event loop drives the caller is detected once per task and remembered in a
context variable (``_here``): every asyncio and trio task runs in a context of its
own, so the value never leaks from one task, loop or backend to another. A value is
trusted only on the thread that stored it (a context copied into a worker thread, as
``anyio.to_thread`` does, is detected afresh there), and a wrong guess corrects itself:
trio rejects asyncio's bare yield with TypeError, and asyncio rejects trio's
checkpoint with RuntimeError, after which the caller is detected again. Nothing here
is process-wide state but the per-loop ``_Wakeups``, held in a weak dictionary keyed by
the loop (they go with their loop).
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import types
import weakref
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Protocol, cast

__all__ = ["Waker", "checkpoint", "in_event_loop", "make_waker", "soon_threadsafe"]

_get_ident = threading.get_ident


class Waker(Protocol):
    """A one-shot notification a task awaits (``await waker.wait()``) and any thread may
    set (``waker.set()``)."""

    def wait(self) -> Awaitable[Any]:
        """An awaitable that completes once ``set()`` was called."""
        ...

    def set(self) -> None:
        """Notify the waiting task (from any thread)."""
        ...


class _Loop:
    """What the tasks of one thread's running event loop need: asyncio's loop and its
    wake-up channel, or trio's token (``trio`` is then the trio module)."""

    __slots__ = ("loop", "thread", "token", "trio", "wakeups")

    def __init__(self) -> None:
        self.thread = _get_ident()
        self.trio: Any = None
        self.token: Any = None
        self.wakeups: _Wakeups | None = None
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
            trio = sys.modules.get("trio")
            if trio is not None and trio.lowlevel.in_trio_run():
                self.trio = trio
                self.token = trio.lowlevel.current_trio_token()
        else:
            self.wakeups = _loop_wakeups(self.loop)

    @property
    def running(self) -> bool:
        return self.loop is not None or self.trio is not None


_current: contextvars.ContextVar[_Loop] = contextvars.ContextVar("aqueue_event_loop")
_trio: contextvars.ContextVar[Any] = contextvars.ContextVar("aqueue_trio")  # (checkpoint's)
_trio_get = _trio.get


def _here() -> _Loop:
    """The event loop driving the calling task (detected once per task and thread)."""
    here = _current.get(None)
    if here is None or here.thread != _get_ident():
        here = _Loop()
        if here.running:  # (outside a loop nothing is remembered)
            _current.set(here)
            _trio.set(here.trio)
    return here


def _redetect() -> _Loop:
    here = _Loop()
    _current.set(here)
    _trio.set(here.trio)
    return here


def in_event_loop() -> bool:
    """True when called from a thread that is running an asyncio or trio event loop."""
    return _here().running


@types.coroutine
def checkpoint() -> Generator[Any, Any, None]:
    """One cancellation and scheduling point on the event loop driving the caller.

    On asyncio this is a bare ``yield``: the task is rescheduled for the next loop
    iteration, and a pending cancellation is thrown in there, exactly as with
    ``asyncio.sleep(0)`` but without its two extra frames. On trio it is
    ``trio.lowlevel.checkpoint()``.
    """
    # Tasks are on asyncio unless this task found trio (a value carried into another
    # thread is still right about the backend, or the backend says so below: the yield
    # needs no loop object).
    trio = _trio_get(None)
    if trio is None:
        try:
            yield
            return
        except TypeError:  # trio: "received unrecognized yield message None"
            trio = _redetect().trio
            if trio is None:
                raise
    try:
        yield from trio.lowlevel.checkpoint().__await__()
    except RuntimeError:  # not trio after all (a context carried across loops)
        if _redetect().trio is not None:
            raise
        yield


class _Wakeups:
    """Wake-ups that other threads send to one asyncio event loop.

    A burst of them (16 pipeline threads handing back items, say) costs the loop one
    ``call_soon_threadsafe``, one self-pipe write and one callback instead of one of
    each per wake-up: a thread appends its future and schedules a delivery only when
    none is pending, and the delivery sets every future collected until it runs.
    Invariant: ``_pending`` is non-empty only while a delivery is scheduled (or about
    to be, by the thread that made it non-empty).
    """

    __slots__ = ("__weakref__", "_lock", "_loop", "_pending")

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


def _loop_wakeups(loop: asyncio.AbstractEventLoop) -> _Wakeups:
    """The ``_Wakeups`` of ``loop`` (called on the loop's own thread, once per task)."""
    w = _wakeups.get(loop)
    if w is None:
        w = _wakeups[loop] = _Wakeups(loop)
    return w


class _AsyncioWaker:
    __slots__ = ("_fut", "_thread", "_wakeups")

    def __init__(self, loop: asyncio.AbstractEventLoop, wakeups: _Wakeups, thread: int) -> None:
        self._thread = thread
        self._fut: asyncio.Future[None] = loop.create_future()
        self._wakeups = wakeups

    def wait(self) -> Awaitable[Any]:
        return self._fut

    def set(self) -> None:
        if _get_ident() == self._thread:
            if not self._fut.done():
                self._fut.set_result(None)
        else:
            self._wakeups.send(self._fut)


class _TrioWaker:
    __slots__ = ("_event", "_thread", "_token")

    def __init__(self, event: Any, token: Any, thread: int) -> None:
        self._thread = thread
        self._event = event
        self._token = token

    def wait(self) -> Awaitable[Any]:
        return cast("Awaitable[Any]", self._event.wait())

    def set(self) -> None:
        if _get_ident() == self._thread:
            self._event.set()
        else:
            try:
                self._token.run_sync_soon(self._event.set)
            except RuntimeError:  # trio.RunFinishedError: nobody left to wake
                pass


def make_waker() -> Waker:
    """Create a waker bound to the event loop driving the caller (asyncio or trio).

    Raises:
        RuntimeError: No asyncio or trio event loop runs in this thread.
    """
    here = _current.get(None)
    if here is None or here.thread != _get_ident():
        here = _here()
    loop = here.loop
    if loop is not None:
        assert here.wakeups is not None
        return _AsyncioWaker(loop, here.wakeups, here.thread)
    if here.trio is None:
        raise RuntimeError("aqueue: an await needs a running asyncio or trio event loop")
    return _TrioWaker(here.trio.Event(), here.token, here.thread)


def soon_threadsafe() -> Callable[[Callable[[], object]], None]:
    """A function that schedules a callback on the current event loop from any thread.

    Raises:
        RuntimeError: No asyncio or trio event loop runs in this thread.
    """
    here = _here()
    loop = here.loop
    if loop is not None:
        running = loop

        def asyncio_soon(fn: Callable[[], object]) -> None:
            try:
                running.call_soon_threadsafe(fn)
            except RuntimeError:  # the loop is closed: nobody is left to run it
                pass

        return asyncio_soon
    if here.trio is None:
        raise RuntimeError("aqueue: needs a running asyncio or trio event loop")
    token, finished = here.token, here.trio.RunFinishedError

    def trio_soon(fn: Callable[[], object]) -> None:
        try:
            token.run_sync_soon(fn)
        except finished:
            pass

    return trio_soon
