"""QueueRunner: producers that keep one queue filled, and the context-local registry.

A runner holds a queue and a list of producers. A Coordinator starts it
(``coord.start(runner)``); each producer then runs until it ends cleanly, fails, or the
coordinator stops:

- async callables and async iterables run as tasks in the coordinator's task group;
- sync callables and sync iterables run on dedicated, long-lived daemon threads (one per
  producer, so a thread-affine object always sees the same thread) that enqueue through
  the queue's blocking view, with no event-loop round trip per item. A supervising task
  in the task group waits for each thread and reports how it ended. The threads are
  started by a short-lived helper thread, so the event loop never waits for one to
  come up (on a busy machine that takes a scheduler slice per thread).

Invariants:

- Each producer checks ``coord.should_stop()`` before producing an item; an item already
  produced is still enqueued (the enqueue fails cleanly if the coordinator closed the
  queue meanwhile).
- A producer ends *cleanly* on StopIteration / StopAsyncIteration or an exception of
  ``queue_closed_exception_types``. Any other exception closes the queue with
  ``cancel_pending_enqueues=True``, is appended to ``exceptions_raised`` (with a note
  naming runner and producer) and is reported to the coordinator, which stops everything.
- The last producer to finish closes the queue: a plain ``close()`` after a clean end
  (consumers drain, then get OutOfRangeError, so end-of-input travels down a chain of
  queues). "Last" counts the running producers of every runner of that queue, so two
  runners feeding one queue do not cut each other short. A producer that fails or is
  cancelled closes it with ``cancel_pending_enqueues=True`` at once. Nobody waits
  forever on a queue whose runners are gone.
- Threads never touch the coordinator or any event-loop object: a thread records its
  outcome under a lock and sets a waker, and its supervising task does the rest.

The registry: ``add_queue_runner`` is TF's QUEUE_RUNNERS graph collection, runners
registered while a pipeline is built and started together by
``coord.start_queue_runners()``. It lives in a ``contextvars.ContextVar`` holding a list
that is created on first use and emptied in place when taken, so contexts copied from the
one that created it (tasks started later) share it. Registration may happen before any
event loop runs, so a small daemon thread watches for TF's most common silent hang: it
lives only while some registered runner has not been started, polls every 0.25 s, reads
nothing but ``queue.statistics()`` (which takes the queue's lock) and
``runner._started``, and logs one warning per queue once a consumer has waited on it for
a second while its runner was never started.
"""

from __future__ import annotations

import _thread
import contextvars
import inspect
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._base import QueueBase
from ._errors import OutOfRangeError, QueueClosedError
from ._producers import _Producer, _ThreadRecord, add_note, classify, describe, fetchers

if TYPE_CHECKING:
    from ._blocking import BlockingQueue
    from ._coordinator import Coordinator

__all__ = ["Producer", "QueueRunner", "add_queue_runner", "take_registered_runners"]

logger = logging.getLogger("aqueue")

_add_note = add_note  # the pipeline modules import it from here

Producer = Callable[[], Any] | AsyncIterable[Any] | Iterable[Any]
"""An async or sync callable (called repeatedly) or an async or sync iterable."""


class _Run:
    """The state of one start of a runner."""

    __slots__ = ("blocking", "live", "producers")

    def __init__(self, producers: list[_Producer], blocking: BlockingQueue | None) -> None:
        self.producers = producers
        self.blocking = blocking
        self.live = len(producers)


class QueueRunner:
    """Producers that keep one queue filled, started and stopped by a Coordinator.

    Args:
        queue: The queue the producers fill.
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
        TypeError: A producer is none of the four kinds, or
            ``queue_closed_exception_types`` is not a tuple of exception classes.
        ValueError: ``producers`` is empty.
    """

    def __init__(
        self,
        queue: QueueBase,
        producers: Sequence[Producer],
        *,
        enqueue_many: bool = False,
        name: str | None = None,
        queue_closed_exception_types: tuple[type[BaseException], ...] = (
            OutOfRangeError,
            QueueClosedError,
        ),
    ) -> None:
        if not isinstance(queue, QueueBase):
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
        self._producers = [_Producer(i, p, classify(i, p)) for i, p in enumerate(producers)]
        self._enqueue_many = bool(enqueue_many)
        self._name = queue.name if name is None else str(name)
        self._closed_types = types
        self._clean_types: tuple[type[BaseException], ...] = (
            StopIteration,
            StopAsyncIteration,
            *types,
        )
        self._run: _Run | None = None
        self._started = False
        self.exceptions_raised: list[BaseException] = []
        """Non-clean exceptions raised by producers since the last start, first first."""

    @property
    def name(self) -> str:
        """The runner's name (by default its queue's name)."""
        return self._name

    @property
    def queue(self) -> QueueBase:
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
        return self._run is not None and self._run.live > 0

    def __repr__(self) -> str:
        live = self._run.live if self._run is not None else 0
        return (
            f"<QueueRunner '{self._name}' queue='{self._queue.name}' "
            f"producers={len(self._producers)} live={live}>"
        )

    # -- used by the Coordinator and the watchdog ----------------------------------------

    def _producer_states(self) -> list[tuple[str, str]]:
        run = self._run
        if run is None:
            return []
        return [(p.label, p.state) for p in run.producers]

    def _sources(self) -> list[QueueBase]:
        """Queues this runner's producers read from (detected, not declared)."""
        found = []
        for p in self._producers:
            for cand in (p.target, getattr(p.target, "__self__", None)):
                cand = getattr(cand, "_queue", cand)  # a queue's element/batch iterator
                if isinstance(cand, QueueBase) and cand is not self._queue:
                    found.append(cand)
        return found

    def _start(self, coord: Coordinator) -> None:
        """Start every producer as a task of ``coord`` (called on the event-loop thread).

        Producer threads are created here but started by a helper thread (see
        ``_launch``), so the event loop never waits for a thread to come up.
        """
        if self.running:
            raise RuntimeError(f"QueueRunner '{self._name}' is already running")
        self._started = True
        self.exceptions_raised = []
        threaded = any(p.kind.threaded for p in self._producers)
        producers = [_Producer(p.index, p.target, p.kind) for p in self._producers]
        run = self._run = _Run(producers, self._queue.blocking() if threaded else None)
        _feeders[self._queue] = _feeders.get(self._queue, 0) + len(producers)
        async_fetch, sync_fetch = fetchers(producers)
        threads: list[tuple[threading.Thread, _ThreadRecord]] = []
        for p in producers:
            task_name = f"QueueRunner '{self._name}' {p.label}"
            if p.kind.threaded:
                assert run.blocking is not None
                record = _ThreadRecord(
                    f"QueueRunnerThread-{self._name}-{p.index} ({describe(p.target)})", p
                )
                thread = threading.Thread(
                    target=contextvars.copy_context().run,
                    args=(self._thread_main, coord, record, p, sync_fetch[p.index], run.blocking),
                    name=record.name,
                    daemon=True,  # a stuck producer never blocks interpreter exit
                )
                coord._track_thread(record)
                threads.append((thread, record))
                coord._spawn(self._supervise_thread, coord, run, p, record, name=task_name)
            else:
                coord._spawn(
                    self._produce_async, coord, run, p, async_fetch[p.index], name=task_name
                )
        if threads:
            _launch(threads)

    # -- producers -----------------------------------------------------------------------

    async def _produce_async(
        self,
        coord: Coordinator,
        run: _Run,
        p: _Producer,
        fetch: Callable[[], Awaitable[Any]],
    ) -> None:
        put = self._queue.enqueue_many if self._enqueue_many else self._queue.enqueue
        outcome = "cancelled"
        try:
            while not coord.should_stop():
                p.state = "producing"
                item = await fetch()
                p.state = "enqueueing"
                await put(item)
            outcome = "clean"
        except self._clean_types:
            outcome = "clean"
        except Exception as exc:
            outcome = "error"
            self._failed(coord, p, exc)
        finally:
            self._producer_done(run, p, outcome)

    async def _supervise_thread(
        self, coord: Coordinator, run: _Run, p: _Producer, record: _ThreadRecord
    ) -> None:
        outcome = "cancelled"
        try:
            await record.wait()
            outcome = record.outcome
            if record.error is not None:
                assert isinstance(record.error, Exception)
                self._failed(coord, p, record.error)
        finally:
            if not record.finished:
                record.stop.set()
            self._producer_done(run, p, outcome, thread_running=not record.finished)

    def _thread_main(
        self,
        coord: Coordinator,
        record: _ThreadRecord,
        p: _Producer,
        fetch: Callable[[], Any],
        blocking: BlockingQueue,
    ) -> None:
        put = blocking.enqueue_many if self._enqueue_many else blocking.enqueue
        stop = record.stop
        outcome, error = "clean", None
        try:
            while not (stop.is_set() or coord.should_stop()):
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

    def _failed(self, coord: Coordinator, p: _Producer, exc: Exception) -> None:
        add_note(exc, f"raised by {p.label} of QueueRunner '{self._name}'")
        self.exceptions_raised.append(exc)
        self._queue.close(cancel_pending_enqueues=True)
        coord._report(exc)

    def _producer_done(
        self, run: _Run, p: _Producer, outcome: str, *, thread_running: bool = False
    ) -> None:
        if not thread_running:  # a thread still running sets "done" itself when it ends
            p.state = "done"
        run.live -= 1
        feeders = _feeders[self._queue] = _feeders[self._queue] - 1
        if outcome != "clean":
            self._queue.close(cancel_pending_enqueues=True)
        elif feeders == 0:
            self._queue.close()


_STARTERS = 4  # producer threads started concurrently (see _launch)


def _launch(threads: list[tuple[threading.Thread, _ThreadRecord]]) -> None:
    """Start producer threads without making the event loop wait for them.

    ``Thread.start()`` blocks its caller until the new thread runs: about 0.1 ms on a
    quiet machine, but a scheduler slice (4 ms or more) on a busy one, so 16 threads
    started one after another on the loop held it up for 20 to 60 ms. Here one helper
    thread and up to ``_STARTERS - 1`` more starter threads each start every
    ``_STARTERS``-th producer thread in turn: on a busy machine the scheduling delays
    overlap (16 threads running after ~7 ms instead of ~20 ms), on a quiet one a few
    starters cost no more than one (~2.5 ms), and the loop only pays for creating the
    helper. Helper and starters are ``_thread.start_new_thread`` threads (the standard
    library's low-level thread API) because that call does not wait. A thread whose
    supervising task is already gone is not started; one that cannot be started
    reports the error through its record, as a failed producer.
    """

    def start_one(thread: threading.Thread, record: _ThreadRecord) -> None:
        if record.stop.is_set():
            record.finish("clean", None)
            return
        try:
            thread.start()
        except Exception as exc:  # e.g. "can't start new thread"
            record.finish("error", exc)

    def start_chain(chain: list[tuple[threading.Thread, _ThreadRecord]]) -> None:
        for thread, record in chain:
            start_one(thread, record)

    def start_all() -> None:
        chains = [threads[k::_STARTERS] for k in range(min(_STARTERS, len(threads)))]
        for chain in chains[1:]:
            try:
                _thread.start_new_thread(start_chain, (chain,))
            except RuntimeError:  # no starter thread to be had: start them here
                start_chain(chain)
        start_chain(chains[0])  # the helper is the first starter

    try:
        _thread.start_new_thread(start_all, ())
    except RuntimeError:
        start_all()


# Running producers per queue, over all runners (touched on event-loop threads only).
_feeders: weakref.WeakKeyDictionary[QueueBase, int] = weakref.WeakKeyDictionary()

_registry: contextvars.ContextVar[list[QueueRunner]] = contextvars.ContextVar(
    "aqueue_queue_runners"
)


def add_queue_runner(runner: QueueRunner) -> None:
    """Register ``runner`` in the current context's collection of queue runners.

    ``coord.start_queue_runners()`` later starts every registered runner. The collection
    is context-local (a ``contextvars.ContextVar``): runners registered at module level
    are seen by every task started afterwards; runners registered inside a task are seen
    by that task (and the tasks it starts later).

    A consumer that blocks for about a second on the queue of a registered runner that
    was never started gets a warning on the "aqueue" logger naming the queue: the silent
    hang of TensorFlow pipelines whose runners were never started.

    Raises:
        TypeError: ``runner`` is not a QueueRunner.
    """
    if not isinstance(runner, QueueRunner):
        raise TypeError(f"add_queue_runner: expected a QueueRunner, got {type(runner).__name__}")
    try:
        runners = _registry.get()
    except LookupError:
        runners = []
        _registry.set(runners)
    if runner not in runners:
        runners.append(runner)
    if not runner._started:
        _watch_unstarted(runner)


def take_registered_runners() -> list[QueueRunner]:
    """Return the runners registered in the current context and clear the collection."""
    try:
        runners = _registry.get()
    except LookupError:
        return []
    taken = list(runners)
    runners.clear()  # in place: outer contexts that share the list see it empty too
    return taken


_UNSTARTED_POLL_S = 0.25
_UNSTARTED_AFTER_S = 1.0

_pending: weakref.WeakSet[QueueRunner] = weakref.WeakSet()
_pending_lock = threading.Lock()
_watcher: threading.Thread | None = None
_blocked_since: weakref.WeakKeyDictionary[QueueRunner, float] = weakref.WeakKeyDictionary()
_warned: weakref.WeakSet[QueueBase] = weakref.WeakSet()


def _watch_unstarted(runner: QueueRunner) -> None:
    global _watcher
    with _pending_lock:
        _pending.add(runner)
        if _watcher is None:
            _watcher = threading.Thread(
                target=_unstarted_loop, name="aqueue-unstarted-runner-watch", daemon=True
            )
            _watcher.start()


def _unstarted_loop() -> None:
    global _watcher
    while True:
        time.sleep(_UNSTARTED_POLL_S)
        with _pending_lock:
            for r in [r for r in _pending if r._started]:
                _pending.discard(r)
            runners = list(_pending)
            if not runners:
                _watcher = None
                return
        _check_unstarted(runners, time.monotonic())


def _check_unstarted(runners: list[QueueRunner], now: float) -> None:
    for r in runners:
        q = r.queue
        if q in _warned:
            continue
        st = q.statistics()
        if st.tasks_waiting_dequeue == 0 or st.closed:
            _blocked_since.pop(r, None)
            continue
        since = _blocked_since.setdefault(r, now)
        if now - since >= _UNSTARTED_AFTER_S and not r._started:
            _warned.add(q)
            logger.warning(
                "queue '%s' has %d consumer(s) waiting, but QueueRunner '%s' that feeds it "
                "was registered with add_queue_runner() and never started; call "
                "coord.start_queue_runners() (or coord.start(runner)) inside "
                "`async with Coordinator() as coord:`",
                q.name,
                st.tasks_waiting_dequeue,
                r.name,
            )
