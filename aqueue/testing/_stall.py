"""StallError, the stall report, and ``stall_guard``: a hang becomes a failure that
names the stuck queues (one concept: the guard and what it reports).

The report. Every in-process queue created once aqueue.testing is imported joins a weak
registry (``live_queues`` in ``aqueue/_queues/_queue.py``); the report reads each one's
``statistics()`` (which takes the queue's lock, so any thread may read it) and names
every queue that has a task or thread waiting on it: its name, kind, size/capacity,
which side waits and how many (consumers blocked in a dequeue, producers blocked in an
enqueue), the started runners feeding it and the producers of theirs blocked in
enqueue, and the runners registered with ``add_queue_runner`` that were never started:
inline for the queue they fill (``unstarted_runners`` in ``aqueue/_running/_alive.py``,
any context), and, in the StallError's last line, those registered in the guarded
block's context (what ``coord.start_queue_runners()`` would start there; read when the
block is left, since the watcher thread has no context of its own to read). Queues of
``aqueue.redis`` are not in the registry (their statistics need their server, and their
waiters may live in other processes): the guard does not see them.

The guard's queues. A guard watches, reports and releases only the queues of its own
block: those created while it is on, and older ones the block uses (their enqueued or
dequeued total moves, or more tasks and threads wait on them than when the guard
started; ``_Scope``). A queue an earlier test left with a thread blocked on it is
therefore neither reported nor closed by a later test's guard: that thread's error
belongs to the test that left it (``aqueue_leak_check`` names and releases it there).

The guard's rule. A watcher thread polls, every ``min(seconds / 10, 0.1)`` s, the
enqueued and dequeued totals of the guard's queues. Any change is progress. When none
has made progress for ``seconds``, the guard *fires*: it builds the report and logs it
(a warning on the "aqueue" logger, so it is seen even if the body never returns and an
outer timeout ends the test), then

- the async form cancels its body (an anyio cancel scope, cancelled on the event loop's
  thread: asyncio and trio alike);
- the sync form, with ``release=True`` (the default), *releases* the stuck queues: it
  closes every guard's queue that has waiters with ``cancel_pending_enqueues=True``, so
  blocked dequeues end with OutOfRangeError (or take what is left) and blocked enqueues
  with QueueClosedError, threads included.

Then it re-arms: each further ``seconds`` without progress releases again (the async
form too: a body that cancellation cannot end, such as a thread it waits for, ends
this way). When the block is left after a fire, StallError is raised with the first
report, chained to what the body raised (nothing, when the body was cancelled). A
cancellation from outside (an enclosing scope, ``task.cancel()``) is never swallowed:
it propagates instead of StallError.

Limits. The sync form cannot interrupt a thread: it ends a block that waits on an
aqueue queue (by releasing it), not one that waits on anything else (a lock, a socket,
``time.sleep``); then it only logs the report, and StallError comes when the block
ends by itself (give blocking calls a ``timeout=``). The async form cancels awaits, but
an ``anyio.to_thread.run_sync`` call that does not abandon its thread waits for it
(releasing the queue that thread waits on ends it, ``seconds`` later). A queue that
keeps moving counts as used, so a test in which an unrelated older queue keeps moving
(an endless producer an earlier test left) never stalls. Work that touches no queue
for ``seconds`` counts as a stall: choose ``seconds`` above the longest such stretch.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel

from .._queues._protocol import QueueStatistics
from .._queues._queue import QueueBase, live_queues
from .._running._alive import live_runners, unstarted_runners
from .._running._registry import registered_runners
from .._running._watchdog import describe_runner
from .._waiting._backend import soon_threadsafe

__all__ = [
    "StallError",
    "StallGuard",
    "never_started_line",
    "seconds_arg",
    "stall_guard",
    "waiting_report",
]

logger = logging.getLogger("aqueue")


class StallError(AssertionError):
    """A test made no progress: raised when a ``stall_guard`` fired and by ``drain``'s
    ``timeout``. Its message names the queues that tasks or threads were stuck on.

    An AssertionError, so pytest reports it as a failed expectation, and so no code
    under test that handles TimeoutError (a retry loop, say) can mistake it for its own.
    """


def seconds_arg(value: Any, what: str) -> float:
    """``value`` as a finite number of seconds > 0 (bools refused), or ValueError."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{what} must be a number of seconds > 0, got {value!r}")
    return float(value)


# -- the report -------------------------------------------------------------------------


def _statistics(q: QueueBase[Any]) -> QueueStatistics:
    """The engine's record of in-process queue ``q``, read without waiting, whatever a
    subclass made of ``statistics()`` (a test double standing for a shared queue makes
    it a coroutine, and such an object may outlive its test)."""
    return QueueBase.statistics(q)


def _waiting_sides(q: QueueBase[Any]) -> str | None:
    """What waits on ``q`` (None when nothing does)."""
    st = _statistics(q)
    sides = []
    if st.tasks_waiting_dequeue:
        n = st.tasks_waiting_dequeue
        text = f"{n} consumer{'s' if n != 1 else ''} blocked in dequeue"
        floor = q.min_after_dequeue
        if st.size == 0:
            text += " on an empty queue"
        elif not st.closed and st.size <= floor:
            text += f" (size {st.size} does not exceed min_after_dequeue {floor})"
        else:
            text += f" (size {st.size} is less than they asked for)"
        sides.append(text)
    if st.tasks_waiting_enqueue:
        n = st.tasks_waiting_enqueue
        text = f"{n} producer{'s' if n != 1 else ''} blocked in enqueue"
        text += " on a full queue" if st.size >= st.capacity else " (waiting for room)"
        sides.append(text)
    if not sides:
        return None
    state = "closed" if st.closed else "open"
    return (
        f"queue '{q.name}' ({type(q).__name__}, size {st.size}/{st.capacity}, {state}): "
        + "; ".join(sides)
    )


def waiting_report(queues: list[QueueBase[Any]] | None = None) -> list[str]:
    """One line per queue of ``queues`` (default: every in-process queue) that tasks or
    threads wait on (sorted by name)."""
    unstarted = unstarted_runners()  # (of every context: matched by queue below)
    running = [r for r in live_runners() if r.running]
    lines = []
    watched = live_queues() if queues is None else queues
    for q in sorted(watched, key=lambda q: q.name):
        line = _waiting_sides(q)
        if line is None:
            continue
        feeding = [describe_runner(r) for r in running if r.queue is q]
        feeding += [
            f"QueueRunner '{r.name}' that fills it was registered with add_queue_runner() "
            "and never started"
            for r in unstarted
            if r.queue is q
        ]
        line += "; " + "; ".join(feeding or ["no running QueueRunner fills it"])
        lines.append(f"- {line}")
    if not lines:
        lines.append(
            "- no in-process queue has a task or thread waiting on it (of those this "
            "block created or used): the code waits on something else (queues of "
            "aqueue.redis are not watched)"
        )
    return lines


def never_started_line() -> str | None:
    """The line naming the runners registered in the current context and never started
    (what ``coord.start_queue_runners()`` would start here), if any."""
    never = [r for r in registered_runners() if not r.started]
    if not never:
        return None
    names = ", ".join(f"QueueRunner '{r.name}' (queue '{r.queue.name}')" for r in never)
    return (
        f"registered with add_queue_runner() and never started: {names}; call "
        "coord.start_queue_runners() inside `async with Coordinator() as coord:`"
    )


def _release_waiting(queues: list[QueueBase[Any]]) -> None:
    """Close every queue of ``queues`` that has waiters, cancelling pending enqueues."""
    for q in queues:
        st = _statistics(q)
        if st.tasks_waiting_dequeue or st.tasks_waiting_enqueue:
            q.close(cancel_pending_enqueues=True)


class _Scope:
    """The queues of one guard's block (see the module docstring): created since the
    guard started, or older and used since (their totals moved, or more wait on them)."""

    def __init__(self) -> None:
        self._before: weakref.WeakKeyDictionary[QueueBase[Any], tuple[int, int, int]] = (
            weakref.WeakKeyDictionary()
        )
        for q in live_queues():
            self._before[q] = self._reading(q)
        self._mine: weakref.WeakSet[QueueBase[Any]] = weakref.WeakSet()

    @staticmethod
    def _reading(q: QueueBase[Any]) -> tuple[int, int, int]:
        st = _statistics(q)
        return (
            st.enqueued_total,
            st.dequeued_total,
            st.tasks_waiting_enqueue + st.tasks_waiting_dequeue,
        )

    def queues(self) -> list[QueueBase[Any]]:
        """The guard's queues now (a queue, once the guard's, stays so)."""
        out = []
        for q in live_queues():
            if q not in self._mine:
                old = self._before.get(q)
                if old is not None:
                    now = self._reading(q)
                    if now[:2] == old[:2] and now[2] <= old[2]:
                        continue  # an older queue this block has not used
                self._mine.add(q)
            out.append(q)
        return out


# -- the watcher ------------------------------------------------------------------------


class _Watcher:
    """The thread behind one guard: polls the queues' totals and fires on a stall (or,
    as a ``deadline``, once ``seconds`` have passed)."""

    def __init__(
        self,
        seconds: float,
        *,
        release: bool,
        deadline: bool,
        header: Callable[[float], str],
        on_fire: Callable[[], None] | None,
    ) -> None:
        self._seconds = seconds
        self._release = release
        self._deadline = deadline
        self._header = header
        self._on_fire = on_fire
        self._period = min(seconds / 10, 0.1)
        self._scope = _Scope()  # (taken now, in the guarded block's thread)
        self._lock = threading.Lock()  # a fire and stop() exclude each other
        self._stopped = False
        self._wake = threading.Event()
        self.report: str | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"aqueue stall_guard({seconds:g})", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> str | None:
        """Stop watching (no fire can happen after this returns); the report, if fired."""
        with self._lock:
            self._stopped = True
        self._wake.set()
        return self.report

    def _totals(self) -> dict[int, tuple[int, int]]:
        totals = {}
        for q in self._scope.queues():
            st = _statistics(q)
            totals[id(q)] = (st.enqueued_total, st.dequeued_total)
        return totals

    def _run(self) -> None:
        if self._deadline:
            if not self._wake.wait(self._seconds):
                self._fire(self._seconds)
            return
        seen = self._totals()
        last_progress = time.monotonic()
        while not self._wake.wait(self._period):
            now = time.monotonic()
            totals = self._totals()
            if any(seen.get(k, (0, 0)) != v for k, v in totals.items()):
                last_progress = now
            seen = totals
            if now - last_progress >= self._seconds:
                self._fire(now - last_progress)
                last_progress = time.monotonic()  # re-arm

    def _fire(self, stalled: float) -> None:
        with self._lock:
            if self._stopped:
                return
            first = self.report is None
            queues = self._scope.queues()
            if first:
                self.report = "\n".join([self._header(stalled), *waiting_report(queues)])
                logger.warning("%s", self.report)
            if first and self._on_fire is not None:
                self._on_fire()  # the async form cancels its body first
            elif self._release:
                _release_waiting(queues)


# -- the guard --------------------------------------------------------------------------


class StallGuard:
    """Turns a hang into StallError; see ``stall_guard``. Single use."""

    _deadline = False  # (a subclass fires once ``seconds`` have passed, progress or not)

    def __init__(self, seconds: float, *, release: bool = True) -> None:
        self._seconds = seconds_arg(seconds, "stall_guard: seconds")
        if not isinstance(release, bool):
            raise TypeError(f"stall_guard: release must be a bool, got {type(release).__name__}")
        self._release = release
        self._watcher: _Watcher | None = None
        self._message: str | None = None  # the StallError's: the report and the context line
        self._scope: anyio.CancelScope | None = None
        self._active = False  # (async form) the body runs: a fire may cancel the scope

    @property
    def seconds(self) -> float:
        """Seconds without progress on any queue after which the guard fires."""
        return self._seconds

    @property
    def report(self) -> str | None:
        """The report of the first stall, once the guard has fired (None before); once
        the block is left, the StallError's message."""
        if self._message is not None:
            return self._message
        return None if self._watcher is None else self._watcher.report

    def __repr__(self) -> str:
        state = "fired" if self.report is not None else "armed"
        return f"<StallGuard seconds={self._seconds:g} {state}>"

    def _header(self, stalled: float) -> str:
        """The report's first line."""
        return f"stall_guard({self._seconds:g}): no aqueue queue made progress for {stalled:.1f} s"

    def _start(self, on_fire: Callable[[], None] | None) -> None:
        if self._watcher is not None:
            raise RuntimeError("a stall_guard can be entered only once; create a new one")
        self._watcher = _Watcher(
            self._seconds,
            release=self._release,
            deadline=self._deadline,
            header=self._header,
            on_fire=on_fire,
        )
        self._watcher.start()

    def _stop(self) -> str | None:
        """Stop the watcher; the StallError's message if it fired (None otherwise). Called
        in the guarded block's own context, which is where the line naming the runners
        registered and never started is read (the watcher thread has no context of it)."""
        assert self._watcher is not None
        report = self._watcher.stop()
        if report is not None:
            line = never_started_line()
            self._message = report if line is None else f"{report}\n{line}"
        return self._message

    # -- sync form -----------------------------------------------------------------------

    def __enter__(self) -> StallGuard:
        self._start(None)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        report = self._stop()
        if report is None or (exc is not None and not isinstance(exc, Exception)):
            return  # no stall, or KeyboardInterrupt and the like: let it through
        raise StallError(report) from exc

    # -- async form ----------------------------------------------------------------------

    async def __aenter__(self) -> StallGuard:
        soon = soon_threadsafe()
        scope = anyio.CancelScope()

        def cancel_body() -> None:  # runs on the event loop's thread
            if self._active:
                scope.cancel()

        self._start(lambda: soon(cancel_body))
        self._scope = scope.__enter__()
        self._active = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        report = self._stop()
        self._active = False
        assert self._scope is not None
        swallowed = bool(self._scope.__exit__(exc_type, exc, tb))
        if report is None:
            return swallowed
        if exc is not None and not swallowed and not isinstance(exc, Exception):
            return False  # a cancellation from outside (or KeyboardInterrupt): it wins
        # A cancellation requested from outside while ours was delivered wins as well: a
        # checkpoint delivers it (an anyio/trio scope's, or a native task.cancel() that
        # asyncio would otherwise lose when the task ends with StallError).
        await anyio.lowlevel.checkpoint()
        raise StallError(report) from (None if swallowed else exc)


def stall_guard(seconds: float, *, release: bool = True) -> StallGuard:
    """A sync and async context manager that turns a hang into StallError.

    ``async with stall_guard(5):`` cancels its body once no in-process aqueue queue has
    made progress (an element enqueued or dequeued) for ``seconds``; ``with
    stall_guard(5):`` guards a thread that blocks (a ``q.blocking()`` call, say). Either
    then raises StallError, whose message names each queue that tasks or threads wait
    on (name, size/capacity, the waiting side with counts, the runners feeding it) and
    the runners registered with ``add_queue_runner`` that were never started. See the
    module docstring of ``aqueue.testing`` for the rule and its limits.

    Args:
        seconds: Seconds without progress on any queue before the guard fires.
        release: When it fires (the async form: when it fires again, its body not
            having ended), close every queue that has waiters with
            ``cancel_pending_enqueues=True``, which wakes threads blocked on them.

    Raises:
        ValueError: ``seconds`` is not a number > 0.
        TypeError: ``release`` is not a bool.
    """
    return StallGuard(seconds, release=release)
