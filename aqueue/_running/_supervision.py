"""A Coordinator's supervision: starting runners and tasks, stop requests, exceptions.

``Supervision`` is the part of ``Coordinator`` (``_coordinator.py``, a mixin) that
runs things inside the block and stops them; ``RunnerSupervisor`` is what the
coordinator hands the runners it starts (the runner's ``Supervisor``).

- ``request_stop()`` (or an exception of ``clean_stop_exception_types``) is a *clean*
  stop: ``should_stop()`` becomes true, every runner queue is closed with
  ``cancel_pending_enqueues=True`` (which releases producers blocked on a full queue),
  producers exit before their next item and the body keeps running.
- Any other exception, reported by a producer, a supervised task, the body or
  ``request_stop(exc)``, is recorded (the first one wins) and cancels the scope: every
  task and the body are cancelled.

Invariants:

- ``Coordinator.__init__`` sets every attribute annotated on ``Supervision``;
  ``__aenter__`` sets the task group, the loop thread and the stop event.
- The stop flag is only ever set, never cleared; ``_stop`` may run any number of times.
- ``_exceptions`` only grows, under ``_lock``, and holds each exception once (by
  identity): the first one is what the block raises.
- ``_live`` counts the tasks started through ``_spawn`` that have not ended; ``_idle``
  is set when it drops to zero. The monitor's and the watchdog's tasks are not counted.
- ``_tg`` is None before entry and after the task group's exit: cancelling the scope
  is then a no-op.

Thread safety: ``should_stop()`` and ``request_stop()`` may be called from any thread
(another thread only records under the lock and hands the rest to the event loop);
everything else belongs to the event-loop thread that entered the block.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.abc

from .._errors import add_note
from ._producers import ThreadRecord
from ._registry import take_registered_runners
from ._runner import QueueRunner
from ._watchdog import QueueMonitor

__all__ = ["DONE", "EXITING", "NEW", "RUNNING", "RunnerSupervisor", "Supervision"]

logger = logging.getLogger("aqueue")

# A coordinator's life: entered once, left once.
NEW, RUNNING, EXITING, DONE = "new", "running", "exiting", "done"


class Supervision:
    """Starting runners and supervised tasks, and stopping them (Coordinator's mixin)."""

    _state: str
    _clean_types: tuple[type[BaseException], ...]
    _stop_flag: threading.Event
    _lock: threading.Lock  # guards _exceptions against reporting threads
    _exceptions: list[BaseException]
    _runners: list[QueueRunner]
    _threads: list[ThreadRecord]
    _monitor: QueueMonitor
    _supervisor: RunnerSupervisor
    _live: int
    _idle: anyio.Event | None
    _stop_event: anyio.Event | None
    _tg: anyio.abc.TaskGroup | None
    _loop_thread: int
    _soon: Callable[[Callable[[], object]], None] | None

    # -- supervision ---------------------------------------------------------------------

    def start(self, runner: QueueRunner) -> None:
        """Start every producer of ``runner`` in this coordinator.

        Raises:
            RuntimeError: The coordinator is not running, or the runner already is.
        """
        if not isinstance(runner, QueueRunner):
            raise TypeError(
                f"Coordinator.start: expected a QueueRunner, got {type(runner).__name__}"
            )
        self._check_running("start")
        runner.launch(self._supervisor)
        self._runners.append(runner)
        self._monitor.add(runner.queue, runner)
        if self._stop_flag.is_set():
            runner.queue.release_producers()

    def start_queue_runners(self) -> list[QueueRunner]:
        """Start every runner registered with add_queue_runner in the current context.

        Clears the registry and returns the runners started (an empty registry only logs
        a warning, as in TensorFlow).
        """
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
        self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None
    ) -> None:
        """Run ``fn(*args)`` as a supervised task.

        Its exceptions are reported like a producer's (an exception of
        ``clean_stop_exception_types`` requests a clean stop); the coordinator waits for
        it, as for producers, within the grace period when the block is left.
        """
        self._check_running("start_soon")
        label = name if name is not None else getattr(fn, "__qualname__", repr(fn))
        self._spawn(self._supervise, fn, args, label, name=label)

    def _check_running(self, what: str) -> None:
        if self._state not in (RUNNING, EXITING):
            raise RuntimeError(
                f"Coordinator.{what}() needs a running coordinator: call it inside "
                "`async with Coordinator() as coord:`"
            )
        if threading.get_ident() != self._loop_thread:
            raise RuntimeError(f"Coordinator.{what}() must be called on the event-loop thread")

    def _spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
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
            self._report(exc)

    async def _wait_idle(self) -> None:
        while self._live:
            self._idle = anyio.Event()
            await self._idle.wait()

    async def _wait_threads(self, deadline: float) -> list[str]:
        """Wait (shielded) until the deadline for producer threads; return the stragglers."""
        alive = [t for t in self._threads if not t.finished]
        if alive:
            with anyio.CancelScope(shield=True) as scope:
                scope.deadline = anyio.current_time() + max(0.0, deadline - time.monotonic())
                for t in alive:
                    await t.wait()
        return [t.name for t in self._threads if not t.finished]

    # -- stopping ------------------------------------------------------------------------

    def should_stop(self) -> bool:
        """Whether a stop was requested (any thread may ask)."""
        return self._stop_flag.is_set()

    def request_stop(self, exc: BaseException | None = None) -> None:
        """Ask every producer and task to stop.

        With no exception, or one of ``clean_stop_exception_types``, the stop is clean:
        the body keeps running. Any other exception is recorded (the first one reported
        is the one raised when the block is left) and cancels the coordinator's scope,
        the body included. May be called from any thread.

        Raises:
            BaseException: ``exc`` itself, if the block was already left (nobody would
                report it otherwise).
            TypeError: ``exc`` is not an exception.
        """
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
                self._record(exc)
            return
        if threading.get_ident() == self._loop_thread:
            self._report(exc) if failed else self._stop()
        else:
            assert self._soon is not None
            if failed:
                assert exc is not None
                self._record(exc)
                self._soon(self._cancel_scope)
            self._soon(self._stop)

    def _report(self, exc: BaseException | None) -> None:
        """Record a non-clean exception, stop, and cancel the scope (loop thread)."""
        if exc is not None:
            self._record(exc)
        self._stop()
        self._cancel_scope()

    def _record(self, exc: BaseException) -> None:
        with self._lock:
            if not any(e is exc for e in self._exceptions):
                self._exceptions.append(exc)

    def _cancel_scope(self) -> None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def _stop(self) -> None:
        """Set the stop flag, close runner queues (releasing blocked producers), wake waiters."""
        self._stop_flag.set()
        for runner in self._runners:
            runner.queue.release_producers()
        if self._stop_event is not None and not self._stop_event.is_set():
            self._stop_event.set()

    async def wait_for_stop(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait until a stop is requested; return whether it was (False on timeout)."""
        if self._stop_event is None:
            raise RuntimeError("Coordinator.wait_for_stop() needs a running coordinator")
        with anyio.move_on_after(timeout):
            await self._stop_event.wait()
        return self.should_stop()

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        """Report an exception raised in the ``with`` body and suppress it.

        Only ``Exception`` subclasses are caught: cancellation and KeyboardInterrupt
        pass through.
        """
        try:
            yield
        except Exception as exc:
            self.request_stop(exc)

    def raise_requested_exception(self) -> None:
        """Raise the first recorded exception, if any."""
        if self._exceptions:
            raise self._exceptions[0]

    @property
    def exceptions(self) -> tuple[BaseException, ...]:
        """Every non-clean exception seen, first first."""
        with self._lock:
            return tuple(self._exceptions)

    @property
    def runners(self) -> tuple[QueueRunner, ...]:
        """The runners started by this coordinator."""
        return tuple(self._runners)


class RunnerSupervisor:
    """What a Coordinator offers the runners it starts (the runner's ``Supervisor``)."""

    __slots__ = ("_coord",)

    def __init__(self, coord: Supervision) -> None:
        self._coord = coord

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str) -> None:
        self._coord._spawn(fn, *args, name=name)

    def track_thread(self, record: ThreadRecord) -> None:
        self._coord._threads.append(record)

    def failed(self, exc: Exception) -> None:
        self._coord._report(exc)

    def start(self, runner: QueueRunner) -> None:
        self._coord.start(runner)
