"""Shared fixtures and helpers for the aqueue test suite.

Two runners are used side by side:

- pytest-asyncio in strict mode (``@pytest.mark.asyncio``) for asyncio-only tests,
  including native asyncio cancellation (``task.cancel()``, ``asyncio.timeout``,
  ``asyncio.wait_for``);
- anyio's pytest plugin (``@pytest.mark.anyio``) for tests that must hold on both
  asyncio and trio. The ``anyio_backend`` fixture below is pinned to both backends so a
  missing trio fails loudly instead of silently shrinking the matrix.

The helpers at the bottom are imported by the test modules (``from conftest import ...``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import aqueue


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every anyio-marked test on asyncio and on trio (module scope, like anyio's own
    fixture, so module-scoped async fixtures keep working)."""
    return str(request.param)


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


async def poll(predicate: Callable[[], bool], *, limit_s: float = 10.0) -> None:
    """Sleep in small steps until ``predicate()`` holds (for threads, which
    ``wait_all_tasks_blocked`` cannot see); fail after ``limit_s`` seconds."""
    with anyio.fail_after(limit_s):
        while not predicate():  # noqa: ASYNC110 - threads cannot set an anyio.Event
            await anyio.sleep(0.001)


# --------------------------------------------------------------------------------------
# Queue kinds for contract-style tests
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One queue class configured with a single int64 scalar component.

    Values are Python ints. For PriorityQueue the priority equals the value, so
    enqueuing ascending values gives FIFO order there too.
    """

    label: str
    factory: Callable[[int, str], Any]
    ordered: bool
    """Dequeue order equals enqueue order (for ascending values)."""
    priority: bool = False
    """Elements are (priority, value) pairs."""

    def make(self, capacity: int, name: str = "q") -> Any:
        """Build an empty queue."""
        return self.factory(capacity, name)

    def elem(self, v: int) -> Any:
        """The element form of value ``v``."""
        return (v, v) if self.priority else v

    def batch(self, vs: list[int] | range) -> Any:
        """The batch form of values ``vs``."""
        arr = np.asarray(list(vs), dtype=np.int64)
        return (arr.copy(), arr) if self.priority else arr

    def value(self, element: Any) -> int:
        """The value of a dequeued element (checking its form)."""
        if self.priority:
            assert isinstance(element, tuple)
            assert len(element) == 2
            p, x = element
            assert int(p) == int(x)
            return int(x)
        assert np.ndim(element) == 0
        return int(element)

    def values(self, batch: Any, n: int | None = None) -> list[int]:
        """The values of a dequeued batch (checking its form and length ``n``)."""
        if self.priority:
            assert isinstance(batch, tuple)
            assert len(batch) == 2
            p, x = batch
            assert isinstance(x, np.ndarray)
            assert p.tolist() == x.tolist()
        else:
            x = batch
        assert isinstance(x, np.ndarray)
        assert x.dtype == np.int64
        assert x.ndim == 1
        if n is not None:
            assert x.shape == (n,)
        return [int(v) for v in x]

    def check(self, got: list[int], want: list[int] | range) -> None:
        """Assert ``got`` matches ``want`` (exactly, or as a multiset if unordered)."""
        if self.ordered:
            assert got == list(want)
        else:
            assert sorted(got) == sorted(want)


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
        priority=True,
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
