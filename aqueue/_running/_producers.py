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
"""

from __future__ import annotations

import _thread
import enum
import inspect
import threading
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, cast

import anyio

from .._queues._backend import Waker, make_waker
from . import _alive

__all__ = [
    "Kind",
    "ProducerSlot",
    "ThreadRecord",
    "classify",
    "describe",
    "fetchers",
    "is_async_callable",
    "start_threads",
]


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


_STARTERS = 4  # producer threads started concurrently (see _launch)


def start_threads(threads: list[tuple[threading.Thread, ThreadRecord]]) -> None:
    """Start producer threads without making the event loop wait for them.

    ``Thread.start()`` blocks its caller until the new thread runs: about 0.1 ms on a
    quiet machine, but a scheduler slice (4 ms or more) on a busy one, so 16 threads
    started one after another on the loop held it up for 20 to 60 ms. Here one helper
    thread and up to ``_STARTERS - 1`` more starter threads each start every
    ``_STARTERS``-th producer thread in turn: on a busy machine the scheduling delays
    overlap (16 threads running after ~7 ms instead of ~20 ms), on a quiet one a few
    starters cost no more than one (~2.5 ms), and the loop only pays for creating the
    helper. Helper and starters are ``_thread.start_new_thread`` threads (the standard
    library's low-level thread API) because that call does not wait. A thread whose
    supervising task is already gone is not started; one that cannot be started
    reports the error through its record, as a failed producer.
    """

    def start_one(thread: threading.Thread, record: ThreadRecord) -> None:
        if record.stop.is_set():
            record.finish("clean", None)
            return
        try:
            thread.start()
        except Exception as exc:  # e.g. "can't start new thread"
            record.finish("error", exc)

    def start_chain(chain: list[tuple[threading.Thread, ThreadRecord]]) -> None:
        for thread, record in chain:
            start_one(thread, record)

    def start_all() -> None:
        chains = [threads[k::_STARTERS] for k in range(min(_STARTERS, len(threads)))]
        for chain in chains[1:]:
            try:
                _thread.start_new_thread(start_chain, (chain,))
            except RuntimeError:  # no starter thread to be had: start them here
                start_chain(chain)
        start_chain(chains[0])  # the helper is the first starter

    try:
        _thread.start_new_thread(start_all, ())
    except RuntimeError:
        start_all()
