"""BlockingRedisQueue: the thread-side view of a Redis queue (``q.blocking()``).

Its methods run the same ops as the async queue (``_protocol``) with the synchronous
redis client, in the calling thread: a thread never touches the event loop, and a
blocked event loop never stalls a producer thread. Threads may share one view.

Each blocking method takes ``timeout=None`` (seconds) and, as in process, raises
RuntimeError on a thread that runs an event loop: blocking there would stall the loop,
and on a full (or empty) queue deadlock it, since the task that would make room could
never run. On expiry it raises the built-in
``TimeoutError`` and changes nothing: a dequeue gives back what it had claimed, and an
enqueue_many with a timeout is all-or-nothing (its batch must fit the capacity).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import aqueue
from aqueue._queues._backend import in_event_loop
from aqueue._queues._blocked import BlockedCall, enter, leave

from ._protocol import DONE, WAIT, Handle, PutOp, TakeOp

if TYPE_CHECKING:
    from ._queue import RedisQueue
    from ._transport import SyncCalls

__all__ = ["BlockingRedisQueue"]


class BlockingRedisQueue:
    """Blocking methods of one Redis queue, for threads."""

    __slots__ = ("_calls", "_h", "_q")

    def __init__(self, handle: Handle, calls: SyncCalls, queue: RedisQueue) -> None:
        self._h = handle
        self._calls = calls
        self._q = queue

    @property
    def queue(self) -> RedisQueue:
        """The queue this view belongs to."""
        return self._q

    def __repr__(self) -> str:
        return f"<BlockingRedisQueue of {self._q!r}>"

    def enqueue(self, element: Any, timeout: float | None = None) -> None:
        """Add one element, blocking while the queue is full."""
        self._check("enqueue")
        payload = self._h.codec.encode_one(self._h.spec.element(element))
        self._put(PutOp(self._h, [payload], atomic=timeout is not None), timeout, "enqueue")

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
        payloads = h.codec.encode_batch(comps, count)
        self._put(PutOp(h, payloads, atomic=timeout is not None), timeout, "enqueue_many")

    def dequeue(self, timeout: float | None = None) -> Any:
        """Remove and return one element, blocking while none can be taken."""
        self._check("dequeue")
        return self._take(TakeOp(self._h, "one", 1), timeout, "dequeue")

    def dequeue_many(self, n: int, timeout: float | None = None) -> Any:
        """Remove and return exactly ``n`` elements as a batch."""
        self._check("dequeue_many")
        n = self._h.batch_n(n, "dequeue_many")
        if n == 0:
            return self._h.spec.empty_batch()
        return self._take(TakeOp(self._h, "many", n), timeout, "dequeue_many")

    def dequeue_up_to(self, n: int, timeout: float | None = None) -> Any:
        """Like dequeue_many, but once the queue is closed return the 1..n that remain."""
        self._check("dequeue_up_to")
        n = self._h.batch_n(n, "dequeue_up_to")
        if n == 0:
            return self._h.spec.empty_batch()
        return self._take(TakeOp(self._h, "upto", n), timeout, "dequeue_up_to")

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue for every process (see ``aclose`` on the queue)."""
        h = self._h
        self._calls.fcall("aq_close", h.key, [h.gen, "1" if cancel_pending_enqueues else "0"])

    def size(self) -> int:
        """Number of elements stored now (one server call)."""
        h = self._h
        r = self._calls.fcall("aq_stats", h.key, [h.gen], ro=True)
        if not r:
            raise aqueue.QueueClosedError(f"queue '{h.name}' was deleted")
        return int(r[0])

    # -- drivers -------------------------------------------------------------------------

    def _check(self, what: str) -> None:
        """Refuse to block a thread that runs an event loop (RuntimeError)."""
        if in_event_loop():
            raise RuntimeError(
                f"BlockingQueue.{what}() of Redis queue '{self._h.name}' was called on an "
                f"event-loop thread, where blocking would stall the loop; use "
                f"`await q.{what}(...)` there"
            )

    def _remaining(self, deadline: float | None, timeout: float | None, what: str) -> float:
        """The next wait's length, or TimeoutError once the deadline passed."""
        wait = self._h.wait_timeout
        if deadline is None:
            return wait
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                f"BlockingQueue.{what}() on queue '{self._h.name}' timed out after {timeout} s"
            )
        return min(wait, left)

    def _put(self, op: PutOp, timeout: float | None, what: str) -> None:
        calls, h = self._calls, self._h
        deadline = None if timeout is None else time.monotonic() + timeout
        clock = self._q.full_clock
        waiting: BlockedCall | None = None  # (for aqueue.testing's leak check)
        try:
            while True:
                h.check_released()
                status = op.on_put(calls.put("aq_put", h.key, *op.put_args()))
                if status is DONE:
                    return
                if status is WAIT:
                    if not waiting:
                        waiting = enter(self._q, what)
                        clock.enter()
                    op.on_wake(calls.wait(op.wake_key, self._remaining(deadline, timeout, what)))
        except BaseException:
            self._leave(op.leave_args())
            raise
        finally:
            if waiting:
                clock.leave()
                leave(waiting)

    def _take(self, op: TakeOp, timeout: float | None, what: str) -> Any:
        calls, h = self._calls, self._h
        deadline = None if timeout is None else time.monotonic() + timeout
        clock = self._q.empty_clock
        waiting: BlockedCall | None = None  # (for aqueue.testing's leak check)
        try:
            while True:
                reply, values = calls.take("aq_take", h.key, op.take_args(), op.fetch_keys())
                got = op.on_take(reply)
                if got is WAIT:
                    if not waiting:
                        waiting = enter(self._q, what)
                        clock.enter()
                    calls.wait(op.wake_key, self._remaining(deadline, timeout, what))
                elif got is not None:
                    if values is None:  # a progressive op reads its payloads now
                        values = calls.mget(op.payload_keys(got))
                    result = op.received(values)
                    if op.on_ack(calls.fcall("aq_ack", h.key, op.ack_args())):
                        return result
        except BaseException:
            self._leave(op.leave_args())
            raise
        finally:
            if waiting:
                clock.leave()
                leave(waiting)

    def _leave(self, args: list[Any] | None) -> None:
        if args is None:
            return
        try:
            self._calls.fcall("aq_leave", self._h.key, args)
        except aqueue.QueueError:
            pass
