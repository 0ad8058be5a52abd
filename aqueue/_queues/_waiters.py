"""Waiters: the pending requests of one direction, oldest first, and their clock.

An engine holds two: ``putters`` (enqueues waiting for room) and ``getters`` (dequeues
waiting for elements). Only the head of each makes progress (head of line), so one
pending ``enqueue_many``'s elements stay contiguous and nobody is passed.

A ``Waiters`` is a ``collections.deque`` (its truth, length and head are the deque's,
read on every operation) that also keeps the time during which it was not empty:
``append`` starts the clock when the list becomes non-empty, ``remove`` stops it when
it becomes empty again, and ``blocked_s(now)`` is the total, the current stretch
included. That is ``time_full_s`` for the putters and ``time_empty_s`` for the getters.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Generic, TypeVar

from ._requests import Request

__all__ = ["Waiters"]

R = TypeVar("R", bound=Request)

_monotonic = time.monotonic


class Waiters(deque[R], Generic[R]):
    """Parked requests of one direction, oldest first (see the module docstring)."""

    __slots__ = ("_since", "_total")

    def __init__(self) -> None:
        super().__init__()
        self._since = 0.0
        self._total = 0.0

    def park(self, req: R) -> None:
        """Append ``req`` (registered from now on)."""
        if not self:
            self._since = _monotonic()
        req.registered = True
        self.append(req)

    def leave(self, req: R) -> bool:
        """Take ``req`` out of the list; True when it was the head. A request that is
        not registered (done already) is left alone (False)."""
        if not req.registered:
            return False
        req.registered = False
        was_head = self[0] is req
        self.remove(req)
        if not self:
            self._total += _monotonic() - self._since
        return was_head

    def blocked_s(self, now: float) -> float:
        """Seconds during which the list was not empty, up to ``now``."""
        return self._total + (now - self._since if self else 0.0)

    def quiet(self) -> int:
        """Waiting requests with no wake-up pending (they cannot progress until the
        queue changes: every change wakes a head that can)."""
        return sum(1 for r in self if not r.notified)
