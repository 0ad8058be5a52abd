"""A runner's launch: registering its producers, starting them, and each producer's loop.

``QueueRunner.launch`` (``_runner.py``) makes a ``Launch`` and spawns
``_register_and_start`` under the coordinator's ``Supervisor``; everything from there
on is ``RunsProducers``'s, a mixin of QueueRunner:

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
- A ``Launch``'s ``live`` counts its producers that have not reported their end;
  ``ended`` is set when it reaches zero (at once if registering failed).
"""

from __future__ import annotations

import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from .._errors import add_note
from .._queues._protocol import AsyncQueue, BlockingView
from ._producers import ProducerSlot, ThreadRecord, describe, fetchers, start_threads

if TYPE_CHECKING:
    from ._runner import Supervisor

__all__ = ["Launch", "RunsProducers"]


class Launch:
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


class RunsProducers:
    """Registering, starting and running a launch's producers (QueueRunner's mixin)."""

    _queue: AsyncQueue[Any]
    _name: str
    _enqueue_many: bool
    _clean_types: tuple[type[BaseException], ...]
    exceptions_raised: list[BaseException]

    async def _register_and_start(self, supervisor: Supervisor, launch: Launch) -> None:
        """Register every producer with the queue, then start them all. A queue that is
        closed already (``register_producer`` raises QueueClosedError) ends them all
        cleanly at once, as their first enqueue would have."""
        ids: list[str] = []
        try:
            for _ in launch.producers:
                ids.append(await self._queue.register_producer())
        except BaseException as exc:  # cancelled, closed, or the queue's server failed
            for p in launch.producers:
                p.state = "done"
            launch.live = 0
            launch.ended.set()
            if not isinstance(exc, self._clean_types):
                raise
            with anyio.CancelScope(shield=True):
                for pid in ids:  # (registered before the close: drop them)
                    await self._queue.producer_done(pid, clean=True)
            return
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
        launch: Launch,
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
        launch: Launch,
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

    async def _ended(self, launch: Launch, pid: str, outcome: str) -> None:
        """A producer has ended: report it to the queue (which may close), even while
        its task is being cancelled."""
        try:
            with anyio.CancelScope(shield=True):
                await self._queue.producer_done(pid, clean=outcome == "clean")
        finally:
            launch.one_ended()
