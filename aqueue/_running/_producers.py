"""Producer kinds, per-producer state, and the hand-off between producer threads and
the event loop (used by QueueRunner and by the pipeline's stages).

A producer is one of four kinds, told apart once, at QueueRunner construction:

- an async callable (a coroutine function, or an object whose ``__call__`` is one);
- an async iterable (``__aiter__``), for example another queue;
- a sync iterable (``__iter__``; str and bytes are refused as almost certainly a mistake);
- a sync callable (anything else callable).

Generator *functions* are refused: the caller meant the generator they return.

``is_async_callable`` is the one place aqueue decides whether calling something gives
an awaitable (``async def`` functions and objects whose ``__call__`` is one).

A producer thread and its supervising task share a ``ThreadRecord``: the thread writes
its outcome under the record's lock and then sets the waker the task parked on, if any;
the task creates a fresh waker for every wait, so a cancelled wait never leaves a stale
one behind.

Threads. A coordinator's ``ThreadStarter`` starts its runners' producer threads off the
event loop, and a runner's threads produce once all of them are started
(``start_threads``). Every thread aqueue starts for a runner is a named daemon
``threading.Thread``, listed by ``threading.enumerate()`` while it runs:
``QueueRunnerThread-<runner>-<i> (<producer>)`` for producer ``i``, and one
``QueueRunnerStarter (...)`` per coordinator block with threaded runners, which starts
them and ends with the block.
"""

from __future__ import annotations

import enum
import inspect
import queue
import threading
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, cast

import anyio

from .._waiting._backend import Waker, checkpoint, make_waker
from . import _alive

__all__ = [
    "Kind",
    "NewThreads",
    "ProducerSlot",
    "ThreadRecord",
    "ThreadStarter",
    "classify",
    "describe",
    "fetchers",
    "is_async_callable",
    "start_threads",
]

_JOIN_S = 0.0005  # seconds a round of ThreadRecord.exited joins the thread, at most


class Kind(enum.Enum):
    """The four producer kinds."""

    ASYNC_CALL = "async callable"
    ASYNC_ITER = "async iterable"
    SYNC_CALL = "sync callable"
    SYNC_ITER = "sync iterable"

    @property
    def threaded(self) -> bool:
        return self in (Kind.SYNC_CALL, Kind.SYNC_ITER)


def describe(obj: object) -> str:
    """A short human name for a producer (its qualified name when it has one)."""
    name = getattr(obj, "__qualname__", None)
    if isinstance(name, str):
        return name
    func = getattr(obj, "func", None)  # functools.partial
    if func is not None:
        return f"partial({describe(func)})"
    return f"{type(obj).__name__} object"


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` returns an awaitable (async def, or async ``__call__``)."""
    return inspect.iscoroutinefunction(fn) or (
        callable(fn)
        and not inspect.isroutine(fn)
        and inspect.iscoroutinefunction(type(fn).__call__)
    )


def classify(index: int, producer: object) -> Kind:
    """The kind of ``producer`` (``producers[index]``), or TypeError."""
    if is_async_callable(producer):
        return Kind.ASYNC_CALL
    if inspect.isasyncgenfunction(producer) or inspect.isgeneratorfunction(producer):
        raise TypeError(
            f"QueueRunner: producers[{index}] ({describe(producer)}) is a generator function; "
            f"pass the generator it returns (call it) to have its items enqueued"
        )
    if hasattr(producer, "__aiter__"):
        return Kind.ASYNC_ITER
    if isinstance(producer, (str, bytes)):
        raise TypeError(
            f"QueueRunner: producers[{index}] is a {type(producer).__name__} ({producer!r}); "
            "expected a callable or an iterable of elements (wrap a list of file names "
            "in a list: producers=[names])"
        )
    if hasattr(producer, "__iter__"):
        return Kind.SYNC_ITER
    if callable(producer):
        return Kind.SYNC_CALL
    raise TypeError(
        f"QueueRunner: producers[{index}] must be an async or sync callable or an async or "
        f"sync iterable, got {type(producer).__name__}"
    )


class ProducerSlot:
    """One producer slot of a runner; ``state`` is read by the stall watchdog."""

    __slots__ = ("index", "kind", "label", "state", "target")

    def __init__(self, index: int, target: object, kind: Kind) -> None:
        self.index = index
        self.target = target
        self.kind = kind
        self.label = f"producer {index} ({describe(target)})"
        self.state = "idle"  # idle | producing | enqueueing | done


class ThreadRecord:
    """How one producer thread ended, shared by the thread and the event loop."""

    __slots__ = (
        "__weakref__",  # (held weakly by the live registry, _alive.py)
        "_lock",
        "_waker",
        "error",
        "finished",
        "name",
        "outcome",
        "producer",
        "stop",
        "thread",
    )

    def __init__(self, name: str, producer: ProducerSlot) -> None:
        self.name = name
        self.producer = producer
        self._lock = threading.Lock()
        self._waker: Waker | None = None
        self.finished = False
        self.outcome = "running"  # clean | error
        self.error: BaseException | None = None
        self.stop = threading.Event()  # set when the supervising task is gone
        self.thread: threading.Thread | None = None  # (set by whoever makes the thread)
        _alive.thread_created(self)

    def finish(self, outcome: str, error: BaseException | None) -> None:
        """Record the outcome and wake the event loop (thread side)."""
        # The producer's state is "done" from here on: the thread no longer writes it.
        self.producer.state = "done"
        with self._lock:
            self.outcome = outcome
            self.error = error
            self.finished = True
            waker = self._waker
        if waker is not None:
            waker.set()

    async def wait(self) -> None:
        """Wait until the thread has finished (event-loop side; cancellable)."""
        while True:
            with self._lock:
                if self.finished:
                    return
                waker = self._waker = make_waker()
            await waker.wait()

    async def exited(self) -> None:
        """Wait until the thread has finished and then ended (event-loop side;
        cancellable). Between the two, the thread still unwinds its frames, which hold
        the producer and the last value it produced: a coordinator's exit waits for
        this, so nothing a producer held outlives the block (a shared-memory view, a
        file). A thread's end wakes nothing, and the unwinding takes microseconds once
        the thread has the GIL: each round joins it for at most half a millisecond
        (which hands it the GIL) and then checkpoints. (Not ``sleep``: on trio a sleep
        ends by a caught cancellation, whose traceback keeps this frame, and so the
        record and its producer, until the task's next checkpoint.)"""
        await self.wait()
        thread = self.thread
        while thread is not None and thread.is_alive():
            thread.join(_JOIN_S)
            await checkpoint()


NewThreads = list[tuple[threading.Thread, ThreadRecord]]
"""Producer threads not yet started, each with its record."""


def fetchers(
    producers: list[ProducerSlot],
) -> tuple[dict[int, Callable[[], Awaitable[Any]]], dict[int, Callable[[], Any]]]:
    """One "produce the next value" function per producer.

    Iterators are created once per producer slot; an iterator object shared by several
    slots (a generator listed twice) is guarded by a lock, since generators cannot be
    advanced concurrently.
    """
    a_iters: dict[int, AsyncIterator[Any]] = {}
    s_iters: dict[int, Iterable[Any]] = {}
    counts: dict[int, int] = {}
    for p in producers:
        if p.kind is Kind.ASYNC_ITER:
            it: Any = aiter(cast("AsyncIterable[Any]", p.target))
            a_iters[p.index] = it
        elif p.kind is Kind.SYNC_ITER:
            it = iter(cast("Iterable[Any]", p.target))
            s_iters[p.index] = it
        else:
            continue
        counts[id(it)] = counts.get(id(it), 0) + 1
    async_locks: dict[int, anyio.Lock] = {}
    sync_locks: dict[int, threading.Lock] = {}
    afetch: dict[int, Callable[[], Awaitable[Any]]] = {}
    sfetch: dict[int, Callable[[], Any]] = {}
    for p in producers:
        if p.kind is Kind.ASYNC_CALL:
            afetch[p.index] = cast("Callable[[], Awaitable[Any]]", p.target)
        elif p.kind is Kind.SYNC_CALL:
            sfetch[p.index] = cast("Callable[[], Any]", p.target)
        elif p.kind is Kind.ASYNC_ITER:
            ait = a_iters[p.index]
            if counts[id(ait)] == 1:
                afetch[p.index] = ait.__anext__
            else:
                afetch[p.index] = _locked_anext(ait, async_locks.setdefault(id(ait), anyio.Lock()))
        else:
            sit = iter(s_iters[p.index])
            if counts[id(sit)] == 1:
                sfetch[p.index] = sit.__next__
            else:
                sfetch[p.index] = _locked_next(
                    sit, sync_locks.setdefault(id(sit), threading.Lock())
                )
    return afetch, sfetch


def _locked_anext(it: AsyncIterator[Any], lock: anyio.Lock) -> Callable[[], Awaitable[Any]]:
    async def fetch() -> Any:
        async with lock:
            return await it.__anext__()

    return fetch


def _locked_next(it: Any, lock: threading.Lock) -> Callable[[], Any]:
    def fetch() -> Any:
        with lock:
            return next(it)

    return fetch


def start_threads(threads: NewThreads, go: threading.Event) -> None:
    """Start producer threads one after another, then set ``go`` (a starter's job).

    Every producer thread waits for ``go`` before producing, so none competes for the
    GIL while the others are being started. ``Thread.start()`` waits until the new
    thread runs, which needs the GIL: about 0.1 ms while no Python thread is busy, but
    25 ms and more while two threads run Python code (measured), so a runner's threads
    that began producing one by one left the last ones idle for tens of milliseconds.
    A thread whose supervising task is already gone is not started; one that cannot be
    started reports the error through its record, as a failed producer.
    """
    try:
        for thread, record in threads:
            if record.stop.is_set():
                record.finish("clean", None)
                continue
            try:
                thread.start()
            except Exception as exc:  # e.g. "can't start new thread"
                record.finish("error", exc)
    finally:
        go.set()


class ThreadStarter:
    """Starts the producer threads of one coordinator's runners, off the event loop.

    ``Thread.start()`` blocks its caller until the new thread runs, and while other
    Python threads are busy that takes 25 ms and more (``start_threads``): on the event
    loop, every runner start would stall every task. So the loop only hands each
    runner's threads over (``submit``: a ``queue.SimpleQueue`` put, no wait), and one
    thread, ``QueueRunnerStarter``, a named daemon ``threading.Thread`` created at the
    coordinator's first threaded runner, starts them. The loop waits for that one thread
    start per coordinator block, made when its first threaded runner starts (usually
    before any producer thread runs: about 0.1 ms on a quiet machine, 1 to 2.5 ms
    measured on a loaded one); later runner starts never wait. (A helper per runner
    start, started from the loop, made the loop wait 25 ms and more whenever another
    runner's threads were busy.) The starter waits on its queue (no polling) and ends
    once ``close`` is called (the coordinator's exit) and the jobs before it are done.
    If it cannot be started, the loop starts the threads.
    """

    NAME = "QueueRunnerStarter (starts the producer threads of one Coordinator's runners)"

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[NewThreads, threading.Event] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, threads: NewThreads, go: threading.Event) -> None:
        """Have ``threads`` started, then ``go`` set (event-loop thread)."""
        if self._closed:  # (no runner starts after the coordinator's task group exited)
            start_threads(threads, go)
            return
        self._jobs.put((threads, go))
        if self._thread is None:
            thread = threading.Thread(target=self._run, name=self.NAME, daemon=True)
            try:
                thread.start()
            except RuntimeError:  # no thread to be had: start them here
                self._run_pending()
                return
            self._thread = thread

    def close(self) -> None:
        """Let the starter end once its jobs are done (the coordinator's exit)."""
        self._closed = True
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            start_threads(*job)
            del job  # (waiting for the next job must not keep this one's threads alive)

    def _run_pending(self) -> None:
        while not self._jobs.empty():
            job = self._jobs.get_nowait()
            if job is not None:
                start_threads(*job)
