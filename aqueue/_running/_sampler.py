"""Sampling: one ``Sampler`` per coordinator block, writing into a monitor's ``Record``.

``Coordinator(monitor=m)`` makes a Sampler at entry and runs ``loop`` as a task in its
task group (not counted among the tasks the coordinator waits for at exit); every
``interval`` seconds it reads the statistics of every queue and replay table the
coordinator watches (the sinks of the runners it started and those passed to
``coord.watch``) and of every attached stage provider, appends a ``MonitorReading`` to
the record's bounded deque, feeds the live line and calls the callback. When the body
ends (the block's exit begins, before the producers are stopped), ``finish`` ends the
periodic samples and takes one final sample (shielded from cancellation, and given up,
callback included, after 10 s): the samples then cover the body's time, exactly what
``coord.report()`` measures its input-bound share over, so the two agree.

Invariants:

- Sampling only reads: statistics and stage providers. It never changes a queue.
- Samples are appended in time order; the deque keeps the last ``history`` of them.
- State changes are synchronous: a sample is computed and appended after every read
  has been awaited, so a cancellation mid-sample leaves no half-taken sample.
- Rates are deltas of the totals (a queue's enqueued and dequeued, a table's inserts
  and samples) over the interval since the previous sample, and a table's blocked
  shares are deltas of its wait seconds over the same interval.
  A queue's first baseline is its statistics when the coordinator first saw it
  (``Watched.base``; for a shared queue, read by the coordinator right after: a
  sample waits for that reading, within ``timeout``), dated at the previous sample (or
  the block's entry), so ``rate x interval`` summed over its samples is exactly the
  elements moved since then, and the input-bound share over the samples is the
  coordinator's. A shared queue whose baseline could not be read gets one from its
  first reading instead; a reading after samples it missed averages over the time
  since its previous reading.
- Every queue and table is read with ``await q.statistics()``; an in-process one's
  call returns the record without waiting, a shared one's is awaited under ``timeout``;
  one that does not answer in time, or fails, is left out of that sample (listed in
  ``sample.missing``), so a dead server never stalls sampling.
- A stage's decisions (``StageStatistics.decisions``, dated on its run's clock) appear
  in the first sample read after they were made, once, dated on the monitor's clock.
- An exception raised by the callback or a stage provider is reported to the
  coordinator (``loop``'s ``failed``) or returned by ``finish``; sampling stops and the
  callback is not called again.
"""

from __future__ import annotations

import collections
import inspect
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Protocol

import anyio

from .._errors import add_note
from .._queues._protocol import QueueStatistics
from .._replay._results import ReplayStatistics
from ._live import LiveLine, open_live
from ._report import inputs
from ._samples import MonitorReading, QueueReading, StageDecision, StageReading, TableReading
from ._watchdog import QueueMonitor, Seen, Watched

__all__ = ["Record", "Sampler", "StageProvider", "StageFigures"]

logger = logging.getLogger("aqueue")

_FINAL_LIMIT_S = 10.0  # the final sample, shielded, gives up after this long


class StageFigures(Protocol):
    """What a stage provider returns per stage (``aqueue.StageStatistics`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def items_out(self) -> int: ...
    @property
    def busy_s(self) -> float: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def elapsed_s(self) -> float: ...


StageProvider = Callable[[], Sequence[StageFigures]]


class Record:
    """What a monitor keeps across blocks: its settings, samples and stage baselines."""

    def __init__(
        self,
        interval: float,
        timeout: float,
        history: int,
        callback: Callable[[MonitorReading], object] | None,
        live: bool,
    ) -> None:
        self.interval = interval
        self.timeout = timeout
        self.callback = callback
        self.live = live
        self.samples: collections.deque[MonitorReading] = collections.deque(maxlen=history)
        self.providers: dict[str, StageProvider] = {}
        self.stage_prev: dict[str, tuple[float, int, float]] = {}  # elapsed, items, busy
        self.floors: dict[str, int] = {}  # each queue's min_after_dequeue, by key
        self.count = 0  # samples taken, dropped ones included
        self.t0: float | None = None  # when the monitor first started
        self.running = False


@dataclass
class _Prev:
    """A queue's or table's previous reading (its baseline for rates): the totals put
    in and taken out (a queue's enqueued and dequeued, a table's inserts and samples)
    and the seconds each side waited (a queue's full and empty, a table's insert and
    sample waits)."""

    t: float  # when it was read (for one first seen: the previous sample's time)
    put: int
    taken: int
    put_wait_s: float
    take_wait_s: float


def _counters(st: QueueStatistics | ReplayStatistics) -> tuple[int, int, float, float]:
    """``_Prev``'s figures of a reading."""
    if isinstance(st, QueueStatistics):
        return st.enqueued_total, st.dequeued_total, st.time_full_s, st.time_empty_s
    return st.inserts, st.samples, st.insert_wait_s, st.sample_wait_s


class Sampler:
    """One monitor sampling one coordinator's block."""

    def __init__(self, record: Record, queues: QueueMonitor, now: float) -> None:
        self._m = record
        self._queues = queues
        self._last_t = now
        self._prev: dict[int, _Prev | None] = {}  # None: a shared one without a baseline
        self._keys: dict[int, str] = {}
        self._failed = False
        self._live: LiveLine | None = open_live() if record.live else None
        self._scope = anyio.CancelScope()  # the periodic samples' (see ``finish``)
        self._done = False  # ``finish`` began: no periodic sample may follow the final one
        self._looping = False
        self._stopped: anyio.Event | None = None  # set when ``loop`` has returned

    async def loop(self, failed: Callable[[BaseException], None]) -> None:
        """Sample every interval until ``finish`` or cancelled; report a callback's
        exception."""
        period = self._m.interval
        next_t = self._last_t + period
        self._looping = True
        self._stopped = anyio.Event()
        try:
            with self._scope:
                while True:
                    await anyio.sleep(max(0.0, next_t - time.monotonic()))
                    # (a task already due to wake when ``finish`` cancelled the scope is
                    # not interrupted on asyncio: it must not sample after the final one)
                    if self._done:
                        return
                    try:
                        await self.sample(final=False)
                    except Exception as exc:
                        self._failed = True
                        failed(exc)
                        return
                    next_t += period
                    now = time.monotonic()
                    if next_t <= now:  # a slow sample or a blocked loop: skip missed ticks
                        next_t = now + period
        finally:
            self._looping = False
            self._stopped.set()

    async def finish(self, end: float | None = None) -> BaseException | None:
        """Stop the periodic samples and take the final one (shielded, bounded); return
        what it raised, if anything. A periodic sample still awaiting a shared queue's
        statistics is cancelled first: it appends nothing; one already appended finishes
        its callback first, so callbacks see the samples in order, the final one last.
        ``end`` (the body's end, ``time.monotonic()``) dates the final sample, so that
        the samples cover the body's time exactly, however long stopping took."""
        self._done = True
        self._scope.cancel()
        try:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_FINAL_LIMIT_S):
                if self._looping and self._stopped is not None:
                    await self._stopped.wait()
                await self.sample(final=True, end=end)
        except Exception as exc:
            return exc
        finally:
            if self._live is not None:
                self._live.close()
            self._m.running = False
        return None

    # -- one sample ----------------------------------------------------------------------

    def _key(self, w: Seen[Any]) -> str:
        """The monitor's name for ``w`` (queues and tables share one namespace)."""
        key = self._keys.get(id(w.source))
        if key is None:
            taken = set(self._keys.values())
            key, n = w.name, 1
            while key in taken:
                n += 1
                key = f"{w.name}#{n}"
            self._keys[id(w.source)] = key
            if isinstance(w, Watched):
                self._m.floors[key] = w.queue.min_after_dequeue
        return key

    async def _read_shared(self, shared: list[Seen[Any]]) -> dict[int, Any]:
        got: dict[int, Any] = {}

        async def read(w: Seen[Any]) -> None:
            q = w.source
            with anyio.move_on_after(self._m.timeout):
                if w.reading is not None and id(q) not in self._prev:
                    await w.reading.wait()  # the coordinator's baseline comes first
                try:
                    st = await q.statistics()
                except Exception as exc:
                    logger.debug("Monitor: statistics of '%s' failed: %r", q.name, exc)
                    return
                if isinstance(st, (QueueStatistics, ReplayStatistics)):
                    got[id(q)] = st

        if shared:
            async with anyio.create_task_group() as tg:
                for w in shared:
                    tg.start_soon(read, w)
        return got

    async def sample(self, *, final: bool, end: float | None = None) -> MonitorReading | None:
        """Read everything, append the sample, then show it and call the callback
        (shielded: a periodic sample appended is a sample its callback sees). None: a
        periodic sample that ``finish`` overtook while it read, which appends nothing."""
        seen = self._queues.seen
        shared = [w for w in seen if w.shared]
        remote = await self._read_shared(shared)
        if self._done and not final:
            return None
        stages = self._read_stages()
        local = {id(w.source): w.local() for w in seen if not w.shared}
        # `now` after every reading: a waited time read after `now` could exceed the
        # interval and be clipped, and the overall share would come out low. The final
        # sample is dated at the body's end instead: what was waited after it is beyond
        # the body's time.
        now = time.monotonic()
        if end is not None:
            now = max(self._last_t, min(now, end))
        dt = max(now - self._last_t, 1e-9)
        input_ids = {id(w.source) for w in inputs(self._queues)}
        queues: dict[str, QueueReading] = {}
        tables: dict[str, TableReading] = {}
        missing: list[str] = []
        bound: float | None = None
        taken: float | None = None
        for w in seen:
            q = w.source
            st = remote.get(id(q)) if w.shared else local.get(id(q))
            key = self._key(w)
            if st is None:
                if w.shared:
                    missing.append(key)
                continue
            if id(q) not in self._prev:
                base = w.base
                self._prev[id(q)] = None if base is None else _Prev(self._last_t, *_counters(base))
            prev = self._prev[id(q)]
            put, took, put_wait, take_wait = _counters(st)
            is_input = id(q) in input_ids
            if prev is None:
                put_rate = take_rate = put_blocked = take_blocked = math.nan
            else:
                # == dt, unless a shared one missed samples: then since its last reading
                span = max(now - prev.t, 1e-9)
                put_rate = (put - prev.put) / span
                take_rate = (took - prev.taken) / span
                put_blocked = min(1.0, max(0.0, (put_wait - prev.put_wait_s) / span))
                take_blocked = min(1.0, max(0.0, (take_wait - prev.take_wait_s) / span))
                if is_input:
                    bound = take_blocked if bound is None else max(bound, take_blocked)
                    taken = take_rate if taken is None else taken + take_rate
            self._prev[id(q)] = _Prev(now, put, took, put_wait, take_wait)
            if isinstance(st, QueueStatistics):
                queues[key] = QueueReading(
                    name=key,
                    size=st.size,
                    capacity=st.capacity,
                    fraction_full=min(1.0, st.size / st.capacity) if st.capacity else 0.0,
                    enqueue_rate=put_rate,
                    dequeue_rate=take_rate,
                    enqueued_total=st.enqueued_total,
                    dequeued_total=st.dequeued_total,
                    waiting_enqueue=st.tasks_waiting_enqueue,
                    waiting_dequeue=st.tasks_waiting_dequeue,
                    closed=st.closed,
                    shared=w.shared,
                    is_input=is_input,
                )
            else:
                tables[key] = TableReading(
                    name=key,
                    size=st.size,
                    max_size=st.max_size,
                    fraction_full=min(1.0, st.size / st.max_size) if st.max_size else 0.0,
                    insert_rate=put_rate,
                    sample_rate=take_rate,
                    insert_blocked=put_blocked,
                    sample_blocked=take_blocked,
                    inserts=st.inserts,
                    samples=st.samples,
                    inserts_waiting=st.inserts_waiting,
                    samples_waiting=st.samples_waiting,
                    closed=st.closed,
                    shared=w.shared,
                    is_input=is_input,
                )
        m = self._m
        assert m.t0 is not None
        sample = MonitorReading(
            index=m.count,
            time_s=now - m.t0,
            interval_s=dt,
            final=final,
            queues=MappingProxyType(queues),
            stages=MappingProxyType(stages),
            input_bound=bound,
            items_per_s=taken,
            missing=tuple(missing),
            tables=MappingProxyType(tables),
        )
        m.count += 1
        m.samples.append(sample)
        self._last_t = now
        if self._live is not None:
            self._live.show(sample)
        if m.callback is not None and not self._failed:
            try:
                result = m.callback(sample)
                if inspect.isawaitable(result):
                    with anyio.CancelScope(shield=True):
                        await result
            except Exception as exc:
                self._failed = True
                add_note(exc, "raised by the callback of an aqueue Monitor")
                raise
        return sample

    def _read_stages(self) -> dict[str, StageReading]:
        out: dict[str, StageReading] = {}
        m = self._m
        assert m.t0 is not None
        read_t = time.monotonic() - m.t0  # the monitor's clock when the providers answer
        for pipeline, provider in list(m.providers.items()):
            try:
                readings = provider()
            except Exception as exc:
                add_note(exc, f"raised by the stage provider '{pipeline}' of an aqueue Monitor")
                raise
            for r in readings:
                key, n = f"{pipeline}/{r.name}", 1
                while key in out:
                    n += 1
                    key = f"{pipeline}/{r.name}#{n}"
                elapsed, items, busy = float(r.elapsed_s), int(r.items_out), float(r.busy_s)
                prev = m.stage_prev.get(key)
                if prev is not None and elapsed >= prev[0] and items >= prev[1]:
                    d_t, d_items, d_busy = elapsed - prev[0], items - prev[1], busy - prev[2]
                    since = prev[0]
                else:  # first reading, or a new run of the pipeline: since its start
                    d_t, d_items, d_busy = elapsed, items, busy
                    since = -math.inf
                m.stage_prev[key] = (elapsed, items, busy)
                workers = max(int(r.concurrency), 1)
                out[key] = StageReading(
                    name=key,
                    items_out=items,
                    items_per_s=d_items / d_t if d_t > 0 else 0.0,
                    busy_fraction=min(1.0, max(0.0, d_busy / (workers * d_t))) if d_t > 0 else 0.0,
                    concurrency=int(r.concurrency),
                    set_by=getattr(r, "set_by", None),
                    decisions=_new_decisions(r, since, elapsed, read_t),
                    worker_processes=int(getattr(r, "worker_processes", 0)),
                )
        return out


def _new_decisions(
    r: StageFigures, since: float, elapsed: float, read_t: float
) -> tuple[StageDecision, ...]:
    """The decisions of ``r`` (``StageStatistics.decisions``, dated in seconds since its
    run started) made after ``since`` in that clock, dated on the monitor's clock: the
    provider answered ``elapsed`` seconds into the run at ``read_t``."""
    decisions: Sequence[StageDecision] = getattr(r, "decisions", ())
    return tuple(
        replace(d, time_s=max(0.0, read_t - (elapsed - d.time_s)))
        for d in decisions
        if d.time_s > since
    )
