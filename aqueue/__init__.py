"""aqueue: TensorFlow-style queue-based input pipelines for asyncio and trio.

Async FIFOQueue, RandomShuffleQueue, PaddingFIFOQueue and PriorityQueue over numpy
elements, with awaitable enqueue_many / dequeue_many / dequeue_up_to, a thread-side
blocking view, and TensorFlow's close / OutOfRange semantics.
"""

from __future__ import annotations

from ._base import QueueBase as QueueBase
from ._blocking import BlockingQueue as BlockingQueue
from ._errors import ElementSpecError as ElementSpecError
from ._errors import OutOfRangeError as OutOfRangeError
from ._errors import QueueClosedError as QueueClosedError
from ._errors import QueueEmpty as QueueEmpty
from ._errors import QueueError as QueueError
from ._errors import QueueFull as QueueFull
from ._queues import FIFOQueue as FIFOQueue
from ._queues import PaddingFIFOQueue as PaddingFIFOQueue
from ._queues import PriorityQueue as PriorityQueue
from ._queues import RandomShuffleQueue as RandomShuffleQueue
from ._stats import QueueStatistics as QueueStatistics

__version__ = "0.1.0"

__all__ = [
    "BlockingQueue",
    "ElementSpecError",
    "FIFOQueue",
    "OutOfRangeError",
    "PaddingFIFOQueue",
    "PriorityQueue",
    "QueueBase",
    "QueueClosedError",
    "QueueEmpty",
    "QueueError",
    "QueueFull",
    "QueueStatistics",
    "RandomShuffleQueue",
]

# Public objects report the public module, so reprs, docs and pickles say "aqueue".
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("aqueue."):
        _obj.__module__ = "aqueue"
del _name, _obj
