"""Coordinator: one task group and its cancel scope, supervising runners and tasks.

``async with Coordinator() as coord:`` opens an anyio task group; the body runs inside
its cancel scope, next to every producer the coordinator starts. That is TF's
Coordinator with structured concurrency underneath:

- ``request_stop()`` (or an exception of ``clean_stop_exception_types``) is a *clean*
  stop: ``should_stop()`` becomes true, every runner queue is closed with
  ``cancel_pending_enqueues=True`` (which releases producers blocked on a full queue),
  producers exit before their next item and the body keeps running.
- Any other exception, reported by a producer, a supervised task, the body or
  ``request_stop(exc)``, is recorded (the first one wins) and cancels the scope: every
  task and the body are cancelled.
- Leaving the block: after a normal exit the coordinator requests a stop and waits up to
  ``stop_grace_period`` for its tasks, then cancels the rest; producer threads still
  running by the end of the grace period are abandoned (they are daemon threads). Then
  it raises, in this order of precedence: the host task's own cancellation (never
  swallowed), the first recorded exception itself (not wrapped in an exception group;
  later ones are attached as notes), RuntimeError naming abandoned threads (unless
  ``ignore_live_threads``).

With ``monitor=`` (an ``aqueue.Monitor``), the monitor's sampling task starts at entry
in the task group (it is not one of the tasks waited for at exit; its failure, a
callback's exception, is reported like a supervised task's) and takes a final sample
after the producer threads have been waited for, just before the outcome is decided.

Thread safety: ``should_stop()`` and ``request_stop()`` may be called from any thread;
everything else belongs to the event-loop thread that entered the block.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from .._errors import OutOfRangeError, add_note
from .._queues._backend import soon_threadsafe
from .._queues._protocol import AsyncQueue
from . import _alive
from ._monitor import Monitor, begin_monitor
from ._outcome import block_outcome
from ._producers import ThreadRecord
from ._registry import take_registered_runners
from ._runner import QueueRunner
from ._sampler import Sampler
from ._watchdog import QueueMonitor, input_wait, report

__all__ = ["Coordinator"]

logger = logging.getLogger("aqueue")

_NEW, _RUNNING, _EXITING, _DONE = "new", "running", "exiting", "done"


class Coordinator:
    """Runs queue runners and tasks in one task group and stops them together.

    Args:
        stop_grace_period: Seconds to wait, when the block is left, for producers to
            finish after the stop request before cancelling the rest.
        clean_stop_exception_types: Exceptions that mean "stop" rather than "fail"
            when reported (TF: OutOfRangeError ends training cleanly). A custom tuple
            replaces the default. Such an exception leaving the body ends the block
            quietly.
        ignore_live_threads: Only log, instead of raising RuntimeError, producer
            threads still running after the grace period.
        watchdog: If set, log a warning on the "aqueue" logger when a watched queue has
            made no progress for this many seconds while tasks wait on it.
        monitor: A ``Monitor`` that samples every watched queue while the block runs
            (from its entry; one last sample after the producers have stopped).

    Raises:
        ValueError: ``stop_grace_period`` or ``watchdog`` is negative (or not a number).
        TypeError: ``clean_stop_exception_types`` is not a tuple of exception classes,
            or ``monitor`` is not a Monitor.
        RuntimeError: On entry, ``monitor`` already runs with another coordinator.
    """

    def __init__(
        self,
        *,
        stop_grace_period: float = 5.0,
        clean_stop_exception_types: tuple[type[BaseException], ...] = (OutOfRangeError,),
        ignore_live_threads: bool = False,
        watchdog: float | None = None,
        monitor: Monitor | None = None,
    ) -> None:
        for what, value in (("stop_grace_period", stop_grace_period), ("watchdog", watchdog)):
            if value is None and what == "watchdog":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"Coordinator: {what} must be a number >= 0, got {value!r}")
        types = clean_stop_exception_types
        if not isinstance(types, tuple) or not all(
            isinstance(t, type) and issubclass(t, BaseException) for t in types
        ):
            raise TypeError(
                "Coordinator: clean_stop_exception_types must be a tuple of exception "
                f"classes, got {types!r}"
            )
        if monitor is not None and not isinstance(monitor, Monitor):
            raise TypeError(
                f"Coordinator: monitor must be an aqueue.Monitor or None, got "
                f"{type(monitor).__name__}"
            )
        self._grace = float(stop_grace_period)
        self._clean_types = types
        self._ignore_live_threads = bool(ignore_live_threads)
        self._watchdog = None if watchdog is None else float(watchdog)
        self._user_monitor = monitor
        self._monitor_run: Sampler | None = None
        self._state = _NEW
        self._stop_flag = threading.Event()
        self._lock = threading.Lock()  # guards _exceptions against reporting threads
        self._exceptions: list[BaseException] = []
        self._runners: list[QueueRunner] = []
        self._threads: list[ThreadRecord] = []
        self._monitor = QueueMonitor()
        self._supervisor = _RunnerSupervisor(self)
        self._live = 0
        self._idle: anyio.Event | None = None
        self._stop_event: anyio.Event | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._loop_thread = 0
        self._soon: Callable[[Callable[[], object]], None] | None = None
        self._t_enter = 0.0
        self._t_body_end: float | None = None

    def __repr__(self) -> str:
        return (
            f"<Coordinator {self._state} should_stop={self.should_stop()} "
            f"tasks={self._live} exceptions={len(self._exceptions)}>"
        )

    # -- the block -----------------------------------------------------------------------

    async def __aenter__(self) -> Coordinator:
        if self._state != _NEW:
            raise RuntimeError("a Coordinator can be entered only once; create a new one")
        if self._user_monitor is not None:
            self._monitor_run = begin_monitor(self._user_monitor, self._monitor)
        self._soon = soon_threadsafe()
        self._loop_thread = threading.get_ident()
        self._stop_event = anyio.Event()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._state = _RUNNING
        _alive.coordinator_entered(self)
        self._t_enter = time.monotonic()
        if self._watchdog is not None:
            tg.start_soon(self._run_watchdog, self._watchdog, name="aqueue Coordinator watchdog")
        if self._monitor_run is not None:
            tg.start_soon(self._monitor_run.loop, self._report, name="aqueue Monitor")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        tg = self._tg
        assert tg is not None
        assert self._state == _RUNNING
        self._state = _EXITING
        self._t_body_end = time.monotonic()
        deadline = self._t_body_end + self._grace
        cancelled = anyio.get_cancelled_exc_class()
        passed: BaseException | None = None  # what the task group's exit gets to see
        quiet = False  # a clean-stop exception left the body: end the block quietly
        if exc is None:
            pass
        elif isinstance(exc, cancelled) or not isinstance(exc, Exception):
            passed = exc
        elif isinstance(exc, self._clean_types):
            quiet = True
        else:
            self._record(exc)
        if self._monitor_run is not None:  # the final sample: the body's time, as report()
            failure = await self._monitor_run.finish()
            if failure is not None:
                self._record(failure)
        self._stop()
        if passed is None and not self._exceptions:
            try:
                with anyio.move_on_after(self._grace):
                    await self._wait_idle()
            except cancelled as e:  # an error reported during the grace period, or outside
                passed = e
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
            del passed
            self._tg = None  # its scope is closed: nothing may cancel it any more
        stragglers = await self._wait_threads(deadline)
        self._state = _DONE
        _alive.coordinator_exited(self)
        return block_outcome(
            escaped,
            stragglers,
            quiet,
            handling=exc is not None,
            record=self._record,
            recorded=self.exceptions,
            ignore_live_threads=self._ignore_live_threads,
        )

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

    def watch(self, *queues: AsyncQueue[Any]) -> None:
        """Add queues to the watchdog and the report, as the queues the body consumes.

        The queues of started runners are watched anyway; watching a queue explicitly
        makes it count towards the input-bound fraction of ``report()``.
        """
        for q in queues:
            if not isinstance(q, AsyncQueue):
                raise TypeError(
                    f"Coordinator.watch: expected aqueue queues, got {type(q).__name__}"
                )
            self._monitor.add(q, explicit=True)

    def _check_running(self, what: str) -> None:
        if self._state not in (_RUNNING, _EXITING):
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

    async def _run_watchdog(self, threshold: float) -> None:
        await self._monitor.run(threshold)

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
        if self._state == _DONE:
            if failed:
                assert exc is not None
                raise exc
            return
        self._stop_flag.set()
        if self._state == _NEW:
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

    # -- report --------------------------------------------------------------------------

    def report(self) -> str:
        """A text table of every queue seen, and the fraction of the body's time spent
        waiting for input ("input-bound: 37%")."""
        return report(self._monitor, self._body_seconds())

    @property
    def input_bound(self) -> float | None:
        """The fraction of the body's time (so far, or until it ended) spent waiting on
        its input queue: the figure of ``report()``'s last line, and of a ``Monitor``'s
        overall input-bound share; None before any input queue was seen."""
        waited, queue = input_wait(self._monitor)
        body = self._body_seconds()
        if queue is None:
            return None
        return min(1.0, waited / body) if body > 0 else 0.0

    def _body_seconds(self) -> float:
        end = self._t_body_end if self._t_body_end is not None else time.monotonic()
        return end - self._t_enter if self._state != _NEW else 0.0


class _RunnerSupervisor:
    """What a Coordinator offers the runners it starts (the runner's ``Supervisor``)."""

    __slots__ = ("_coord",)

    def __init__(self, coord: Coordinator) -> None:
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
