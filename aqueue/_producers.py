"""Producer kinds, per-producer state, and the hand-off between producer threads and
the event loop (used by QueueRunner).

A producer is one of four kinds, told apart once, at QueueRunner construction:

- an async callable (a coroutine function, or an object whose ``__call__`` is one);
- an async iterable (``__aiter__``), for example another queue;
- a sync iterable (``__iter__``; str and bytes are refused as almost certainly a mistake);
- a sync callable (anything else callable).

Generator *functions* are refused: the caller meant the generator they return.

A producer thread and its supervising task share a ``_ThreadRecord``: the thread writes
its outcome under the record's lock and then sets the waker the task parked on, if any;
the task creates a fresh waker for every wait, so a cancelled wait never leaves a stale
one behind.
"""

from __future__ import annotations

import enum
import inspect
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import anyio

from ._backend import Waker, make_waker

__all__ = ["add_note", "classify", "describe", "fetchers"]


class _Kind(enum.Enum):
    """The four producer kinds."""

    ASYNC_CALL = "async callable"
    ASYNC_ITER = "async iterable"
    SYNC_CALL = "sync callable"
    SYNC_ITER = "sync iterable"

    @property
    def threaded(self) -> bool:
        return self in (_Kind.SYNC_CALL, _Kind.SYNC_ITER)


def describe(obj: object) -> str:
    """A short human name for a producer (its qualified name when it has one)."""
    name = getattr(obj, "__qualname__", None)
    if isinstance(name, str):
        return name
    func = getattr(obj, "func", None)  # functools.partial
    if func is not None:
        return f"partial({describe(func)})"
    return f"{type(obj).__name__} object"


def classify(index: int, producer: object) -> _Kind:
    """The kind of ``producer`` (``producers[index]``), or TypeError."""
    if inspect.iscoroutinefunction(producer) or (
        callable(producer)
        and not inspect.isroutine(producer)
        and inspect.iscoroutinefunction(type(producer).__call__)
    ):
        return _Kind.ASYNC_CALL
    if inspect.isasyncgenfunction(producer) or inspect.isgeneratorfunction(producer):
        raise TypeError(
            f"QueueRunner: producers[{index}] ({describe(producer)}) is a generator function; "
            f"pass the generator it returns (call it) to have its items enqueued"
        )
    if hasattr(producer, "__aiter__"):
        return _Kind.ASYNC_ITER
    if isinstance(producer, (str, bytes)):
        raise TypeError(
            f"QueueRunner: producers[{index}] is a {type(producer).__name__} ({producer!r}); "
            "expected a callable or an iterable of elements (wrap a list of file names "
            "in a list: producers=[names])"
        )
    if hasattr(producer, "__iter__"):
        return _Kind.SYNC_ITER
    if callable(producer):
        return _Kind.SYNC_CALL
    raise TypeError(
        f"QueueRunner: producers[{index}] must be an async or sync callable or an async or "
        f"sync iterable, got {type(producer).__name__}"
    )


class _Producer:
    """One producer slot of a runner; ``state`` is read by the stall watchdog."""

    __slots__ = ("index", "kind", "label", "state", "target")

    def __init__(self, index: int, target: object, kind: _Kind) -> None:
        self.index = index
        self.target = target
        self.kind = kind
        self.label = f"producer {index} ({describe(target)})"
        self.state = "idle"  # idle | producing | enqueueing | done


class _ThreadRecord:
    """How one producer thread ended, shared by the thread and the event loop."""

    __slots__ = ("_lock", "_waker", "error", "finished", "name", "outcome", "producer", "stop")

    def __init__(self, name: str, producer: _Producer) -> None:
        self.name = name
        self.producer = producer
        self._lock = threading.Lock()
        self._waker: Waker | None = None
        self.finished = False
        self.outcome = "running"  # clean | error
        self.error: BaseException | None = None
        self.stop = threading.Event()  # set when the supervising task is gone

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
    producers: list[_Producer],
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
        if p.kind is _Kind.ASYNC_ITER:
            it: Any = aiter(p.target)  # type: ignore[arg-type]
            a_iters[p.index] = it
        elif p.kind is _Kind.SYNC_ITER:
            it = iter(p.target)  # type: ignore[call-overload]
            s_iters[p.index] = it
        else:
            continue
        counts[id(it)] = counts.get(id(it), 0) + 1
    async_locks: dict[int, anyio.Lock] = {}
    sync_locks: dict[int, threading.Lock] = {}
    afetch: dict[int, Callable[[], Awaitable[Any]]] = {}
    sfetch: dict[int, Callable[[], Any]] = {}
    for p in producers:
        if p.kind is _Kind.ASYNC_CALL:
            afetch[p.index] = p.target  # type: ignore[assignment]
        elif p.kind is _Kind.SYNC_CALL:
            sfetch[p.index] = p.target  # type: ignore[assignment]
        elif p.kind is _Kind.ASYNC_ITER:
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


def add_note(exc: BaseException, note: str) -> None:
    """Attach ``note`` to ``exc`` once (``__notes__``, PEP 678)."""
    if note in getattr(exc, "__notes__", ()):
        return
    if sys.version_info >= (3, 11):
        exc.add_note(note)
    else:  # pragma: no cover - the exceptiongroup backport prints __notes__ on 3.10
        exc.__notes__ = [*getattr(exc, "__notes__", ()), note]  # type: ignore[attr-defined]
