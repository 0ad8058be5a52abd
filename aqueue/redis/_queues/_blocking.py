"""BlockingRedisQueue: the thread-side view of a Redis queue (``q.blocking()``).

Its methods run the same ops as the async queue (``_ops``) with the sync driver
(``_transport.run_blocking``) over the synchronous client, in the calling thread: a
thread never touches the event loop, and a blocked event loop never stalls a producer
thread. Threads may share one view.

Each blocking method takes ``timeout=None`` (seconds) and, as in process, raises
RuntimeError on a thread that runs an event loop: blocking there would stall the loop,
and on a full (or empty) queue deadlock it, since the task that would make room could
never run. On expiry it raises the built-in
``TimeoutError`` and changes nothing: a dequeue gives back what it had claimed, and an
enqueue_many with a timeout is all-or-nothing (its batch must fit the capacity).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic

import aqueue
from aqueue._queues._declare import T
from aqueue._waiting._tracking import BlockedCall, enter, leave

from .._core import _shared
from .._core._transport import (
    Deadline,
    Op,
    SyncTransport,
    WaitClock,
    refuse_event_loop,
    run_blocking,
)
from ._handle import QueueHandle
from ._ops import PutOp, TakeOp

if TYPE_CHECKING:
    from ._queue import RedisQueue

__all__ = ["BlockingRedisQueue"]


class BlockingRedisQueue(Generic[T]):
    """Blocking methods of one Redis queue, for threads."""

    __slots__ = ("_h", "_q", "_t")

    def __init__(self, handle: QueueHandle, transport: SyncTransport, queue: RedisQueue[T]) -> None:
        self._h = handle
        self._t = transport
        self._q = queue

    @property
    def queue(self) -> RedisQueue[T]:
        """The queue this view belongs to."""
        return self._q

    def __repr__(self) -> str:
        return f"<BlockingRedisQueue of {self._q!r}>"

    def enqueue(self, element: Any, timeout: float | None = None) -> None:
        """Add one element, blocking while the queue is full."""
        self._check("enqueue")
        payload = self._h.codec.encode_one(self._h.spec.element(element))
        op = PutOp(self._h, [payload], atomic=timeout is not None)
        self._run(op.run(), "enqueue", timeout, self._q.full_clock)

    def enqueue_many(self, batch: Any, timeout: float | None = None) -> None:
        """Add a batch; progressive without timeout, all-or-nothing with one."""
        self._check("enqueue_many")
        h = self._h
        comps, count = h.spec.batch(batch)
        if count == 0:
            return
        if timeout is not None and count > h.capacity:
            raise aqueue.ElementSpecError(
                f"BlockingQueue.enqueue_many on queue '{h.name}': a batch of {count} "
                f"cannot be admitted all at once with a timeout (capacity {h.capacity}); "
                "pass timeout=None or split the batch"
            )
        op = PutOp(h, h.codec.encode_batch(comps, count), atomic=timeout is not None)
        self._run(op.run(), "enqueue_many", timeout, self._q.full_clock)

    def dequeue(self, timeout: float | None = None) -> T:
        """Remove and return one element, blocking while none can be taken."""
        self._check("dequeue")
        element: T = self._run(
            TakeOp(self._h, "one", 1).run(), "dequeue", timeout, self._q.empty_clock
        )
        return element

    def dequeue_many(self, n: int, timeout: float | None = None) -> T:
        """Remove and return exactly ``n`` elements as a batch."""
        return self._take_batch("many", n, timeout, "dequeue_many")

    def dequeue_up_to(self, n: int, timeout: float | None = None) -> T:
        """Like dequeue_many, but once the queue is closed return the 1..n that remain."""
        return self._take_batch("upto", n, timeout, "dequeue_up_to")

    def dequeue_burst(self, n: int, timeout: float | None = None) -> T:
        """Block until at least one element can be taken, then take 1..n at once (see
        ``dequeue_burst`` on the queue)."""
        return self._take_batch("some", n, timeout, "dequeue_burst")

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue for every process (see ``aclose`` on the queue)."""
        self._q.close(cancel_pending_enqueues)

    def size(self) -> int:
        """Number of elements stored now (one server call)."""
        return run_blocking(_shared.stats(self._h), self._t)[0]

    # -- driving ops ---------------------------------------------------------------------

    def _take_batch(self, mode: str, n: Any, timeout: float | None, what: str) -> T:
        self._check(what)
        n = self._h.spec.batch_count(n, what)
        if n == 0:
            empty: T = self._h.spec.empty_batch()
            return empty
        batch: T = self._run(TakeOp(self._h, mode, n).run(), what, timeout, self._q.empty_clock)
        return batch

    def _check(self, what: str) -> None:
        """Refuse to block a thread that runs an event loop (RuntimeError)."""
        of = f"Redis queue '{self._h.name}'"
        refuse_event_loop(f"BlockingQueue.{what}()", of, f"q.{what}(...)")

    def _run(self, op: Op[Any], what: str, timeout: float | None, clock: WaitClock) -> Any:
        """Run ``op`` in this thread; its waits end at ``timeout`` (TimeoutError)."""
        deadline = None
        if timeout is not None:
            deadline = Deadline(timeout, f"BlockingQueue.{what}() on queue '{self._h.name}'")
        return run_blocking(op, self._t, _ThreadWaits(clock, self._q, what), deadline)


class _ThreadWaits:
    """A waiting thread counts in the queue's wait clock, and is listed as blocked in
    ``what`` meanwhile (for aqueue.testing's leak check)."""

    __slots__ = ("_call", "_clock", "_queue", "_what")

    def __init__(self, clock: WaitClock, queue: RedisQueue[Any], what: str) -> None:
        self._clock = clock
        self._queue = queue
        self._what = what
        self._call: BlockedCall | None = None

    def enter(self) -> None:
        self._call = enter(self._queue, self._what)
        self._clock.enter()

    def leave(self) -> None:
        self._clock.leave()
        if self._call is not None:
            leave(self._call)
