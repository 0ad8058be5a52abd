"""Names: wherever aqueue takes a ``name=`` in process, an empty one is refused at the
call with a clear error (messages and reports name the object by it), as is one that
is not a str; None gives the default, named in the message."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aqueue


def _queue_runner(name: Any) -> Any:
    return aqueue.QueueRunner(aqueue.FIFOQueue(2, np.int64, ()), [range(3)], name=name)


MAKERS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "FIFOQueue": (lambda name: aqueue.FIFOQueue(2, np.int64, (), name=name), "fifo_queue"),
    "PaddingFIFOQueue": (
        lambda name: aqueue.PaddingFIFOQueue(2, np.int64, [()], name=name),
        "padding_fifo_queue",
    ),
    "RandomShuffleQueue": (
        lambda name: aqueue.RandomShuffleQueue(2, 0, np.int64, (), name=name),
        "random_shuffle_queue",
    ),
    "PriorityQueue": (lambda name: aqueue.PriorityQueue(2, np.int64, (), name=name), None),
    "ReplayTable": (lambda name: aqueue.ReplayTable(2, np.float32, (), name=name), None),
    "TrajectoryTable": (
        lambda name: aqueue.TrajectoryTable(4, np.float32, (), length=2, name=name),
        "trajectory_table",
    ),
    "string_input_producer": (
        lambda name: aqueue.string_input_producer(["a"], name=name),
        "string_input_producer",
    ),
    "batch": (lambda name: aqueue.batch([range(4)], 2, name=name), "batch"),
    "QueueRunner": (_queue_runner, None),
    "Pipeline": (lambda name: aqueue.Pipeline(range(3), name=name), None),
    "Pipeline.map": (lambda name: aqueue.Pipeline(range(3)).map(abs, name=name), None),
}


@pytest.mark.parametrize("what", list(MAKERS))
def test_an_empty_name_is_refused(what: str) -> None:
    """``name=""`` raises ElementSpecError saying the name must not be empty (and what
    None would give); nothing is built."""
    build, default = MAKERS[what]

    def make(name: Any) -> Any:  # (in a context of its own: runners registered stay there)
        return contextvars.copy_context().run(build, name)

    with pytest.raises(aqueue.ElementSpecError, match="name must not be empty") as info:
        make("")
    if default is not None:
        assert f"pass None for the default, {default!r}" in str(info.value)
    with pytest.raises(aqueue.ElementSpecError, match="name must be a str, got int"):
        make(7)
    assert make("mine") is not None


@pytest.mark.anyio
async def test_an_empty_task_name_is_refused() -> None:
    """``coord.start_soon(fn, name="")`` is refused too (a supervised task is named in
    the coordinator's errors)."""

    async def work() -> None:
        pass

    async with aqueue.Coordinator() as coord:
        with pytest.raises(aqueue.ElementSpecError, match="name must not be empty"):
            coord.start_soon(work, name="")
        coord.start_soon(work, name="work")
