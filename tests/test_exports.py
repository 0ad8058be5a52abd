"""The public surface: one door (``aqueue``), a sorted and complete ``__all__``, public
``__module__`` names, and the exception tree."""

from __future__ import annotations
import __future__

import asyncio
import inspect
import pickle
import pydoc
import types
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

import aqueue

CORE_NAMES = {
    "BlockingQueue",
    "CheckpointError",
    "ElementSpecError",
    "FIFOQueue",
    "OutOfRangeError",
    "PaddingFIFOQueue",
    "PriorityQueue",
    "QueueClosedError",
    "QueueEmpty",
    "QueueError",
    "QueueFull",
    "QueueSnapshot",
    "QueueStatistics",
    "RandomShuffleQueue",
}

MONITOR_NAMES = {
    "Monitor",
    "MonitorHistory",
    "MonitorReading",
    "QueueHistory",
    "QueueReading",
    "StageHistory",
    "StageReading",
}


def test_all_is_sorted_and_unique() -> None:
    """__all__ is sorted and has no duplicates."""
    assert list(aqueue.__all__) == sorted(aqueue.__all__)
    assert len(set(aqueue.__all__)) == len(aqueue.__all__)


def test_all_is_complete() -> None:
    """Every public, non-module name of the package is in __all__, and every name in
    __all__ exists."""
    public = {
        name
        for name, value in vars(aqueue).items()
        if not name.startswith("_")
        and not isinstance(value, (types.ModuleType, __future__._Feature))
    }
    assert public == set(aqueue.__all__)
    assert set(aqueue.__all__) >= CORE_NAMES | MONITOR_NAMES


@pytest.mark.parametrize("name", sorted(aqueue.__all__))
def test_public_objects_report_the_public_module(name: str) -> None:
    """Every export says it lives in ``aqueue`` (not in a private module)."""
    assert getattr(aqueue, name).__module__ == "aqueue"


def test_package_ships_py_typed() -> None:
    """The package is marked as typed."""
    assert (Path(aqueue.__file__).parent / "py.typed").is_file()


@pytest.mark.parametrize(
    ("cls", "bases"),
    [
        (aqueue.QueueError, (Exception,)),
        (aqueue.QueueClosedError, (aqueue.QueueError, anyio.ClosedResourceError)),
        (aqueue.OutOfRangeError, (aqueue.QueueError, anyio.EndOfStream)),
        (aqueue.QueueFull, (aqueue.QueueError, anyio.WouldBlock, asyncio.QueueFull)),
        (aqueue.QueueEmpty, (aqueue.QueueError, anyio.WouldBlock, asyncio.QueueEmpty)),
        (aqueue.ElementSpecError, (aqueue.QueueError, ValueError)),
        (aqueue.CheckpointError, (aqueue.QueueError, ValueError)),
        (aqueue.WorkerProcessError, (aqueue.QueueError, anyio.BrokenResourceError)),
    ],
)
def test_exception_tree(cls: type[BaseException], bases: tuple[type[BaseException], ...]) -> None:
    """Each error derives from the package base and the matching anyio/asyncio bases."""
    for base in bases:
        assert issubclass(cls, base)


def test_closed_and_out_of_range_are_distinct() -> None:
    """'closed for enqueue', 'exhausted' and 'would block' are different types."""
    kinds = [aqueue.QueueClosedError, aqueue.OutOfRangeError, aqueue.QueueFull, aqueue.QueueEmpty]
    for a in kinds:
        for b in kinds:
            assert issubclass(a, b) == (a is b)


def test_out_of_range_message_and_pickle() -> None:
    """OutOfRangeError carries TF's message and survives pickling."""
    err = aqueue.OutOfRangeError(queue_name="q", requested=3, size=1)
    msg = "queue 'q' is closed and has insufficient elements (requested 3, current size 1)"
    assert str(err) == msg
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is aqueue.OutOfRangeError
    assert str(clone) == msg
    assert (clone.queue_name, clone.requested, clone.size) == ("q", 3, 1)


def test_worker_process_error_keeps_its_fields_through_pickle() -> None:
    """WorkerProcessError names the stage, pid and exit code, also after pickling."""
    err = aqueue.WorkerProcessError("gone", stage="1 'map(f)'", pid=42, exitcode=-9)
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is aqueue.WorkerProcessError
    assert (str(clone), clone.stage, clone.pid, clone.exitcode) == ("gone", "1 'map(f)'", 42, -9)


@pytest.mark.parametrize(
    "cls",
    [
        aqueue.QueueError,
        aqueue.QueueClosedError,
        aqueue.OutOfRangeError,
        aqueue.QueueFull,
        aqueue.QueueEmpty,
        aqueue.ElementSpecError,
        aqueue.CheckpointError,
        aqueue.WorkerProcessError,
    ],
)
def test_every_public_exception_is_built_from_a_message_alone(cls: type[Exception]) -> None:
    """``raise aqueue.OutOfRangeError("done")`` and its siblings work, as in TF, and
    survive pickling."""
    err = cls("done")
    assert str(err) == "done"
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is cls
    assert str(clone) == "done"


@pytest.mark.anyio
async def test_a_producer_raising_out_of_range_ends_cleanly() -> None:
    """A producer that signals the end of its data with OutOfRangeError("...") ends its
    runner cleanly: the queue closes after draining and nothing is raised."""
    q = aqueue.FIFOQueue(8, "int64", ())
    items = iter(range(3))

    async def produce() -> int:
        for x in items:
            return x
        raise aqueue.OutOfRangeError("no more items")

    async with aqueue.Coordinator() as coord:
        coord.start(aqueue.QueueRunner(q, [produce]))
        got = [int(x) async for x in q]
    assert got == [0, 1, 2]


@pytest.mark.parametrize(
    "cls",
    [aqueue.FIFOQueue, aqueue.RandomShuffleQueue, aqueue.PaddingFIFOQueue, aqueue.PriorityQueue],
)
def test_help_shows_what_the_constructor_takes(cls: type[Any]) -> None:
    """``help(aqueue.FIFOQueue)`` shows the types ``dtypes``, ``shapes`` and ``names``
    take, not ``Any``; and the producer-accounting methods it lists say who they are
    for (runners, producer processes, the Coordinator)."""
    params = inspect.signature(cls).parameters
    for arg in ("dtypes", "shapes", "names"):
        if arg in params:
            annotation = str(params[arg].annotation)
            assert "Any" not in annotation, (cls.__name__, arg, annotation)
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    assert "dtypes: 'DTypeLike | Sequence[DTypeLike]'" in text
    for method, audience in (
        ("register_producer", "runners and producer processes"),
        ("producer_done", "register_producer"),
        ("release_producers", "Coordinator"),
    ):
        assert audience in " ".join((getattr(cls, method).__doc__ or "").split()), method


def test_statistics_is_a_frozen_dataclass_with_documented_fields() -> None:
    """QueueStatistics has the documented fields."""
    fields = set(aqueue.QueueStatistics.__dataclass_fields__)
    assert fields == {
        "size",
        "capacity",
        "closed",
        "enqueued_total",
        "dequeued_total",
        "peak_size",
        "tasks_waiting_enqueue",
        "tasks_waiting_dequeue",
        "time_full_s",
        "time_empty_s",
    }
    assert aqueue.QueueStatistics.__dataclass_params__.frozen  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_statistics_are_awaitable_on_every_backend() -> None:
    """``await q.statistics()`` works on an in-process queue as on a shared one: the
    record the call returns is awaitable and gives itself back, without suspending."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    q.enqueue_nowait(1)
    record = q.statistics()
    assert await record is record
    assert (await q.statistics()).size == 1
    assert isinstance(q, aqueue.AsyncQueue)
    assert "statistics" in dir(aqueue.AsyncQueue)


def test_testing_subpackage_exports() -> None:
    """``aqueue.testing`` has its own sorted, complete ``__all__``, reported as
    ``aqueue.testing``; importing it adds nothing to ``aqueue.__all__``."""
    import aqueue.testing

    names = aqueue.testing.__all__
    assert list(names) == sorted(set(names))
    public = {
        name
        for name, value in vars(aqueue.testing).items()
        if not name.startswith("_")
        and not isinstance(value, (types.ModuleType, __future__._Feature))
    }
    assert public == set(names) == {"StallError", "StallGuard", "drain", "stall_guard"}
    for name in names:
        assert getattr(aqueue.testing, name).__module__ == "aqueue.testing"
    assert issubclass(aqueue.testing.StallError, AssertionError)
    assert "testing" not in aqueue.__all__
