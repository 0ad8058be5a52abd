"""``map(fn, executor="process", concurrency="auto")``, through the public API: a
process map the consumer waits on grows by whole worker processes once the consumer has
waited for a while (a spawn costs a fraction of a second), the items still arrive once
and in order (``ordered=True``), and when the pipeline closes no worker process, shared
memory name or mapping is left. Asserts on the decisions, the workers that did the work
and what is left, never on time. Both backends.
"""

from __future__ import annotations

import logging
import multiprocessing
import re

import anyio
import proc_fns
import pytest
from test_procs import assert_nothing_left

import aqueue
from aqueue import Pipeline

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

N = 2000


def _paced() -> Pipeline[tuple[int, int]]:
    auto = aqueue.Auto(start=1, max=2)  # (one worker, then two: the CPU budget aside)
    return Pipeline(range(N)).map(
        proc_fns.paced, executor="process", concurrency=auto, ordered=True
    )


async def test_a_process_map_grows_by_whole_workers_and_keeps_the_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    auto = aqueue.Auto(start=1, max=2)
    pipe = Pipeline(range(N)).map(
        proc_fns.paced, executor="process", concurrency=auto, ordered=True
    )
    got = []
    with caplog.at_level(logging.DEBUG, logger="aqueue"), anyio.fail_after(150):
        async with pipe.open() as items:
            async for x in items:
                got.append(x)
    assert [i for i, _ in got] == list(range(N))  # every item once, in order
    pids = {p for _, p in got}
    assert len(pids) == 2  # the worker added did work
    raises = [
        r.getMessage()
        for r in caplog.records
        if re.match(r"pipeline tuner: map\(paced\): 1 -> 2, ", r.getMessage())
    ]
    assert raises  # (a raise a busy machine judges "no gain" may be undone after it)
    assert re.search(
        r"^1 map\(paced\): concurrency [12] \(auto 1\.\.2, set by ", pipe.describe(), re.M
    )
    assert_nothing_left(pids)
    assert multiprocessing.active_children() == []  # (the pool's, whether they worked or not)


async def test_leaving_early_leaves_no_worker_behind() -> None:
    """The consumer leaves while the tuner may be adding a worker: every worker process
    started is ended and reaped, and no shared memory is left."""
    auto = aqueue.Auto(start=1, max=2)
    pipe = Pipeline(range(N)).map(
        proc_fns.paced, executor="process", concurrency=auto, ordered=True
    )
    got = []
    with anyio.fail_after(150):
        async with pipe.open() as items:
            async for x in items:
                got.append(x)
                if len(got) == 1100:  # (about when the second worker starts)
                    break
    assert [i for i, _ in got] == list(range(1100))
    assert_nothing_left({p for _, p in got})
    assert multiprocessing.active_children() == []


async def test_a_checkpoint_after_a_worker_was_added_resumes_exactly() -> None:
    """The drivers of added workers are counted at rest as the first ones: a checkpoint
    taken after the map grew resumes with exactly the items after it, in order."""
    pipe = _paced()
    got: list[int] = []
    pids: set[int] = set()
    with anyio.fail_after(150):
        async with pipe.open() as items:
            async for i, p in items:
                got.append(i)
                pids.add(p)
                if len(got) == 1400:
                    state = await items.checkpoint()
                    break
        assert len(pids) == 2  # (grown before the checkpoint: the added worker worked)
        async with pipe.open(state=state) as items:
            got += [i async for i, _ in items]
    assert got == list(range(N))
    assert multiprocessing.active_children() == []
