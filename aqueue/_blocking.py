"""BlockingQueue: the thread-side view of a queue (``q.blocking()``).

A thread that calls these methods takes the queue's lock and works on the storage
directly: when there is room, an enqueue admits at once and only *notifies* the event
loop's waiting tasks (a thread-safe wake-up, no round trip), so producer threads keep
filling the queue even while a training step blocks the event loop. Only when it must
wait does a thread block, on a ``threading.Event`` of its own, woken by whichever side
frees space or adds data. Threads and tasks share one head-of-line order per direction.

Each blocking method takes ``timeout=None`` (seconds). On expiry it raises
``TimeoutError`` and changes nothing: a dequeue puts back anything it had claimed, and
an enqueue_many with a timeout is all-or-nothing (it waits until the whole batch fits,
so its batch must not exceed the capacity).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core import _MANY, _ONE, _UP_TO, _WAIT
from ._errors import ElementSpecError

if TYPE_CHECKING:
    from ._base import QueueBase

__all__ = ["BlockingQueue"]


class BlockingQueue:
    """Blocking methods of one queue, for threads other than the event loop's."""

    __slots__ = ("_q",)

    def __init__(self, queue: QueueBase) -> None:
        self._q = queue

    @property
    def queue(self) -> QueueBase:
        """The queue this view belongs to."""
        return self._q

    def __repr__(self) -> str:
        return f"<BlockingQueue of {self._q!r}>"

    def enqueue(self, element: Any, timeout: float | None = None) -> None:
        """Add one element, blocking while the queue is full."""
        q = self._q
        q._thread_check("enqueue")
        comps = q._spec.element(element)
        if q._put_one_now(comps, []):  # room now: no request object needed
            return
        q._thread_run(q._putter(_ONE, comps, 1), False, timeout, "enqueue")

    def enqueue_many(self, batch: Any, timeout: float | None = None) -> None:
        """Add a batch; progressive without timeout, all-or-nothing with one."""
        q = self._q
        q._thread_check("enqueue_many")
        comps, count = q._spec.batch(batch)
        if count == 0:
            return
        w = q._putter(_MANY, comps, count)
        if timeout is not None:
            if w.count > q.capacity:
                raise ElementSpecError(
                    f"BlockingQueue.enqueue_many on queue '{q.name}': a batch of {w.count} "
                    f"cannot be admitted all at once with a timeout (capacity {q.capacity}); "
                    "pass timeout=None or split the batch"
                )
            w.atomic = True
        q._thread_run(w, False, timeout, "enqueue_many")

    def dequeue(self, timeout: float | None = None) -> Any:
        """Remove and return one element, blocking while none can be taken."""
        q = self._q
        q._thread_check("dequeue")
        result = q._take_one_now([])  # one there now: no request object needed
        if result is not _WAIT:
            return result
        return q._thread_run(q._getter(_ONE, 1), True, timeout, "dequeue")

    def dequeue_many(self, n: int, timeout: float | None = None) -> Any:
        """Remove and return exactly ``n`` elements as a batch."""
        return self._dequeue_batch(_MANY, n, timeout, "dequeue_many")

    def dequeue_up_to(self, n: int, timeout: float | None = None) -> Any:
        """Like dequeue_many, but once the queue is closed return the 1..n that remain."""
        return self._dequeue_batch(_UP_TO, n, timeout, "dequeue_up_to")

    def _dequeue_batch(self, mode: int, n: int, timeout: float | None, what: str) -> Any:
        q = self._q
        q._thread_check(what)
        n = q._batch_op(n, what)
        if n == 0:
            return q._spec.empty_batch()
        return q._thread_run(q._getter(mode, n), True, timeout, what)

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue (see ``close`` on the queue)."""
        self._q.close(cancel_pending_enqueues)

    def size(self) -> int:
        """Number of elements stored now."""
        return self._q.size()
