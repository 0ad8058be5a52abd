"""Helpers shared by the test modules (``from support import ...``), each defined once:

- background operations: ``spawn`` and ``Op``, ``settle``, ``poll`` (for conditions
  that threads set), ``raised``; for native asyncio tests, ``blocked_task`` and
  ``task_outcome``; for engine property tests, the waker ``Flag`` and ``engine_step``;
- queues and batches: ``int_queue``, ``ints``, the queue kinds of the contract suite
  (``Kind``, ``KINDS``, ``drain_nowait``), and the storage tests' elements (``Token``,
  ``int_batch``, ``multi_batch``, ``multi_values``, ``alive``);
- pipelines, monitors and logs: ``collect``, ``notes``, ``stage_statistics``,
  ``wait_samples``, ``aqueue_warnings``;
- the example scripts: ``EXAMPLES``, ``run_example``, ``example_main``, ``one_line``.

They live here rather than in ``conftest.py``: the Redis and replay tests have a
``conftest.py`` of their own, and ``import conftest`` would find whichever was imported
first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import runpy
import subprocess
import sys
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import aqueue
from aqueue._waiting._wait import thread_step

# --------------------------------------------------------------------------------------
# Background operations
# --------------------------------------------------------------------------------------


@dataclass
class Op:
    """The outcome of one queue operation run in a background task.

    ``finished`` is True once the task has ended for any reason; then exactly one of
    ``returned`` (the call returned ``value``), ``error`` (it raised an ``Exception``)
    or ``cancelled`` (its scope caught a cancellation) holds.
    """

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    value: Any = None
    error: BaseException | None = None
    returned: bool = False
    finished: bool = False
    cancelled: bool = False

    @property
    def pending(self) -> bool:
        """True while the operation has neither returned, raised nor been cancelled."""
        return not self.finished

    def result(self) -> Any:
        """Return the value, re-raising the error; fail the test if still pending."""
        assert self.finished, "operation is still pending"
        assert not self.cancelled, "operation was cancelled"
        if self.error is not None:
            raise self.error
        return self.value


def spawn(tg: anyio.abc.TaskGroup, fn: Callable[..., Awaitable[Any]], *args: Any) -> Op:
    """Start ``fn(*args)`` in ``tg`` under its own cancel scope and return its Op."""
    op = Op()

    async def run() -> None:
        with op.scope:
            try:
                op.value = await fn(*args)
                op.returned = True
            except Exception as exc:
                op.error = exc
        op.cancelled = op.scope.cancelled_caught
        op.finished = True

    tg.start_soon(run)
    return op


async def settle() -> None:
    """Let every other task run until all of them are blocked.

    A few plain checkpoints first let freshly started or woken tasks park, so that
    ``wait_all_tasks_blocked`` (which backs off for 0.1 s on asyncio whenever a task is
    still runnable) usually returns at once; it remains the actual guarantee.
    """
    for _ in range(4):
        await anyio.lowlevel.checkpoint()
    await anyio.wait_all_tasks_blocked()


async def poll(predicate: Callable[[], bool], *, limit_s: float = 20.0) -> None:
    """Sleep in small steps until ``predicate()`` holds; fail after ``limit_s`` seconds.

    For conditions that threads set, which ``wait_all_tasks_blocked`` cannot see.
    """
    with anyio.fail_after(limit_s):
        while not predicate():  # noqa: ASYNC110 - threads cannot set an anyio.Event
            await anyio.sleep(0.001)


async def raised(body: Callable[[], Awaitable[object]]) -> Exception:
    """Run ``body()`` and return the exception it raised; fail if it returned."""
    try:
        await body()
    except Exception as exc:
        return exc
    pytest.fail(f"{body.__qualname__} raised nothing")


async def blocked_task(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """Start ``coro`` as an asyncio task and return it once it is blocked (for tests of
    native asyncio cancellation: ``task.cancel()``)."""
    task = asyncio.ensure_future(coro)
    await anyio.wait_all_tasks_blocked()
    assert not task.done()
    return task


async def task_outcome(task: asyncio.Task[Any]) -> str:
    """Wait for an asyncio ``task`` and report 'cancelled', 'timeout' or 'returned'."""
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise
        return "cancelled"
    except TimeoutError:
        return "timeout"
    return "returned"


class Flag:
    """A waker for engine property tests (an engine's steps driven directly): it records
    when it is set, and counts the times it was set with ``driver.engine.lock`` held in
    ``driver.set_under_lock`` (a thread's step must send its wake-ups after the lock)."""

    __slots__ = ("driver", "fired")

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.fired = False

    def set(self) -> None:
        self.fired = True
        if self.driver.engine.lock.locked():
            self.driver.set_under_lock += 1


def engine_step(driver: Any, fn: Callable[[], Any], thread: bool) -> Any:
    """``fn()``, one step of ``driver.engine``, as the event loop takes it or (``thread``)
    as a thread does (``thread_step``), which must set no ``Flag`` under the lock."""
    before = driver.set_under_lock
    try:
        return thread_step(fn) if thread else fn()
    finally:
        if thread:
            assert driver.set_under_lock == before, "a thread's step woke under the lock"


# --------------------------------------------------------------------------------------
# Queues and batches
# --------------------------------------------------------------------------------------


def int_queue(capacity: int = 10, name: str = "q") -> aqueue.FIFOQueue[Any]:
    """A FIFOQueue of int64 scalars."""
    return aqueue.FIFOQueue(capacity, np.int64, (), name=name)


def ints(batch: object) -> list[int]:
    """A batch (or any array-like of numbers) as a list of Python ints."""
    return [int(v) for v in np.asarray(batch)]


# --------------------------------------------------------------------------------------
# Queue kinds for contract-style tests
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One queue class configured with one element *form*, each element carrying an int.

    Forms (``form``), chosen so that every storage kind is exercised:

    - ``scalar``: one int64 scalar component (ring, pool, or padding ring);
    - ``priority``: ``(priority, value)`` with priority == value (heap), so ascending
      values come out in FIFO order;
    - ``named``: ``{"v": int64, "x": float32[2] = [v, -v]}`` (a two-component ring);
    - ``ragged``: ``(v, x)`` with ``x`` an int64 vector of ``v % 3`` copies of ``v``,
      padded with zeros in batches (PaddingFIFOQueue's padded tuple deque);
    - ``object``: ``(v, ("tag", v))``, the second component a Python object (a pool
      with an object component);
    - ``pyobj``: the Python object ``("tag", v)`` itself, one object component (a ring
      of object references).

    ``value``/``values`` check the form of what comes back and return the ints.
    """

    label: str
    factory: Callable[[int, str], Any]
    ordered: bool
    """Dequeue order equals enqueue order (for ascending values)."""
    form: str = "scalar"

    @property
    def priority(self) -> bool:
        """Elements are (priority, value) pairs."""
        return self.form == "priority"

    def make(self, capacity: int, name: str = "q") -> Any:
        """Build an empty queue."""
        return self.factory(capacity, name)

    def elem(self, v: int) -> Any:
        """The element form of value ``v``."""
        if self.form == "priority":
            return (v, v)
        if self.form == "named":
            return {"v": v, "x": np.array([v, -v], dtype=np.float32)}
        if self.form == "ragged":
            return (v, np.full(v % 3, v, dtype=np.int64))
        if self.form == "object":
            return (v, ("tag", v))
        if self.form == "pyobj":
            return ("tag", v)
        return v

    def batch(self, vs: list[int] | range) -> Any:
        """The batch form of values ``vs``."""
        arr = np.asarray(list(vs), dtype=np.int64)
        if self.form == "priority":
            return (arr.copy(), arr)
        if self.form == "named":
            return {"v": arr, "x": np.stack([arr, -arr], axis=1).astype(np.float32)}
        if self.form == "ragged":
            width = max((v % 3 for v in arr), default=0)
            x = np.zeros((len(arr), width), dtype=np.int64)
            for j, v in enumerate(arr):
                x[j, : v % 3] = v
            return (arr, x)
        if self.form in ("object", "pyobj"):
            objs = np.empty(len(arr), dtype=object)
            for j, v in enumerate(arr):
                objs[j] = ("tag", int(v))
            return (arr, objs) if self.form == "object" else objs
        return arr

    def value(self, element: Any) -> int:
        """The value of a dequeued element (checking its form)."""
        if self.form == "pyobj":
            assert isinstance(element, tuple)
            assert element[0] == "tag"
            return int(element[1])
        if self.form == "named":
            assert isinstance(element, dict)
            assert set(element) == {"v", "x"}
            v = int(element["v"])
            assert element["x"].tolist() == [v, -v]
            return v
        if self.form in ("priority", "ragged", "object"):
            assert isinstance(element, tuple)
            assert len(element) == 2
            p, x = element
            if self.form == "priority":
                assert int(p) == int(x)
                return int(x)
            v = int(p)
            if self.form == "ragged":
                _check_ragged_row(np.asarray(x), v)
            else:
                assert x == ("tag", v)
            return v
        assert np.ndim(element) == 0
        return int(element)

    def values(self, batch: Any, n: int | None = None) -> list[int]:
        """The values of a dequeued batch (checking its form and length ``n``)."""
        if self.form == "pyobj":
            assert isinstance(batch, np.ndarray)
            assert batch.dtype == object
            assert batch.ndim == 1
            out = [self.value(e) for e in batch]
        elif self.form == "named":
            assert isinstance(batch, dict)
            x = batch["v"]
            assert batch["x"].shape == (len(x), 2)
            assert batch["x"].tolist() == [[float(v), float(-v)] for v in x]
            out = [int(v) for v in x]
        elif self.form == "scalar":
            x = batch
            assert isinstance(x, np.ndarray)
            assert x.dtype == np.int64
            assert x.ndim == 1
            out = [int(v) for v in x]
        else:
            assert isinstance(batch, tuple)
            assert len(batch) == 2
            p, x = batch
            assert isinstance(p, np.ndarray)
            assert p.dtype == np.int64
            assert p.ndim == 1
            if self.form == "priority":
                assert p.tolist() == x.tolist()
            elif self.form == "ragged":
                assert x.ndim == 2
                for v, row in zip(p, x):
                    _check_ragged_row(row, int(v))
            else:
                assert [tuple(o) for o in x] == [("tag", int(v)) for v in p]
            out = [int(v) for v in p]
        if n is not None:
            assert len(out) == n
        return out

    def check(self, got: list[int], want: list[int] | range) -> None:
        """Assert ``got`` matches ``want`` (exactly, or as a multiset if unordered)."""
        if self.ordered:
            assert got == list(want)
        else:
            assert sorted(got) == sorted(want)


def _check_ragged_row(x: np.ndarray, v: int) -> None:
    """A ragged element or batch row: ``v % 3`` copies of ``v``, then padding zeros."""
    k = v % 3
    assert x.dtype == np.int64
    assert x.ndim == 1
    assert len(x) >= k
    assert x[:k].tolist() == [v] * k
    assert not x[k:].any()


KINDS = [
    Kind("fifo", lambda c, n: aqueue.FIFOQueue(c, np.int64, (), name=n), ordered=True),
    Kind(
        "shuffle",
        lambda c, n: aqueue.RandomShuffleQueue(c, 0, np.int64, (), seed=7, name=n),
        ordered=False,
    ),
    Kind("padding", lambda c, n: aqueue.PaddingFIFOQueue(c, np.int64, [()], name=n), ordered=True),
    Kind(
        "priority",
        lambda c, n: aqueue.PriorityQueue(c, np.int64, (), name=n),
        ordered=True,
        form="priority",
    ),
    Kind(
        "fifo-named",
        lambda c, n: aqueue.FIFOQueue(
            c, [np.int64, np.float32], [(), (2,)], names=["v", "x"], name=n
        ),
        ordered=True,
        form="named",
    ),
    Kind(
        "padding-ragged",
        lambda c, n: aqueue.PaddingFIFOQueue(c, [np.int64, np.int64], [(), (None,)], name=n),
        ordered=True,
        form="ragged",
    ),
    Kind(
        "shuffle-object",
        lambda c, n: aqueue.RandomShuffleQueue(c, 0, [np.int64, object], [(), ()], seed=3, name=n),
        ordered=False,
        form="object",
    ),
    Kind(
        "fifo-pyobj",
        lambda c, n: aqueue.FIFOQueue(c, object, (), name=n),
        ordered=True,
        form="pyobj",
    ),
]


def drain_nowait(q: Any, kind: Kind) -> list[int]:
    """Take every element that ``dequeue_nowait`` gives now, in order."""
    out: list[int] = []
    while True:
        try:
            out.append(kind.value(q.dequeue_nowait()))
        except (aqueue.QueueEmpty, aqueue.OutOfRangeError):
            return out


# --------------------------------------------------------------------------------------
# Storage elements (the storages driven directly, without a queue)
# --------------------------------------------------------------------------------------


class Token:
    """A Python object that a weakref can watch."""

    def __init__(self, v: int) -> None:
        self.v = v

    def __repr__(self) -> str:
        return f"Token({self.v})"


def alive(refs: list[weakref.ref[Token]]) -> list[int]:
    """The indices of the tokens still referenced somewhere (after a collection)."""
    gc.collect()
    return [j for j, r in enumerate(refs) if r() is not None]


def int_batch(lo: int, hi: int) -> tuple[Any, ...]:
    """Batch components holding the ints ``lo .. hi - 1`` (one int64 component)."""
    return (np.arange(lo, hi, dtype=np.int64),)


def multi_batch(vs: list[int] | range) -> tuple[Any, ...]:
    """Batch components of (int64 v, float32[2] = [v, -v], object ("tag", v)) elements
    for values ``vs``."""
    a = np.asarray(list(vs), dtype=np.int64)
    objs = np.empty(len(a), dtype=object)
    for j, v in enumerate(a):
        objs[j] = ("tag", int(v))
    return (a, np.stack([a, -a], axis=1).astype(np.float32), objs)


def multi_values(comps: tuple[Any, ...]) -> list[int]:
    """The values of a ``multi_batch``-form batch, checking every component's dtype and
    that every row's components agree."""
    a, x, objs = comps
    assert a.dtype == np.int64
    assert x.dtype == np.float32
    assert objs.dtype == object
    assert x.shape == (len(a), 2)
    assert x.tolist() == [[float(v), float(-v)] for v in a]
    assert list(objs) == [("tag", int(v)) for v in a]
    return [int(v) for v in a]


# --------------------------------------------------------------------------------------
# Pipelines, monitors and logs
# --------------------------------------------------------------------------------------


async def collect(pipe: aqueue.Pipeline[Any], *, limit_s: float = 60.0) -> list[Any]:
    """Run ``pipe`` to its end and return its items; fail after ``limit_s`` seconds."""
    with anyio.fail_after(limit_s):
        async with pipe.open() as items:
            return [x async for x in items]


def notes(exc: BaseException) -> str:
    """All the notes of ``exc``, one a line."""
    return "\n".join(getattr(exc, "__notes__", ()))


def stage_statistics(name: str, **figures: Any) -> aqueue.StageStatistics:
    """Made-up statistics of stage ``name``: the given ``figures``, every other one zero
    (one worker, no waits); for the rules that read them (bottleneck, Monitor rates)."""
    zero: dict[str, Any] = {
        f.name: 0 if f.type in (int, "int") else 0.0
        for f in dataclasses.fields(aqueue.StageStatistics)
        if f.name != "name" and f.type in (int, "int", float, "float")
    }
    zero["concurrency"] = 1
    unknown = set(figures) - {f.name for f in dataclasses.fields(aqueue.StageStatistics)}
    assert not unknown, f"StageStatistics has no {sorted(unknown)}"
    return aqueue.StageStatistics(name=name, **{**zero, **figures})


async def wait_samples(seen: list[aqueue.MonitorReading], more: int) -> None:
    """Let a monitor whose callback appends to ``seen`` take ``more`` samples beyond
    those seen so far."""
    target = len(seen) + more
    await poll(lambda: len(seen) >= target)


class _Messages(logging.Handler):
    def __init__(self, messages: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def aqueue_warnings() -> Iterator[list[str]]:
    """Collect the messages (WARNING and above) of the "aqueue" logger while the block
    runs, from any thread; the list stays readable after the block."""
    messages: list[str] = []
    handler = _Messages(messages)
    logger = logging.getLogger("aqueue")
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


# --------------------------------------------------------------------------------------
# Example scripts
# --------------------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(
    name: str, *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<name>.py`` with ``args`` as a user would; its output as text."""
    return subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def example_main(name: str) -> Any:
    """The ``main(argv)`` function of examples/<name>.py, loaded without running it."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=f"example_{name}")["main"]


def one_line(text: str) -> str:
    """The output with its wrapped lines joined, so claims can be matched across breaks."""
    return " ".join(text.split())
