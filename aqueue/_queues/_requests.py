"""Pending requests: what an enqueue or a dequeue that has to wait leaves behind.

An engine step (``Engine.put``/``Engine.get``) creates a request only when the operation
cannot complete at once: it appends it to its waiting list (``Waiters``) with a waker
from the caller, and returns it; the caller then waits (``_waiting.py``). The engine
changes a request's fields under the queue's lock only.

Life of a request:

1. *parked*: in its list, ``registered`` true, with a ``waker`` (a task's, from
   ``make_waker``, or a thread's ``threading.Event``).
2. *notified*: the engine decided it can progress, set ``notified`` under the lock and
   set its waker (for a thread's step, after releasing the lock: see ``fire_all``).
   Notifying never hands over data: the woken side runs its own step
   (``Engine.retry``), which completes it or re-arms it with a fresh waker.
3. *done*: it completed, failed or left (cancellation, timeout); on every way out the
   engine removes it from its list and passes any wake-up on, so none is lost.

A ``GetRequest`` may hold elements it has claimed but not yet returned (``Claims``):
they have left the storage and go back to it, in order, when the request fails or
leaves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
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
"""Returned by a retried step when its request must wait longer."""


class Request:
    """What every pending request has: its list state and how to wake it."""

    __slots__ = ("notified", "registered", "waker")

    def __init__(self) -> None:
        self.registered = False  # in the engine's list
        self.notified = False  # a wake-up was sent and not yet consumed
        self.waker: Any = None  # a task's Waker or a thread's threading.Event

    def fire(self) -> None:
        """Wake the waiting thread or task (the engine decided it can progress)."""
        self.waker.set()


class PutRequest(Request):
    """An enqueue of ``count`` elements (``mode`` ONE or MANY).

    ``pos`` elements have been admitted so far; an *atomic* request (a timed thread
    ``enqueue_many``) is admitted whole or not at all; while no dequeue waits, a
    parked one admits nothing until ``least`` elements fit (``Rules.whole_rest``).
    ``rejected`` is set by ``close(cancel_pending_enqueues=True)``: the request then
    fails at its next step, keeping what it had admitted.
    """

    __slots__ = ("atomic", "comps", "count", "least", "mode", "pos", "rejected")

    def __init__(self, mode: int, comps: Components, count: int, atomic: bool) -> None:
        super().__init__()
        self.mode = mode
        self.comps = comps
        self.count = count
        self.pos = 0
        self.atomic = atomic
        self.least = 0
        self.rejected = False


class GetRequest(Request):
    """A dequeue of ``n`` elements (``mode`` ONE, MANY, UP_TO or SOME).

    ``claimed`` elements are held so far: as storage chunks in ``claims`` (a
    *progressive* request, larger than ``capacity - min_after_dequeue``, which could
    never be served in one take), or as rows ``out[:claimed]`` of its own output batch
    (a *filling* request on a FIFO ring: enqueues copy straight into ``out``).
    ``eager``: it can progress as soon as one element can be taken (a progressive
    request, or a SOME request, which then returns what it could take).
    """

    __slots__ = ("claimed", "claims", "eager", "mode", "n", "out", "progressive")

    def __init__(self, mode: int, n: int, progressive: bool) -> None:
        super().__init__()
        self.mode = mode
        self.n = n
        self.progressive = progressive
        self.eager = progressive or mode == SOME
        self.claims: list[Any] = []
        self.claimed = 0
        self.out: Components | None = None


def fire_all(deferred: list[Request]) -> None:
    """Send the wake-ups a thread's step *deferred*: collected while it held the lock,
    sent after it released it.

    Waking a task from another thread is a system call that may also hand the GIL to
    the event loop; sent under the lock, every other thread would wait for the lock
    meanwhile. A wake-up is never lost: ``notified`` was set under the lock.
    """
    for r in deferred:
        r.fire()
