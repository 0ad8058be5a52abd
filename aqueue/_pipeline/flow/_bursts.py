"""Bursts: how items travel between the stages of a running pipeline.

Every stage's step (``run/``, ``process/``) takes a burst of items from its input
queue, works on it and returns a burst, which its runner enqueues in one
``enqueue_many``.

Invariants:

- A burst is a 1-d ``dtype=object`` array of the items themselves (``pack`` builds one
  without looking into the items, so any Python object, tuples and arrays included,
  passes unchanged). Stage queues are FIFOQueues of one scalar object component; a
  burst costs one lock, one copy of references and at most one wake-up per hand-off,
  whatever its length.
- A step never returns an empty burst: it takes again, or ends.
- Bursts are taken with ``take`` (a task: what is there now without waiting, else
  ``dequeue_burst``) or the blocking view's ``dequeue_burst`` (a thread), at most
  ``burst_size`` items: about half a millisecond of work (one expensive item, many
  cheap ones), so no worker sits on items the others could work on, and no item waits
  long in a worker's hands.
- A stage's exception carries a note naming the stage (``noted``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..._errors import OutOfRangeError, QueueClosedError, QueueEmpty, add_note

if TYPE_CHECKING:
    from ..._queues._queue import QueueBase

__all__ = ["BURST_MAX", "CLEAN", "Burst", "burst_size", "noted", "pack", "take"]

Burst = npt.NDArray[Any]  # a 1-d object array of items
BURST_MAX = 256  # items per burst at most (bounds one step's loop time)
CLEAN = (OutOfRangeError, QueueClosedError)  # a source queue ended: not a failure
_BURST_S = 0.0005  # a worker's burst holds about this much work


def pack(items: list[Any]) -> Burst:
    """A burst of ``items``: a 1-d object array holding each item as it is."""
    return np.fromiter(items, dtype=object, count=len(items))


def burst_size(item_s: float) -> int:
    """How many items a worker takes at a time, when an item took it ``item_s`` seconds
    so far (0: not known yet).

    About ``_BURST_S`` of work: one expensive item at a time (so expensive items spread
    over every worker, and each is handed on as soon as it is done), many cheap ones (so
    the hand-offs, not the items, do not set the pace). One item until the cost is
    known; at most ``BURST_MAX``.
    """
    if item_s <= 0.0:
        return 1
    n = int(_BURST_S / item_s)
    return 1 if n < 1 else n if n < BURST_MAX else BURST_MAX


async def take(queue: QueueBase[Any], n: int) -> Burst:
    """Up to ``n`` items of ``queue``: those there now, without a checkpoint, else the
    first ones to arrive (``dequeue_burst``).

    Only for steps that return what they take (or what they make of it): their
    runner's enqueue checkpoints once per burst, so taking without a checkpoint never
    starves other tasks.
    """
    burst: Burst
    if queue.size():
        try:
            burst = queue.dequeue_up_to_nowait(n)
            return burst
        except QueueEmpty:  # earlier dequeues are waiting: queue up behind them
            pass
    burst = await queue.dequeue_burst(n)
    return burst


def noted(exc: BaseException, label: str) -> None:
    """Name the stage in which ``exc`` was raised (a note, PEP 678)."""
    add_note(exc, f"raised in pipeline stage {label}")
