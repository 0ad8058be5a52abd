"""aqueue: TensorFlow-style queue-based input pipelines for asyncio and trio.

Async FIFOQueue, RandomShuffleQueue, PaddingFIFOQueue and PriorityQueue over numpy
elements, with awaitable enqueue_many / dequeue_many / dequeue_up_to and a thread-side
blocking view; QueueRunner and Coordinator (producer tasks and threads under one cancel
scope); TF's input functions and a composable Pipeline; a Monitor that samples each
queue's fill and throughput while a coordinator runs (history, CSV, plot, live line);
a ReplayTable (Reverb's model: selectors, removers, a rate limiter, priorities,
snapshots) whose every wait can time out or be cancelled without a trace, and which
runners and pipelines fill like a queue (both are an ``aqueue.Sink``).
"""

from typing import Any as _Any

from ._errors import CheckpointError as CheckpointError
from ._errors import CheckpointWarning as CheckpointWarning
from ._errors import ElementSpecError as ElementSpecError
from ._errors import OutOfRangeError as OutOfRangeError
from ._errors import QueueClosedError as QueueClosedError
from ._errors import QueueEmpty as QueueEmpty
from ._errors import QueueError as QueueError
from ._errors import QueueFull as QueueFull
from ._errors import WorkerProcessError as WorkerProcessError
from ._input._batch_fns import batch as batch
from ._input._batch_fns import shuffle_batch as shuffle_batch
from ._input._batch_join import batch_join as batch_join
from ._input._batch_join import shuffle_batch_join as shuffle_batch_join
from ._input._batching import Batches as Batches
from ._input._functions import input_producer as input_producer
from ._input._functions import limit_epochs as limit_epochs
from ._input._functions import range_input_producer as range_input_producer
from ._input._functions import slice_input_producer as slice_input_producer
from ._input._functions import string_input_producer as string_input_producer
from ._pipeline._pipeline import Pipeline as Pipeline
from ._pipeline.defs._state import PipelineState as PipelineState
from ._pipeline.flow._meter import StageStatistics as StageStatistics
from ._pipeline.run._open import OpenPipeline as OpenPipeline
from ._pipeline.run._open import PipelineItems as PipelineItems
from ._pipeline.tune._settings import Auto as Auto
from ._pipeline.tune._settings import Autotune as Autotune
from ._queues._fifo import FIFOQueue as FIFOQueue
from ._queues._fifo import PaddingFIFOQueue as PaddingFIFOQueue
from ._queues._protocol import AsyncQueue as AsyncQueue
from ._queues._protocol import QueueStatistics as QueueStatistics
from ._queues._protocol import QueueView as QueueView
from ._queues._protocol import Sink as Sink
from ._queues._protocol import SinkView as SinkView
from ._queues._queue import QueueBase as QueueBase
from ._queues._reorder import PriorityQueue as PriorityQueue
from ._queues._reorder import RandomShuffleQueue as RandomShuffleQueue
from ._queues._snapshot import QueueSnapshot as QueueSnapshot
from ._queues._views import BatchIterator as BatchIterator
from ._queues._views import BlockingQueue as BlockingQueue
from ._queues._views import ElementIterator as ElementIterator
from ._replay._limiter import MinSize as MinSize
from ._replay._limiter import RateLimiter as RateLimiter
from ._replay._limiter import SampleToInsertRatio as SampleToInsertRatio
from ._replay._protocol import AsyncReplayTable as AsyncReplayTable
from ._replay._protocol import ReplayView as ReplayView
from ._replay._results import ReplaySample as ReplaySample
from ._replay._results import ReplayStatistics as ReplayStatistics
from ._replay._selectors import Fifo as Fifo
from ._replay._selectors import Lifo as Lifo
from ._replay._selectors import MaxHeap as MaxHeap
from ._replay._selectors import MinHeap as MinHeap
from ._replay._selectors import Prioritized as Prioritized
from ._replay._selectors import Uniform as Uniform
from ._replay._snapshot import ReplaySnapshot as ReplaySnapshot
from ._replay._table import ReplayTable as ReplayTable
from ._replay._trajectory._results import TrajectoryStatistics as TrajectoryStatistics
from ._replay._trajectory._returns import n_step_returns as n_step_returns
from ._replay._trajectory._snapshot import TrajectorySnapshot as TrajectorySnapshot
from ._replay._trajectory._table import TrajectoryTable as TrajectoryTable
from ._replay._trajectory._writer import BlockingTrajectoryTable as BlockingTrajectoryTable
from ._replay._trajectory._writer import BlockingTrajectoryWriter as BlockingTrajectoryWriter
from ._replay._trajectory._writer import TrajectoryWriter as TrajectoryWriter
from ._replay._views import BlockingReplayTable as BlockingReplayTable
from ._replay._views import SampleIterator as SampleIterator
from ._running._coordinator import Coordinator as Coordinator
from ._running._monitor import Monitor as Monitor
from ._running._registry import add_queue_runner as add_queue_runner
from ._running._runner import QueueRunner as QueueRunner
from ._running._samples import MonitorHistory as MonitorHistory
from ._running._samples import MonitorReading as MonitorReading
from ._running._samples import QueueHistory as QueueHistory
from ._running._samples import QueueReading as QueueReading
from ._running._samples import StageDecision as StageDecision
from ._running._samples import StageHistory as StageHistory
from ._running._samples import StageReading as StageReading
from ._running._samples import TableHistory as TableHistory
from ._running._samples import TableReading as TableReading

__version__ = "0.1.0"

__all__ = [
    "AsyncQueue",
    "AsyncReplayTable",
    "Auto",
    "Autotune",
    "BatchIterator",
    "Batches",
    "BlockingQueue",
    "BlockingReplayTable",
    "BlockingTrajectoryTable",
    "BlockingTrajectoryWriter",
    "CheckpointError",
    "CheckpointWarning",
    "Coordinator",
    "ElementIterator",
    "ElementSpecError",
    "FIFOQueue",
    "Fifo",
    "Lifo",
    "MaxHeap",
    "MinHeap",
    "MinSize",
    "Monitor",
    "MonitorHistory",
    "MonitorReading",
    "OpenPipeline",
    "OutOfRangeError",
    "PaddingFIFOQueue",
    "Pipeline",
    "PipelineItems",
    "PipelineState",
    "Prioritized",
    "PriorityQueue",
    "QueueBase",
    "QueueClosedError",
    "QueueEmpty",
    "QueueError",
    "QueueFull",
    "QueueHistory",
    "QueueReading",
    "QueueRunner",
    "QueueSnapshot",
    "QueueStatistics",
    "QueueView",
    "RandomShuffleQueue",
    "RateLimiter",
    "ReplaySample",
    "ReplaySnapshot",
    "ReplayStatistics",
    "ReplayTable",
    "ReplayView",
    "SampleIterator",
    "SampleToInsertRatio",
    "Sink",
    "SinkView",
    "StageDecision",
    "StageHistory",
    "StageReading",
    "StageStatistics",
    "TableHistory",
    "TableReading",
    "TrajectorySnapshot",
    "TrajectoryStatistics",
    "TrajectoryTable",
    "TrajectoryWriter",
    "Uniform",
    "WorkerProcessError",
    "add_queue_runner",
    "batch",
    "batch_join",
    "input_producer",
    "limit_epochs",
    "n_step_returns",
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

# Names renamed for one convention, still importable for a while: each warns once per
# use with the name to use instead. Thread-view protocols end in ``View`` (the classes
# are ``Blocking<Class>``); a Monitor's records are readings (a table's ``sample`` is a
# draw of items, ``ReplaySample``).
_RENAMED = {
    "BlockingView": "QueueView",
    "BlockingReplayView": "ReplayView",
    "MonitorSample": "MonitorReading",
    "QueueSample": "QueueReading",
    "StageSample": "StageReading",
    "TableSample": "TableReading",
}


def __getattr__(name: str) -> _Any:
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module 'aqueue' has no attribute {name!r}")
    import warnings

    warnings.warn(
        f"aqueue.{name} is deprecated: use aqueue.{new} (the same class, renamed)",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]
