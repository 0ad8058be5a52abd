"""FIFOQueue quickstart: producer tasks fill a queue while a consumer awaits batches.

Two producer tasks enqueue (image, label) elements in small batches; the consumer
iterates over batches of 8 (``dequeue_many``) and, once the producers are done and the
queue is closed, gets the short remainder as a final batch (``dequeue_up_to``). Closing
the queue ends ``async for`` loops cleanly; a dequeue that can no longer be satisfied
raises OutOfRangeError, as in TensorFlow.

Run: python examples/quickstart.py [--elements 100] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse

import anyio
import numpy as np

import aqueue


async def main(elements: int) -> int:
    queue = aqueue.FIFOQueue(
        32, dtypes=[np.float32, np.int64], shapes=[(4, 4), ()], name="examples"
    )

    async def producer(start: int, stop: int) -> None:
        for i in range(start, stop, 3):
            k = min(3, stop - i)
            offsets = np.arange(k, dtype=np.float32)[:, None, None]
            images = np.full((k, 4, 4), i, dtype=np.float32) + offsets
            labels = np.arange(i, i + k)
            await queue.enqueue_many((images, labels))  # waits while the queue is full

    async def produce_then_close() -> None:
        half = elements // 2
        async with anyio.create_task_group() as producers:
            producers.start_soon(producer, 0, half)
            producers.start_soon(producer, half, elements)
        queue.close()  # no more input: the consumer drains what is left, then stops

    seen: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce_then_close)
        # Full batches of 8 while the queue is open; once it is closed, one short
        # final batch with the remainder, then the loop ends.
        async for images, labels in queue.batches(8, allow_smaller_final_batch=True):
            assert images.shape[1:] == (4, 4)
            assert images.shape[0] == labels.shape[0]
            seen.extend(labels.tolist())

    stats = queue.statistics()
    assert sorted(seen) == list(range(elements)), "every element exactly once"
    print(f"consumed {len(seen)} elements; {stats}")
    return len(seen)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=100)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    anyio.run(main, args.elements, backend=args.backend)
