"""Which threads are inside a blocking call of a queue's thread view, now.

``aqueue.testing``'s leak check names a thread that a test left blocked in
``q.blocking().enqueue(...)`` (or any other blocking method, of an in-process queue or
an ``aqueue.redis`` one); a thread blocked there is invisible otherwise, since it is
not a producer thread of any runner.

The thread views enter a ``BlockedCall`` when a call may block (``BlockingQueue``: the
operation's slow path, after the fast path found no room or data; the Redis view: its
first wait) and remove it when the call returns or raises. Invariants:

- one record per thread at most (a thread is in one call at a time), keyed by its
  ident; a record leaves the registry only by ``leave`` of the call that entered it;
- a record is a new object per call, so a snapshot (``blocked_calls``) tells a call
  still blocked since then (the same record) from a later one;
- entering and leaving are single dict operations (atomic under the GIL), about
  0.3 µs, on paths that wait or take a lock anyway.
"""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["BlockedCall", "blocked_calls", "enter", "leave"]


class BlockedCall:
    """One thread inside one blocking call of a queue's thread view."""

    __slots__ = ("__weakref__", "queue", "since", "thread", "what")

    def __init__(self, queue: Any, what: str) -> None:
        self.queue = queue  # the queue (an AsyncQueue: in process or aqueue.redis)
        self.what = what  # the method, e.g. "enqueue"
        self.thread = threading.current_thread()
        self.since = time.monotonic()

    def describe(self) -> str:
        """``thread 'T' blocked in BlockingQueue.enqueue() on queue 'q' for 1.2 s``."""
        seconds = time.monotonic() - self.since
        return (
            f"thread '{self.thread.name}' blocked in BlockingQueue.{self.what}() on queue "
            f"'{self.queue.name}' for {seconds:.1f} s"
        )


_calls: dict[int, BlockedCall] = {}


def enter(queue: Any, what: str) -> BlockedCall:
    """The calling thread may block in ``what`` on ``queue`` from now on."""
    record = BlockedCall(queue, what)
    _calls[threading.get_ident()] = record
    return record


def leave(record: BlockedCall) -> None:
    """The call that entered ``record`` has returned (or raised)."""
    ident = threading.get_ident()
    if _calls.get(ident) is record:
        del _calls[ident]


def blocked_calls() -> list[BlockedCall]:
    """The calls threads are blocked in now (a copy)."""
    return list(_calls.copy().values())
