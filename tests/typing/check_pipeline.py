"""Checked by mypy (``mypy aqueue tests/typing``), never run: a Pipeline's item types.

``map`` carries its function's return type to the next stage (awaited for an async
function), ``batch`` stacks items into arrays (per component for tuples and dicts), and
``open()`` yields typed items. The ``# type: ignore[...]`` lines must be errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import aqueue

Array = npt.NDArray[Any]


def load(path: str) -> bytes:
    return path.encode()


async def decode(raw: bytes) -> tuple[Array, int]:
    return np.frombuffer(raw, np.uint8), len(raw)


async def typed() -> None:
    paths = aqueue.Pipeline(["a", "b"])
    assert_type(paths, aqueue.Pipeline[str])
    raw = paths.map(load, concurrency=4)
    assert_type(raw, aqueue.Pipeline[bytes])
    pairs = raw.map(decode).shuffle(100, 10, seed=0).prefetch(2)
    assert_type(pairs, aqueue.Pipeline[tuple[Array, int]])
    batches = pairs.batch(8)
    assert_type(batches, aqueue.Pipeline[tuple[Array, ...]])
    assert_type(batches.open(), aqueue.OpenPipeline[tuple[Array, ...]])
    async with batches.open() as items:
        assert_type(items, aqueue.PipelineItems[tuple[Array, ...]])
        assert_type(await items.get(), tuple[Array, ...])
        async for b in items:
            assert_type(b, tuple[Array, ...])
        assert_type(await items.checkpoint(), aqueue.PipelineState)
    numbers = aqueue.Pipeline(range(10)).filter(lambda x: x % 2 == 0).batch(4)
    assert_type(numbers, aqueue.Pipeline[Array])
    records = aqueue.Pipeline([{"x": 1.0}]).batch(2)
    assert_type(records, aqueue.Pipeline[dict[str, Array]])
    q = aqueue.FIFOQueue(8, np.float32, (3,))
    assert_type(aqueue.Pipeline(q), aqueue.Pipeline[Array])
    tuned = paths.map(load, concurrency="auto", capacity="auto").prefetch("auto")
    assert_type(tuned, aqueue.Pipeline[bytes])
    ranged = paths.filter(bool, capacity=aqueue.Auto(max=64)).prefetch(aqueue.Auto(min=4))
    assert_type(ranged, aqueue.Pipeline[str])


async def rejected() -> None:
    words = aqueue.Pipeline(["a", "b"])
    words.map(lambda n: n + 1)  # type: ignore[operator]
    words.prefetch("big")  # type: ignore[arg-type]
    async with words.open() as items:
        n: int = await items.get()  # type: ignore[assignment]
        del n


def example() -> tuple[Array, int]:
    return np.zeros(3), 1


async def record() -> dict[str, float]:
    return {"x": 1.0}


async def tf_batches() -> None:
    # TF-style batching is typed like queues and pipelines: a queue's batches have its
    # element type; tuple examples give tuples of arrays, dicts dicts, others an array.
    frames = aqueue.FIFOQueue(100, np.uint8, (84, 84, 4))
    assert_type(aqueue.batch(frames, 32), aqueue.Batches[Array])
    pairs = aqueue.FIFOQueue(10, (np.float32, np.int64), ((3,), ()))
    assert_type(await aqueue.shuffle_batch(pairs, 8, 100, 10).dequeue(), tuple[Array, Array])
    assert_type(aqueue.batch(example, 8), aqueue.Batches[tuple[Array, ...]])
    assert_type(aqueue.shuffle_batch(record, 8, 100, 10), aqueue.Batches[dict[str, Array]])
    assert_type(aqueue.batch(range(10), 4), aqueue.Batches[Array])
    assert_type(aqueue.batch_join([frames, frames], 4), aqueue.Batches[Array])
    assert_type(aqueue.shuffle_batch_join([example], 4, 100, 10), aqueue.Batches[tuple[Array, ...]])
    async for b in aqueue.batch(example, 8):
        assert_type(b, tuple[Array, ...])
    n: int = await aqueue.batch(frames, 2).dequeue()  # type: ignore[assignment]
    del n
