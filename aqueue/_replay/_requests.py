"""Requests: what an insert or a sample that has to wait leaves with the engine.

A request is built by the table for each insert or sample, after its arguments were
checked and converted. The engine (``_engine.py``) tries it once; if it cannot
complete, the engine *parks* it: appends it to the waiting list of its direction
(``inserters`` or ``samplers``, oldest first) with a *waker*, a task's waker
(``make_waker``) or a ``threading.Event`` for a thread. Its fields change under the
engine's lock only:

- ``registered``: it is in its list;
- ``notified``: the engine decided it can progress and fired its waker; the woken
  side runs its own step (``ReplayEngine.retry``), which completes it or re-arms it
  with a fresh waker (``notified`` False again);
- ``waker``: what its waiter sleeps on; ``fire()`` sets it (for a thread's step, after
  the lock is released).

An insert or a sample completes entirely inside one step, so a request never holds
anything: when its waiter leaves (cancelled, timed out) it has changed nothing, and
leaving only removes it from its list and passes the wake-up on. The one exception is
a progressive insert (a sink's ``enqueue_many``, as a queue's): the prefix it inserted
before leaving stays in the table.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._queues._backend import Waker
    from .._queues._declare import Components

__all__ = ["InsertRequest", "ReplayRequest", "SampleRequest"]


class ReplayRequest:
    """What every waiting request has: its list state and how to wake it."""

    __slots__ = ("notified", "registered", "waker")

    def __init__(self) -> None:
        self.registered = False
        self.notified = False
        self.waker: Waker | threading.Event | None = None

    def fire(self) -> None:
        """Wake the waiting task or thread (the engine decided it can progress)."""
        waker = self.waker
        if waker is not None:
            waker.set()


class InsertRequest(ReplayRequest):
    """An insert of ``count`` items: ``comps`` (one batch array per component) and
    their ``priorities`` (float64, or None for the table's largest).

    A *progressive* request (a sink's ``enqueue_many``) goes in piece by piece: each
    step inserts the longest prefix of what is left that the rate limiter admits, and
    ``done`` counts the items in so far; it waits only while not one more is admitted
    (``least`` is 1, where a whole request needs ``count``)."""

    __slots__ = ("comps", "count", "done", "least", "priorities", "progressive")

    def __init__(
        self, comps: Components, count: int, priorities: Any, *, progressive: bool = False
    ) -> None:
        super().__init__()
        self.comps = comps
        self.count = count
        self.priorities = priorities
        self.progressive = progressive
        self.done = 0
        self.least = 1 if progressive else count


class SampleRequest(ReplayRequest):
    """A sample of ``n`` items."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
