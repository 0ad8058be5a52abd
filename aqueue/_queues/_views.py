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
so its batch must not exceed the capacity). A thread inside a call that may block is
listed in ``_blocked`` for the duration (aqueue.testing names it if a test leaves it
there).

The iterators are classes with ``__anext__`` (not async generators, which would hold
their caller's cancel scopes across ``yield``); they end cleanly when the queue is
final (OutOfRangeError becomes StopAsyncIteration) and never close the queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._errors import ElementSpecError, OutOfRangeError
from ._blocked import enter, leave
from ._requests import MANY, ONE, SOME, UP_TO, WAIT, PutRequest, Request

if TYPE_CHECKING:
    from ._drivers import ThreadDriver
    from ._engine import Engine
    from ._protocol import AsyncQueue
    from ._spec import ElementSpec

__all__ = ["BatchIterator", "BlockingQueue", "ElementIterator"]

T = TypeVar("T")


class BlockingQueue(Generic[T]):
    """Blocking methods of one queue, for threads other than the event loop's.

    Get one with ``q.blocking()``.
    """

    __slots__ = ("_driver", "_engine", "_queue", "_spec")

    def __init__(
        self, queue: AsyncQueue[T], spec: ElementSpec, engine: Engine, driver: ThreadDriver
    ) -> None:
        self._queue = queue
        self._spec = spec
        self._engine = engine
        self._driver = driver

    @property
    def queue(self) -> AsyncQueue[T]:
        """The queue this view belongs to."""
        return self._queue

    def __repr__(self) -> str:
        return f"<BlockingQueue of {self._queue!r}>"

    def enqueue(self, element: Any, timeout: float | None = None) -> None:
        """Add one element, blocking while the queue is full."""
        self._driver.check("enqueue")
        comps = self._spec.element(element)
        deferred: list[Request] = []
        if self._engine.put_one_now(comps, deferred):  # room now: no request object
            return
        call = enter(self._queue, "enqueue")  # (for aqueue.testing's leak check)
        try:
            self._driver.put(PutRequest(ONE, comps, 1), timeout, "enqueue")
        finally:
            leave(call)

    def enqueue_many(self, batch: Any, timeout: float | None = None) -> None:
        """Add a batch; progressive without timeout, all-or-nothing with one."""
        self._driver.check("enqueue_many")
        comps, count = self._spec.batch(batch)
        if count == 0:
            return
        req = PutRequest(MANY, comps, count)
        if timeout is not None:
            capacity = self._engine.capacity
            if count > capacity:
                raise ElementSpecError(
                    f"BlockingQueue.enqueue_many on queue '{self._engine.name}': a batch of "
                    f"{count} cannot be admitted all at once with a timeout (capacity "
                    f"{capacity}); pass timeout=None or split the batch"
                )
            req.atomic = True
        call = enter(self._queue, "enqueue_many")
        try:
            self._driver.put(req, timeout, "enqueue_many")
        finally:
            leave(call)

    def dequeue(self, timeout: float | None = None) -> T:
        """Remove and return one element, blocking while none can be taken."""
        self._driver.check("dequeue")
        deferred: list[Request] = []
        comps = self._engine.take_one_now(deferred)  # one there now: no request object
        if comps is WAIT:
            req = self._engine.get_request(ONE, 1)
            call = enter(self._queue, "dequeue")
            try:
                comps = self._driver.get(req, timeout, "dequeue")
            finally:
                leave(call)
        result: T = self._spec.pack(comps)
        return result

    def dequeue_many(self, n: int, timeout: float | None = None) -> T:
        """Remove and return exactly ``n`` elements as a batch."""
        return self._dequeue_batch(MANY, n, timeout, "dequeue_many")

    def dequeue_up_to(self, n: int, timeout: float | None = None) -> T:
        """Like dequeue_many, but once the queue is closed return the 1..n that remain."""
        return self._dequeue_batch(UP_TO, n, timeout, "dequeue_up_to")

    def dequeue_burst(self, n: int, timeout: float | None = None) -> T:
        """Block until at least one element can be taken, then take up to ``n`` (see
        ``dequeue_burst`` on the queue)."""
        self._driver.check("dequeue_burst")
        n = self._spec.batch_count(n, "dequeue_burst")
        if n == 0:
            empty: T = self._spec.empty_batch()
            return empty
        deferred: list[Request] = []
        comps = self._engine.take_some_now(n, deferred)
        if comps is WAIT:
            call = enter(self._queue, "dequeue_burst")
            try:
                comps = self._driver.get(
                    self._engine.get_request(SOME, n), timeout, "dequeue_burst"
                )
            finally:
                leave(call)
        result: T = self._spec.pack(comps)
        return result

    def _dequeue_batch(self, mode: int, n: Any, timeout: float | None, what: str) -> T:
        self._driver.check(what)
        n = self._spec.batch_count(n, what)
        if n == 0:
            empty: T = self._spec.empty_batch()
            return empty
        call = enter(self._queue, what)
        try:
            comps = self._driver.get(self._engine.get_request(mode, n), timeout, what)
        finally:
            leave(call)
        result: T = self._spec.pack(comps)
        return result

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue (see ``close`` on the queue)."""
        self._engine.close(bool(cancel_pending_enqueues))

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
