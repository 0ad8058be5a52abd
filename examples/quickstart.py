"""Quickstart, the first stop of the tour: a queue, a producer task, two async-for
loops, and how closing the queue ends them cleanly.

A producer task puts the numbers 0, 1, 2, ... into a FIFOQueue with room for 16, then
closes it. The consumer takes them in batches with ``async for batch in
queue.batches(8)`` and, once fewer than 8 are left in the closed queue, takes the
leftovers one at a time with ``async for x in queue``. Neither loop needs a sentinel
value or a try/except: a loop over a closed queue ends once it has taken everything it
can. At the end the script checks and says that every number arrived exactly once, in
order.

Run: python examples/quickstart.py [--elements 100] [--batch 8] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import textwrap

import anyio
import numpy as np

import aqueue


def say(text: str) -> None:
    print(textwrap.fill(text, 88, subsequent_indent="  ", break_on_hyphens=False))


async def main(elements: int = 100, batch: int = 8) -> list[int]:
    """Send ``elements`` numbers through a queue; return them in the order received."""
    queue = aqueue.FIFOQueue(16, np.int64, shapes=(), name="numbers")  # 16 scalars
    received: list[int] = []
    batches = 0
    first: np.ndarray | None = None

    async def producer() -> None:
        for i in range(elements):
            await queue.enqueue(i)  # waits while the queue is full
        queue.close()  # no more input: consumers take what is left, then their loops end

    async with anyio.create_task_group() as tg:
        tg.start_soon(producer)
        async for numbers in queue.batches(batch):  # dequeue_many(batch), one array each
            received.extend(numbers.tolist())
            first = numbers if first is None else first
            batches += 1
        # The loop above ended because the queue is closed and fewer than `batch`
        # numbers are left; this one takes them one by one until the queue is empty.
        async for number in queue:
            received.append(int(number))

    leftovers = len(received) - batches * batch
    exact = received == list(range(elements))
    shown = "" if first is None else f" (one numpy array each, the first {first})"
    say(
        f"The producer task enqueued the numbers 0 to {elements - 1} into a FIFOQueue of "
        "capacity 16 (enqueue waits while the queue is full), then closed the queue."
    )
    say(
        f"async for numbers in queue.batches({batch}): took {batches} batches of {batch}"
        f"{shown}; it stopped when the queue was closed with fewer than {batch} left."
    )
    say(f"async for number in queue: took the {leftovers} numbers left over, one at a time.")
    say(
        "What this showed: "
        + (
            f"all {elements} numbers arrived exactly once, in the order they were enqueued. "
            if exact
            else f"the numbers did NOT arrive once each and in order: {received}. "
        )
        + "Both loops ended by themselves, without an error, because the producer closed "
        "the queue: a loop over a closed queue ends once it has taken all it can."
    )
    return received


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--elements", type=int, default=100, help="numbers to send")
    parser.add_argument("--batch", type=int, default=8, help="numbers per batch")
    parser.add_argument(
        "--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop"
    )
    args = parser.parse_args()
    anyio.run(main, args.elements, args.batch, backend=args.backend)
