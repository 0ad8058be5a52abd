"""QueueRunner: producers that keep one queue filled.

A runner holds a queue (any ``AsyncQueue``: in-process or shared through a server)
and a list of producers. A Coordinator starts it (``coord.start(runner)``, which calls
``runner.launch`` with the ``Supervisor`` the coordinator offers); each producer then
runs until it ends cleanly, fails, or the coordinator stops:

- async callables and async iterables run as tasks in the coordinator's task group;
- sync callables and sync iterables run on dedicated, long-lived daemon threads (one per
  producer, so a thread-affine object always sees the same thread) that enqueue through
  the queue's blocking view, with no event-loop round trip per item. A supervising task
  waits for each thread and reports how it ended. The threads are started by a
  short-lived helper thread (``start_threads``), so the event loop never waits for one
  to come up.

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
  ``queue_closed_exception_types``. Any other exception is appended to
  ``exceptions_raised`` (with a note naming runner and producer) and reported to the
  supervisor, which stops everything.
- Threads never touch the coordinator or any event-loop object: a thread records its
  outcome under a lock and sets a waker, and its supervising task does the rest. A
  producer's state is "done" once it can no longer enqueue: its task has ended, or its
  thread has.
"""

from __future__ import annotations

import contextvars
import inspect
import threading
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

import anyio

from .._errors import OutOfRangeError, QueueClosedError, add_note
from .._queues._protocol import AsyncQueue, BlockingView
from . import _alive
from ._producers import ProducerSlot, ThreadRecord, classify, describe, fetchers, start_threads

__all__ = ["Producer", "QueueRunner", "Supervisor"]

Producer = Callable[[], Any] | AsyncIterable[Any] | Iterable[Any]
"""An async or sync callable (called repeatedly) or an async or sync iterable."""


class Supervisor(Protocol):
    """What a coordinator offers the runners it starts."""

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

    def start(self, runner: QueueRunner) -> None:
        """Start another runner under the same coordinator."""
        ...


class _Launch:
    """The state of one start of a runner."""

    __slots__ = ("blocking", "ended", "live", "producers")

    def __init__(self, producers: list[ProducerSlot], blocking: BlockingView[Any] | None) -> None:
        self.producers = producers
        self.blocking = blocking
        self.live = len(producers)
        self.ended = anyio.Event()  # set when the last producer has ended

    def one_ended(self) -> None:
        self.live -= 1
        if self.live <= 0:
            self.ended.set()


class QueueRunner:
    """Producers that keep one queue filled, started and stopped by a Coordinator.

    Args:
        queue: The queue the producers fill (an in-process queue, or a shared one
            from ``aqueue.redis``).
        producers: A non-empty sequence. Each item is an async callable (awaited
            repeatedly, each result enqueued), an async iterable (each item enqueued), a
            sync callable (called repeatedly on a dedicated thread) or a sync iterable
            (advanced on a dedicated thread). Listing the same callable k times gives k
            concurrent producers; an iterator listed k times is shared by k producers.
        enqueue_many: Each produced value is a batch (``enqueue_many``) instead of one
            element.
        name: The runner's name (default: the queue's name).
        queue_closed_exception_types: Exceptions that end a producer cleanly (an
            upstream queue is exhausted, or this queue was closed).

    Raises:
        TypeError: A producer is none of the four kinds, ``queue`` is not a queue, or
            ``queue_closed_exception_types`` is not a tuple of exception classes.
        ValueError: ``producers`` is empty.
    """

    def __init__(
        self,
        queue: AsyncQueue[Any],
        producers: Sequence[Producer],
        *,
        enqueue_many: bool = False,
        name: str | None = None,
        queue_closed_exception_types: tuple[type[BaseException], ...] = (
            OutOfRangeError,
            QueueClosedError,
        ),
    ) -> None:
        if not isinstance(queue, AsyncQueue):
            raise TypeError(
                f"QueueRunner: queue must be an aqueue queue, got {type(queue).__name__}"
            )
        if callable(producers) or not isinstance(producers, Sequence) or isinstance(producers, str):
            raise TypeError(
                "QueueRunner: producers must be a sequence of producers (e.g. [load] or "
                f"[load] * 4), got {type(producers).__name__}"
            )
        if len(producers) == 0:
            raise ValueError(f"QueueRunner for queue '{queue.name}': producers must not be empty")
        types = queue_closed_exception_types
        if (
            not isinstance(types, tuple)
            or not types
            or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types)
        ):
            raise TypeError(
                "QueueRunner: queue_closed_exception_types must be a non-empty tuple of "
                f"exception classes, got {types!r}"
            )
        self._queue = queue
        self._producers = [ProducerSlot(i, p, classify(i, p)) for i, p in enumerate(producers)]
        self._enqueue_many = bool(enqueue_many)
        self._name = queue.name if name is None else str(name)
        self._closed_types = types
        self._clean_types: tuple[type[BaseException], ...] = (
            StopIteration,
            StopAsyncIteration,
            *types,
        )
        self._launch: _Launch | None = None
        self._started = False
        self.exceptions_raised: list[BaseException] = []
        """Non-clean exceptions raised by producers since the last start, first first."""

    @property
    def name(self) -> str:
        """The runner's name (by default its queue's name)."""
        return self._name

    @property
    def queue(self) -> AsyncQueue[Any]:
        """The queue this runner fills."""
        return self._queue

    @property
    def enqueue_many(self) -> bool:
        """Whether each produced value is a batch."""
        return self._enqueue_many

    @property
    def queue_closed_exception_types(self) -> tuple[type[BaseException], ...]:
        """Exceptions that end a producer cleanly."""
        return self._closed_types

    @property
    def running(self) -> bool:
        """Whether any producer of the current start is still running."""
        return self._launch is not None and self._launch.live > 0

    @property
    def started(self) -> bool:
        """Whether the runner was ever started."""
        return self._started

    def __repr__(self) -> str:
        live = self._launch.live if self._launch is not None else 0
        return (
            f"<QueueRunner '{self._name}' queue='{self._queue.name}' "
            f"producers={len(self._producers)} live={live}>"
        )

    async def join(self) -> None:
        """Wait until every producer of the current start has ended (and the queue has
        been told, so it closed if they were its last producers).

        Raises:
            RuntimeError: The runner was never started.
        """
        launch = self._launch
        if launch is None:
            raise RuntimeError(f"QueueRunner '{self._name}'.join(): the runner was never started")
        await launch.ended.wait()

    def producer_states(self) -> list[tuple[str, str]]:
        """``(label, state)`` of each producer of the current start: ``idle``,
        ``producing``, ``enqueueing`` or ``done`` (empty before the first start)."""
        launch = self._launch
        if launch is None:
            return []
        return [(p.label, p.state) for p in launch.producers]

    def source_queues(self) -> list[AsyncQueue[Any]]:
        """Queues this runner's producers read from (detected: a queue, its bound
        method, or its iterator, listed as a producer)."""
        found = []
        for p in self._producers:
            for cand in (p.target, getattr(p.target, "__self__", None)):
                cand = getattr(cand, "queue", cand)  # a queue's element/batch iterator
                if isinstance(cand, AsyncQueue) and cand is not self._queue:
                    found.append(cand)
        return found

    def launch(self, supervisor: Supervisor) -> None:
        """Start every producer under ``supervisor`` (``Coordinator.start`` calls this,
        on the event-loop thread).

        Raises:
            RuntimeError: The runner is already running.
        """
        if self.running:
            raise RuntimeError(f"QueueRunner '{self._name}' is already running")
        self._started = True
        _alive.runner_launched(self)
        self.exceptions_raised = []
        threaded = any(p.kind.threaded for p in self._producers)
        producers = [ProducerSlot(p.index, p.target, p.kind) for p in self._producers]
        launch = self._launch = _Launch(producers, self._queue.blocking() if threaded else None)
        supervisor.spawn(
            self._register_and_start, supervisor, launch, name=f"QueueRunner '{self._name}'"
        )

    async def _register_and_start(self, supervisor: Supervisor, launch: _Launch) -> None:
        """Register every producer with the queue, then start them all."""
        try:
            ids = [await self._queue.register_producer() for _ in launch.producers]
        except BaseException:  # cancelled (or the queue's server failed) before any started
            for p in launch.producers:
                p.state = "done"
            launch.live = 0
            launch.ended.set()
            raise
        async_fetch, sync_fetch = fetchers(launch.producers)
        threads: list[tuple[threading.Thread, ThreadRecord]] = []
        for p, pid in zip(launch.producers, ids):
            task_name = f"QueueRunner '{self._name}' {p.label}"
            if p.kind.threaded:
                assert launch.blocking is not None
                record = ThreadRecord(
                    f"QueueRunnerThread-{self._name}-{p.index} ({describe(p.target)})", p
                )
                thread = threading.Thread(
                    target=contextvars.copy_context().run,
                    args=(
                        self._thread_main,
                        supervisor,
                        record,
                        p,
                        sync_fetch[p.index],
                        launch.blocking,
                    ),
                    name=record.name,
                    daemon=True,  # a stuck producer never blocks interpreter exit
                )
                supervisor.track_thread(record)
                threads.append((thread, record))
                supervisor.spawn(
                    self._supervise_thread, supervisor, launch, p, pid, record, name=task_name
                )
            else:
                supervisor.spawn(
                    self._produce_async,
                    supervisor,
                    launch,
                    p,
                    pid,
                    async_fetch[p.index],
                    name=task_name,
                )
        if threads:
            start_threads(threads)

    # -- producers -----------------------------------------------------------------------

    async def _produce_async(
        self,
        supervisor: Supervisor,
        launch: _Launch,
        p: ProducerSlot,
        pid: str,
        fetch: Callable[[], Awaitable[Any]],
    ) -> None:
        put = self._queue.enqueue_many if self._enqueue_many else self._queue.enqueue
        outcome = "cancelled"
        try:
            while not supervisor.should_stop():
                p.state = "producing"
                item = await fetch()
                p.state = "enqueueing"
                await put(item)
            outcome = "clean"
        except self._clean_types:
            outcome = "clean"
        except Exception as exc:
            outcome = "error"
            self._failed(supervisor, p, exc)
        finally:
            p.state = "done"
            await self._ended(launch, pid, outcome)

    async def _supervise_thread(
        self,
        supervisor: Supervisor,
        launch: _Launch,
        p: ProducerSlot,
        pid: str,
        record: ThreadRecord,
    ) -> None:
        outcome = "cancelled"
        try:
            await record.wait()
            outcome = record.outcome
            if record.error is not None:
                assert isinstance(record.error, Exception)
                self._failed(supervisor, p, record.error)
        finally:
            if not record.finished:
                record.stop.set()  # the thread sets its state to "done" when it ends
            await self._ended(launch, pid, outcome)

    def _thread_main(
        self,
        supervisor: Supervisor,
        record: ThreadRecord,
        p: ProducerSlot,
        fetch: Callable[[], Any],
        blocking: BlockingView[Any],
    ) -> None:
        put = blocking.enqueue_many if self._enqueue_many else blocking.enqueue
        stop = record.stop
        outcome, error = "clean", None
        try:
            while not (stop.is_set() or supervisor.should_stop()):
                p.state = "producing"
                item = fetch()
                if inspect.isawaitable(item):
                    if inspect.iscoroutine(item):
                        item.close()  # never awaited on purpose: no "never awaited" warning
                    raise TypeError(
                        f"{p.label} of QueueRunner '{self._name}' is a sync callable but "
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

    def _failed(self, supervisor: Supervisor, p: ProducerSlot, exc: Exception) -> None:
        add_note(exc, f"raised by {p.label} of QueueRunner '{self._name}'")
        self.exceptions_raised.append(exc)
        supervisor.failed(exc)

    async def _ended(self, launch: _Launch, pid: str, outcome: str) -> None:
        """A producer has ended: report it to the queue (which may close), even while
        its task is being cancelled."""
        try:
            with anyio.CancelScope(shield=True):
                await self._queue.producer_done(pid, clean=outcome == "clean")
        finally:
            launch.one_ended()
