"""aqueue: TensorFlow-style queue-based input pipelines for asyncio and trio.

Async FIFOQueue, RandomShuffleQueue, PaddingFIFOQueue and PriorityQueue over numpy
elements, with awaitable enqueue_many / dequeue_many / dequeue_up_to and a thread-side
blocking view; QueueRunner and Coordinator (producer tasks and threads under one cancel
scope); TF's input functions and a composable Pipeline.
"""

from ._base import QueueBase as QueueBase
from ._batching import Batches as Batches
from ._batching import batch as batch
from ._batching import batch_join as batch_join
from ._batching import shuffle_batch as shuffle_batch
from ._batching import shuffle_batch_join as shuffle_batch_join
from ._blocking import BlockingQueue as BlockingQueue
from ._coordinator import Coordinator as Coordinator
from ._errors import ElementSpecError as ElementSpecError
from ._errors import OutOfRangeError as OutOfRangeError
from ._errors import QueueClosedError as QueueClosedError
from ._errors import QueueEmpty as QueueEmpty
from ._errors import QueueError as QueueError
from ._errors import QueueFull as QueueFull
from ._input import input_producer as input_producer
from ._input import limit_epochs as limit_epochs
from ._input import range_input_producer as range_input_producer
from ._input import slice_input_producer as slice_input_producer
from ._input import string_input_producer as string_input_producer
from ._pipeline import Pipeline as Pipeline
from ._queues import FIFOQueue as FIFOQueue
from ._queues import PaddingFIFOQueue as PaddingFIFOQueue
from ._queues import PriorityQueue as PriorityQueue
from ._queues import RandomShuffleQueue as RandomShuffleQueue
from ._runner import QueueRunner as QueueRunner
from ._runner import add_queue_runner as add_queue_runner
from ._stages import StageStatistics as StageStatistics
from ._stats import QueueStatistics as QueueStatistics

__version__ = "0.1.0"

__all__ = [
    "Batches",
    "BlockingQueue",
    "Coordinator",
    "ElementSpecError",
    "FIFOQueue",
    "OutOfRangeError",
    "PaddingFIFOQueue",
    "Pipeline",
    "PriorityQueue",
    "QueueBase",
    "QueueClosedError",
    "QueueEmpty",
    "QueueError",
    "QueueFull",
    "QueueRunner",
    "QueueStatistics",
    "RandomShuffleQueue",
    "StageStatistics",
    "add_queue_runner",
    "batch",
    "batch_join",
    "input_producer",
    "limit_epochs",
    "range_input_producer",
    "shuffle_batch",
    "shuffle_batch_join",
    "slice_input_producer",
    "string_input_producer",
]

# Public objects report the public module, so reprs, docs and pickles say "aqueue".
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("aqueue."):
        _obj.__module__ = "aqueue"
del _name, _obj
