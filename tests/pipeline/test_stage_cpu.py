"""The CPU a thread or process map's work uses, through the public API:
``StageStatistics.cpu_s`` tells a stage that computes from one that waits, and the
tuner reads it (its reasons name a thread map's CPU, which bounds it by the CPU
budget).

No test measures time: the ratios compared are far apart (hashing holds a core for
all of its call, sleeping for none of it; a loaded machine gives the hashing thread
less of a core, 26% of its work time in one suite run beside two others).
"""

from __future__ import annotations

import re

import anyio
import proc_fns
import pytest
from support import collect

import aqueue
from aqueue import Pipeline

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.mark.parametrize("executor", ["thread", "process"])
async def test_statistics_tell_a_stage_that_computes_from_one_that_waits(executor: str) -> None:
    pipe = (
        Pipeline(range(60))
        .map(proc_fns.crunch, executor=executor, concurrency=2, name="computes")
        .map(proc_fns.nap, executor=executor, concurrency=2, name="waits")
    )
    assert [s.cpu_s for s in pipe.statistics()] == [None, 0.0, 0.0]
    assert sorted(await collect(pipe)) == list(range(60))
    _, computes, waits = pipe.statistics()
    assert computes.cpu_s is not None
    assert waits.cpu_s is not None
    # (loaded, a thread waits for a core: its CPU per second of work falls)
    assert computes.cpu_s / computes.busy_s > 4 * waits.cpu_s / waits.busy_s
    assert waits.cpu_s < 0.2 * waits.busy_s


async def test_a_task_map_has_no_cpu_of_its_own() -> None:
    async def same(x: int) -> int:
        return x

    pipe = Pipeline(range(10)).map(same)
    assert sorted(await collect(pipe)) == list(range(10))
    assert pipe.statistics()[1].cpu_s is None


async def test_the_tuner_reads_a_thread_maps_cpu() -> None:
    # A map that holds a core per call, and a training step that takes 1 ms: the
    # consumer waits, so the tuner raises the map, saying why. Its reasons name the
    # stage's measured CPU ("cpu-bound", or the share of its work time on a loaded
    # machine, where a thread waits for a core); unmeasured, a thread map was
    # "latency-bound" with no figure, and the CPU budget could not bound it.
    pipe = Pipeline(range(300)).map(
        proc_fns.crunch, executor="thread", concurrency=aqueue.Auto(start=1)
    )
    got: list[int] = []
    with anyio.fail_after(90):
        async with pipe.open(autotune=aqueue.Autotune(cpu=2)) as items:
            async for x in items:
                got.append(x)
                await anyio.sleep(0.001)  # (a training step)
    assert sorted(got) == list(range(300))
    st = pipe.statistics()[1]
    raises = [d.reason for d in st.decisions if d.new > d.old]
    assert raises, st.decisions
    assert any(re.search(r"cpu-bound|CPU \d+% of its work time", r) for r in raises), raises
    assert st.cpu_s is not None
    assert st.cpu_s > 0.1 * st.busy_s
