"""Coordinator: one task group and its cancel scope, supervising runners and tasks.

``async with Coordinator() as coord:`` opens an anyio task group; the body runs inside
its cancel scope, next to every producer the coordinator starts. That is TF's
Coordinator with structured concurrency underneath. This module holds the block
itself (entry, exit, the grace period), ``watch`` and the report; starting runners and
tasks, stop requests (clean and failed) and recorded exceptions are ``Supervision``'s,
a mixin in ``_supervision.py``.

Leaving the block: after a normal exit the coordinator requests a stop and waits up to
``stop_grace_period`` for its tasks, then cancels the rest; producer threads still
running by the end of the grace period are abandoned (they are daemon threads). Then it
raises, in this order of precedence: the host task's own cancellation (never
swallowed), the first recorded exception itself (not wrapped in an exception group;
later ones are attached as notes), RuntimeError naming abandoned threads (unless
``ignore_live_threads``). The decision is ``block_outcome``'s, at the end of this
module.

With ``monitor=`` (an ``aqueue.Monitor``), the monitor's sampling task starts at entry
in the task group (it is not one of the tasks waited for at exit; its failure, a
callback's exception, is reported like a supervised task's) and takes its final sample
when the body ends, before the stop: its samples cover the body's time, as
``report()`` does.

Shared queues (``aqueue.redis``) are read the same way for ``report()``: a task reads
each one's baseline statistics when the coordinator first sees it, and their final
figures are read when the body ends, after the monitor's final sample and before the
stop (each reading under the monitor's ``statistics_timeout``, or
``SHARED_STATISTICS_TIMEOUT_S`` without a monitor; skipped when the block is left by a
cancellation or KeyboardInterrupt). Nothing is awaited for in-process queues.

Invariants:

- The state only moves forward: new, running (entered), exiting (``__aexit__`` began),
  done (the task group has exited and the threads were waited for). A coordinator is
  entered once.
- The body's time, which ``report()`` and ``input_bound`` divide by, runs from entry to
  the start of ``__aexit__`` (until then, to now).

Thread safety: ``should_stop()`` and ``request_stop()`` may be called from any thread;
everything else belongs to the event-loop thread that entered the block.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio

from .._errors import OutOfRangeError, add_note
from .._queues._backend import soon_threadsafe
from .._queues._protocol import AsyncQueue
from . import _alive
from ._monitor import Monitor, begin_monitor
from ._sampler import Sampler
from ._supervision import DONE, EXITING, NEW, RUNNING, RunnerSupervisor, Supervision
from ._watchdog import QueueMonitor, Watched, input_wait, report

__all__ = ["SHARED_STATISTICS_TIMEOUT_S", "Coordinator"]

SHARED_STATISTICS_TIMEOUT_S = 5.0
"""Seconds a coordinator without a monitor waits for a shared queue's statistics."""

logger = logging.getLogger("aqueue")


class Coordinator(Supervision):
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
        self._statistics_timeout = (
            SHARED_STATISTICS_TIMEOUT_S if monitor is None else monitor.statistics_timeout
        )
        self._state = NEW
        self._stop_flag = threading.Event()
        self._lock = threading.Lock()
        self._exceptions = []
        self._runners = []
        self._threads = []
        self._monitor = QueueMonitor()
        self._supervisor = RunnerSupervisor(self)
        self._live = 0
        self._idle = None
        self._stop_event = None
        self._tg = None
        self._loop_thread = 0
        self._soon = None
        self._t_enter = 0.0
        self._t_body_end: float | None = None

    def __repr__(self) -> str:
        return (
            f"<Coordinator {self._state} should_stop={self.should_stop()} "
            f"tasks={self._live} exceptions={len(self._exceptions)}>"
        )

    # -- the block -----------------------------------------------------------------------

    async def __aenter__(self) -> Coordinator:
        if self._state != NEW:
            raise RuntimeError("a Coordinator can be entered only once; create a new one")
        if self._user_monitor is not None:
            self._monitor_run = begin_monitor(self._user_monitor, self._monitor)
        self._soon = soon_threadsafe()
        self._loop_thread = threading.get_ident()
        self._stop_event = anyio.Event()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._state = RUNNING
        _alive.coordinator_entered(self)
        self._t_enter = time.monotonic()
        if self._watchdog is not None:
            tg.start_soon(self._run_watchdog, self._watchdog, name="aqueue Coordinator watchdog")
        if self._monitor_run is not None:
            tg.start_soon(self._monitor_run.loop, self._report, name="aqueue Monitor")
        self._monitor.read_shared_with(self._read_baseline)
        return self

    def _read_baseline(self, w: Watched) -> None:
        """Start reading a shared queue's baseline statistics (see the module docstring)."""
        if self._tg is None or self._state != RUNNING:
            return
        self._monitor.begin_baseline(w)
        self._tg.start_soon(
            self._monitor.read_baseline,
            w,
            self._statistics_timeout,
            name=f"aqueue Coordinator: statistics of '{w.queue.name}'",
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        tg = self._tg
        assert tg is not None
        assert self._state == RUNNING
        self._state = EXITING
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
        if passed is None:  # shared queues' figures for report(), as the monitor's
            with anyio.CancelScope(shield=True):
                await self._monitor.read_final(self._statistics_timeout)
        else:
            self._monitor.not_read("the block was cancelled before its statistics were read")
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
        self._state = DONE
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

    # -- watching and the report ---------------------------------------------------------

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

    async def _run_watchdog(self, threshold: float) -> None:
        await self._monitor.run(threshold)

    def report(self) -> str:
        """A text table of every queue seen, and the fraction of the body's time spent
        waiting for input ("input-bound: 37%").

        Shared queues (``aqueue.redis``) show the figures read from their server when
        the body ended; while it runs (or when the server did not answer), a line below
        the table says why a queue has none."""
        return report(self._monitor, self._body_seconds(), self._t_body_end is not None)

    @property
    def input_bound(self) -> float | None:
        """The fraction of the body's time (so far, or until it ended) spent waiting on
        its input queue: the figure of ``report()``'s last line, and of a ``Monitor``'s
        overall input-bound share; None before any input queue was seen, and while a
        shared input queue has no figures (``report()`` says why)."""
        waited, queue, _ = input_wait(self._monitor, self._t_body_end is not None)
        body = self._body_seconds()
        if queue is None:
            return None
        return min(1.0, waited / body) if body > 0 else 0.0

    def _body_seconds(self) -> float:
        end = self._t_body_end if self._t_body_end is not None else time.monotonic()
        return end - self._t_enter if self._state != NEW else 0.0


# -- how the block ends ------------------------------------------------------------------
# How a Coordinator's block ends: which exception leaves ``async with``, with which notes.
#
# Called once, at the very end of ``Coordinator.__aexit__``, with what escaped the task
# group. The order of precedence:
#
# 1. the host task's own cancellation (never swallowed; recorded errors and abandoned
#    threads are logged);
# 2. ``BaseException``s that are not ``Exception`` (KeyboardInterrupt, SystemExit);
# 3. the first recorded exception itself, not wrapped in an exception group; later ones
#    are attached as notes, and so are producer threads that outlived the grace period;
# 4. RuntimeError naming the threads that outlived the grace period (unless
#    ``ignore_live_threads``, which only logs them);
# 5. otherwise the block ends normally, suppressing the body's exception only when it
#    was a clean-stop one (``quiet``).


def block_outcome(
    escaped: BaseException | None,
    stragglers: list[str],
    quiet: bool,
    *,
    handling: bool,
    record: Callable[[BaseException], None],
    recorded: tuple[BaseException, ...],
    ignore_live_threads: bool,
) -> bool:
    """Raise what leaves the block, or return whether to suppress the body's exception.

    Args:
        escaped: What the task group's exit raised (an exception group is unwrapped
            when it holds one real error besides cancellations).
        stragglers: Names of producer threads still running after the grace period.
        quiet: A clean-stop exception left the body.
        handling: The block is being left with an exception (so a raised error is not
            chained to it: it is usually the cancellation that error caused).
        record: Records an exception as the coordinator's.
        recorded: The exceptions recorded before ``escaped``, first first.
        ignore_live_threads: Log stragglers instead of raising RuntimeError.
    """
    cancelled = anyio.get_cancelled_exc_class()
    exceptions = recorded
    if is_group(escaped):
        group: Any = escaped
        rest = group.split(cancelled)[1]
        if rest is None:
            escaped = group.exceptions[0]
        elif len(rest.exceptions) == 1 and not is_group(rest.exceptions[0]):
            escaped = rest.exceptions[0]
    straggler_text = ", ".join(stragglers)
    if isinstance(escaped, cancelled):
        # The host task itself is being cancelled: propagate that, never swallow it.
        for e in exceptions:
            logger.error("Coordinator cancelled from outside after recording: %r", e)
        if stragglers:
            logger.warning(
                "Coordinator cancelled from outside; producers still running after the "
                "grace period were abandoned: %s",
                straggler_text,
            )
        raise escaped
    if escaped is not None and not isinstance(escaped, Exception):
        raise escaped  # KeyboardInterrupt, SystemExit, ...
    if escaped is not None:
        record(escaped)
        if not any(e is escaped for e in exceptions):
            exceptions = (*exceptions, escaped)
    if exceptions:
        first = exceptions[0]
        for other in exceptions[1:]:
            add_note(first, f"the Coordinator also caught: {other!r}" + _notes_suffix(other))
        if stragglers:
            add_note(
                first,
                f"producer threads still running after the grace period: {straggler_text}",
            )
        if not handling:
            raise first
        # Raised while the body's exception (often the cancellation this error caused)
        # is being handled: do not chain it as the context, it is noise.
        if first.__cause__ is not None:
            raise first from first.__cause__
        raise first from None
    if stragglers:
        message = f"Coordinator stopped with producers still running: {straggler_text}"
        if not ignore_live_threads:
            raise RuntimeError(message)
        logger.warning("%s (abandoned; ignore_live_threads=True)", message)
    return quiet


def is_group(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a (Base)ExceptionGroup (Python 3.11+ or the backport)."""
    return exc is not None and any(c.__name__ == "BaseExceptionGroup" for c in type(exc).__mro__)


def _notes_suffix(exc: BaseException) -> str:
    notes = getattr(exc, "__notes__", None)
    return f" ({'; '.join(notes)})" if notes else ""
