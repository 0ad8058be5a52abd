"""Test-only bookkeeping, behind one switch: what ``aqueue.testing`` reads to name what a
test left running or stuck.

Three layers keep registries that nothing in aqueue itself reads: every in-process
queue (``live_queues`` in ``aqueue/_queues/_queue.py``), what runs now (coordinators,
runners, producer threads and registered runners, ``aqueue/_running/_alive.py``), and
the threads inside a blocking call of a queue's thread view (``BlockedCall``, here:
of an in-process queue or an ``aqueue.redis`` one; a thread blocked there is invisible
otherwise, since it is not a producer thread of any runner). They are written only
while ``tracking.on`` is true. ``aqueue.testing`` turns it on when it is imported (its
pytest plugin is, when pytest starts; a script imports it before building what it
guards), and nothing turns it off: off, queues, runners and waiting calls register
nothing at all.

Blocked calls. The thread views ``enter`` a ``BlockedCall`` when a call may block
(``BlockingQueue``: the operation's slow path, after the first step found no room or
data; the Redis view: its first wait) and ``leave`` it when the call returns or
raises. Invariants:

- one record per thread at most (a thread is in one call at a time), keyed by its
  ident; a record leaves the registry only by ``leave`` of the call that entered it;
- a record is a new object per call, so a snapshot (``blocked_calls``) tells a call
  still blocked since then (the same record) from a later one;
- entering and leaving are single dict operations (atomic under the GIL), on paths that
  wait or take a lock anyway; with tracking off, ``enter`` returns None and ``leave``
  of None does nothing.

Readers copy a weak set (``weak_snapshot``) before iterating it: another thread may add
meanwhile. Only weak references are kept: nothing here keeps an object alive.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, TypeVar

__all__ = ["BlockedCall", "blocked_calls", "enter", "leave", "tracking", "weak_snapshot"]

T = TypeVar("T")


class _Switch:
    """Whether the test-only registries are written (see the module docstring)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


tracking = _Switch()


def weak_snapshot(objects: weakref.WeakSet[T]) -> list[T]:
    """The objects of a weak set that other threads may add to, as a list."""
    while True:
        try:
            return list(objects)
        except RuntimeError:  # another thread added one while we copied: copy again
            continue


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


def enter(queue: Any, what: str) -> BlockedCall | None:
    """The calling thread may block in ``what`` on ``queue`` from now on (None: tracking
    is off, nothing is recorded)."""
    if not tracking.on:
        return None
    record = BlockedCall(queue, what)
    _calls[threading.get_ident()] = record
    return record


def leave(record: BlockedCall | None) -> None:
    """The call that entered ``record`` has returned (or raised)."""
    if record is None:
        return
    ident = threading.get_ident()
    if _calls.get(ident) is record:
        del _calls[ident]


def blocked_calls() -> list[BlockedCall]:
    """The calls threads are blocked in now (a copy)."""
    return list(_calls.copy().values())
