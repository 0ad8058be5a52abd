"""The coordinator's view of its queues and replay tables: what it has seen, their
statistics, and the stall watchdog. (``coord.report()`` and the input-bound share are
in ``_report.py``.)

A ``QueueMonitor`` remembers every queue and replay table a coordinator has seen (the
sinks of the runners it started, plus those passed to ``coord.watch``), with a
baseline snapshot of each one's statistics taken when it was first seen: a
``Watched`` per queue (``QueueStatistics``), a ``WatchedTable`` per table
(``ReplayStatistics``). What is which is decided once, when first seen, by the
protocols ``AsyncQueue`` and ``SampledTable`` (every replay table, trajectory tables
too); a runner's sink that is neither (a ``Sink`` of the user's own) is not watched.
It only reads ``statistics()`` and the runners' producer states; it never changes
anything.

Shared queues and tables (``aqueue.redis``), whose ``statistics()`` must be awaited,
are read asynchronously: the coordinator reads a shared one's baseline as soon as it
sees it (a task in its task group, ``read_baseline``) and its final figures when the
body ends (``read_final``, before the producers are stopped, as the Monitor's final
sample), each under a timeout. ``report()`` and ``input_bound`` then give the same
figures for shared ones as for in-process ones; where a figure could not be had (the
body still runs, the server did not answer, the block was cancelled first), the
report says why in a line of its own, and ``input_bound`` is None. The stall watchdog
checks in-process ones only (a shared one's waiters may be other processes).

Stall rule: a queue *stalls* when tasks or threads wait on it and neither its
enqueued nor its dequeued total has moved for ``threshold`` seconds (counted from the
later of the last progress and the moment waiting began); a table likewise, with its
inserts and samples. One warning is logged per stall; progress re-arms it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import anyio

from .._queues._protocol import AsyncQueue, QueueStatistics, local_statistics
from .._replay._protocol import SampledTable
from .._replay._results import ReplayStatistics

if TYPE_CHECKING:
    from ._runner import QueueRunner

__all__ = ["QueueMonitor", "Seen", "Watched", "WatchedTable", "describe_runner"]

logger = logging.getLogger("aqueue")

R = TypeVar("R", QueueStatistics, ReplayStatistics)
R_co = TypeVar("R_co", QueueStatistics, ReplayStatistics, covariant=True)


class Readable(Protocol[R_co]):
    """What a coordinator reads of anything it watches."""

    @property
    def name(self) -> str: ...
    def statistics(self) -> Awaitable[R_co]: ...


class Seen(Generic[R]):
    """One queue or table a coordinator has seen, ``R`` its statistics record: what
    both kinds share (runners, the baseline, shared reads, the stall state)."""

    __slots__ = (
        "base",
        "explicit",
        "final",
        "last_change",
        "problem",
        "progress",
        "reading",
        "runners",
        "shared",
        "source",
        "waiting_since",
        "warned",
    )

    def __init__(self, source: Readable[R], base: R | None, now: float) -> None:
        self.source: Readable[R] = source
        self.runners: list[QueueRunner] = []
        self.explicit = False  # passed to coord.watch: what the body consumes
        self.base: R | None = base  # a shared one's is read later
        self.shared = base is None  # its statistics() must be awaited
        self.final: R | None = None  # (shared) read when the body ended
        self.problem: str | None = None  # (shared) why a reading is missing
        self.reading: anyio.Event | None = None  # (shared) set once the baseline read ends
        self.progress = (0, 0)  # (stall watchdog) the totals last seen moving
        self.last_change = now
        self.waiting_since: float | None = None
        self.warned = False

    @property
    def name(self) -> str:
        """The queue's or table's name."""
        name: str = self.source.name
        return name

    def local(self) -> R | None:
        """The statistics now, for an in-process one (None for a shared one)."""
        raise NotImplementedError

    def figures(self) -> R | None:
        """The statistics the report shows: now for an in-process one, at the body's
        end for a shared one (None until then, or when they could not be read)."""
        return self.final if self.shared else self.local()


class Watched(Seen[QueueStatistics]):
    """One queue a coordinator has seen."""

    __slots__ = ("queue",)

    def __init__(self, queue: AsyncQueue[Any], now: float) -> None:
        super().__init__(queue, local_statistics(queue, QueueStatistics), now)
        self.queue = queue
        if self.base is not None:
            self.progress = (self.base.enqueued_total, self.base.dequeued_total)

    def local(self) -> QueueStatistics | None:
        return None if self.shared else local_statistics(self.queue, QueueStatistics)


class WatchedTable(Seen[ReplayStatistics]):
    """One replay table a coordinator has seen."""

    __slots__ = ("table",)

    def __init__(self, table: SampledTable[Any], now: float) -> None:
        super().__init__(table, local_statistics(table, ReplayStatistics), now)
        self.table = table
        if self.base is not None:
            self.progress = (self.base.inserts, self.base.samples)

    def local(self) -> ReplayStatistics | None:
        return None if self.shared else local_statistics(self.table, ReplayStatistics)


async def _read(source: Readable[R], limit_s: float) -> R | str:
    """``await source.statistics()`` within ``limit_s`` seconds, or why not."""
    with anyio.move_on_after(limit_s):
        try:
            return await source.statistics()
        except Exception as exc:
            logger.debug("statistics of '%s' failed: %r", source.name, exc)
            return f"reading its statistics failed: {exc!r}"
    return f"its server did not answer within {limit_s:g} s"


def watched_of(item: object, now: float) -> Seen[Any] | None:
    """A new record for ``item``: a queue's, a table's, or None for anything else."""
    if isinstance(item, AsyncQueue):
        return Watched(item, now)
    if isinstance(item, SampledTable):
        return WatchedTable(item, now)
    return None


class QueueMonitor:
    """Queues and tables seen by one coordinator, and their stall checks."""

    def __init__(self) -> None:
        self._seen: dict[int, Seen[Any]] = {}
        self._ignored: set[int] = set()  # sinks that are neither (not watched)
        self._spawn: Callable[[Seen[Any]], None] | None = None

    @property
    def seen(self) -> list[Seen[Any]]:
        """Every queue and table seen, in the order first seen."""
        return list(self._seen.values())

    @property
    def watched(self) -> list[Watched]:
        """Every queue seen, with its runners and baseline, in the order first seen."""
        return [w for w in self._seen.values() if isinstance(w, Watched)]

    @property
    def tables(self) -> list[WatchedTable]:
        """Every replay table seen, in the order first seen."""
        return [w for w in self._seen.values() if isinstance(w, WatchedTable)]

    def add(
        self, item: object, runner: QueueRunner | None = None, *, explicit: bool = False
    ) -> None:
        """Start watching ``item``, a queue or a replay table (idempotent; anything else
        is ignored), optionally as fed by ``runner``."""
        key = id(item)
        w = self._seen.get(key)
        if w is None:
            if key in self._ignored:
                return
            w = watched_of(item, time.monotonic())
            if w is None:
                self._ignored.add(key)
                return
            self._seen[key] = w
            if w.shared and self._spawn is not None:
                self._spawn(w)
        if runner is not None and runner not in w.runners:
            w.runners.append(runner)
        w.explicit = w.explicit or explicit

    # -- shared queues and tables: read asynchronously -----------------------------------

    def read_shared_with(self, spawn: Callable[[Seen[Any]], None]) -> None:
        """From now on, hand each new shared one to ``spawn`` (which starts
        ``read_baseline`` for it as a task); the shared ones seen so far go now."""
        self._spawn = spawn
        for w in self._seen.values():
            if w.shared and w.reading is None:
                spawn(w)

    def begin_baseline(self, w: Seen[Any]) -> anyio.Event:
        """Mark ``w``'s baseline as being read (call before starting ``read_baseline``)."""
        w.reading = anyio.Event()
        return w.reading

    async def read_baseline(self, w: Seen[Any], limit_s: float) -> None:
        """Read a shared one's baseline (see ``begin_baseline``)."""
        assert w.reading is not None
        try:
            got = await _read(w.source, limit_s)
            if isinstance(got, str):
                w.problem = f"{got} when the coordinator first saw it"
            else:
                w.base = got
        finally:
            w.reading.set()

    async def read_final(self, limit_s: float) -> None:
        """Read every shared one's figures as the body ends: first waits for baselines
        still being read, then reads all at once; ``limit_s`` bounds it all."""
        shared = [w for w in self._seen.values() if w.shared]
        if not shared:
            return

        async def final(w: Seen[Any]) -> None:
            if w.reading is not None:
                await w.reading.wait()
            got = await _read(w.source, limit_s)
            if not isinstance(got, str):
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
        """Say ``why`` the shared ones have no final figures (the block was cancelled
        before they were read)."""
        for w in self._seen.values():
            if w.shared and w.final is None and w.problem is None:
                w.problem = why

    # -- stall watchdog ------------------------------------------------------------------

    async def run(self, threshold: float) -> None:
        """Check every ``threshold / 5`` seconds (at most 1 s) until cancelled."""
        period = min(threshold / 5, 1.0)
        while True:
            await anyio.sleep(period)
            self.check(time.monotonic(), threshold)

    def check(self, now: float, threshold: float) -> list[str]:
        """Log (and return) a warning for each queue or table that newly stalled."""
        messages = []
        for w in self._seen.values():
            st = w.local()
            if st is None:
                continue
            if isinstance(st, QueueStatistics):
                progress = (st.enqueued_total, st.dequeued_total)
                waiting = st.tasks_waiting_enqueue or st.tasks_waiting_dequeue
            else:
                progress = (st.inserts, st.samples)
                waiting = st.inserts_waiting or st.samples_waiting
            if progress != w.progress:
                w.progress = progress
                w.last_change = now
                w.warned = False
            if not waiting:
                w.waiting_since = None
                w.warned = False
                continue
            if w.waiting_since is None:
                w.waiting_since = now
            stalled = now - max(w.last_change, w.waiting_since)
            if stalled >= threshold and not w.warned:
                w.warned = True
                message = _stall_message(w, st, stalled)
                logger.warning("%s", message)
                messages.append(message)
        return messages


def _stall_message(w: Seen[Any], st: QueueStatistics | ReplayStatistics, stalled: float) -> str:
    if isinstance(st, QueueStatistics):
        what, put, take = "queue", "enqueue", "dequeue"
        counts = (st.tasks_waiting_enqueue, st.tasks_waiting_dequeue)
        size = f"size {st.size}/{st.capacity}"
    else:
        what, put, take = "replay table", "insert", "sample"
        counts = (st.inserts_waiting, st.samples_waiting)
        size = f"size {st.size}/{st.max_size}"
    sides = [(n, side) for n, side in zip(counts, (put, take)) if n]
    blocked = " and ".join(side for _, side in sides)
    waiting = ", ".join(f"{n} waiting to {side}" for n, side in sides)
    parts = [
        f"{what} '{w.name}' made no progress for {stalled:.1f} s while tasks wait on "
        f"it (blocked side: {blocked}; {waiting}; {size}{', closed' if st.closed else ''})"
    ]
    if not w.runners:
        parts.append("no QueueRunner started by this coordinator feeds it")
    parts.extend(describe_runner(r) for r in w.runners)
    return "; ".join(parts)


def describe_runner(runner: QueueRunner) -> str:
    """``QueueRunner 'name': 2 of 4 producers alive, blocked in enqueue: producer 0 (...)``."""
    states = runner.producer_states()
    waiting = [label for label, s in states if s == "enqueueing"]
    text = f"QueueRunner '{runner.name}': {alive(states)} of {len(states)} producers alive"
    if waiting:
        text += f", blocked in enqueue: {', '.join(waiting)}"
    return text


def alive(states: list[tuple[str, str]]) -> int:
    """How many of ``states`` (``(label, state)`` pairs) are not done."""
    return sum(1 for _, state in states if state != "done")
