"""Sampling: one ``Sampler`` per coordinator block, writing into a monitor's ``Record``.

``Coordinator(monitor=m)`` makes a Sampler at entry and runs ``loop`` as a task in its
task group (not counted among the tasks the coordinator waits for at exit); every
``interval`` seconds it reads the statistics of every queue the coordinator watches
(the queues of the runners it started and those passed to ``coord.watch``) and of
every attached stage provider, appends a ``MonitorSample`` to the record's bounded
deque, feeds the live line and calls the callback. When the body ends (the block's
exit begins, before the producers are stopped), ``finish`` ends the periodic samples
and takes one final sample (shielded from cancellation, and given up, callback
included, after 10 s): the samples then cover the body's time, exactly what
``coord.report()`` measures its input-bound share over, so the two agree.

Invariants:

- Sampling only reads: statistics and stage providers. It never changes a queue.
- Samples are appended in time order; the deque keeps the last ``history`` of them.
- State changes are synchronous: a sample is computed and appended after every read
  has been awaited, so a cancellation mid-sample leaves no half-taken sample.
- Rates are deltas of the queues' totals over the interval since the previous sample.
  A queue's first baseline is its statistics when the coordinator first saw it
  (``Watched.base``; for a shared queue, read by the coordinator right after: a
  sample waits for that reading, within ``timeout``), dated at the previous sample (or
  the block's entry), so ``rate x interval`` summed over its samples is exactly the
  elements moved since then, and the input-bound share over the samples is the
  coordinator's. A shared queue whose baseline could not be read gets one from its
  first reading instead; a reading after samples it missed averages over the time
  since its previous reading.
- Every queue is read with ``await q.statistics()``; an in-process queue's call
  returns the record without waiting, a shared queue's is awaited under ``timeout``;
  one that does not answer in time, or fails, is left out of that sample (listed in
  ``sample.missing``), so a dead server never stalls sampling.
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
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

import anyio

from .._errors import add_note
from .._queues._protocol import AsyncQueue, QueueStatistics, local_statistics
from ._live import LiveLine, open_live
from ._samples import MonitorSample, QueueSample, StageSample
from ._watchdog import QueueMonitor, Watched, input_queues

__all__ = ["Record", "Sampler", "StageProvider", "StageReading"]

logger = logging.getLogger("aqueue")

_FINAL_LIMIT_S = 10.0  # the final sample, shielded, gives up after this long


class StageReading(Protocol):
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


StageProvider = Callable[[], Sequence[StageReading]]


class Record:
    """What a monitor keeps across blocks: its settings, samples and stage baselines."""

    def __init__(
        self,
        interval: float,
        timeout: float,
        history: int,
        callback: Callable[[MonitorSample], object] | None,
        live: bool,
    ) -> None:
        self.interval = interval
        self.timeout = timeout
        self.callback = callback
        self.live = live
        self.samples: collections.deque[MonitorSample] = collections.deque(maxlen=history)
        self.providers: dict[str, StageProvider] = {}
        self.stage_prev: dict[str, tuple[float, int, float]] = {}  # elapsed, items, busy
        self.floors: dict[str, int] = {}  # each queue's min_after_dequeue, by key
        self.count = 0  # samples taken, dropped ones included
        self.t0: float | None = None  # when the monitor first started
        self.running = False


@dataclass
class _Prev:
    """A queue's previous reading (its baseline for rates)."""

    t: float  # when it was read (for a queue first seen: the previous sample's time)
    enqueued: int
    dequeued: int
    empty_s: float


class Sampler:
    """One monitor sampling one coordinator's block."""

    def __init__(self, record: Record, queues: QueueMonitor, now: float) -> None:
        self._m = record
        self._queues = queues
        self._last_t = now
        self._prev: dict[int, _Prev | None] = {}  # None: a shared queue without a baseline
        self._keys: dict[int, str] = {}
        self._failed = False
        self._live: LiveLine | None = open_live() if record.live else None
        self._scope = anyio.CancelScope()  # the periodic samples' (see ``finish``)

    async def loop(self, failed: Callable[[BaseException], None]) -> None:
        """Sample every interval until ``finish`` or cancelled; report a callback's
        exception."""
        period = self._m.interval
        next_t = self._last_t + period
        with self._scope:
            while True:
                await anyio.sleep(max(0.0, next_t - time.monotonic()))
                try:
                    await self.sample(final=False)
                except Exception as exc:
                    self._failed = True
                    failed(exc)
                    return
                next_t += period
                now = time.monotonic()
                if next_t <= now:  # a slow sample or a blocked loop: skip the missed ticks
                    next_t = now + period

    async def finish(self) -> BaseException | None:
        """Stop the periodic samples and take the final one (shielded, bounded); return
        what it raised, if anything. A periodic sample still awaiting a shared queue's
        statistics is cancelled first: it appends nothing."""
        self._scope.cancel()
        try:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_FINAL_LIMIT_S):
                await self.sample(final=True)
        except Exception as exc:
            return exc
        finally:
            if self._live is not None:
                self._live.close()
            self._m.running = False
        return None

    # -- one sample ----------------------------------------------------------------------

    def _key(self, queue: AsyncQueue[Any]) -> str:
        key = self._keys.get(id(queue))
        if key is None:
            taken = set(self._keys.values())
            key, n = queue.name, 1
            while key in taken:
                n += 1
                key = f"{queue.name}#{n}"
            self._keys[id(queue)] = key
            self._m.floors[key] = queue.min_after_dequeue
        return key

    async def _read_shared(self, shared: list[Watched]) -> dict[int, QueueStatistics]:
        got: dict[int, QueueStatistics] = {}

        async def read(w: Watched) -> None:
            q = w.queue
            with anyio.move_on_after(self._m.timeout):
                if w.reading is not None and id(q) not in self._prev:
                    await w.reading.wait()  # the coordinator's baseline comes first
                try:
                    st = await q.statistics()
                except Exception as exc:
                    logger.debug("Monitor: statistics of '%s' failed: %r", q.name, exc)
                    return
                if isinstance(st, QueueStatistics):
                    got[id(q)] = st

        if shared:
            async with anyio.create_task_group() as tg:
                for w in shared:
                    tg.start_soon(read, w)
        return got

    async def sample(self, *, final: bool) -> MonitorSample:
        """Read everything, append the sample, then show it and call the callback."""
        watched = self._queues.watched
        shared = [w for w in watched if w.shared]
        shared_ids = {id(w.queue) for w in shared}
        remote = await self._read_shared(shared)
        stages = self._read_stages()
        local = {id(w.queue): local_statistics(w.queue) for w in watched if not w.shared}
        # `now` after every reading: a waited time read after `now` could exceed the
        # interval and be clipped, and the overall share would come out low.
        now = time.monotonic()
        dt = max(now - self._last_t, 1e-9)
        inputs = {id(q) for q in input_queues(self._queues)}
        samples: dict[str, QueueSample] = {}
        missing: list[str] = []
        bound: float | None = None
        taken: float | None = None
        for w in watched:
            q = w.queue
            is_shared = id(q) in shared_ids
            st = remote.get(id(q)) if is_shared else local.get(id(q))
            key = self._key(q)
            if st is None:
                if is_shared:
                    missing.append(key)
                continue
            if id(q) not in self._prev:
                base = w.base
                self._prev[id(q)] = (
                    None
                    if base is None
                    else _Prev(
                        self._last_t, base.enqueued_total, base.dequeued_total, base.time_empty_s
                    )
                )
            prev = self._prev[id(q)]
            if prev is None:
                enq = deq = math.nan
            else:
                # == dt, unless a shared queue missed samples: then since its last reading
                span = max(now - prev.t, 1e-9)
                enq = (st.enqueued_total - prev.enqueued) / span
                deq = (st.dequeued_total - prev.dequeued) / span
                if id(q) in inputs:
                    waited = min(1.0, max(0.0, (st.time_empty_s - prev.empty_s) / span))
                    bound = waited if bound is None else max(bound, waited)
                    taken = deq if taken is None else taken + deq
            self._prev[id(q)] = _Prev(now, st.enqueued_total, st.dequeued_total, st.time_empty_s)
            samples[key] = QueueSample(
                name=key,
                size=st.size,
                capacity=st.capacity,
                fraction_full=min(1.0, st.size / st.capacity) if st.capacity else 0.0,
                enqueue_rate=enq,
                dequeue_rate=deq,
                enqueued_total=st.enqueued_total,
                dequeued_total=st.dequeued_total,
                waiting_enqueue=st.tasks_waiting_enqueue,
                waiting_dequeue=st.tasks_waiting_dequeue,
                closed=st.closed,
                shared=is_shared,
                is_input=id(q) in inputs,
            )
        m = self._m
        assert m.t0 is not None
        sample = MonitorSample(
            index=m.count,
            time_s=now - m.t0,
            interval_s=dt,
            final=final,
            queues=MappingProxyType(samples),
            stages=MappingProxyType(stages),
            input_bound=bound,
            items_per_s=taken,
            missing=tuple(missing),
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
                    await result
            except Exception as exc:
                self._failed = True
                add_note(exc, "raised by the callback of an aqueue Monitor")
                raise
        return sample

    def _read_stages(self) -> dict[str, StageSample]:
        out: dict[str, StageSample] = {}
        m = self._m
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
                else:  # first reading, or a new run of the pipeline: since its start
                    d_t, d_items, d_busy = elapsed, items, busy
                m.stage_prev[key] = (elapsed, items, busy)
                workers = max(int(r.concurrency), 1)
                out[key] = StageSample(
                    name=key,
                    items_out=items,
                    items_per_s=d_items / d_t if d_t > 0 else 0.0,
                    busy_fraction=min(1.0, max(0.0, d_busy / (workers * d_t))) if d_t > 0 else 0.0,
                    concurrency=int(r.concurrency),
                )
        return out
