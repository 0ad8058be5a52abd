#!/usr/bin/env python3
"""Side-by-side throughput of aqueue's core queues and the installed peers, in one process run.

Workloads (element = float32[32, 32], 4096 bytes):

* **W1** single ``enqueue``/``dequeue``, one producer task, one consumer task, capacity 1000.
* **W1-threads** W1 with 4 threads enqueueing through ``q.blocking()`` and one async consumer.
* **W2** ``enqueue_many(64)`` / ``dequeue_many(256)``, capacity 1000.
* **W3** ``RandomShuffleQueue(10000, min_after_dequeue=1000)`` fed by ``enqueue_many(64)``,
  closed by the producer, drained by ``dequeue_many(256)``.
* **memcpy** the limit: the same bytes copied by numpy in 256-element slices, once
  (``1-pass``), and the way an ideal ring queue must (``in+out``: 64-element slices into a
  1000-slot ring, 256-element slices out into a fresh array, no synchronisation at all).

Peers (each run only when importable): ``asyncio.Queue`` (W1 as is and with one
``asyncio.sleep(0)`` per operation, the "every call yields" contract aqueue keeps; W2/W3
holding single elements and building each batch with ``np.stack``; W3 adds a consumer-side
shuffle pool), anyio's memory object stream (W1, asyncio and trio),
``tf.queue.FIFOQueue`` / ``tf.queue.RandomShuffleQueue`` (eager, producer thread), and three
*floors*, which are not queues but the least work any queue under aqueue's contract must do:

* *bare ring* (W1): one yield, one copy in and one copy out per element, nothing else
  (``BareRing``);
* *checked ring* (W1): the bare ring plus the element check and the storage lock that the
  contract requires on every operation (``CheckedRing``);
* *bare pool* (W3): one yield per operation, one copy into a preallocated pool per element,
  a uniformly random ordered sample gathered into a fresh array per dequeue, nothing else
  (``BarePool``).

aqueue W1 and W2 also run under trio.

Every run checks what it received: the element count, the tag stored in element ``[0, 0]``
(exact global order for FIFO, per-thread order for W1-threads, the exact multiset and a
non-FIFO order for shuffles) and the last value ``[-1, -1]`` of every element, so a queue that
loses, duplicates, reorders or half-copies elements is reported as FAILED, never as fast.

Runs are interleaved (repetition 1 of every case, then repetition 2, ...) so that load from
other processes spreads over all cases; the table gives the median and the best of the
repetitions, and the target ratios are computed from both.

Usage::

    python benchmarks/bench_queues.py                  # full run, about 1-2 minutes
    python benchmarks/bench_queues.py --quick          # smoke run, a few seconds per case
    python benchmarks/bench_queues.py --json out.json  # also write the JSON report to a file
    python benchmarks/bench_queues.py --only W2 --reps 3 --no-tf

The table goes to stdout, followed by the JSON report; progress goes to stderr.
The exit status is 1 when any run failed its checks or raised, else 0 (missed targets are
reported, not turned into an exit status).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import importlib.metadata
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np

import aqueue

try:
    import trio
except ImportError:  # trio is an optional extra
    trio = None

SHAPE = (32, 32)
DTYPE = np.dtype(np.float32)
ELEMENT_BYTES = DTYPE.itemsize * SHAPE[0] * SHAPE[1]  # 4096
CAPACITY = 1000  # W1/W2 queue capacity
ENQ_BATCH = 64  # W2/W3 enqueue_many size
DEQ_BATCH = 256  # W2/W3 dequeue_many size
RS_CAPACITY = 10_000  # W3 RandomShuffleQueue capacity
RS_MIN_AFTER = 1_000  # W3 min_after_dequeue
THREADS = 4  # W1-threads producer threads
SOURCE_ELEMENTS = 4096  # distinct source elements (16 MiB), cycled by the producers
RUN_TIMEOUT_S = 120.0  # one run that takes longer is reported as failed (a hang, not slowness)

# Default element counts per run (before --scale); multiples of lcm(64, 256, THREADS) = 256.
N_W1 = 61_440
N_W2 = 524_288
N_W3 = 262_144
TF_W1_DIVISOR = 8  # tf.queue's single-element path costs tens of µs: run fewer elements

tf: Any = None  # tensorflow module, imported in main() unless --no-tf


class CheckError(AssertionError):
    """Raised when a run delivered the wrong elements (count, order or content)."""


# --------------------------------------------------------------------------------------------
# Source data and verification
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(repr=False)
class Source:
    """Distinct source elements; element ``k`` carries the tag ``k`` in ``[0, 0]``."""

    elems: np.ndarray
    rows: list[np.ndarray] = dataclasses.field(init=False)
    batches: list[np.ndarray] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.rows = list(self.elems)
        self.batches = [self.elems[k : k + ENQ_BATCH] for k in range(0, len(self.elems), ENQ_BATCH)]

    @classmethod
    def make(cls) -> Source:
        """Build SOURCE_ELEMENTS random elements with tags 0..SOURCE_ELEMENTS-1 at [0, 0]."""
        rng = np.random.default_rng(12345)
        elems = rng.standard_normal((SOURCE_ELEMENTS, *SHAPE), dtype=np.float32)
        elems[:, 0, 0] = np.arange(SOURCE_ELEMENTS, dtype=np.float32)
        return cls(elems)

    def expected_tags(self, n: int) -> np.ndarray:
        """Tags of the first ``n`` produced elements, in production order."""
        return (np.arange(n) % len(self.elems)).astype(np.float32)


@dataclasses.dataclass(repr=False)
class Run:
    """What one timed run observed: wall time and the tags/last values it received."""

    elapsed_s: float
    tags: list[Any]
    lasts: list[Any]

    def __repr__(self) -> str:
        # Kept short: asyncio.run() on Python 3.11 formats the main task's result (this
        # object) while restoring the SIGINT handler; a full repr would print every tag.
        return f"Run(elapsed_s={self.elapsed_s:.6f}, parts={len(self.tags)})"

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Tags and last values as flat float32 arrays (batches are concatenated)."""
        return _flat(self.tags), _flat(self.lasts)


def _flat(parts: list[Any]) -> np.ndarray:
    if not parts:
        return np.empty(0, np.float32)
    if isinstance(parts[0], np.ndarray) and parts[0].ndim == 1:
        return np.concatenate(parts).astype(np.float32, copy=False)
    return np.asarray(parts, dtype=np.float32)


def check_fifo(src: Source, n: int, run: Run) -> None:
    """Exactly ``n`` elements, in production order, with intact payloads."""
    tags, lasts = run.arrays()
    if tags.size != n or lasts.size != n:
        raise CheckError(f"expected {n} elements, got {tags.size}")
    want = src.expected_tags(n)
    if not np.array_equal(tags, want):
        first = int(np.flatnonzero(tags != want)[0])
        raise CheckError(
            f"order broken at element {first}: got tag {tags[first]}, expected {want[first]}"
        )
    if not np.array_equal(lasts, src.elems[want.astype(np.int64), -1, -1]):
        raise CheckError("payload mismatch: element [-1, -1] differs from the source")


def check_shuffle(src: Source, n: int, run: Run) -> None:
    """Exactly the produced multiset, intact payloads, and not in production order."""
    tags, lasts = run.arrays()
    if tags.size != n or lasts.size != n:
        raise CheckError(f"expected {n} elements, got {tags.size}")
    idx = tags.astype(np.int64)
    if idx.min() < 0 or idx.max() >= len(src.elems) or not np.array_equal(idx, tags):
        raise CheckError("received tags outside the source range")
    want_counts = np.bincount(src.expected_tags(n).astype(np.int64), minlength=len(src.elems))
    if not np.array_equal(np.bincount(idx, minlength=len(src.elems)), want_counts):
        raise CheckError("multiset mismatch: elements lost or duplicated")
    if not np.array_equal(lasts, src.elems[idx, -1, -1]):
        raise CheckError("payload mismatch: element [-1, -1] differs from the source")
    in_place = float(np.mean(tags == src.expected_tags(n)))
    if in_place > 0.5:
        raise CheckError(f"not shuffled: {in_place:.0%} of elements arrived in FIFO position")


def check_threads(src: Source, n: int, run: Run) -> None:
    """Every thread's ``n / THREADS`` elements arrive, each thread's in its own order."""
    tags, lasts = run.arrays()
    if tags.size != n:
        raise CheckError(f"expected {n} elements, got {tags.size}")
    ids = tags.astype(np.int64)
    thread, seq = ids % THREADS, ids // THREADS
    per = n // THREADS
    for t in range(THREADS):
        got = seq[thread == t]
        if not np.array_equal(got, np.arange(per)):
            raise CheckError(
                f"thread {t}: expected its {per} elements in order, got "
                f"{got.size} elements (ordered={bool(np.all(np.diff(got) > 0))})"
            )
    if not np.array_equal(lasts, thread.astype(np.float32) + 0.5):
        raise CheckError("payload mismatch: element [-1, -1] differs from the thread's buffer")


def check_none(src: Source, n: int, run: Run) -> None:
    """memcpy baselines check their own output inside the runner."""


# --------------------------------------------------------------------------------------------
# Task plumbing shared by asyncio and trio
# --------------------------------------------------------------------------------------------


async def _run_tasks(*fns: Callable[[], Awaitable[None]]) -> float:
    """Run ``fns`` concurrently on the current loop (asyncio or trio); return seconds taken."""
    import sniffio

    if sniffio.current_async_library() == "trio":
        t0 = time.perf_counter()
        with trio.fail_after(RUN_TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                for fn in fns:
                    nursery.start_soon(fn)
        return time.perf_counter() - t0
    t0 = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(fn() for fn in fns)), RUN_TIMEOUT_S)
    return time.perf_counter() - t0


def _on(backend: str, fn: Callable[[Source, int], Awaitable[Run]]) -> Callable[[Source, int], Run]:
    def run(src: Source, n: int) -> Run:
        if backend == "trio":
            return trio.run(fn, src, n)  # type: ignore[no-any-return]
        return asyncio.run(fn(src, n))

    return run


# --------------------------------------------------------------------------------------------
# aqueue
# --------------------------------------------------------------------------------------------


async def _w1_pair(
    put: Callable[[np.ndarray], Awaitable[Any]],
    get: Callable[[], Awaitable[Any]],
    src: Source,
    n: int,
) -> Run:
    """W1's producer and consumer tasks around one queue's put and get."""
    rows, m = src.rows, len(src.rows)
    tags: list[Any] = []
    lasts: list[Any] = []

    async def producer() -> None:
        for i in range(n):
            await put(rows[i % m])

    async def consumer() -> None:
        for _ in range(n):
            x = await get()
            tags.append(x[0, 0])
            lasts.append(x[-1, -1])

    return Run(await _run_tasks(producer, consumer), tags, lasts)


async def aqueue_w1(src: Source, n: int) -> Run:
    q = aqueue.FIFOQueue(CAPACITY, DTYPE, SHAPE)
    return await _w1_pair(q.enqueue, q.dequeue, src, n)


async def aqueue_w1_threads(src: Source, n: int) -> Run:
    q = aqueue.FIFOQueue(CAPACITY, DTYPE, SHAPE)
    bq = q.blocking()
    per = n // THREADS
    errors: list[BaseException] = []
    tags: list[Any] = []
    lasts: list[Any] = []

    def producer(t: int) -> None:
        buf = src.elems[t].copy()  # the queue copies on enqueue, so one buffer per thread
        buf[-1, -1] = t + 0.5
        try:
            for seq in range(per):
                buf[0, 0] = seq * THREADS + t
                bq.enqueue(buf, timeout=RUN_TIMEOUT_S)
        except BaseException as exc:
            errors.append(exc)

    async def consumer() -> None:
        threads = [
            threading.Thread(target=producer, args=(t,), daemon=True) for t in range(THREADS)
        ]
        for th in threads:
            th.start()
        for _ in range(per * THREADS):
            x = await q.dequeue()
            tags.append(x[0, 0])
            lasts.append(x[-1, -1])

    elapsed = await _run_tasks(consumer)
    if errors:
        raise errors[0]
    return Run(elapsed, tags, lasts)


async def aqueue_w2(src: Source, n: int) -> Run:
    q = aqueue.FIFOQueue(CAPACITY, DTYPE, SHAPE)
    batches, nb = src.batches, len(src.batches)
    tags: list[Any] = []
    lasts: list[Any] = []

    async def producer() -> None:
        for i in range(n // ENQ_BATCH):
            await q.enqueue_many(batches[i % nb])

    async def consumer() -> None:
        for _ in range(n // DEQ_BATCH):
            b = await q.dequeue_many(DEQ_BATCH)
            tags.append(b[:, 0, 0].copy())
            lasts.append(b[:, -1, -1].copy())

    return Run(await _run_tasks(producer, consumer), tags, lasts)


async def aqueue_w3(src: Source, n: int) -> Run:
    q = aqueue.RandomShuffleQueue(RS_CAPACITY, RS_MIN_AFTER, DTYPE, SHAPE, seed=0)
    return await _w3_pair(q, src, n)


async def _w3_pair(q: Any, src: Source, n: int) -> Run:
    """W3's producer and consumer tasks around a shuffling queue ``q`` (aqueue's API)."""
    batches, nb = src.batches, len(src.batches)
    tags: list[Any] = []
    lasts: list[Any] = []

    async def producer() -> None:
        for i in range(n // ENQ_BATCH):
            await q.enqueue_many(batches[i % nb])
        q.close()

    async def consumer() -> None:
        while True:
            try:
                b = await q.dequeue_many(DEQ_BATCH)
            except aqueue.OutOfRangeError:
                break
            tags.append(b[:, 0, 0].copy())
            lasts.append(b[:, -1, -1].copy())
        while True:  # a remainder smaller than DEQ_BATCH (none when n % 256 == 0)
            try:
                b = await q.dequeue_up_to(DEQ_BATCH)
            except aqueue.OutOfRangeError:
                break
            tags.append(b[:, 0, 0].copy())
            lasts.append(b[:, -1, -1].copy())

    return Run(await _run_tasks(producer, consumer), tags, lasts)


# --------------------------------------------------------------------------------------------
# asyncio.Queue and anyio memory object streams
# --------------------------------------------------------------------------------------------


async def asyncio_w1(src: Source, n: int) -> Run:
    q: asyncio.Queue[np.ndarray] = asyncio.Queue(maxsize=CAPACITY)
    return await _w1_pair(q.put, q.get, src, n)


async def _asyncio_w1_sleep0(src: Source, n: int, copy: bool) -> Run:
    q: asyncio.Queue[np.ndarray] = asyncio.Queue(maxsize=CAPACITY)
    rows, m = src.rows, len(src.rows)
    tags: list[Any] = []
    lasts: list[Any] = []

    async def producer() -> None:
        for i in range(n):
            await asyncio.sleep(0)
            await q.put(rows[i % m])

    async def copying_producer() -> None:  # (a separate loop: no branch per element)
        for i in range(n):
            await asyncio.sleep(0)
            await q.put(rows[i % m].copy())

    async def consumer() -> None:
        for _ in range(n):
            await asyncio.sleep(0)
            x = await q.get()
            tags.append(x[0, 0])
            lasts.append(x[-1, -1])

    return Run(await _run_tasks(copying_producer if copy else producer, consumer), tags, lasts)


async def asyncio_w1_sleep0(src: Source, n: int) -> Run:
    """W1 on asyncio.Queue with one sleep(0) per op: the "every call yields" contract."""
    return await _asyncio_w1_sleep0(src, n, copy=False)


async def asyncio_w1_sleep0_copy(src: Source, n: int) -> Run:
    """W1 on asyncio.Queue with one sleep(0) per op and a copy per element.

    A queue that may not share the caller's array has to copy it; asyncio.Queue shares
    references, so this row shows what one copy per element adds to the sleep(0) peer.
    """
    return await _asyncio_w1_sleep0(src, n, copy=True)


async def asyncio_w2(src: Source, n: int) -> Run:
    q: asyncio.Queue[np.ndarray] = asyncio.Queue(maxsize=CAPACITY)
    rows, m = src.rows, len(src.rows)
    tags: list[Any] = []
    lasts: list[Any] = []

    async def producer() -> None:
        for i in range(n):
            await q.put(rows[i % m])

    async def consumer() -> None:
        for _ in range(n // DEQ_BATCH):
            b = np.stack([await q.get() for _ in range(DEQ_BATCH)])
            tags.append(b[:, 0, 0].copy())
            lasts.append(b[:, -1, -1].copy())

    return Run(await _run_tasks(producer, consumer), tags, lasts)


async def asyncio_w3(src: Source, n: int) -> Run:
    """asyncio.Queue feeding a consumer-side shuffle pool that keeps RS_MIN_AFTER elements."""
    q: asyncio.Queue[np.ndarray | None] = asyncio.Queue(maxsize=RS_CAPACITY - RS_MIN_AFTER)
    rows, m = src.rows, len(src.rows)
    tags: list[Any] = []
    lasts: list[Any] = []

    async def producer() -> None:
        for i in range(n):
            await q.put(rows[i % m])
        await q.put(None)  # the close signal

    async def consumer() -> None:
        rng = np.random.default_rng(0)
        pool: list[np.ndarray] = []
        done = False
        while True:
            while not done and len(pool) < RS_MIN_AFTER + DEQ_BATCH:
                x = await q.get()
                if x is None:
                    done = True
                else:
                    pool.append(x)
            if not pool:
                return
            picks = []
            for r in rng.random(min(DEQ_BATCH, len(pool))):
                j = int(r * len(pool))
                pool[j], pool[-1] = pool[-1], pool[j]
                picks.append(pool.pop())
            b = np.stack(picks)
            tags.append(b[:, 0, 0].copy())
            lasts.append(b[:, -1, -1].copy())

    return Run(await _run_tasks(producer, consumer), tags, lasts)


async def anyio_w1(src: Source, n: int) -> Run:
    send, receive = anyio.create_memory_object_stream[np.ndarray](CAPACITY)
    with send, receive:
        return await _w1_pair(send.send, receive.receive, src, n)


@types.coroutine
def _bare_yield() -> Any:
    yield  # one asyncio loop iteration, as asyncio.sleep(0)


class BareRing:
    """The floor of a copying queue on asyncio, for W1 only (an informative row).

    A preallocated ring with exactly what any queue that copies into numpy storage must
    do per element: one yield per operation, one copy in, one copy out. Nothing else: no
    validation, no lock, no statistics, no cancellation safety, one producer and one
    consumer only.
    """

    def __init__(self, capacity: int) -> None:
        self.buf = np.empty((capacity, *SHAPE), DTYPE)
        self.cap, self.head, self.size = capacity, 0, 0
        self.getter: asyncio.Future[None] | None = None
        self.putter: asyncio.Future[None] | None = None

    async def _room(self) -> None:
        while self.size == self.cap:
            self.putter = asyncio.get_running_loop().create_future()
            await self.putter

    async def _data(self) -> None:
        while self.size == 0:
            self.getter = asyncio.get_running_loop().create_future()
            await self.getter

    async def put(self, x: np.ndarray) -> None:
        await _bare_yield()
        if self.size == self.cap:
            await self._room()
        i = self.head + self.size
        self.buf[i if i < self.cap else i - self.cap] = x
        self.size += 1
        if self.getter is not None:
            self.getter.set_result(None)
            self.getter = None

    async def get(self) -> np.ndarray:
        await _bare_yield()
        if self.size == 0:
            await self._data()
        i = self.head
        x: np.ndarray = self.buf[i].copy()
        self.size -= 1
        self.head = 0 if self.size == 0 else i + 1 if i + 1 < self.cap else 0  # as aqueue's
        if self.putter is not None:
            self.putter.set_result(None)
            self.putter = None
        return x


class CheckedRing(BareRing):
    """The bare ring plus the two things aqueue's contract adds to every single operation:
    the fast-path check of the element (an array of exactly the declared dtype and shape;
    anything else would go to a full validation) and a lock around the ring update (thread
    producers admit directly into the storage). Still no statistics, no closing, no
    waiter lists, no cancellation safety, one producer and one consumer only: a floor, not
    a queue.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.lock = threading.Lock()

    async def put(self, x: np.ndarray) -> None:
        if type(x) is not np.ndarray or x.dtype != DTYPE or x.shape != SHAPE:
            raise ValueError(f"expected float32{list(SHAPE)}, got {x!r:.40}")
        await _bare_yield()
        if self.size == self.cap:
            await self._room()
        self.lock.acquire()  # (acquire/release: cheaper than `with`, as in aqueue)
        i = self.head + self.size
        self.buf[i if i < self.cap else i - self.cap] = x
        self.size += 1
        self.lock.release()
        if self.getter is not None:
            self.getter.set_result(None)
            self.getter = None

    async def get(self) -> np.ndarray:
        await _bare_yield()
        if self.size == 0:
            await self._data()
        self.lock.acquire()
        i = self.head
        x: np.ndarray = self.buf[i].copy()
        self.size -= 1
        self.head = 0 if self.size == 0 else i + 1 if i + 1 < self.cap else 0
        self.lock.release()
        if self.putter is not None:
            self.putter.set_result(None)
            self.putter = None
        return x


def ring_w1(ring: type[BareRing]) -> Callable[[Source, int], Awaitable[Run]]:
    """W1 on a floor ring (``BareRing`` or ``CheckedRing``)."""

    async def run(src: Source, n: int) -> Run:
        q = ring(CAPACITY)
        return await _w1_pair(q.put, q.get, src, n)

    return run


class BarePool:
    """The floor of a uniformly shuffling queue on preallocated storage, for W3 only.

    What any such queue must do: one yield per operation, each enqueued row copied once
    into a free slot of a preallocated pool, each dequeue_many picking a uniformly random
    ordered sample (one Fisher-Yates shuffle of the occupied slot numbers, as aqueue does
    for pools of this size) and gathering its rows into a fresh array. Nothing else: no
    validation, no lock, no statistics, no cancellation safety, one producer and one
    consumer only.
    """

    def __init__(self, capacity: int, min_after: int, seed: int) -> None:
        self.buf = np.empty((capacity, *SHAPE), DTYPE)
        self.ids = np.arange(capacity)
        self.cap, self.floor, self.size, self.closed = capacity, min_after, 0, False
        self.rng = np.random.default_rng(seed)
        self.getter: asyncio.Future[None] | None = None
        self.putter: asyncio.Future[None] | None = None
        self.need = 0

    def _wake_getter(self) -> None:
        if self.getter is not None and (self.closed or self.size - self.floor >= self.need):
            self.getter.set_result(None)
            self.getter = None

    async def enqueue_many(self, batch: np.ndarray) -> None:
        await _bare_yield()
        k = len(batch)
        while self.size + k > self.cap:
            self.putter = asyncio.get_running_loop().create_future()
            await self.putter
        s = self.size
        self.buf[self.ids[s : s + k]] = batch
        self.size = s + k
        self._wake_getter()

    async def dequeue_many(self, n: int) -> np.ndarray:
        await _bare_yield()
        while self.size - (0 if self.closed else self.floor) < n:
            if self.closed:
                raise aqueue.OutOfRangeError(queue_name="bare pool", requested=n, size=self.size)
            self.need = n
            self.getter = asyncio.get_running_loop().create_future()
            await self.getter
        return self._take(n)

    async def dequeue_up_to(self, n: int) -> np.ndarray:
        await _bare_yield()
        if not self.closed or self.size == 0:  # (only called once closed, for a remainder)
            raise aqueue.OutOfRangeError(queue_name="bare pool", requested=n, size=self.size)
        return self._take(min(n, self.size))

    def _take(self, n: int) -> np.ndarray:
        size = self.size
        self.rng.shuffle(self.ids[:size])
        out = np.take(self.buf, self.ids[size - n : size], axis=0)
        self.size = size - n
        if self.putter is not None:
            self.putter.set_result(None)
            self.putter = None
        return out

    def close(self) -> None:
        self.closed = True
        self._wake_getter()


async def bare_pool_w3(src: Source, n: int) -> Run:
    return await _w3_pair(BarePool(RS_CAPACITY, RS_MIN_AFTER, 0), src, n)


# --------------------------------------------------------------------------------------------
# tf.queue (eager; producer thread, consumer in the main thread)
# --------------------------------------------------------------------------------------------


def _tf_pair(q: Any, producer: Callable[[], None], consumer: Callable[[], None]) -> float:
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            producer()
        except BaseException as exc:
            errors.append(exc)

    # A hung run is unblocked by closing the queue (pending ops then fail).
    watchdog = threading.Timer(RUN_TIMEOUT_S, lambda: q.close(cancel_pending_enqueues=True))
    watchdog.daemon = True
    th = threading.Thread(target=guarded, daemon=True)
    watchdog.start()
    t0 = time.perf_counter()
    th.start()
    try:
        consumer()
        elapsed = time.perf_counter() - t0
    finally:
        watchdog.cancel()
    th.join(RUN_TIMEOUT_S)
    if errors:
        raise errors[0]
    return elapsed


def _tf_single(t: Any) -> np.ndarray:
    return (t[0] if isinstance(t, (list, tuple)) else t).numpy()  # type: ignore[no-any-return]


def tf_w1(src: Source, n: int) -> Run:
    q = tf.queue.FIFOQueue(CAPACITY, [tf.float32], shapes=[SHAPE])
    rows, m = src.rows, len(src.rows)
    tags: list[Any] = []
    lasts: list[Any] = []

    def producer() -> None:
        for i in range(n):
            q.enqueue(rows[i % m])

    def consumer() -> None:
        for _ in range(n):
            x = _tf_single(q.dequeue())
            tags.append(x[0, 0])
            lasts.append(x[-1, -1])

    return Run(_tf_pair(q, producer, consumer), tags, lasts)


def tf_w2(src: Source, n: int) -> Run:
    q = tf.queue.FIFOQueue(CAPACITY, [tf.float32], shapes=[SHAPE])
    batches, nb = src.batches, len(src.batches)
    tags: list[Any] = []
    lasts: list[Any] = []

    def producer() -> None:
        for i in range(n // ENQ_BATCH):
            q.enqueue_many(batches[i % nb])

    def consumer() -> None:
        for _ in range(n // DEQ_BATCH):
            b = _tf_single(q.dequeue_many(DEQ_BATCH))
            tags.append(b[:, 0, 0].copy())
            lasts.append(b[:, -1, -1].copy())

    return Run(_tf_pair(q, producer, consumer), tags, lasts)


def tf_w3(src: Source, n: int) -> Run:
    q = tf.queue.RandomShuffleQueue(RS_CAPACITY, RS_MIN_AFTER, [tf.float32], shapes=[SHAPE], seed=0)
    batches, nb = src.batches, len(src.batches)
    tags: list[Any] = []
    lasts: list[Any] = []

    def producer() -> None:
        for i in range(n // ENQ_BATCH):
            q.enqueue_many(batches[i % nb])
        q.close()

    def consumer() -> None:
        for op in (q.dequeue_many, q.dequeue_up_to):
            while True:
                try:
                    b = _tf_single(op(DEQ_BATCH))
                except tf.errors.OutOfRangeError:
                    break
                tags.append(b[:, 0, 0].copy())
                lasts.append(b[:, -1, -1].copy())

    return Run(_tf_pair(q, producer, consumer), tags, lasts)


# --------------------------------------------------------------------------------------------
# memcpy limits
# --------------------------------------------------------------------------------------------


def memcpy_1pass(src: Source, n: int) -> Run:
    """Copy the same bytes once, 256 elements per np.copyto, into a preallocated buffer."""
    dst = np.empty((4 * DEQ_BATCH, *SHAPE), DTYPE)
    m = len(src.elems)
    t0 = time.perf_counter()
    for i in range(0, n, DEQ_BATCH):
        j, k = i % m, i % len(dst)
        np.copyto(dst[k : k + DEQ_BATCH], src.elems[j : j + DEQ_BATCH])
    elapsed = time.perf_counter() - t0
    j, k = (n - DEQ_BATCH) % m, (n - DEQ_BATCH) % len(dst)
    if not np.array_equal(dst[k : k + DEQ_BATCH], src.elems[j : j + DEQ_BATCH]):
        raise CheckError("memcpy 1-pass produced wrong bytes")
    return Run(elapsed, [], [])


def memcpy_in_out(src: Source, n: int) -> Run:
    """An ideal ring queue's copies: 64 in (with wrap), 256 out into a fresh array; no sync."""
    ring = np.empty((CAPACITY, *SHAPE), DTYPE)
    batches, nb = src.batches, len(src.batches)
    head = tail = 0
    tags: list[Any] = []
    lasts: list[Any] = []
    per_out = DEQ_BATCH // ENQ_BATCH
    t0 = time.perf_counter()
    for o in range(n // DEQ_BATCH):
        for b in range(per_out):
            batch = batches[(o * per_out + b) % nb]
            s = tail % CAPACITY
            first = min(ENQ_BATCH, CAPACITY - s)
            ring[s : s + first] = batch[:first]
            if first < ENQ_BATCH:
                ring[: ENQ_BATCH - first] = batch[first:]
            tail += ENQ_BATCH
        out = np.empty((DEQ_BATCH, *SHAPE), DTYPE)
        s = head % CAPACITY
        first = min(DEQ_BATCH, CAPACITY - s)
        out[:first] = ring[s : s + first]
        if first < DEQ_BATCH:
            out[first:] = ring[: DEQ_BATCH - first]
        head += DEQ_BATCH
        tags.append(out[:, 0, 0].copy())
        lasts.append(out[:, -1, -1].copy())
    return Run(time.perf_counter() - t0, tags, lasts)


# --------------------------------------------------------------------------------------------
# Cases, ratios, reporting
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    """One implementation of one workload, with its results across repetitions."""

    key: str
    workload: str
    impl: str
    backend: str
    elements: int
    run: Callable[[Source, int], Run]
    check: Callable[[Source, int, Run], None]
    times_s: list[float] = dataclasses.field(default_factory=list)
    error: str | None = None

    def rates(self) -> list[float]:
        return [self.elements / t for t in self.times_s]

    def median(self) -> float | None:
        return statistics.median(self.rates()) if self.times_s and not self.error else None

    def best(self) -> float | None:
        return max(self.rates()) if self.times_s and not self.error else None


@dataclasses.dataclass(frozen=True)
class Ratio:
    """A target ratio (or, with target None, an informative one)."""

    name: str
    num: str
    den: str
    target: float | None


RATIOS = [
    Ratio("W1 aqueue / anyio stream", "W1/aqueue/asyncio", "W1/anyio-stream/asyncio", 1.0),
    Ratio(
        "W1 aqueue / asyncio.Queue+sleep(0)",
        "W1/aqueue/asyncio",
        "W1/asyncio.Queue+sleep0/asyncio",
        0.8,
    ),
    Ratio(
        "W2 aqueue / asyncio.Queue+np.stack",
        "W2/aqueue/asyncio",
        "W2/asyncio.Queue+np.stack/asyncio",
        4.0,
    ),
    Ratio("W2 aqueue / memcpy 1-pass", "W2/aqueue/asyncio", "memcpy/1-pass/numpy", 0.5),
    Ratio("W2 aqueue / tf.queue.FIFOQueue", "W2/aqueue/asyncio", "W2/tf.queue/threads", 7.0),
    Ratio(
        "W3 aqueue / tf.queue.RandomShuffleQueue", "W3/aqueue/asyncio", "W3/tf.queue/threads", 6.0
    ),
    Ratio(
        "W2 aqueue / memcpy in+out (ideal ring)", "W2/aqueue/asyncio", "memcpy/in+out/numpy", None
    ),
    Ratio(
        "W1 aqueue / asyncio.Queue+sleep(0)+copy",
        "W1/aqueue/asyncio",
        "W1/asyncio.Queue+sleep0+copy/asyncio",
        None,
    ),
    Ratio(
        "W1 aqueue / bare ring (2 copies, nothing else)",
        "W1/aqueue/asyncio",
        "W1/bare ring/asyncio",
        None,
    ),
    Ratio(
        "W1 bare ring / asyncio.Queue+sleep(0)",
        "W1/bare ring/asyncio",
        "W1/asyncio.Queue+sleep0/asyncio",
        None,
    ),
    Ratio(
        "W1 aqueue / checked ring (bare ring + check + lock)",
        "W1/aqueue/asyncio",
        "W1/checked ring/asyncio",
        None,
    ),
    Ratio(
        "W1 checked ring / asyncio.Queue+sleep(0)",
        "W1/checked ring/asyncio",
        "W1/asyncio.Queue+sleep0/asyncio",
        None,
    ),
    Ratio(
        "W1 aqueue / asyncio.Queue (no sleep)",
        "W1/aqueue/asyncio",
        "W1/asyncio.Queue/asyncio",
        None,
    ),
    Ratio("W1 aqueue / tf.queue.FIFOQueue", "W1/aqueue/asyncio", "W1/tf.queue/threads", None),
    Ratio("W1-threads aqueue / W1 aqueue", "W1-threads/aqueue/asyncio", "W1/aqueue/asyncio", None),
    Ratio("W1 trio: aqueue / anyio stream", "W1/aqueue/trio", "W1/anyio-stream/trio", None),
    Ratio("W1 aqueue: trio / asyncio", "W1/aqueue/trio", "W1/aqueue/asyncio", None),
    Ratio("W2 aqueue: trio / asyncio", "W2/aqueue/trio", "W2/aqueue/asyncio", None),
    Ratio(
        "W3 aqueue / bare pool (1 copy in, 1 gather out, nothing else)",
        "W3/aqueue/asyncio",
        "W3/bare pool/asyncio",
        None,
    ),
    Ratio(
        "W3 bare pool / tf.queue.RandomShuffleQueue",
        "W3/bare pool/asyncio",
        "W3/tf.queue/threads",
        None,
    ),
    Ratio(
        "W3 aqueue / asyncio.Queue+pool+np.stack",
        "W3/aqueue/asyncio",
        "W3/asyncio.Queue+pool+np.stack/asyncio",
        None,
    ),
]


def build_cases(scale: float, with_tf: bool, with_trio: bool) -> list[Case]:
    def count(base: int) -> int:
        return max(256, int(base * scale) // 256 * 256)

    n1, n2, n3 = count(N_W1), count(N_W2), count(N_W3)
    specs: list[tuple[str, str, str, int, Callable[[Source, int], Run], Any]] = [
        ("memcpy", "1-pass", "numpy", n2, memcpy_1pass, check_none),
        ("memcpy", "in+out", "numpy", n2, memcpy_in_out, check_fifo),
        ("W1", "aqueue", "asyncio", n1, _on("asyncio", aqueue_w1), check_fifo),
        ("W1", "asyncio.Queue", "asyncio", n1, _on("asyncio", asyncio_w1), check_fifo),
        (
            "W1",
            "asyncio.Queue+sleep0",
            "asyncio",
            n1,
            _on("asyncio", asyncio_w1_sleep0),
            check_fifo,
        ),
        (
            "W1",
            "asyncio.Queue+sleep0+copy",
            "asyncio",
            n1,
            _on("asyncio", asyncio_w1_sleep0_copy),
            check_fifo,
        ),
        ("W1", "anyio-stream", "asyncio", n1, _on("asyncio", anyio_w1), check_fifo),
        ("W1", "bare ring", "asyncio", n1, _on("asyncio", ring_w1(BareRing)), check_fifo),
        ("W1", "checked ring", "asyncio", n1, _on("asyncio", ring_w1(CheckedRing)), check_fifo),
        ("W1-threads", "aqueue", "asyncio", n1, _on("asyncio", aqueue_w1_threads), check_threads),
        ("W2", "aqueue", "asyncio", n2, _on("asyncio", aqueue_w2), check_fifo),
        ("W2", "asyncio.Queue+np.stack", "asyncio", n2, _on("asyncio", asyncio_w2), check_fifo),
        ("W3", "aqueue", "asyncio", n3, _on("asyncio", aqueue_w3), check_shuffle),
        (
            "W3",
            "asyncio.Queue+pool+np.stack",
            "asyncio",
            n3,
            _on("asyncio", asyncio_w3),
            check_shuffle,
        ),
        ("W3", "bare pool", "asyncio", n3, _on("asyncio", bare_pool_w3), check_shuffle),
    ]
    if with_trio:
        specs += [
            ("W1", "aqueue", "trio", n1, _on("trio", aqueue_w1), check_fifo),
            ("W1", "anyio-stream", "trio", n1, _on("trio", anyio_w1), check_fifo),
            ("W2", "aqueue", "trio", n2, _on("trio", aqueue_w2), check_fifo),
        ]
    if with_tf:
        specs += [
            ("W1", "tf.queue", "threads", count(N_W1 // TF_W1_DIVISOR), tf_w1, check_fifo),
            ("W2", "tf.queue", "threads", n2, tf_w2, check_fifo),
            ("W3", "tf.queue", "threads", n3, tf_w3, check_shuffle),
        ]
    order = {"memcpy": 0, "W1": 1, "W1-threads": 2, "W2": 3, "W3": 4}
    specs.sort(key=lambda s: order[s[0]])
    return [Case(f"{w}/{i}/{b}", w, i, b, n, run, chk) for w, i, b, n, run, chk in specs]


def run_once(case: Case, src: Source) -> None:
    gc.collect()
    try:
        result = case.run(src, case.elements)
        case.check(src, case.elements, result)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        case.error = f"{type(exc).__name__}: {exc}"[:300]
        return
    case.times_s.append(result.elapsed_s)


def ratio_values(cases: dict[str, Case], r: Ratio) -> tuple[float | None, float | None]:
    num, den = cases.get(r.num), cases.get(r.den)
    if num is None or den is None:
        return None, None
    nm, dm, nb, db = num.median(), den.median(), num.best(), den.best()
    med = nm / dm if nm and dm else None
    best = nb / db if nb and db else None
    return med, best


def _fmt_rate(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _fmt_ratio(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def render_table(cases: list[Case]) -> str:
    head = (
        "workload",
        "implementation",
        "backend",
        "elements",
        "median el/s",
        "median MB/s",
        "best el/s",
        "spread",
        "status",
    )
    rows = []
    for c in cases:
        med, best = c.median(), c.best()
        spread = (max(c.rates()) / min(c.rates()) - 1) if c.times_s and not c.error else None
        rows.append(
            (
                c.workload,
                c.impl,
                c.backend,
                f"{c.elements:,}",
                _fmt_rate(med),
                "-" if med is None else f"{med * ELEMENT_BYTES / 1e6:,.0f}",
                _fmt_rate(best),
                "-" if spread is None else f"{spread:.0%}",
                "ok" if c.error is None else "FAILED",
            )
        )
    return _markdown(head, rows)


def render_ratios(cases: dict[str, Case]) -> str:
    head = ("ratio", "target", "median", "best", "meets target")
    rows = []
    for r in RATIOS:
        med, best = ratio_values(cases, r)
        if r.target is None:
            verdict = "(info)"
        elif med is None:
            verdict = "n/a"
        else:
            verdict = (
                "yes" if med >= r.target else ("no" if (best or 0) < r.target else "best only")
            )
        rows.append(
            (
                r.name,
                "-" if r.target is None else f">= {r.target:g}x",
                _fmt_ratio(med),
                _fmt_ratio(best),
                verdict,
            )
        )
    return _markdown(head, rows)


def _markdown(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)
    ]
    right = {
        i
        for i, h in enumerate(head)
        if any(w in h for w in ("el/s", "MB/s", "elements", "spread", "median", "best"))
    }

    def line(cells: tuple[str, ...]) -> str:
        return (
            "| "
            + " | ".join(
                c.rjust(w) if i in right else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    sep = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if i in right else ("-" * (w + 2)) for i, w in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([line(head), sep, *(line(r) for r in rows)])


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_rev() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def report(args: argparse.Namespace, cases: list[Case], meta: dict[str, Any]) -> dict[str, Any]:
    by_key = {c.key: c for c in cases}
    ratios = []
    for r in RATIOS:
        med, best = ratio_values(by_key, r)
        ratios.append(
            {
                "name": r.name,
                "numerator": r.num,
                "denominator": r.den,
                "target": r.target,
                "median": med,
                "best": best,
                "meets_target": None if r.target is None or med is None else med >= r.target,
            }
        )
    results = []
    for c in cases:
        med, best = c.median(), c.best()
        results.append(
            {
                "key": c.key,
                "workload": c.workload,
                "implementation": c.impl,
                "backend": c.backend,
                "elements": c.elements,
                "element_bytes": ELEMENT_BYTES,
                "times_s": [round(t, 6) for t in c.times_s],
                "median_elements_per_s": med,
                "best_elements_per_s": best,
                "median_MB_per_s": None if med is None else med * ELEMENT_BYTES / 1e6,
                "best_MB_per_s": None if best is None else best * ELEMENT_BYTES / 1e6,
                "error": c.error,
            }
        )
    return {"meta": meta, "results": results, "ratios": ratios}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument(
        "--quick", action="store_true", help="smoke run: 2 repetitions of 1/10 of the elements"
    )
    p.add_argument("--reps", type=int, default=None, help="repetitions per case (default 5)")
    p.add_argument(
        "--scale", type=float, default=None, help="multiply the element counts (default 1.0)"
    )
    p.add_argument(
        "--only",
        default=None,
        metavar="REGEX",
        help="run only cases whose key (e.g. 'W2/aqueue/asyncio') matches",
    )
    p.add_argument("--no-tf", action="store_true", help="skip tf.queue even if importable")
    p.add_argument("--no-trio", action="store_true", help="skip the trio backend")
    p.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the JSON report to PATH"
    )
    args = p.parse_args(argv)
    args.reps = args.reps or (2 if args.quick else 5)
    args.scale = args.scale or (0.1 if args.quick else 1.0)
    return args


def main(argv: list[str] | None = None) -> int:
    global tf
    args = parse_args(argv)
    tf_note = "skipped (--no-tf)"
    if not args.no_tf:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        try:
            import tensorflow

            tf = tensorflow
            tf_note = tf.__version__
        except ImportError as exc:
            tf_note = f"not importable ({exc})"
    with_trio = trio is not None and not args.no_trio
    cases = build_cases(args.scale, tf is not None, with_trio)
    if args.only:
        cases = [c for c in cases if re.search(args.only, c.key)]
    src = Source.make()

    started = time.time()
    meta: dict[str, Any] = {
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "versions": {d: _version(d) for d in ("aqueue", "numpy", "anyio", "trio")},
        "tensorflow": tf_note,
        "git_rev": _git_rev(),
        "reps": args.reps,
        "scale": args.scale,
        "only": args.only,
        "loadavg_start": _loadavg(),
        # glibc heap tuning changes the cost of fresh 1 MB batches (page faults): record it.
        "malloc_env": {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")},
        "element": f"{DTYPE}{list(SHAPE)} ({ELEMENT_BYTES} bytes)",
    }
    print(
        f"bench_queues: {len(cases)} cases x {args.reps} reps; tensorflow: {tf_note}; "
        f"trio: {'yes' if with_trio else 'no'}",
        file=sys.stderr,
    )
    for case in cases:  # warm-up: imports, first-touch page faults, lazily built code paths
        warm = dataclasses.replace(
            case, elements=max(256, case.elements // 10 // 256 * 256), times_s=[]
        )
        run_once(warm, src)
        case.error = warm.error
        print(
            f"  warm-up {case.key:<45} {'ok' if warm.error is None else warm.error}",
            file=sys.stderr,
        )
    for rep in range(args.reps):
        for case in cases:
            if case.error:
                continue
            t_case = time.perf_counter()
            run_once(case, src)
            last = (
                f"{case.elements / case.times_s[-1]:>14,.0f} el/s"
                if not case.error and len(case.times_s) == rep + 1
                else f"FAILED {case.error}"
            )
            wall = time.perf_counter() - t_case
            print(
                f"  rep {rep + 1}/{args.reps} {case.key:<45} {last}  ({wall:.2f} s wall)",
                file=sys.stderr,
            )
            time.sleep(0.02)  # let other threads (TF's pools, stopped producers) settle
    meta["duration_s"] = round(time.time() - started, 1)
    meta["loadavg_end"] = _loadavg()

    doc = report(args, cases, meta)
    print(
        f"aqueue core-queue benchmark ({meta['started_utc']}, Python {meta['python']}, "
        f"{meta['cpu']} x{meta['cpu_count']}, element {meta['element']}, "
        f"{args.reps} reps, {meta['duration_s']} s)\n"
    )
    print(render_table(cases))
    print()
    print(render_ratios({c.key: c for c in cases}))
    failed = [c for c in cases if c.error]
    for c in failed:
        print(f"\nFAILED {c.key}: {c.error}")
    text = json.dumps(doc, indent=2)
    print("\n" + text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
