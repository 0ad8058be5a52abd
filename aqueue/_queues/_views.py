"""Views of a queue: the thread-side view (``q.blocking()``) and the async iterators
(``async for x in q``, ``q.batches(n)``).

BlockingQueue: a thread that calls these methods takes the queue's lock and works on
the storage directly. When there is room, an enqueue admits at once and only
*notifies* the event loop's waiting tasks (a thread-safe wake-up, no round trip), so
producer threads keep filling the queue even while a training step blocks the event
loop. Only when it must wait does a thread block, on a ``threading.Event`` of its own,
woken by whichever side frees space or adds data. Threads and tasks share one
head-of-line order per direction.

Each blocking method takes ``timeout=None`` (seconds). On expiry it raises
``TimeoutError`` and changes nothing: a dequeue puts back anything it had claimed, and
an enqueue_many with a timeout is all-or-nothing (it waits until the whole batch fits,
so its batch must not exceed the capacity). Every step is the waiting kernel's
``thread_step`` (its wake-ups are sent after the queue's lock is released). A thread
inside a call that may block is listed (``enter``/``leave`` of
``aqueue/_waiting/_tracking.py``, while the test-only bookkeeping is on) for the
duration: aqueue.testing names it if a test leaves it there.

The iterators are classes with ``__anext__`` (not async generators, which would hold
their caller's cancel scopes across ``yield``); they end cleanly when the queue is
final (OutOfRangeError becomes StopAsyncIteration) and never close the queue.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._errors import ElementSpecError, OutOfRangeError
from .._waiting._backend import in_event_loop
from .._waiting._tracking import enter, leave
from .._waiting._wait import Request, thread_step, wait_thread
from ._requests import MANY, ONE, SOME, UP_TO, GetRequest

if TYPE_CHECKING:
    from ._engine import Engine
    from ._protocol import AsyncQueue
    from ._spec import ElementSpec

__all__ = ["BatchIterator", "BlockingQueue", "ElementIterator"]

T = TypeVar("T")


class BlockingQueue(Generic[T]):
    """Blocking methods of one queue, for threads other than the event loop's.

    Get one with ``q.blocking()``.
    """

    __slots__ = ("_engine", "_loop_thread", "_queue", "_spec")

    def __init__(
        self, queue: AsyncQueue[T], spec: ElementSpec, engine: Engine, loop_thread: int | None
    ) -> None:
        self._queue = queue
        self._spec = spec
        self._engine = engine
        self._loop_thread = loop_thread  # the event loop's thread, when known

    @property
    def queue(self) -> AsyncQueue[T]:
        """The queue this view belongs to."""
        return self._queue

    def __repr__(self) -> str:
        return f"<BlockingQueue of {self._queue!r}>"

    def _check(self, what: str) -> str:
        """Refuse to block an event loop's thread; the operation's name for messages.

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
        return f"BlockingQueue.{what}() on queue '{self._engine.name}'"

    def enqueue(self, element: Any, timeout: float | None = None) -> None:
        """Add one element, blocking while the queue is full."""
        what = self._check("enqueue")
        comps = self._spec.element(element)
        req = thread_step(self._engine.put, ONE, comps, 1, threading.Event)
        if req is not None:
            self._wait(req, timeout, what, "enqueue")

    def enqueue_many(self, batch: Any, timeout: float | None = None) -> None:
        """Add a batch; progressive without timeout, all-or-nothing with one."""
        what = self._check("enqueue_many")
        comps, count = self._spec.batch(batch)
        if count == 0:
            return
        atomic = timeout is not None
        if atomic:
            capacity = self._engine.capacity
            if count > capacity:
                raise ElementSpecError(
                    f"BlockingQueue.enqueue_many on queue '{self._engine.name}': a batch of "
                    f"{count} cannot be admitted all at once with a timeout (capacity "
                    f"{capacity}); pass timeout=None or split the batch"
                )
        req = thread_step(self._engine.put, MANY, comps, count, threading.Event, atomic)
        if req is not None:
            self._wait(req, timeout, what, "enqueue_many")

    def dequeue(self, timeout: float | None = None) -> T:
        """Remove and return one element, blocking while none can be taken."""
        return self._dequeue(ONE, 1, timeout, "dequeue")

    def dequeue_many(self, n: int, timeout: float | None = None) -> T:
        """Remove and return exactly ``n`` elements as a batch."""
        return self._dequeue(MANY, n, timeout, "dequeue_many")

    def dequeue_up_to(self, n: int, timeout: float | None = None) -> T:
        """Like dequeue_many, but once the queue is closed return the 1..n that remain."""
        return self._dequeue(UP_TO, n, timeout, "dequeue_up_to")

    def dequeue_burst(self, n: int, timeout: float | None = None) -> T:
        """Block until at least one element can be taken, then take up to ``n`` (see
        ``dequeue_burst`` on the queue)."""
        return self._dequeue(SOME, n, timeout, "dequeue_burst")

    def _dequeue(self, mode: int, n: Any, timeout: float | None, name: str) -> T:
        what = self._check(name)
        spec = self._spec
        if mode != ONE:
            n = spec.batch_count(n, name)
        got = thread_step(self._engine.get, mode, n, threading.Event)
        if type(got) is GetRequest:
            got = self._wait(got, timeout, what, name, self._queue)
        result: T = spec.empty_batch() if got is None else spec.pack(got)
        return result

    def _wait(
        self, req: Request, timeout: float | None, what: str, name: str, consumed: Any = None
    ) -> Any:
        """Wait for parked request ``req``, listed as a blocked call meanwhile
        (``consumed``: see ``wait_thread``)."""
        call = enter(self._queue, name)  # (for aqueue.testing's leak check)
        try:
            return wait_thread(self._engine, req, timeout, what, consumed)
        finally:
            leave(call)

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue (see ``close`` on the queue)."""
        thread_step(self._engine.close, bool(cancel_pending_enqueues))

    def size(self) -> int:
        """Number of elements stored now."""
        return self._engine.storage.size


class ElementIterator(Generic[T]):
    """What ``async for element in q`` iterates with: ``dequeue()`` until the queue is
    closed and drained (OutOfRangeError ends the iteration; the queue is not closed)."""

    __slots__ = ("_queue",)

    def __init__(self, queue: AsyncQueue[T]) -> None:
        self._queue = queue

    @property
    def queue(self) -> AsyncQueue[T]:
        """The queue iterated over."""
        return self._queue

    def __aiter__(self) -> ElementIterator[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self._queue.dequeue()
        except OutOfRangeError:
            raise StopAsyncIteration from None


class BatchIterator(Generic[T]):
    """The iterator returned by ``q.batches(n)``: ``dequeue_many(n)`` (or
    ``dequeue_up_to(n)`` with ``allow_smaller_final_batch``) until the queue is closed
    and drained; the queue is not closed."""

    __slots__ = ("_n", "_queue", "_smaller")

    def __init__(self, queue: AsyncQueue[T], n: int, smaller: bool) -> None:
        self._queue = queue
        self._n = n
        self._smaller = smaller

    @property
    def queue(self) -> AsyncQueue[T]:
        """The queue iterated over."""
        return self._queue

    def __aiter__(self) -> BatchIterator[T]:
        return self

    async def __anext__(self) -> T:
        try:
            if self._smaller:
                return await self._queue.dequeue_up_to(self._n)
            return await self._queue.dequeue_many(self._n)
        except OutOfRangeError:
            raise StopAsyncIteration from None
