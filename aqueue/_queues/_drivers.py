"""Drivers: how a request that cannot complete at once waits for the engine.

A queue operation converts its data with the spec and calls one of the engine's fast
paths (``Engine.*_now``); when that cannot complete, it builds a request and hands it
to a driver, which alone owns the waiting:

- ``TaskDriver`` (tasks on asyncio or trio): checkpoint once, try the request under the
  engine's lock, else park it with a fresh *waker* and await it; on each wake-up try
  again; on any exception (cancellation included) ``Engine.abandon`` puts back what the
  request had claimed and passes the wake-up on, then the exception propagates. A batch
  dequeue may park *before* its checkpoint (``park_get_now``: an enqueue that runs next
  then copies straight into its batch); its wait is then its checkpoint, and a
  cancellation that was already pending when the call began is raised at its first
  wake-up, before it takes anything.
- ``ThreadDriver`` (threads other than the event loop's): the same loop on a
  ``threading.Event`` with a deadline (expiry raises TimeoutError and changes nothing);
  the wake-ups a thread's step decides are sent after it releases the lock (``fire_all``).
- ``get_nowait`` / ``put_nowait``: one try, never parked; QueueEmpty / QueueFull name
  the reason.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import anyio.lowlevel

from .._errors import QueueEmpty, QueueFull
from ._backend import checkpoint, in_event_loop, make_waker
from ._engine import Engine
from ._requests import WAIT, GetRequest, PutRequest, Request, fire_all

__all__ = ["TaskDriver", "ThreadDriver", "get_nowait", "put_nowait"]


def _put_step(engine: Engine) -> Callable[[PutRequest], Any]:
    """``engine.try_put`` in the shape of ``try_get``: None when done, else WAIT."""

    def step(req: PutRequest) -> Any:
        return None if engine.try_put(req) else WAIT

    return step


class TaskDriver:
    """Runs requests of tasks on the event loop that drives them."""

    __slots__ = ("_engine", "_put")

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._put = _put_step(engine)

    async def get(self, req: GetRequest, *, checkpointed: bool = False) -> Any:
        """Complete dequeue request ``req``: its components (the engine's result)."""
        return await self._run(req, self._engine.try_get, checkpointed)

    async def put(self, req: PutRequest, *, checkpointed: bool = False) -> None:
        """Complete enqueue request ``req``."""
        await self._run(req, self._put, checkpointed)

    def park_get_now(self, req: GetRequest) -> bool:
        """Park ``req`` at once if it cannot complete now (True), before any checkpoint;
        False (nothing changed) if it could complete now."""
        engine = self._engine
        with engine.lock:
            if engine.can_get_now(req):
                return False
            req.waker = make_waker()
            engine.park(req)
        return True

    async def _run(self, req: Request, step: Callable[[Any], Any], checkpointed: bool) -> Any:
        if not checkpointed:
            await checkpoint()
        engine = self._engine
        with engine.lock:
            result = step(req)
            if result is not WAIT:
                return result
            req.waker = make_waker()
            engine.park(req)
        return await self.wait(req, step, checkpointed=True)

    async def wait(self, req: Request, step: Callable[[Any], Any], *, checkpointed: bool) -> Any:
        """Wait until parked request ``req`` completes or fails.

        ``checkpointed`` is False for a request parked before its checkpoint: a
        cancellation pending since before the call is then raised at the first wake-up,
        before the request takes anything (on asyncio an anyio scope does not cancel a
        task whose wake-up is already set, so the wait alone would not raise it).
        """
        engine = self._engine
        try:
            while True:
                waker = req.waker
                assert waker is not None
                await waker.wait()
                if not checkpointed:
                    await anyio.lowlevel.checkpoint_if_cancelled()
                    checkpointed = True
                with engine.lock:
                    result = step(req)
                    if result is not WAIT:
                        return result
                    req.notified = False
                    req.waker = make_waker()
        except BaseException:
            engine.abandon(req)
            raise

    def wait_get(self, req: GetRequest) -> Any:
        """The awaitable ``wait`` of a dequeue parked by ``park_get_now``."""
        return self.wait(req, self._engine.try_get, checkpointed=False)


class ThreadDriver:
    """Runs requests of threads other than the event loop's, blocking them."""

    __slots__ = ("_engine", "_loop_thread", "_put")

    def __init__(self, engine: Engine, loop_thread: int | None) -> None:
        self._engine = engine
        self._loop_thread = loop_thread  # the event loop's thread, when known
        self._put = _put_step(engine)

    def check(self, what: str) -> None:
        """Refuse to block an event loop's thread.

        Raises:
            RuntimeError: The caller runs an event loop (the loop the view was created
                on, or any asyncio or trio loop).
        """
        loop_thread = self._loop_thread
        here = threading.get_ident()
        if here == loop_thread if loop_thread is not None else in_event_loop():
            raise RuntimeError(
                f"BlockingQueue.{what}() of queue '{self._engine.name}' was called on an "
                f"event-loop thread, where blocking would stall the loop; use "
                f"`await q.{what}(...)` there"
            )

    def get(self, req: GetRequest, timeout: float | None, what: str) -> Any:
        """Complete dequeue request ``req`` within ``timeout`` seconds: its components."""
        return self._run(req, self._engine.try_get, timeout, what)

    def put(self, req: PutRequest, timeout: float | None, what: str) -> None:
        """Complete enqueue request ``req`` within ``timeout`` seconds."""
        self._run(req, self._put, timeout, what)

    def _run(
        self, req: Request, step: Callable[[Any], Any], timeout: float | None, what: str
    ) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        result = self._step(req, step, True)
        if result is not WAIT:
            return result
        event = req.event
        assert event is not None
        try:
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(
                        f"BlockingQueue.{what}() on queue '{self._engine.name}' "
                        f"timed out after {timeout} s"
                    )
                if not event.wait(remaining):
                    continue
                result = self._step(req, step, False)
                if result is not WAIT:
                    return result
        except BaseException:
            self._engine.abandon(req)
            raise

    def _step(self, req: Request, step: Callable[[Any], Any], first: bool) -> Any:
        """One step under the lock; on ``WAIT`` the request is parked (``first``) or
        re-armed. Its wake-ups are sent after the lock is released."""
        engine = self._engine
        deferred: list[Request] = []
        try:
            with engine.lock:
                engine.deferred = deferred
                try:
                    result = step(req)
                    if result is WAIT:
                        if first:
                            req.event = threading.Event()
                            engine.park(req)
                        else:
                            req.notified = False
                            assert req.event is not None
                            req.event.clear()
                    return result
                finally:
                    engine.deferred = None
        finally:
            fire_all(deferred)


def get_nowait(engine: Engine, req: GetRequest) -> Any:
    """Try dequeue request ``req`` once: its components.

    Raises:
        QueueEmpty: It cannot complete now (nothing changed).
        OutOfRangeError: The queue is final and cannot supply it.
    """
    req.nowait = True
    with engine.lock:
        result = engine.try_get(req)
        if result is not WAIT:
            return result
        if engine.getters:
            message = f"queue '{engine.name}': earlier dequeues are waiting"
        else:
            floor = 0 if engine.closed else engine.min_after
            message = (
                f"queue '{engine.name}' cannot supply {req.n} element(s) now "
                f"(size {engine.storage.size}, floor {floor})"
            )
    raise QueueEmpty(message)


def put_nowait(engine: Engine, req: PutRequest) -> None:
    """Try enqueue request ``req`` once, all-or-nothing.

    Raises:
        QueueFull: It cannot complete now (nothing changed).
        QueueClosedError: The queue is closed.
    """
    req.nowait = True
    req.atomic = True
    with engine.lock:
        if engine.try_put(req):
            return
        if engine.putters:
            reason = "earlier enqueues are waiting"
        else:
            free = max(0, engine.capacity - engine.storage.size)
            reason = f"needs room for {req.count}, has {free}"
    raise QueueFull(f"queue '{engine.name}': {reason}")
