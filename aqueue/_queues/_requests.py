"""Pending requests: what an enqueue or a dequeue that has to wait leaves behind.

A request is created by a queue operation that cannot complete at once (or that must be
tried as a whole: the ``_nowait`` twins, thread-side operations). The engine
(``_engine.py``) keeps the pending ones in two head-of-line lists and changes their
fields under the queue's lock only; a driver (``_drivers.py``) owns the waiting.

Life of a request:

1. *new*: built by the queue class from converted components (``PutRequest``) or a
   count (``GetRequest``); ``registered`` is False.
2. *parked*: the engine appended it to its list (``Engine.park``); the driver gave it a
   way to be woken first: a ``waker`` (a task) or an ``event`` (a thread).
3. *notified*: the engine decided it can progress and set ``notified`` under the lock,
   then fired its waker or event (for a thread's step, after releasing the lock: see
   ``fire_all``). Notifying never hands over data: the woken side calls
   ``Engine.try_put``/``try_get`` itself.
4. *done*: it completed, failed, or left (cancellation, timeout). On every way out the
   engine removes it from its list and passes any wake-up on, so none is lost.

A ``GetRequest`` may hold elements it has claimed but not yet returned (``claims``, or
rows in ``out`` for a FIFO ring's filling batch); they have left the storage and go
back to it, in order, when the request fails or leaves.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._backend import Waker
    from ._declare import Components

__all__ = [
    "MANY",
    "ONE",
    "SOME",
    "UP_TO",
    "WAIT",
    "GetRequest",
    "PutRequest",
    "Request",
    "fire_all",
]

ONE: Final = 0  # one element (element form)
MANY: Final = 1  # exactly n elements (batch form)
UP_TO: Final = 2  # up to n elements once the queue is final (batch form)
SOME: Final = 3  # 1..n elements as soon as one can be taken (batch form)


class _Wait:
    """The type of ``WAIT``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WAIT"


WAIT: Final = _Wait()
"""Returned by the engine's steps when a request must wait."""


class Request:
    """What every pending request has: its list state and how to wake it."""

    __slots__ = ("event", "notified", "nowait", "registered", "waker")

    def __init__(self) -> None:
        self.registered = False  # in the engine's list
        self.notified = False  # a wake-up was sent and not yet consumed
        self.nowait = False  # a ``_nowait`` twin: tried once, never parked
        self.waker: Waker | None = None  # set by the task driver
        self.event: threading.Event | None = None  # set by the thread driver

    def fire(self) -> None:
        """Wake the waiting thread or task (the engine decided it can progress)."""
        if self.event is not None:
            self.event.set()
        elif self.waker is not None:
            self.waker.set()


class PutRequest(Request):
    """An enqueue of ``count`` elements (``mode`` ONE or MANY).

    ``pos`` elements have been admitted so far; an *atomic* request (``_nowait``, a
    timed thread ``enqueue_many``) is admitted whole or not at all. ``rejected`` is set
    by ``close(cancel_pending_enqueues=True)``: the request then fails at its next step,
    keeping what it had admitted.
    """

    __slots__ = ("atomic", "comps", "count", "mode", "pos", "rejected")

    def __init__(self, mode: int, comps: Components, count: int) -> None:
        super().__init__()
        self.mode = mode
        self.comps = comps
        self.count = count
        self.pos = 0
        self.atomic = False
        self.rejected = False


class GetRequest(Request):
    """A dequeue of ``n`` elements (``mode`` ONE, MANY or UP_TO).

    ``claimed`` elements are held so far: as storage chunks in ``claims`` (a
    *progressive* request, larger than ``capacity - min_after_dequeue``, which could
    never be served in one take), or as rows ``out[:claimed]`` of its own output batch
    (a *filling* request on a FIFO ring: enqueues copy straight into ``out``).
    ``eager``: it can progress as soon as one element can be taken (a progressive
    request, or a SOME request, which then returns what it could take).
    """

    __slots__ = ("claimed", "claims", "eager", "mode", "n", "out", "progressive")

    def __init__(self, mode: int, n: int, progressive: bool = False) -> None:
        super().__init__()
        self.mode = mode
        self.n = n
        self.progressive = progressive
        self.eager = progressive or mode == SOME
        self.claims: list[Any] = []
        self.claimed = 0
        self.out: Components | None = None


def fire_all(deferred: list[Request]) -> None:
    """Send the wake-ups a thread's step *deferred*: collected while it held the lock
    (the engine's ``deferred`` list was set), sent after it released it.

    Waking a task from another thread is a system call that may also hand the GIL to
    the event loop; sent under the lock, every other thread would wait for the lock
    meanwhile. A wake-up is never lost: ``notified`` was set under the lock.
    """
    for r in deferred:
        r.fire()
