"""The length of a waiting operation's path through aqueue (structural, not timing).

An operation that has to wait runs: its checks, its engine's first step (which parks a
request), the kernel's wait, and a second step that completes it. Each part it visits
costs a call and a file to read. These tests trace, with ``sys.setprofile``, the calls
into aqueue that one consumer task makes during its *second* waiting call (steady
state: the first call warmed every cache up), and bound how many distinct functions
and files that path visits, so a change that lengthens it fails here:

- a waiting ``dequeue_many`` on a RandomShuffleQueue: at most 6 files, 20 functions;
- a waiting ``sample`` on a prioritized ReplayTable: at most 9 files, 26 functions.

Only the consumer task's calls count (the producer that wakes it runs in the same
thread, and is filtered out by task); comprehensions count as the functions they are.
Each trace runs in a fresh interpreter: what earlier tests leave behind (a runner
registered and never started keeps the slow-wait watch on, by design) is not part of
the path.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

import numpy as np

import aqueue

ROOT = os.path.dirname(aqueue.__file__)


def consumer_path(
    consume: Callable[[], Awaitable[Any]], produce: Callable[[], Awaitable[Any]]
) -> list[tuple[str, str]]:
    """The (file, function) of each call into aqueue the consumer task makes during its
    second ``consume()``, each time it waits until ``produce()`` runs, in call order."""
    calls: list[tuple[str, str]] = []
    tracing = [False]

    async def consumer() -> None:
        await consume()
        tracing[0] = True
        await consume()
        tracing[0] = False

    async def main() -> None:
        task = asyncio.ensure_future(consumer())

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event != "call" or not tracing[0]:
                return
            path = frame.f_code.co_filename
            if path.startswith(ROOT) and asyncio.current_task() is task:
                code = frame.f_code  # co_qualname is new in 3.11
                name = getattr(code, "co_qualname", code.co_name)
                calls.append((os.path.relpath(path, ROOT), name))

        sys.setprofile(profile)
        try:
            for _ in range(2):
                for _ in range(5):  # the consumer parks
                    await asyncio.sleep(0)
                assert not task.done()
                await produce()
            await asyncio.wait_for(task, 10)
        finally:
            sys.setprofile(None)

    asyncio.run(main())
    return calls


def traced_in_a_fresh_interpreter(which: str) -> list[tuple[str, str]]:
    """``which()`` of this module (a function returning ``consumer_path``'s calls), run
    in a new interpreter."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import test_paths; "
        f"print(json.dumps(test_paths.{which}()))"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run(
        [sys.executable, "-c", code, here], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [tuple(c) for c in json.loads(done.stdout.strip().splitlines()[-1])]


def check(calls: list[tuple[str, str]], files: int, functions: int) -> None:
    distinct = list(dict.fromkeys(calls))
    visited = list(dict.fromkeys(f for f, _ in calls))
    described = "\n".join(f"  {f}: {name}" for f, name in distinct)
    assert len(visited) <= files, f"{len(visited)} files: {visited}"
    assert len(distinct) <= functions, f"{len(distinct)} functions:\n{described}"
    assert len(distinct) >= 8, described  # (the trace saw the path at all)


def dequeue_many_path() -> list[tuple[str, str]]:
    """RandomShuffleQueue(100, 10, float32, (4,)).dequeue_many(32), waiting for 32
    enqueued rows."""
    q = aqueue.RandomShuffleQueue(100, 10, np.float32, (4,), seed=0)
    rows = iter([50, 32])

    async def produce() -> None:
        q.enqueue_many_nowait(np.zeros((next(rows), 4), np.float32))

    return consumer_path(lambda: q.dequeue_many(32), produce)


def test_a_waiting_dequeue_many_is_a_short_path() -> None:
    """A waiting RandomShuffleQueue dequeue_many: at most 6 files and 20 distinct
    functions of aqueue."""
    calls = traced_in_a_fresh_interpreter("dequeue_many_path")
    assert any(name == "wait_task" for _, name in calls)  # it waited
    check(calls, files=6, functions=20)


def sample_path() -> list[tuple[str, str]]:
    """A prioritized ReplayTable's sample(8), waiting for the limiter to allow it (8
    more inserts)."""
    table = aqueue.ReplayTable(
        1000,
        np.float32,
        (4,),
        sampler=aqueue.Prioritized(0.6),
        rate_limiter=aqueue.RateLimiter(1.0, 1, 0.0, float("inf")),
        seed=0,
    )

    async def produce() -> None:
        await table.insert_many(np.zeros((8, 4), np.float32))

    return consumer_path(lambda: table.sample(8), produce)


def test_a_waiting_prioritized_sample_is_a_short_path() -> None:
    """A waiting prioritized ReplayTable sample: at most 9 files and 26 distinct
    functions of aqueue."""
    calls = traced_in_a_fresh_interpreter("sample_path")
    assert any(name == "wait_task" for _, name in calls)  # it waited
    check(calls, files=9, functions=26)
