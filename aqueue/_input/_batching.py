"""TensorFlow-style batching: batch, shuffle_batch, batch_join, shuffle_batch_join.

Each function builds a batch queue and a QueueRunner that fills it from *sources*,
registers the runner with ``add_queue_runner`` and returns a ``Batches`` at once;
``coord.start_queue_runners()`` starts it (reference section 7):

- A source is any producer QueueRunner accepts (async or sync callable returning one
  example, async or sync iterable) or a queue whose elements are taken.
  ``batch``/``shuffle_batch`` run ``num_threads`` concurrent producers over one source
  (an iterable is shared by them); ``batch_join``/``shuffle_batch_join`` one producer
  per source, so each source's own order is kept.
- A batch is ``dequeue_many(batch_size)``: at the end, leftovers smaller than a batch
  are dropped, unless ``allow_smaller_final_batch`` (then ``dequeue_up_to``: one short
  final batch, then OutOfRangeError).
- The batch queue's spec comes from ``dtypes=``/``shapes=`` when both are given, or
  from the source queues' declared spec; otherwise from the first example produced.
  Then the queue is created when the runner starts: a stand-in runner (``_SpecProbe``)
  produces the first example (a sync source: once, on a worker thread), builds the
  queue, enqueues the example and starts the real runner in the same coordinator.
  Consumers that arrive earlier wait on a gate queue that the stand-in closes, so a
  runner that is never started still triggers the "never started" warning and a
  stopped coordinator still ends them with OutOfRangeError.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic

from .._errors import ElementSpecError, OutOfRangeError, int_arg, name_arg, seed_arg
from .._queues._declare import T
from .._queues._fifo import FIFOQueue, PaddingFIFOQueue
from .._queues._protocol import AsyncQueue
from .._queues._queue import QueueBase
from .._queues._reorder import RandomShuffleQueue
from .._running._registry import add_queue_runner
from .._running._runner import QueueRunner
from ._batch_spec import QueueArgs, args_from_example, args_from_queue, first_value, user_args

if TYPE_CHECKING:
    from .._running._runner import Supervisor

__all__ = ["Batches", "plan_batches"]


class Batches(Generic[T]):
    """Batches taken from a batch queue filled by a registered QueueRunner.

    Returned by ``batch``, ``shuffle_batch``, ``batch_join`` and ``shuffle_batch_join``.
    ``await batches.dequeue()`` returns the next batch (OutOfRangeError at the end) and
    ``async for batch in batches`` iterates until then.

    Generic in the batch's type ``T``, as the queues are: batches of a queue's
    elements have the queue's element type (``Batches[numpy.ndarray]`` from a
    ``FIFOQueue[numpy.ndarray]``); examples that are tuples give a tuple of arrays,
    dicts a ``dict[str, numpy.ndarray]``, anything else one array.
    """

    __slots__ = ("_batch_size", "_gate", "_name", "_queue", "_smaller")

    def __init__(
        self,
        name: str,
        batch_size: int,
        allow_smaller_final_batch: bool,
        queue: QueueBase[T] | None,
        gate: FIFOQueue[Any] | None,
    ) -> None:
        self._name = name
        self._batch_size = batch_size
        self._smaller = allow_smaller_final_batch
        self._queue = queue
        self._gate = gate

    @property
    def name(self) -> str:
        """The name of the batch queue and its runner."""
        return self._name

    @property
    def batch_size(self) -> int:
        """Examples per (full) batch."""
        return self._batch_size

    @property
    def allow_smaller_final_batch(self) -> bool:
        """Whether the leftovers come as one short final batch."""
        return self._smaller

    @property
    def queue(self) -> QueueBase[T]:
        """The batch queue.

        Raises:
            RuntimeError: Its spec is inferred from the first example, which has not
                been produced yet (pass ``dtypes=`` and ``shapes=`` to create the queue
                up front).
        """
        if self._queue is None:
            raise RuntimeError(
                f"the batch queue '{self._name}' is created when its first example has been "
                "produced (its runner must be started first); pass dtypes= and shapes= to "
                "create it up front"
            )
        return self._queue

    def __repr__(self) -> str:
        state = "pending" if self._queue is None else f"queue={self._queue!r}"
        return f"<Batches '{self._name}' batch_size={self._batch_size} {state}>"

    async def dequeue(self) -> T:
        """The next batch: ``batch_size`` examples, or fewer once at the very end.

        Raises:
            OutOfRangeError: No (full, unless allow_smaller_final_batch) batch is left.
        """
        queue = self._queue
        if queue is None:
            assert self._gate is not None
            try:  # nothing is ever enqueued on the gate: it is closed when ready
                await self._gate.dequeue()
            except OutOfRangeError:
                pass
            queue = self._queue
            if queue is None:  # the sources ended (or stopped) before any example
                raise OutOfRangeError(queue_name=self._name, requested=self._batch_size, size=0)
        if self._smaller:
            return await queue.dequeue_up_to(self._batch_size)
        return await queue.dequeue_many(self._batch_size)

    def __aiter__(self) -> Batches[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.dequeue()
        except OutOfRangeError:
            raise StopAsyncIteration from None


class _BatchPlan:
    """Everything needed to build a batch queue and its runner."""

    __slots__ = (
        "batches",
        "capacity",
        "dynamic_pad",
        "enqueue_many",
        "min_after_dequeue",
        "name",
        "owner",
        "producers",
        "seed",
        "shuffle",
        "spec",
    )

    def __init__(self, name: str, owner: str) -> None:
        self.name = name
        self.owner = owner
        self.producers: list[Any] = []
        self.shuffle = False
        self.capacity = 32
        self.min_after_dequeue = 0
        self.seed: int | None = None
        self.enqueue_many = False
        self.dynamic_pad = False
        self.spec = QueueArgs(None, None, None)
        self.batches: Batches[Any] | None = None

    def make_queue(self, spec: QueueArgs) -> QueueBase[Any]:
        if self.shuffle:
            return RandomShuffleQueue(
                self.capacity,
                self.min_after_dequeue,
                spec.dtypes,
                spec.shapes,
                spec.names,
                seed=self.seed,
                name=self.name,
            )
        if self.dynamic_pad:
            return PaddingFIFOQueue(
                self.capacity, spec.dtypes, spec.shapes, spec.names, name=self.name
            )
        return FIFOQueue(self.capacity, spec.dtypes, spec.shapes, spec.names, name=self.name)

    def runner(self, queue: QueueBase[Any]) -> QueueRunner:
        return QueueRunner(queue, self.producers, enqueue_many=self.enqueue_many, name=self.name)

    async def bootstrap(self, supervisor: Supervisor) -> None:
        """Produce a first example, build the queue from it and start the real runner."""
        for producer in self.producers:
            found, example = await first_value(producer)
            if not found:
                continue  # this source is empty; try the next one (batch_join)
            spec = args_from_example(
                example,
                self.spec,
                enqueue_many=self.enqueue_many,
                dynamic_pad=self.dynamic_pad,
                owner=self.owner,
            )
            queue = self.make_queue(spec)
            assert self.batches is not None
            assert self.batches._gate is not None
            self.batches._queue = queue
            self.batches._gate.close()  # early consumers move on to the real queue
            if self.enqueue_many:  # may exceed the capacity: admitted as consumers take
                await queue.enqueue_many(example)
            else:
                queue.enqueue_nowait(example)
            supervisor.start(self.runner(queue))
            return


class _SpecProbe(QueueRunner):
    """Stands in for a batch runner until the first example gives the queue's spec.

    Its queue is the gate that early consumers wait on; its single producer runs
    ``_BatchPlan.bootstrap`` in the coordinator that starts it, then ends cleanly, which
    closes the gate.
    """

    def __init__(self, gate: FIFOQueue[Any], plan: _BatchPlan) -> None:
        self._plan = plan
        self._supervisor: Supervisor | None = None
        super().__init__(gate, [self._probe], name=plan.name)

    def launch(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        super().launch(supervisor)

    async def _probe(self) -> None:
        assert self._supervisor is not None
        await self._plan.bootstrap(self._supervisor)
        raise StopAsyncIteration


def _as_producer(source: Any, index: int, owner: str) -> Any:
    """A source as one QueueRunner producer (iterables become their iterator)."""
    if isinstance(source, AsyncQueue):
        return source.dequeue
    if isinstance(source, (str, bytes)):
        raise TypeError(f"{owner}: sources[{index}] is a {type(source).__name__}, not a producer")
    if callable(source):
        return source
    if hasattr(source, "__aiter__"):
        return source.__aiter__()
    if hasattr(source, "__iter__"):
        return iter(source)
    raise TypeError(
        f"{owner}: sources[{index}] must be a queue, an async or sync callable or an "
        f"(async) iterable, got {type(source).__name__}"
    )


def plan_batches(
    kind: str,
    sources: list[Any],
    threads_per_source: int,
    batch_size: Any,
    *,
    capacity: Any,
    min_after_dequeue: Any,
    seed: Any,
    enqueue_many: bool,
    dtypes: Any,
    shapes: Any,
    dynamic_pad: bool,
    allow_smaller_final_batch: bool,
    name: Any,
) -> Batches[Any]:
    qname = name_arg(name, kind, f"{kind}: name")
    owner = f"{kind} '{qname}'"
    size = int_arg(batch_size, "batch_size", owner, 1)
    plan = _BatchPlan(qname, owner)
    plan.capacity = int_arg(capacity, "capacity", owner, 1)
    plan.shuffle = kind.startswith("shuffle")
    if plan.shuffle:
        mad = int_arg(min_after_dequeue, "min_after_dequeue", owner, 0)
        if plan.capacity <= mad:
            raise ElementSpecError(
                f"{owner}: capacity ({plan.capacity}) must be greater than min_after_dequeue "
                f"({mad})"
            )
        plan.min_after_dequeue = mad
        plan.seed = seed_arg(seed, owner)
    plan.enqueue_many = bool(enqueue_many)
    plan.dynamic_pad = bool(dynamic_pad)
    given = user_args(dtypes, shapes, owner)
    if not sources:
        raise ElementSpecError(f"{owner}: sources must not be empty")
    for i, source in enumerate(sources):
        producer = _as_producer(source, i, owner)
        plan.producers.extend([producer] * threads_per_source)
    if not given.complete and all(isinstance(s, AsyncQueue) for s in sources):
        from_queue = args_from_queue(sources[0], plan.enqueue_many)
        given = QueueArgs(
            given.dtypes if given.dtypes is not None else from_queue.dtypes,
            given.shapes if given.shapes is not None else from_queue.shapes,
            given.names if given.names is not None else from_queue.names,
        )
        if plan.dynamic_pad and given.shapes is not None and shapes is None:
            given = given._replace(shapes=[tuple(None for _ in s) for s in given.shapes])
    plan.spec = given
    smaller = bool(allow_smaller_final_batch)
    if given.complete:
        queue = plan.make_queue(given)
        add_queue_runner(plan.runner(queue))
        return Batches(qname, size, smaller, queue, None)
    gate = FIFOQueue(1, object, (), name=f"{qname} (awaiting its first example)")
    batches = plan.batches = Batches(qname, size, smaller, None, gate)
    add_queue_runner(_SpecProbe(gate, plan))
    return batches
