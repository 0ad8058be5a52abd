"""Checked by mypy (``mypy aqueue tests/typing``), never run: aqueue.testing's result types.

``drain`` returns a list of what its source yields, or (``stack=True``) one value of
that type: a batch has the form of an element.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import aqueue
import aqueue.testing

Array = npt.NDArray[Any]


async def drained() -> None:
    frames = aqueue.FIFOQueue(100, np.uint8, (84, 84, 4))
    assert_type(await aqueue.testing.drain(frames), list[Array])
    assert_type(await aqueue.testing.drain(frames, stack=True), Array)
    assert_type(await aqueue.testing.drain(frames.batches(8), stack=True), Array)
    pairs = aqueue.FIFOQueue(10, (np.float32, np.int64), ((3,), ()))
    assert_type(await aqueue.testing.drain(pairs, timeout=5), list[tuple[Array, Array]])
    named = aqueue.FIFOQueue(10, [np.float32, np.int64], [(3,), ()], names=["x", "y"])
    assert_type(await aqueue.testing.drain(named, stack=True), dict[str, Array])
    batches = aqueue.batch(frames, 32)
    assert_type(await aqueue.testing.drain(batches), list[Array])
    n: int = await aqueue.testing.drain(frames, stack=True)  # type: ignore[call-overload]
    del n


def guarded() -> None:
    with aqueue.testing.stall_guard(5) as guard:
        assert_type(guard, aqueue.testing.StallGuard)
    assert_type(guard.report, str | None)


async def guarded_async() -> None:
    async with aqueue.testing.stall_guard(5) as guard:
        assert_type(guard, aqueue.testing.StallGuard)
