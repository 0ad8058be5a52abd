"""A runner's launch: registering its producers, starting them, and each producer's loop.

``QueueRunner.launch`` (``_runner.py``) makes a ``Launch`` for each start and calls
``start()``; the launch then owns everything about that start: its producer slots, the
sink's blocking view (when a producer runs on a thread), the count of producers that
have not ended, and the supervisor (``ProducerSupervisor``, what the coordinator
offers) that it reports to. A runner holds its current launch; it shares nothing else
with it but the runner's ``exceptions_raised`` list, into which the launch appends.

- async callables and async iterables run as tasks in the coordinator's task group;
- sync callables and sync iterables run on dedicated, long-lived daemon threads (one per
  producer, so a thread-affine object always sees the same thread) that enqueue through
  the queue's blocking view, with no event-loop round trip per item. A supervising task
  waits for each thread and reports how it ended. The threads are started off the
  event loop, by the coordinator's ``ThreadStarter`` (``_producers.py``); each waits
  for the launch's ``go`` event, set once all are started, before producing.

Invariants:

- Every producer is registered with the queue (``register_producer``) before any of
  the runner's producers starts, and reports its end (``producer_done``): the queue
  closes after the last registered producer of *all* its runners (and, for a shared
  queue, of all processes) ended cleanly, so consumers drain, then get OutOfRangeError,
  and end-of-input travels down a chain of queues. A producer that fails or is
  cancelled reports an unclean end, which closes the queue with
  ``cancel_pending_enqueues=True`` at once. Nobody waits forever on a queue whose
  runners are gone.
- Each producer checks ``should_stop()`` before producing an item; an item already
  produced is still enqueued (the enqueue fails cleanly if the coordinator released
  the queue's producers meanwhile).
- A producer ends *cleanly* on StopIteration / StopAsyncIteration or an exception of
  the runner's ``queue_closed_exception_types``. Any other exception is appended to
  ``exceptions_raised`` (with a note naming runner and producer) and reported to the
  supervisor, which stops everything.
- Threads never touch the coordinator or any event-loop object: a thread records its
  outcome under a lock and sets a waker, and its supervising task does the rest. A
  producer's state is "done" once it can no longer enqueue: its task has ended, or its
  thread has.
- ``live`` counts the producers that have not reported their end; ``ended`` is set
  when it reaches zero (at once if registering failed).
"""

from __future__ import annotations

import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio

from .._errors import add_note
from .._queues._protocol import Sink, SinkView
from ._producers import NewThreads, ProducerSlot, ThreadRecord, describe, fetchers

__all__ = ["Launch", "ProducerSupervisor"]


class ProducerSupervisor(Protocol):
    """What a launch needs from the coordinator that starts it."""

    def should_stop(self) -> bool:
        """Whether a stop was requested (any thread may ask)."""
        ...

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
        """Run ``fn(*args)`` as a task the coordinator waits for and cancels."""
        ...

    def track_thread(self, record: ThreadRecord) -> None:
        """A producer thread to wait for (and to name if it outlives the grace period)."""
        ...

    def failed(self, exc: Exception) -> None:
        """A producer failed: record ``exc``, stop everything, cancel the scope."""
        ...

    def start_threads(self, threads: NewThreads, go: threading.Event) -> None:
        """Have ``threads`` started off the event loop, then ``go`` set (without waiting
        for a thread start; see ``ThreadStarter``)."""
        ...


class Launch:
    """One start of a runner: its producers, from registration to their last end.

    Args:
        queue: The runner's sink (a queue or a replay table; only its ``Sink``
            methods are used).
        runner: The runner's name (in task and thread names, and in notes).
        producers: Fresh slots, one per producer.
        supervisor: What the coordinator that starts the runner offers.
        enqueue_many: Each produced value is a batch.
        clean_types: Exceptions that end a producer cleanly.
        exceptions: The runner's ``exceptions_raised``: each failure is appended.
    """

    __slots__ = (
        "_blocking",
        "_clean_types",
        "_enqueue_many",
        "_exceptions",
        "_go",
        "_queue",
        "_runner",
        "_supervisor",
        "ended",
        "live",
        "producers",
    )

    def __init__(
        self,
        queue: Sink,
        runner: str,
        producers: list[ProducerSlot],
        supervisor: ProducerSupervisor,
        *,
        enqueue_many: bool,
        clean_types: tuple[type[BaseException], ...],
        exceptions: list[BaseException],
    ) -> None:
        self._queue = queue
        self._runner = runner
        self._supervisor = supervisor
        self._enqueue_many = enqueue_many
        self._clean_types = clean_types
        self._exceptions = exceptions
        threaded = any(p.kind.threaded for p in producers)
        self._blocking: SinkView | None = queue.blocking() if threaded else None
        self._go = threading.Event()  # set once every producer thread is started
        self.producers = producers
        self.live = len(producers)
        self.ended = anyio.Event()  # set when the last producer has ended

    def start(self) -> None:
        """Register and start every producer, in a task of the supervisor's."""
        self._supervisor.spawn(self._register_and_start, name=f"QueueRunner '{self._runner}'")

    async def _register_and_start(self) -> None:
        """Register every producer with the queue, then start them all. A queue that is
        closed already (``register_producer`` raises QueueClosedError) ends them all
        cleanly at once, as their first enqueue would have."""
        ids: list[str] = []
        try:
            for _ in self.producers:
                ids.append(await self._queue.register_producer())
        except BaseException as exc:  # cancelled, closed, or the queue's server failed
            for p in self.producers:
                p.state = "done"
            self.live = 0
            self.ended.set()
            if not isinstance(exc, self._clean_types):
                raise
            with anyio.CancelScope(shield=True):
                for pid in ids:  # (registered before the close: drop them)
                    await self._queue.producer_done(pid, clean=True)
            return
        async_fetch, sync_fetch = fetchers(self.producers)
        threads: NewThreads = []
        for p, pid in zip(self.producers, ids):
            task_name = f"QueueRunner '{self._runner}' {p.label}"
            if p.kind.threaded:
                record = ThreadRecord(
                    f"QueueRunnerThread-{self._runner}-{p.index} ({describe(p.target)})", p
                )
                thread = threading.Thread(
                    target=contextvars.copy_context().run,
                    args=(self._thread_main, record, p, sync_fetch[p.index]),
                    name=record.name,
                    daemon=True,  # a stuck producer never blocks interpreter exit
                )
                record.thread = thread
                self._supervisor.track_thread(record)
                threads.append((thread, record))
                self._supervisor.spawn(self._supervise_thread, p, pid, record, name=task_name)
            else:
                self._supervisor.spawn(
                    self._produce_async, p, pid, async_fetch[p.index], name=task_name
                )
        if threads:
            self._supervisor.start_threads(threads, self._go)

    # -- producers -----------------------------------------------------------------------

    async def _produce_async(
        self, p: ProducerSlot, pid: str, fetch: Callable[[], Awaitable[Any]]
    ) -> None:
        put = self._queue.enqueue_many if self._enqueue_many else self._queue.enqueue
        should_stop = self._supervisor.should_stop
        outcome = "cancelled"
        try:
            while not should_stop():
                p.state = "producing"
                item = await fetch()
                p.state = "enqueueing"
                await put(item)
            outcome = "clean"
        except self._clean_types:
            outcome = "clean"
        except Exception as exc:
            outcome = "error"
            self._failed(p, exc)
        finally:
            p.state = "done"
            await self._ended(pid, outcome)

    async def _supervise_thread(self, p: ProducerSlot, pid: str, record: ThreadRecord) -> None:
        outcome = "cancelled"
        try:
            await record.wait()
            outcome = record.outcome
            if record.error is not None:
                assert isinstance(record.error, Exception)
                self._failed(p, record.error)
        finally:
            if not record.finished:
                record.stop.set()  # the thread sets its state to "done" when it ends
            await self._ended(pid, outcome)

    def _thread_main(self, record: ThreadRecord, p: ProducerSlot, fetch: Callable[[], Any]) -> None:
        """A producer thread's loop (it touches no event-loop object; see the module
        docstring)."""
        blocking = self._blocking
        assert blocking is not None
        put = blocking.enqueue_many if self._enqueue_many else blocking.enqueue
        should_stop = self._supervisor.should_stop
        stop = record.stop
        outcome, error = "clean", None
        try:
            self._go.wait()  # (see start_threads)
            while not (stop.is_set() or should_stop()):
                p.state = "producing"
                item = fetch()
                if inspect.isawaitable(item):
                    if inspect.iscoroutine(item):
                        item.close()  # never awaited on purpose: no "never awaited" warning
                    raise TypeError(
                        f"{p.label} of QueueRunner '{self._runner}' is a sync callable but "
                        "returned an awaitable; pass an `async def` function instead (a "
                        "lambda that returns a coroutine cannot be told apart from a sync one)"
                    )
                p.state = "enqueueing"
                put(item)
        except self._clean_types:
            pass
        except BaseException as exc:  # reported by the supervising task
            outcome = "error"
            error = exc if isinstance(exc, Exception) else RuntimeError(f"{exc!r} in {record.name}")
            if error is not exc:
                error.__cause__ = exc
        finally:
            record.finish(outcome, error)

    def _failed(self, p: ProducerSlot, exc: Exception) -> None:
        add_note(exc, f"raised by {p.label} of QueueRunner '{self._runner}'")
        self._exceptions.append(exc)
        self._supervisor.failed(exc)

    async def _ended(self, pid: str, outcome: str) -> None:
        """A producer has ended: report it to the queue (which may close), even while
        its task is being cancelled."""
        try:
            with anyio.CancelScope(shield=True):
                await self._queue.producer_done(pid, clean=outcome == "clean")
        finally:
            self.live -= 1
            if self.live <= 0:
                self.ended.set()
