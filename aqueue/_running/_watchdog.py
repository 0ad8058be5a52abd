"""The coordinator's view of its queues: the stall watchdog and ``report()``.

A ``QueueMonitor`` remembers every queue a coordinator has seen (the queues of the
runners it started, plus those passed to ``coord.watch``), with a baseline snapshot of
each queue's statistics taken when it was first seen. It only reads
``queue.statistics()`` and the runners' producer states; it never changes anything.

Shared queues (``aqueue.redis``), whose ``statistics()`` must be awaited, are read
asynchronously: the coordinator reads a shared queue's baseline as soon as it sees the
queue (a task in its task group, ``read_baseline``) and its final figures when the body
ends (``read_final``, before the producers are stopped, as the Monitor's final
sample), each under a timeout. ``report()`` and ``input_bound`` then give the same
figures for shared queues as for in-process ones; where a figure could not be had (the
body still runs, the server did not answer, the block was cancelled first), the
report says why in a line of its own, and ``input_bound`` is None. The stall watchdog
checks in-process queues only (a shared queue's waiters may be other processes).

Stall rule: a queue *stalls* when tasks or threads wait on it and neither its
enqueued nor its dequeued total has moved for ``threshold`` seconds (counted from the
later of the last progress and the moment waiting began). One warning is logged per
stall; progress re-arms it.

``report()``: one row per queue, in the order first seen: name (and "(closed)",
"(shared)"), size/capacity, enqueued and dequeued totals, seconds full and empty, and
each runner feeding it with its producers alive (a producer is alive until its task has
ended, or its thread has). A shared queue without figures shows "-" in the number
columns, and a line below the table says why.

Input-bound fraction: the time the body spent waiting for input is read from the
``time_empty_s`` of the queues the body consumes. Those are the queues passed to
``coord.watch``; when none were, the runner queues that no other runner reads from
(the ends of the chains). The last line names the most-waited one: "input-bound: 37%
(the body waited 1.850 s of 5.000 s on 'batches')".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from .._queues._protocol import AsyncQueue, QueueStatistics, local_statistics

if TYPE_CHECKING:
    from ._runner import QueueRunner

__all__ = [
    "QueueMonitor",
    "Watched",
    "describe_runner",
    "input_queues",
    "input_wait",
    "report",
]

logger = logging.getLogger("aqueue")


class Watched:
    """One queue a coordinator has seen."""

    __slots__ = (
        "base",
        "explicit",
        "final",
        "last_change",
        "problem",
        "progress",
        "queue",
        "reading",
        "runners",
        "shared",
        "waiting_since",
        "warned",
    )

    def __init__(self, queue: AsyncQueue[Any], now: float) -> None:
        self.queue = queue
        self.runners: list[QueueRunner] = []
        self.explicit = False  # passed to coord.watch: a queue the body consumes
        self.base = local_statistics(queue)  # a shared queue's is read later
        self.shared = self.base is None  # its statistics() must be awaited
        self.final: QueueStatistics | None = None  # (shared) read when the body ended
        self.problem: str | None = None  # (shared) why a reading is missing
        self.reading: anyio.Event | None = None  # (shared) set once the baseline read ends
        self.progress = (
            (self.base.enqueued_total, self.base.dequeued_total) if self.base else (0, 0)
        )
        self.last_change = now
        self.waiting_since: float | None = None
        self.warned = False

    def figures(self) -> QueueStatistics | None:
        """The statistics the report shows: now for an in-process queue, at the body's
        end for a shared one (None until then, or when they could not be read)."""
        return self.final if self.shared else local_statistics(self.queue)


async def _read(queue: AsyncQueue[Any], limit_s: float) -> QueueStatistics | str:
    """``await queue.statistics()`` within ``limit_s`` seconds, or why not."""
    with anyio.move_on_after(limit_s):
        try:
            return await queue.statistics()
        except Exception as exc:
            logger.debug("statistics of '%s' failed: %r", queue.name, exc)
            return f"reading its statistics failed: {exc!r}"
    return f"its server did not answer within {limit_s:g} s"


class QueueMonitor:
    """Queues seen by one coordinator, and their stall checks."""

    def __init__(self) -> None:
        self._watched: dict[int, Watched] = {}
        self._spawn: Callable[[Watched], None] | None = None

    @property
    def watched(self) -> list[Watched]:
        """Every queue seen, with its runners and baseline, in the order first seen."""
        return list(self._watched.values())

    def add(
        self, queue: AsyncQueue[Any], runner: QueueRunner | None = None, *, explicit: bool = False
    ) -> None:
        """Start watching ``queue`` (idempotent), optionally as fed by ``runner``."""
        w = self._watched.get(id(queue))
        if w is None:
            w = self._watched[id(queue)] = Watched(queue, time.monotonic())
            if w.shared and self._spawn is not None:
                self._spawn(w)
        if runner is not None and runner not in w.runners:
            w.runners.append(runner)
        w.explicit = w.explicit or explicit

    # -- shared queues: read asynchronously ----------------------------------------------

    def read_shared_with(self, spawn: Callable[[Watched], None]) -> None:
        """From now on, hand each new shared queue to ``spawn`` (which starts
        ``read_baseline`` for it as a task); the shared queues seen so far go now."""
        self._spawn = spawn
        for w in self._watched.values():
            if w.shared and w.reading is None:
                spawn(w)

    def begin_baseline(self, w: Watched) -> anyio.Event:
        """Mark ``w``'s baseline as being read (call before starting ``read_baseline``)."""
        w.reading = anyio.Event()
        return w.reading

    async def read_baseline(self, w: Watched, limit_s: float) -> None:
        """Read a shared queue's baseline (see ``begin_baseline``)."""
        assert w.reading is not None
        try:
            got = await _read(w.queue, limit_s)
            if isinstance(got, QueueStatistics):
                w.base = got
            else:
                w.problem = f"{got} when the coordinator first saw it"
        finally:
            w.reading.set()

    async def read_final(self, limit_s: float) -> None:
        """Read every shared queue's figures as the body ends: first waits for
        baselines still being read, then reads all at once; ``limit_s`` bounds it all."""
        shared = [w for w in self._watched.values() if w.shared]
        if not shared:
            return

        async def final(w: Watched) -> None:
            if w.reading is not None:
                await w.reading.wait()
            got = await _read(w.queue, limit_s)
            if isinstance(got, QueueStatistics):
                w.final = got
            elif w.problem is None:
                w.problem = f"{got} when the body ended"

        with anyio.move_on_after(limit_s):
            async with anyio.create_task_group() as tg:
                for w in shared:
                    tg.start_soon(final, w)
        for w in shared:
            if w.final is None and w.problem is None:
                w.problem = f"its server did not answer within {limit_s:g} s when the body ended"

    def not_read(self, why: str) -> None:
        """Say ``why`` the shared queues have no final figures (the block was cancelled
        before they were read)."""
        for w in self._watched.values():
            if w.shared and w.final is None and w.problem is None:
                w.problem = why

    @property
    def queues(self) -> list[AsyncQueue[Any]]:
        """Every queue seen, in the order first seen."""
        return [w.queue for w in self._watched.values()]

    # -- stall watchdog ------------------------------------------------------------------

    async def run(self, threshold: float) -> None:
        """Check every ``threshold / 5`` seconds (at most 1 s) until cancelled."""
        period = min(threshold / 5, 1.0)
        while True:
            await anyio.sleep(period)
            self.check(time.monotonic(), threshold)

    def check(self, now: float, threshold: float) -> list[str]:
        """Log (and return) a warning for each queue that newly stalled."""
        messages = []
        for w in self._watched.values():
            st = None if w.shared else local_statistics(w.queue)
            if st is None:
                continue
            progress = (st.enqueued_total, st.dequeued_total)
            if progress != w.progress:
                w.progress = progress
                w.last_change = now
                w.warned = False
            if not (st.tasks_waiting_enqueue or st.tasks_waiting_dequeue):
                w.waiting_since = None
                w.warned = False
                continue
            if w.waiting_since is None:
                w.waiting_since = now
            stalled = now - max(w.last_change, w.waiting_since)
            if stalled >= threshold and not w.warned:
                w.warned = True
                message = self._stall_message(w, st, stalled)
                logger.warning("%s", message)
                messages.append(message)
        return messages

    def _stall_message(self, w: Watched, st: QueueStatistics, stalled: float) -> str:
        sides = []
        if st.tasks_waiting_enqueue:
            sides.append(f"{st.tasks_waiting_enqueue} waiting to enqueue")
        if st.tasks_waiting_dequeue:
            sides.append(f"{st.tasks_waiting_dequeue} waiting to dequeue")
        blocked = " and ".join(s for s in ("enqueue", "dequeue") if any(s in x for x in sides))
        parts = [
            f"queue '{w.queue.name}' made no progress for {stalled:.1f} s while tasks wait on "
            f"it (blocked side: {blocked}; {', '.join(sides)}; size {st.size}/{st.capacity}"
            f"{', closed' if st.closed else ''})"
        ]
        if not w.runners:
            parts.append("no QueueRunner started by this coordinator feeds it")
        parts.extend(describe_runner(r) for r in w.runners)
        return "; ".join(parts)


def describe_runner(runner: QueueRunner) -> str:
    """``QueueRunner 'name': 2 of 4 producers alive, blocked in enqueue: producer 0 (...)``."""
    states = runner.producer_states()
    waiting = [label for label, s in states if s == "enqueueing"]
    text = f"QueueRunner '{runner.name}': {_alive(states)} of {len(states)} producers alive"
    if waiting:
        text += f", blocked in enqueue: {', '.join(waiting)}"
    return text


_HEADER = (
    "queue",
    "size/capacity",
    "enqueued",
    "dequeued",
    "time_full_s",
    "time_empty_s",
    "runners",
)


def input_queues(monitor: QueueMonitor) -> list[AsyncQueue[Any]]:
    """The queues the body is taken to consume (see the module docstring)."""
    watched = monitor.watched
    explicit = [w.queue for w in watched if w.explicit]
    if explicit:
        return explicit
    upstream = {id(src) for w in watched for r in w.runners for src in r.source_queues()}
    return [w.queue for w in watched if w.runners and id(w.queue) not in upstream]


def _missing(w: Watched, ended: bool) -> str:
    """Why a shared queue has no figures (yet)."""
    if w.problem is not None:
        return w.problem
    if not ended:
        return "its statistics are read from its server when the body ends"
    return "its statistics were not read"


def input_wait(monitor: QueueMonitor, ended: bool) -> tuple[float, AsyncQueue[Any] | None, str]:
    """Seconds the body waited on its most-waited input queue since first seen, that
    queue; or (0, None, why the figure cannot be had). ``ended``: the body has ended."""
    by_id = {id(w.queue): w for w in monitor.watched}
    best: tuple[float, AsyncQueue[Any] | None] = (0.0, None)
    inputs = input_queues(monitor)
    if not inputs:
        return 0.0, None, "no input queue seen"
    for q in inputs:
        w = by_id[id(q)]
        st, base = w.figures(), w.base
        if st is None or base is None:
            return 0.0, None, f"'{q.name}' is shared: {_missing(w, ended)}"
        waited = st.time_empty_s - base.time_empty_s
        if best[1] is None or waited > best[0]:
            best = (waited, q)
    return best[0], best[1], ""


def _alive(states: list[tuple[str, str]]) -> int:
    return sum(1 for _, state in states if state != "done")


def report(monitor: QueueMonitor, body_seconds: float, ended: bool) -> str:
    """The table and the input-bound line (see the module docstring)."""
    rows = [_HEADER]
    notes = []
    for w in monitor.watched:
        runners = ", ".join(
            f"'{r.name}' {_alive(r.producer_states())}/{len(r.producer_states())} alive"
            for r in w.runners
        )
        st = w.figures()
        shared = " (shared)" if w.shared else ""
        if st is None:
            rows.append((f"'{w.queue.name}'{shared}", "-", "-", "-", "-", "-", runners or "-"))
            notes.append(f"'{w.queue.name}' (shared): no figures: {_missing(w, ended)}")
            continue
        rows.append(
            (
                f"'{w.queue.name}'" + (" (closed)" if st.closed else "") + shared,
                f"{st.size}/{st.capacity}",
                str(st.enqueued_total),
                str(st.dequeued_total),
                f"{st.time_full_s:.3f}",
                f"{st.time_empty_s:.3f}",
                runners or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    lines = [
        "  ".join(
            cell.ljust(width) if i in (0, 6) else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    ]
    lines.extend(notes)
    waited, queue, why = input_wait(monitor, ended)
    if queue is None:
        lines.append(f"input-bound: n/a ({why})")
    else:
        fraction = min(1.0, waited / body_seconds) if body_seconds > 0 else 0.0
        lines.append(
            f"input-bound: {fraction:.0%} (the body waited {waited:.3f} s of "
            f"{body_seconds:.3f} s on '{queue.name}')"
        )
    return "\n".join(lines)
