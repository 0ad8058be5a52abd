"""Coordinator: one task group and its cancel scope, supervising runners and tasks.

``async with Coordinator() as coord:`` opens an anyio task group; the body runs inside
its cancel scope, next to every producer the coordinator starts. That is TF's
Coordinator with structured concurrency underneath. A coordinator is made of parts it
holds, each in its own module:

- its ``Supervision`` (``_supervision.py``): the task group, starting runners and
  tasks, stop requests (clean and failed), the recorded exceptions; the coordinator's
  methods of that kind are one-line calls to it;
- its ``QueueMonitor`` (``_watchdog.py``): the queues and replay tables it has seen,
  the stall watchdog; ``report()`` reads it (``_report.py``);
- while the block runs, a ``Sampler`` (``_sampler.py``) for ``monitor=``.

This module holds the block itself (entry, exit, the grace period), ``watch`` and the
report; which exception leaves the block is decided by ``block_outcome``
(``_outcome.py``).

Leaving the block: after a normal exit the coordinator requests a stop and waits up to
``stop_grace_period`` for its tasks, then cancels the rest; producer threads still
running by the end of the grace period are abandoned (they are daemon threads). Then it
raises, in this order of precedence: the host task's own cancellation (never
swallowed), the first recorded exception itself (not wrapped in an exception group;
later ones are attached as notes), RuntimeError naming abandoned threads (unless
``ignore_live_threads``).

With ``monitor=`` (an ``aqueue.Monitor``), the monitor's sampling task starts at entry
in the task group (it is not one of the tasks waited for at exit; its failure, a
callback's exception, is reported like a supervised task's) and takes its final sample
when the body ends, before the stop: its samples cover the body's time, as
``report()`` does.

Runners registered with ``add_queue_runner`` and never started (a forgotten
``start_queue_runners()``) are warned about by the consumer that waits on their queue,
inside a coordinator's block or not (``_unstarted.py``); the coordinator runs nothing
for it.

Shared queues (``aqueue.redis``) are read the same way for ``report()``: a task reads
each one's baseline statistics when the coordinator first sees it, and their final
figures are read when the body ends, after the monitor's final sample and before the
stop (each reading under the monitor's ``statistics_timeout``, or
``SHARED_STATISTICS_TIMEOUT_S`` without a monitor; skipped when the block is left by a
cancellation or KeyboardInterrupt). Nothing is awaited for in-process queues.

Invariants:

- The state (the supervision's) only moves forward: new, running (entered), exiting
  (``__aexit__`` began), done (the task group has exited and the threads were waited
  for). A coordinator is entered once.
- Tasks that only watch (the stall watchdog, the monitor's sampling, shared queues'
  statistics) run in the task group as background tasks: not
  waited for at exit, cancelled with the scope.
- The body's time, which ``report()`` and ``input_bound`` divide by, runs from entry to
  the start of ``__aexit__`` (until then, to now).

Thread safety: ``should_stop()`` and ``request_stop()`` may be called from any thread;
everything else belongs to the event-loop thread that entered the block.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any

import anyio

from .._errors import OutOfRangeError, name_arg
from .._queues._protocol import AsyncQueue
from .._replay._protocol import SampledTable
from . import _alive
from ._monitor import Monitor, begin_monitor
from ._outcome import block_outcome
from ._report import input_wait, report, tuned_lines
from ._runner import QueueRunner
from ._sampler import Sampler
from ._supervision import NEW, RUNNING, Supervision
from ._watchdog import QueueMonitor, Seen

__all__ = ["SHARED_STATISTICS_TIMEOUT_S", "Coordinator"]

SHARED_STATISTICS_TIMEOUT_S = 5.0
"""Seconds a coordinator without a monitor waits for a shared queue's statistics."""


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
        self._ignore_live_threads = bool(ignore_live_threads)
        self._watchdog = None if watchdog is None else float(watchdog)
        self._user_monitor = monitor
        self._monitor_run: Sampler | None = None
        self._statistics_timeout = (
            SHARED_STATISTICS_TIMEOUT_S if monitor is None else monitor.statistics_timeout
        )
        self._monitor = QueueMonitor()
        self._supervision = Supervision(types, self._monitor)
        self._t_enter = 0.0
        self._t_body_end: float | None = None

    def __repr__(self) -> str:
        sup = self._supervision
        return (
            f"<Coordinator {sup.state} should_stop={sup.should_stop()} "
            f"tasks={sup.live_tasks} exceptions={len(sup.exceptions)}>"
        )

    # -- the block -----------------------------------------------------------------------

    async def __aenter__(self) -> Coordinator:
        sup = self._supervision
        if sup.state != NEW:
            raise RuntimeError("a Coordinator can be entered only once; create a new one")
        if self._user_monitor is not None:
            self._monitor_run = begin_monitor(self._user_monitor, self._monitor)
        await sup.open()
        _alive.coordinator_entered(self)
        self._t_enter = time.monotonic()
        if self._watchdog is not None:
            sup.background(self._monitor.run, self._watchdog, name="aqueue Coordinator watchdog")
        if self._monitor_run is not None:
            sup.background(self._monitor_run.loop, sup.failed, name="aqueue Monitor")
        self._monitor.read_shared_with(self._read_baseline)
        return self

    def _read_baseline(self, w: Seen[Any]) -> None:
        """Start reading a shared queue's (or table's) baseline statistics (see the
        module docstring)."""
        if self._supervision.state != RUNNING:
            return
        self._monitor.begin_baseline(w)
        self._supervision.background(
            self._monitor.read_baseline,
            w,
            self._statistics_timeout,
            name=f"aqueue Coordinator: statistics of '{w.name}'",
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        sup = self._supervision
        sup.begin_exit()
        self._t_body_end = time.monotonic()
        deadline = self._t_body_end + self._grace
        cancelled = anyio.get_cancelled_exc_class()
        passed: BaseException | None = None  # what the task group's exit gets to see
        quiet = False  # a clean-stop exception left the body: end the block quietly
        if exc is None:
            pass
        elif isinstance(exc, cancelled) or not isinstance(exc, Exception):
            passed = exc
        elif isinstance(exc, sup.clean_types):
            quiet = True
        else:
            sup.record(exc)
        if self._monitor_run is not None:  # the final sample: the body's time, as report()
            failure = await self._monitor_run.finish(self._t_body_end)
            if failure is not None:
                sup.record(failure)
        if passed is None:  # shared queues' figures for report(), as the monitor's
            with anyio.CancelScope(shield=True):
                await self._monitor.read_final(self._statistics_timeout)
        else:
            self._monitor.not_read("the block was cancelled before its statistics were read")
        sup.stop()
        if passed is None and not sup.exceptions:
            try:
                with anyio.move_on_after(self._grace):
                    await sup.wait_idle()
            except cancelled as e:  # an error reported during the grace period, or outside
                passed = e
        escaped = await sup.close_group(passed)
        del passed  # (no reference cycle through this frame)
        stragglers = await sup.wait_threads(deadline)
        sup.finish()
        _alive.coordinator_exited(self)
        return block_outcome(
            escaped,
            stragglers,
            quiet,
            handling=exc is not None,
            record=sup.record,
            recorded=sup.exceptions,
            ignore_live_threads=self._ignore_live_threads,
        )

    # -- runners, tasks and stopping (the supervision's) ---------------------------------

    def start(self, runner: QueueRunner) -> None:
        """Start every producer of ``runner`` in this coordinator.

        Raises:
            TypeError: ``runner`` is not a QueueRunner.
            RuntimeError: The coordinator is not running, or the runner already is.
        """
        self._supervision.start(runner)

    def start_queue_runners(self) -> list[QueueRunner]:
        """Start every runner registered with add_queue_runner in the current context.

        Clears the registry and returns the runners started (an empty registry only logs
        a warning, as in TensorFlow).
        """
        return self._supervision.start_queue_runners()

    def start_soon(
        self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None
    ) -> None:
        """Run ``fn(*args)`` as a supervised task.

        Its exceptions are reported like a producer's (an exception of
        ``clean_stop_exception_types`` requests a clean stop); the coordinator waits for
        it, as for producers, within the grace period when the block is left.
        """
        label = name_arg(
            name, getattr(fn, "__qualname__", repr(fn)), "Coordinator.start_soon: name"
        )
        self._supervision.start_soon(fn, args, label)

    def should_stop(self) -> bool:
        """Whether a stop was requested (any thread may ask)."""
        return self._supervision.should_stop()

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
        self._supervision.request_stop(exc)

    async def wait_for_stop(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait until a stop is requested; return whether it was (False on timeout)."""
        with anyio.move_on_after(timeout):
            await self._supervision.wait_stopped()
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
        exceptions = self._supervision.exceptions
        if exceptions:
            raise exceptions[0]

    @property
    def exceptions(self) -> tuple[BaseException, ...]:
        """Every non-clean exception seen, first first."""
        return self._supervision.exceptions

    @property
    def runners(self) -> tuple[QueueRunner, ...]:
        """The runners started by this coordinator."""
        return self._supervision.runners

    # -- watching and the report ---------------------------------------------------------

    def watch(self, *queues: AsyncQueue[Any] | SampledTable[Any]) -> None:
        """Add queues and replay tables to the watchdog, the report and the monitor, as
        what the body consumes.

        The queues and tables of started runners are watched anyway; watching one
        explicitly makes it count towards the input-bound fraction of ``report()``: a
        queue's time empty, a table's time during which samples waited (a learner
        waiting in ``sample()`` is waiting for input).

        Raises:
            TypeError: An argument is neither a queue nor a replay table (nothing is
                watched then).
        """
        for q in queues:
            if not isinstance(q, (AsyncQueue, SampledTable)):
                raise TypeError(
                    "Coordinator.watch: expected aqueue queues or replay tables, got "
                    f"{type(q).__name__}"
                )
        for q in queues:
            self._monitor.add(q, explicit=True)

    def report(self) -> str:
        """A text table of every queue seen, one of every replay table seen (size,
        inserts and samples per second, the share of the body's time each side was
        held back by the rate limiter), and the fraction of the body's time spent
        waiting for input ("input-bound: 37%").

        Shared queues (``aqueue.redis``) show the figures read from their server when
        the body ended; while it runs (or when the server did not answer), a line below
        the table says why a queue has none. With a ``Monitor`` that read tuned pipeline
        stages, a line per tuned stage above the input-bound line: its concurrency, who
        set it and the tuner's last decision."""
        text = report(self._monitor, self._body_seconds(), self._t_body_end is not None)
        mon = self._user_monitor
        tuned = [] if mon is None else tuned_lines(mon.latest, mon.history())
        if not tuned:
            return text
        *tables, bound = text.split("\n")
        return "\n".join([*tables, *tuned, bound])

    @property
    def input_bound(self) -> float | None:
        """The fraction of the body's time (so far, or until it ended) spent waiting on
        its input queue (or table): the figure of ``report()``'s last line, and of a
        ``Monitor``'s overall input-bound share; None before any input queue was seen,
        and while a shared input queue has no figures (``report()`` says why)."""
        waited, seen, _ = input_wait(self._monitor, self._t_body_end is not None)
        body = self._body_seconds()
        if seen is None:
            return None
        return min(1.0, waited / body) if body > 0 else 0.0

    def _body_seconds(self) -> float:
        end = self._t_body_end if self._t_body_end is not None else time.monotonic()
        return end - self._t_enter if self._supervision.state != NEW else 0.0
