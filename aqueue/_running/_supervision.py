"""A Coordinator's supervision: its task group, the runners and tasks started in it,
stop requests, and the exceptions recorded.

A ``Coordinator`` (``_coordinator.py``) holds one ``Supervision``, which owns all the
state below; the coordinator's own methods of that kind (``start``, ``request_stop``,
...) are one-line calls to it. The same object is what the coordinator hands the
runners it starts: it is their ``Supervisor`` (``_runner.py``).

- ``request_stop()`` (or an exception of ``clean_stop_exception_types``) is a *clean*
  stop: ``should_stop()`` becomes true, every runner's sink releases its producers
  (``release_producers``: an in-process queue is closed with
  ``cancel_pending_enqueues=True``, a table is closed, which releases producers
  blocked on a full queue or on a rate limiter), producers exit before their next
  item and the body keeps running.
- Any other exception, reported by a producer, a supervised task, the body or
  ``request_stop(exc)``, is recorded (the first one wins) and cancels the scope: every
  task and the body are cancelled.

Invariants:

- The state only moves forward: new, running (``open``), exiting (``begin_exit``),
  done (``finish``). The task group exists from ``open`` until ``close_group``:
  cancelling the scope outside that span is a no-op.
- The stop flag is only ever set, never cleared; ``stop`` may run any number of times.
- The recorded exceptions only grow, under a lock, and hold each exception once (by
  identity): the first one is what the block raises.
- The ``ThreadStarter`` (the one thread that starts producer threads) exists from the
  first threaded runner's start until ``close_group``.
- ``live_tasks`` counts the tasks started through ``spawn`` (producers, supervised
  tasks) that have not ended; the idle event is set when it drops to zero. Background
  tasks (``background``: the watchdog, the monitor, statistics reads) are not
  counted: nobody waits for them, the scope's cancellation ends them.

Thread safety: ``should_stop()`` and ``request_stop()`` may be called from any thread
(another thread only records under the lock and hands the rest to the event loop);
everything else belongs to the event-loop thread that entered the block.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

from .._errors import add_note
from .._waiting._backend import soon_threadsafe
from ._producers import NewThreads, ThreadRecord, ThreadStarter
from ._registry import take_registered_runners
from ._runner import QueueRunner
from ._watchdog import QueueMonitor

__all__ = ["DONE", "EXITING", "NEW", "RUNNING", "Supervision"]

logger = logging.getLogger("aqueue")

# A coordinator's life: entered once, left once.
NEW, RUNNING, EXITING, DONE = "new", "running", "exiting", "done"


class Supervision:
    """Runs runners and supervised tasks in one task group, and stops them.

    Args:
        clean_types: The coordinator's ``clean_stop_exception_types``.
        queues: The coordinator's view of its queues: each started runner's queue is
            added to it.
    """

    def __init__(self, clean_types: tuple[type[BaseException], ...], queues: QueueMonitor) -> None:
        self._clean_types = clean_types
        self._queues = queues
        self._state = NEW
        self._stop_flag = threading.Event()
        self._lock = threading.Lock()  # guards _exceptions against reporting threads
        self._exceptions: list[BaseException] = []
        self._runners: list[QueueRunner] = []
        self._threads: list[ThreadRecord] = []
        self._starter = ThreadStarter()
        self._live = 0
        self._idle: anyio.Event | None = None
        self._stop_event: anyio.Event | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._loop_thread = 0
        self._soon: Callable[[Callable[[], object]], None] | None = None

    # -- the task group's life -----------------------------------------------------------

    @property
    def state(self) -> str:
        """new, running, exiting or done."""
        return self._state

    @property
    def clean_types(self) -> tuple[type[BaseException], ...]:
        """The coordinator's ``clean_stop_exception_types``."""
        return self._clean_types

    @property
    def live_tasks(self) -> int:
        """Tasks started through ``spawn`` that have not ended."""
        return self._live

    async def open(self) -> None:
        """Enter the task group, on the event-loop thread that runs the block."""
        self._soon = soon_threadsafe()
        self._loop_thread = threading.get_ident()
        self._stop_event = anyio.Event()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._state = RUNNING

    def begin_exit(self) -> None:
        """The block is being left (``__aexit__`` began)."""
        assert self._state == RUNNING
        self._state = EXITING

    async def close_group(self, passed: BaseException | None) -> BaseException | None:
        """Cancel the scope and exit the task group, showing it ``passed`` (the body's
        cancellation or KeyboardInterrupt, if any); return what escaped it."""
        tg = self._tg
        assert tg is not None
        tg.cancel_scope.cancel()
        escaped: BaseException | None = None
        try:
            if passed is None:
                await tg.__aexit__(None, None, None)
            elif not await tg.__aexit__(type(passed), passed, passed.__traceback__):
                escaped = passed
        except BaseException as e:
            escaped = e
        finally:
            del passed  # (no reference cycle through this frame)
            self._tg = None  # its scope is closed: nothing may cancel it any more
            self._starter.close()  # every launch is done: no thread is submitted after
        return escaped

    def finish(self) -> None:
        """The task group has exited and the threads were waited for."""
        self._state = DONE

    def background(
        self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str
    ) -> None:
        """Run ``fn(*args)`` in the task group, not waited for at exit (see the module
        docstring); its exceptions propagate as any task's would."""
        assert self._tg is not None
        self._tg.start_soon(fn, *args, name=name)

    # -- starting runners and tasks ------------------------------------------------------

    def start(self, runner: QueueRunner) -> None:
        """``Coordinator.start`` (and a runner starting another)."""
        if not isinstance(runner, QueueRunner):
            raise TypeError(
                f"Coordinator.start: expected a QueueRunner, got {type(runner).__name__}"
            )
        self._check_running("start")
        runner.launch(self)
        self._runners.append(runner)
        self._queues.add(runner.queue, runner)
        if self._stop_flag.is_set():
            runner.queue.release_producers()

    def start_queue_runners(self) -> list[QueueRunner]:
        """``Coordinator.start_queue_runners``."""
        self._check_running("start_queue_runners")
        runners = take_registered_runners()
        if not runners:
            logger.warning(
                "start_queue_runners(): no QueueRunner was registered with add_queue_runner() "
                "in this context"
            )
        for runner in runners:
            self.start(runner)
        return runners

    def start_soon(
        self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...], name: str
    ) -> None:
        """``Coordinator.start_soon``."""
        self._check_running("start_soon")
        self.spawn(self._supervise, fn, args, name, name=name)

    def _check_running(self, what: str) -> None:
        if self._state not in (RUNNING, EXITING):
            raise RuntimeError(
                f"Coordinator.{what}() needs a running coordinator: call it inside "
                "`async with Coordinator() as coord:`"
            )
        if threading.get_ident() != self._loop_thread:
            raise RuntimeError(f"Coordinator.{what}() must be called on the event-loop thread")

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
        """Run ``fn(*args)`` as a counted task (waited for at exit; see ``live_tasks``)."""
        assert self._tg is not None
        self._live += 1
        self._tg.start_soon(self._counted, fn, args, name=name)

    async def _counted(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        try:
            await fn(*args)
        finally:
            self._live -= 1
            if self._live == 0 and self._idle is not None:
                self._idle.set()

    async def _supervise(
        self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...], label: str
    ) -> None:
        try:
            await fn(*args)
        except self._clean_types:
            self.request_stop()
        except Exception as exc:
            add_note(exc, f"raised by task '{label}' started with Coordinator.start_soon")
            self.failed(exc)

    def start_threads(self, threads: NewThreads, go: threading.Event) -> None:
        """Have producer threads started by the coordinator's starter thread."""
        self._starter.submit(threads, go)

    def track_thread(self, record: ThreadRecord) -> None:
        """A producer thread to wait for at exit (and to name if it outlives the grace
        period)."""
        self._threads.append(record)

    async def wait_idle(self) -> None:
        """Wait until no counted task is left."""
        while self._live:
            self._idle = anyio.Event()
            await self._idle.wait()

    async def wait_threads(self, deadline: float) -> list[str]:
        """Wait (shielded) until the deadline (``time.monotonic()``) for producer
        threads to end (``ThreadRecord.exited``); return the names of those still
        running."""
        alive = [t for t in self._threads if not t.finished or (t.thread and t.thread.is_alive())]
        if alive:
            with anyio.CancelScope(shield=True) as scope:
                scope.deadline = anyio.current_time() + max(0.0, deadline - time.monotonic())
                for t in alive:
                    await t.exited()
        return [t.name for t in self._threads if not t.finished]

    # -- stopping ------------------------------------------------------------------------

    def should_stop(self) -> bool:
        """Whether a stop was requested (any thread may ask)."""
        return self._stop_flag.is_set()

    def request_stop(self, exc: BaseException | None = None) -> None:
        """``Coordinator.request_stop`` (any thread)."""
        if exc is not None and not isinstance(exc, BaseException):
            raise TypeError(
                f"Coordinator.request_stop: exc must be an exception, got {type(exc).__name__}"
            )
        failed = exc is not None and not isinstance(exc, self._clean_types)
        if self._state == DONE:
            if failed:
                assert exc is not None
                raise exc
            return
        self._stop_flag.set()
        if self._state == NEW:
            if failed:
                assert exc is not None
                self.record(exc)
            return
        if threading.get_ident() == self._loop_thread:
            self.failed(exc) if failed else self.stop()
        else:
            assert self._soon is not None
            if failed:
                assert exc is not None
                self.record(exc)
                self._soon(self._cancel_scope)
            self._soon(self.stop)

    def failed(self, exc: BaseException | None) -> None:
        """Record a non-clean exception, stop, and cancel the scope (loop thread)."""
        if exc is not None:
            self.record(exc)
        self.stop()
        self._cancel_scope()

    def record(self, exc: BaseException) -> None:
        """Record ``exc`` (once; any thread)."""
        with self._lock:
            if not any(e is exc for e in self._exceptions):
                self._exceptions.append(exc)

    def _cancel_scope(self) -> None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def stop(self) -> None:
        """Set the stop flag, close runner queues (releasing blocked producers), wake
        ``wait_for_stop``."""
        self._stop_flag.set()
        for runner in self._runners:
            runner.queue.release_producers()
        if self._stop_event is not None and not self._stop_event.is_set():
            self._stop_event.set()

    async def wait_stopped(self) -> None:
        """Wait until a stop is requested (``Coordinator.wait_for_stop``)."""
        if self._stop_event is None:
            raise RuntimeError("Coordinator.wait_for_stop() needs a running coordinator")
        await self._stop_event.wait()

    @property
    def exceptions(self) -> tuple[BaseException, ...]:
        """Every non-clean exception recorded, first first."""
        with self._lock:
            return tuple(self._exceptions)

    @property
    def runners(self) -> tuple[QueueRunner, ...]:
        """The runners started, in order."""
        return tuple(self._runners)
