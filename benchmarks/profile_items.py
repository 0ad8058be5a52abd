"""Where W7's time goes: per-item counts of loop iterations, wake-ups, parks and locks.

Runs one W7 chain (``bench_items.py``: N ints -> map(identity) at concurrency C ->
batch(32) -> consumer) once, by aqueue or by one of the floors, and prints what happened
per item. Used for benchmarks/W7_PROFILE.md; a script, not a test.

Modes:

- ``--counters`` (default): asyncio, aqueue and threading methods are wrapped with
  counters (a run is then 2-4x slower, but the counts are exact): event-loop iterations
  (``_run_once``), epoll calls and the ones that slept, callbacks run (task steps),
  ``call_soon_threadsafe`` and self-pipe writes, aqueue's wakers created and fired (for
  a task or for a thread), thread parks (a blocking-view call that had to wait) and the
  ``threading.Event.wait`` calls behind them, fast-path misses, and every acquisition of
  every pipeline queue's lock with the ones that found it held (contended). Also the
  process's context switches (``getrusage``: every thread, voluntary and involuntary).
- ``--plain``: the same run without wrappers, printing items/s and context switches;
  for running under ``py-spy record``, ``strace -f -c`` or ``perf stat``.
- ``--micro``: single-thread costs of the thread chain's per-item steps (enqueue,
  dequeue, metering, collate) and of one thread-to-thread wake-up.
- ``--summarize FILE``: read py-spy's ``--format raw --threads`` output (collapsed
  stacks) and print, per thread role (event loop, map worker, batch worker), the share
  of samples spent waiting and the functions with the most samples.

Run: python benchmarks/profile_items.py --impl aqueue-thread --concurrency 4
     [--items 20000] [--plain] [--summarize FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import resource
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import bench_items

COUNTS: collections.Counter[str] = collections.Counter()
_count_lock = threading.Lock()


def bump(name: str, k: int = 1) -> None:
    with _count_lock:
        COUNTS[name] += k


def wrap(owner: Any, attr: str, name: str, after: Callable[..., None] | None = None) -> None:
    """Replace ``owner.attr`` by a wrapper that counts its calls as ``name``."""
    original = getattr(owner, attr)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bump(name)
        result = original(*args, **kwargs)
        if after is not None:
            after(args, kwargs, result)
        return result

    setattr(owner, attr, wrapper)


class CountingLock:
    """A ``threading.Lock`` that counts acquisitions and the ones that found it held."""

    __slots__ = ("_lock", "_name")

    def __init__(self, name: str) -> None:
        self._lock = threading.Lock()
        self._name = name

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        bump("queue lock: acquisitions")
        if self._lock.acquire(False):
            return True
        bump("queue lock: contended (found held)")
        if not blocking:
            return False
        return self._lock.acquire(True, timeout)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def install_counters() -> None:
    """Wrap the methods whose calls are counted (see the module docstring)."""
    import asyncio.base_events
    import asyncio.events
    import asyncio.selector_events
    import selectors

    import aqueue._backend as backend
    import aqueue._base as base
    import aqueue._blocking as blocking
    import aqueue._core as core

    wrap(asyncio.base_events.BaseEventLoop, "_run_once", "loop: iterations (_run_once)")
    wrap(asyncio.events.Handle, "_run", "loop: callbacks run (task steps and callbacks)")
    wrap(asyncio.base_events.BaseEventLoop, "call_soon_threadsafe", "loop: call_soon_threadsafe")
    wrap(
        asyncio.selector_events.BaseSelectorEventLoop,
        "_write_to_self",
        "loop: self-pipe writes (loop woken by a thread)",
    )
    original_select = selectors.EpollSelector.select

    def select(self: Any, timeout: float | None = None) -> Any:
        bump("epoll: calls")
        if timeout is None or timeout > 0:
            bump("epoll: calls that may sleep (timeout != 0)")
        t0 = time.perf_counter()
        events = original_select(self, timeout)
        if time.perf_counter() - t0 > 50e-6:
            bump("epoll: calls that waited > 50 us")
        return events

    selectors.EpollSelector.select = select  # type: ignore[method-assign]

    original_make_waker = core.make_waker

    def make_waker() -> Any:
        bump("aqueue: wakers created (an async op parks)")
        return original_make_waker()

    core.make_waker = make_waker
    wrap(backend._Wakeups, "send", "aqueue: wake-ups sent to the loop from a thread")
    wrap(backend._Wakeups, "_deliver", "aqueue: wake-up deliveries on the loop (batched)")
    original_wake = core.QueueCore._wake

    def wake(self: Any, w: Any) -> None:
        side = "enqueue" if w.count else "dequeue"
        who = "thread (Event.set)" if w.event is not None else "task (waker)"
        bump(f"aqueue: notify a parked {who}")
        bump(f"aqueue: notify a {who.split()[0]} parked to {side} on {_stage(self)}")
        original_wake(self, w)

    core.QueueCore._wake = wake  # type: ignore[method-assign]
    original_thread_run = core.QueueCore._thread_run

    def thread_run(self: Any, w: Any, getter: bool, timeout: Any, what: str) -> Any:
        bump("thread: parks (blocking-view op had to wait)")
        bump(f"thread: parks on {_stage(self)} ({what})")
        return original_thread_run(self, w, getter, timeout, what)

    core.QueueCore._thread_run = thread_run  # type: ignore[method-assign]
    original_wait = core.QueueCore._wait

    async def wait(self: Any, w: Any, getter: bool, step: Any) -> Any:
        bump("task: parks (async op had to wait)")
        bump(f"task: parks on {_stage(self)} ({'dequeue' if getter else 'enqueue'})")
        return await original_wait(self, w, getter, step)

    core.QueueCore._wait = wait  # type: ignore[method-assign]
    original_event_wait = threading.Event.wait

    def event_wait(self: Any, timeout: float | None = None) -> bool:
        bump("thread: Event.wait calls")
        return original_event_wait(self, timeout)

    threading.Event.wait = event_wait  # type: ignore[method-assign]
    wrap(blocking.BlockingQueue, "dequeue", "thread: BlockingQueue.dequeue")
    wrap(blocking.BlockingQueue, "enqueue", "thread: BlockingQueue.enqueue")
    wrap(blocking.BlockingQueue, "dequeue_many", "thread: BlockingQueue.dequeue_many")
    wrap(base.QueueBase, "enqueue", "task: QueueBase.enqueue")
    wrap(base.QueueBase, "enqueue_many", "task: QueueBase.enqueue_many")
    wrap(base.QueueBase, "dequeue", "task: QueueBase.dequeue")
    wrap(base.QueueBase, "dequeue_nowait", "task: QueueBase.dequeue_nowait")
    original_init = core.QueueCore.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._lock = CountingLock(self._name)

    core.QueueCore.__init__ = init  # type: ignore[method-assign]


def _stage(q: Any) -> str:
    """A pipeline queue's role, from its name ("<i>:<label>")."""
    name = str(q._name)
    return "q" + name.split(":", 1)[0] + " (" + name.split(":", 1)[-1].split("(")[0] + " out)"


def switches() -> tuple[int, int]:
    """Voluntary and involuntary context switches of every thread of the process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_nvcsw, r.ru_nivcsw


def run(impl: str, n: int, c: int) -> float:
    """One run of ``impl``; returns seconds."""
    fn, afn = bench_items.make_fns(0.0)
    if impl == "aqueue-thread":
        return asyncio.run(bench_items.aqueue_run(n, c, fn))
    if impl == "aqueue-async":
        return asyncio.run(bench_items.aqueue_run(n, c, afn))
    if impl == "floor-thread":
        return asyncio.run(bench_items.floor_thread(n, c, fn))
    assert impl == "floor-async"
    return asyncio.run(bench_items.floor_async(n, c, afn))


def _role(thread: str) -> str:
    """A thread's role in the run, from the name py-spy records for it."""
    if "MainThread" in thread:
        return "event loop (main thread)"
    if "QueueRunnerThread-" in thread:
        return "worker " + thread.split("QueueRunnerThread-", 1)[1].split("(")[0].strip()
    return "other thread"


def summarize(path: str, top: int) -> None:
    """Print py-spy samples (``--format raw --threads``) by thread role: how many were
    waiting (Event/Condition wait, a lock, epoll) and, of the others, the functions with
    the most samples (self and inclusive)."""
    waiting = ("wait (threading.py", "_release_save", "select (selectors.py", "acquire")
    running: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    incl: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    states: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with open(path) as f:
        for line in f:
            stack, _, num = line.rstrip().rpartition(" ")
            thread, *frames = stack.split(";")
            role = _role(thread)
            k = int(num)
            last = frames[-1] if frames else "?"
            if any(w in last for w in waiting):
                states[role]["waiting: " + last.split(" (")[0]] += k
                continue
            states[role]["running"] += k
            running[role][last] += k
            for fr in set(frames):
                incl[role][fr] += k
    for role in sorted(states):
        total = sum(states[role].values())
        print(f"\n## {role}: {total} samples")
        for state, k in states[role].most_common():
            print(f"  {100 * k / total:5.1f}%  {state}")
        busy = states[role]["running"] or 1
        print("  running, self (share of running samples):")
        for fr, k in running[role].most_common(top):
            print(f"    {100 * k / busy:5.1f}%  {fr}")
        print("  running, inclusive:")
        for fr, k in incl[role].most_common(top):
            print(f"    {100 * k / busy:5.1f}%  {fr}")


def micro() -> None:
    """Single-thread costs of the per-item steps of the thread chain (no waiting), and
    one thread-to-thread wake-up through ``threading.Event``."""
    import timeit

    import numpy as np
    from aqueue._stages import _Box, _Meter, collate

    from aqueue import FIFOQueue

    n = 50_000
    q = FIFOQueue(n, object, (), name="micro")
    view = q.blocking()
    box = _Box(1)
    boxes = [_Box(i) for i in range(32)]
    meter = _Meter()
    w = meter.worker()

    def put() -> None:
        for _ in range(n):
            view.enqueue(box)

    def get() -> None:
        for _ in range(n):
            view.dequeue()

    def metered() -> None:
        for _ in range(n):
            t0 = meter.began(w)
            w.returned = w.worked(meter.got(t0))

    def many() -> None:
        for _ in range(n // 32):
            for _ in range(32):
                view.enqueue(box)
            view.dequeue_many(32)

    rows = {
        "BlockingQueue.enqueue with room (object queue), per item": timeit.timeit(put, number=1)
        / n,
        "BlockingQueue.dequeue, element there, per item": timeit.timeit(get, number=1) / n,
        "32 x enqueue + dequeue_many(32), per item": timeit.timeit(many, number=1) / n,
        "_Meter began + got + worked, per item": timeit.timeit(metered, number=1) / n,
        "collate of 32 ints, per batch": timeit.timeit(
            lambda: collate([b.value for b in boxes]), number=20_000
        )
        / 20_000,
        "np.asarray of a list of 32 ints, per batch": timeit.timeit(
            lambda: np.asarray([b.value for b in boxes]), number=20_000
        )
        / 20_000,
    }
    e1, e2 = threading.Event(), threading.Event()
    k = 5_000

    def pong() -> None:
        for _ in range(k):
            e1.wait()
            e1.clear()
            e2.set()

    t = threading.Thread(target=pong)
    t.start()
    t0 = time.perf_counter()
    for _ in range(k):
        e1.set()
        e2.wait()
        e2.clear()
    rows["thread -> thread wake-up through threading.Event, one way"] = (
        time.perf_counter() - t0
    ) / (2 * k)
    t.join()
    for name, seconds in rows.items():
        print(f"  {seconds * 1e6:7.2f} us  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--impl",
        choices=["aqueue-thread", "aqueue-async", "floor-thread", "floor-async"],
        default="aqueue-thread",
    )
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--plain", action="store_true", help="no counters (for profilers)")
    parser.add_argument("--summarize", default=None, help="a py-spy raw file to summarize")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--micro", action="store_true", help="single-thread step costs")
    args = parser.parse_args(argv)
    if args.micro:
        micro()
        return 0
    if args.summarize:
        summarize(args.summarize, args.top)
        return 0
    n, c = args.items, args.concurrency
    run(args.impl, 2_048, c)  # warm-up
    if not args.plain:
        install_counters()
        run(args.impl, 2_048, c)  # warm the wrappers, then count one run only
    COUNTS.clear()
    s0 = switches()
    seconds = run(args.impl, n, c)
    s1 = switches()
    per_item = {k: v / n for k, v in sorted(COUNTS.items())}
    per_item["process: voluntary context switches"] = (s1[0] - s0[0]) / n
    per_item["process: involuntary context switches"] = (s1[1] - s0[1]) / n
    print(f"{args.impl} C={c}: {n} items in {seconds:.3f} s, {n / seconds:,.0f} items/s")
    for k, v in per_item.items():
        print(f"  {v:9.3f} per item  {k}")
    print(json.dumps({"impl": args.impl, "C": c, "items": n, "seconds": seconds, **per_item}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
