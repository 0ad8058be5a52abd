"""Helpers of the replay-table tests (``from replay_support import ...``)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

import aqueue

MakeTable = Callable[..., Awaitable[Any]]
"""The type of the ``make_table`` fixture (``conftest.py``)."""

SHAPE = (3,)


def shared_tables(server: Any, **defaults: Any) -> MakeTable:
    """``make_table`` over an ``aqueue.redis`` server: each table gets a fresh name; a
    table a test names (it reads the name in messages) replaces one of that name;
    ``defaults`` are options every table gets unless the test gives them (``shards``)."""

    async def make(
        max_size: int, dtypes: Any, shapes: Any = None, names: Any = None, **options: Any
    ) -> Any:
        options = {**defaults, **options}
        name = options.pop("name", None)
        if name is None:
            name = f"t-{uuid.uuid4().hex[:12]}"
        else:  # a name a test reads in messages: the one of an earlier test goes
            await server.delete_table(name)
        return await server.replay_table(name, max_size, dtypes, shapes, names, **options)

    return make


def item(v: int) -> np.ndarray:
    """An item carrying ``v``: float32[3] = [v, v + 0.5, -v]."""
    return np.array([v, v + 0.5, -v], dtype=np.float32)


def items(vs: Any) -> np.ndarray:
    """A batch of ``item(v)`` for each ``v``."""
    arr = np.asarray(list(vs), dtype=np.float32)
    return np.stack([arr, arr + 0.5, -arr], axis=1) if len(arr) else np.empty((0, 3), np.float32)


def values(batch: np.ndarray) -> list[int]:
    """The ``v`` of each item of a sampled batch (checking the payload is intact)."""
    assert batch.dtype == np.float32
    assert batch.shape[1:] == SHAPE
    v = batch[:, 0]
    assert np.array_equal(batch[:, 1], v + 0.5)
    assert np.array_equal(batch[:, 2], -v)
    return [int(x) for x in v]


async def counters(table: Any) -> tuple[int, ...]:
    """What every backend reports that a cancelled or refused operation must leave as
    it was: size, inserts, samples, deletes, evictions."""
    st = await table.statistics()
    return (st.size, st.inserts, st.samples, st.deletes, st.evictions)


def contents(table: aqueue.ReplayTable[Any]) -> tuple[Any, ...]:
    """An in-process table's whole state, comparable (everything a snapshot holds but
    the wait times)."""
    s = table.snapshot()
    st = s.statistics
    return (
        s.keys.tolist(),
        s.priorities.tolist(),
        s.times_sampled.tolist(),
        [c.tobytes() for c in s.items],
        s.next_key,
        (st.size, st.inserts, st.samples, st.deletes, st.evictions, st.closed),
        repr(s.rng_state),
        {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in s.layout.items()},
    )


async def until(table: Any, predicate: Any, *, limit_s: float = 10.0) -> None:
    """Sleep in small steps until ``predicate(await table.statistics())`` holds (threads
    are invisible to ``wait_all_tasks_blocked``); fail after ``limit_s`` seconds."""
    import anyio

    with anyio.fail_after(limit_s):
        while not predicate(await table.statistics()):  # noqa: ASYNC110 - threads
            await anyio.sleep(0.001)


async def waiting(table: Any, *, inserts: int = 0, samples: int = 0) -> None:
    """Until the table counts exactly this many waiting inserts and samples (a waiter
    of a shared table registers on the server, where ``settle()`` cannot see it)."""
    await until(table, lambda st: (st.inserts_waiting, st.samples_waiting) == (inserts, samples))


async def finished(op: Any) -> None:
    """Until background operation ``op`` (``support.spawn``) has ended."""
    from support import poll

    await poll(lambda: op.finished)


async def settled(table: Any, op: Any) -> None:
    """Until ``op`` (an insert or a sample started on an idle table) has either ended or
    registered as waiting."""
    import anyio

    with anyio.fail_after(10):
        while not op.finished:
            st = await table.statistics()
            if st.inserts_waiting + st.samples_waiting:
                return
            await anyio.sleep(0.001)
