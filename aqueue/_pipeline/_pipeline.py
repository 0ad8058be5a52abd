"""Pipeline: a composable source -> map -> filter -> shuffle -> batch -> prefetch chain.

    pipe = (Pipeline.from_iterable(paths)
            .map(load, concurrency=8)
            .shuffle(capacity=10_000, min_after_dequeue=1_000, seed=0)
            .batch(32, allow_smaller_final_batch=True)
            .prefetch(4))
    async with pipe.open() as batches:
        async for batch in batches:
            ...
    print(pipe.describe())

A Pipeline's chain of stages never changes: each builder method returns a new
Pipeline (it only remembers its latest run, for ``statistics()``). The chain is a tuple
of StageSpecs, built and checked by ``defs/_stage_spec.py`` (the methods here hold the public
signatures, types and docstrings); ``open()`` runs it as a ``PipelineRun``
(``run/_run.py``: its queues, workers, and how a run ends); ``statistics()`` and
``describe()`` come from ``run/_describe.py``.

The module is one concept, the public builder: its overloads and docstrings are the
API reference of ``Pipeline``, and the checks live elsewhere, so it may pass 450 lines.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import Any, Generic, Literal, TypeVar, overload

import numpy.typing as npt

from .._errors import CheckpointError
from .._queues._protocol import AsyncQueue, Sink
from .._running._coordinator import Coordinator
from .._running._monitor import Monitor
from .defs._stage_spec import (
    StageSpec,
    async_iterable_source,
    batch_stage,
    filter_stage,
    fresh,
    iterable_source,
    map_stage,
    prefetch_stage,
    producer_source,
    queue_source,
    repeated,
    shuffle_stage,
    then,
    to_queue_stage,
)
from .defs._state import PipelineState
from .flow._meter import StageStatistics
from .run._checkpoint import check_state, refusal
from .run._describe import describe_run, zero_statistics
from .run._open import OpenPipeline
from .run._run import PipelineRun
from .tune._settings import Auto, Autotune

__all__ = ["Pipeline"]

T = TypeVar("T")
U = TypeVar("U")
Array = npt.NDArray[Any]


class Pipeline(Generic[T]):
    """A chain of stages: a source, then map / filter / shuffle / batch / prefetch.

    ``Pipeline(source)`` starts a chain from a source, told apart by its kind: an
    aqueue queue (``from_queue``), an async iterable (``from_async_iterable``) or a
    sync iterable such as a list or a generator (``from_iterable``); the ``from_*``
    class methods say which explicitly, and ``from_producer`` takes a function called
    repeatedly. Each stage method (``map``, ``filter``, ``shuffle``, ``batch``,
    ``prefetch``, ``repeat``) returns a new Pipeline with one more stage; a Pipeline's
    own chain never changes, so one can be opened many times and extended in several
    ways (but a one-shot iterator source, such as a generator, is read by the first
    run only: opening a pipeline over it again raises ElementSpecError). ``open()``
    runs it::

        pipe = aqueue.Pipeline(paths).map(load, concurrency=8).batch(32).prefetch(2)
        async with pipe.open() as batches:
            async for batch in batches:
                ...
        print(pipe.describe())

    ``statistics()`` and ``describe()`` report on the latest run of this Pipeline
    object.

    Args:
        source: The items to start from (see above).
        name: The source stage's label in statistics.
        autotune: How the maps given ``concurrency="auto"`` are tuned (budgets, mode,
            a cap; None: ``aqueue.Autotune()``), kept by every pipeline built from
            this one; ``open(autotune=...)`` overrides it for one run.

    Raises:
        TypeError: ``source`` is none of the accepted kinds (a str or bytes is refused
            as almost certainly a mistake), or ``autotune`` is not an
            ``aqueue.Autotune``.
    """

    __slots__ = ("_autotune", "_run", "_specs")

    @overload
    def __init__(
        self: Pipeline[T],
        source: AsyncQueue[T],
        *,
        name: str | None = None,
        autotune: Autotune | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Pipeline[T],
        source: AsyncIterable[T],
        *,
        name: str | None = None,
        autotune: Autotune | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Pipeline[T],
        source: Iterable[T],
        *,
        name: str | None = None,
        autotune: Autotune | None = None,
    ) -> None: ...
    def __init__(
        self, source: Any, *, name: str | None = None, autotune: Autotune | None = None
    ) -> None:
        if isinstance(source, AsyncQueue):
            first = Pipeline.from_queue(source, name=name)
        elif hasattr(source, "__aiter__"):
            first = Pipeline.from_async_iterable(source, name=name)
        else:
            first = Pipeline.from_iterable(source, name=name)
        self._specs: tuple[StageSpec, ...] = first._specs
        self._run: PipelineRun | None = None
        self._autotune = _autotune_arg(autotune, "Pipeline")

    @classmethod
    def _of(cls, specs: tuple[StageSpec, ...], autotune: Autotune | None = None) -> Pipeline[Any]:
        """A Pipeline of these stages (the builder methods' constructor)."""
        pipe = object.__new__(cls)
        pipe._specs = specs
        pipe._run = None
        pipe._autotune = autotune
        return pipe

    def _remember(self, run: PipelineRun) -> None:
        self._run = run

    def __repr__(self) -> str:
        return "<Pipeline " + " -> ".join(s.label for s in self._specs) + ">"

    def _then(self, spec: StageSpec) -> Pipeline[Any]:
        return Pipeline._of(then(self._specs, spec), self._autotune)

    # -- sources -------------------------------------------------------------------------

    @classmethod
    def from_iterable(cls, iterable: Iterable[U], *, name: str | None = None) -> Pipeline[U]:
        """Items of a sync iterable, read on a worker thread (it may block)."""
        return cls._of((iterable_source(iterable, name),))

    @classmethod
    def from_async_iterable(
        cls, iterable: AsyncIterable[U], *, name: str | None = None
    ) -> Pipeline[U]:
        """Items of an async iterable, read by a task."""
        return cls._of((async_iterable_source(iterable, name),))

    @classmethod
    def from_queue(cls, queue: AsyncQueue[U], *, name: str | None = None) -> Pipeline[U]:
        """Elements dequeued from an aqueue queue until it is closed and drained."""
        return cls._of((queue_source(queue, name),))

    @classmethod
    def from_producer(
        cls, fn: Callable[[], Awaitable[U]] | Callable[[], U], *, name: str | None = None
    ) -> Pipeline[U]:
        """Items returned by calling ``fn()`` repeatedly (an async one in a task, a sync
        one on a worker thread) until it raises StopIteration, StopAsyncIteration or
        OutOfRangeError."""
        return cls._of((producer_source(fn, name),))

    # -- stages --------------------------------------------------------------------------

    @overload
    def map(
        self,
        fn: Callable[[T], Awaitable[U]],
        *,
        concurrency: int | Literal["auto"] | Auto = 1,
        ordered: bool = False,
        executor: str | None = None,
        capacity: int | Literal["auto"] | Auto | None = None,
        name: str | None = None,
    ) -> Pipeline[U]: ...
    @overload
    def map(
        self,
        fn: Callable[[T], U],
        *,
        concurrency: int | Literal["auto"] | Auto = 1,
        ordered: bool = False,
        executor: str | None = None,
        capacity: int | Literal["auto"] | Auto | None = None,
        name: str | None = None,
    ) -> Pipeline[U]: ...
    def map(
        self,
        fn: Callable[[T], Any],
        *,
        concurrency: int | Literal["auto"] | Auto = 1,
        ordered: bool = False,
        executor: str | None = None,
        capacity: int | Literal["auto"] | Auto | None = None,
        name: str | None = None,
    ) -> Pipeline[Any]:
        """Apply ``fn`` to every item with ``concurrency`` workers.

        Args:
            fn: An async function (run in tasks) or a sync one (run on long-lived
                threads, or in worker processes with ``executor="process"``).
            concurrency: Number of workers, or ``"auto"`` (``aqueue.Auto(min=, max=,
                start=)`` for a range): the pipeline's tuner chooses it while the
                pipeline runs, adding workers or parking some, so that the consumer
                waits as little as the machine allows (see ``aqueue.Autotune``).
                Worker processes are added rarely, one or a few at a time, once the
                consumer has waited on them for a few seconds (a spawn costs a
                fraction of a second), up to the CPU budget; a cut parks the extra
                ones, and once it has held for a couple of seconds their processes
                exit (a later raise spawns new ones). A number is never changed.
            ordered: Deliver in input order even with concurrency > 1 (a slow item then
                holds back the ones after it); by default in completion order.
            executor: None (by the kind of ``fn``: an async function runs in tasks, a
                sync one on threads), ``"thread"`` or ``"process"``: ``concurrency``
                worker processes, started (with *spawn*) when the pipeline opens and
                stopped when it closes, each handed bursts of items; numpy arrays in
                the results come back through shared memory (the items are views of
                it; a ``batch`` right after the map gets batches the workers wrote in
                place), other values pickled. ``fn`` must pickle by reference (defined
                at module level of an importable module or of the main script, whose
                top level must be guarded by ``if __name__ == "__main__":``), and the
                items must pickle. For CPU-bound Python that holds the GIL; on
                free-threaded Python (3.13t), threads run it in parallel too.
            capacity: Capacity of the output queue, in items (default: twice the
                concurrency of this or the next stage, at least 8; at least 64 for
                processes, whose bursts of results then go in with few wake-ups; at
                least twice the batch size of a ``batch`` right after it, which, after
                processes writing the batches in place, takes them from the queue a
                batch at a time). ``"auto"`` (or ``aqueue.Auto(...)``): the tuner
                grows it from that default when the stage after it runs dry while this
                one is held up by a full queue (its output comes in bursts), within
                the memory budget, and shrinks it back when it never runs empty; a
                number is never changed.
            name: Label in statistics (default ``"map(<fn name>)"``).

        Raises:
            ElementSpecError: A bad concurrency, capacity or executor, or a function
                that cannot run in worker processes (it does not pickle).
        """
        return self._then(map_stage(fn, concurrency, ordered, executor, capacity, name))

    def filter(
        self,
        pred: Callable[[T], Any],
        *,
        capacity: int | Literal["auto"] | Auto | None = None,
        name: str | None = None,
    ) -> Pipeline[T]:
        """Keep the items for which ``pred(item)`` is true (order kept).

        A sync predicate runs on the event loop (keep it cheap; use ``map`` for heavy
        work); an async one is awaited. Dropped items are counted as ``items_dropped``.
        ``capacity`` is its output queue's, as for ``map``.
        """
        return self._then(filter_stage(pred, capacity, name))

    def shuffle(
        self,
        capacity: int,
        min_after_dequeue: int,
        *,
        seed: int | None = None,
        name: str | None = None,
    ) -> Pipeline[T]:
        """Shuffle with a buffer of ``min_after_dequeue + 1`` items (deterministic).

        For each item read, the stage emits one chosen uniformly from its buffer, so
        the output order depends only on the input order and ``seed``. ``capacity``
        bounds the items the stage holds (buffer plus output queue). At the end of the
        input the buffer drains in random order.

        Raises:
            ElementSpecError: ``capacity <= min_after_dequeue`` or a bad seed.
        """
        return self._then(shuffle_stage(capacity, min_after_dequeue, seed, name))

    @overload
    def batch(
        self: Pipeline[tuple[Any, ...]],
        batch_size: int,
        *,
        allow_smaller_final_batch: bool = False,
        dynamic_pad: bool = False,
        capacity: int | Literal["auto"] | Auto | None = None,
        name: str | None = None,
    ) -> Pipeline[tuple[Array, ...]]: ...
    @overload
    def batch(
        self: Pipeline[dict[str, Any]],
        batch_size: int,
        *,
        allow_smaller_final_batch: bool = False,
        dynamic_pad: bool = False,
        capacity: int | Literal["auto"] | Auto | None = None,
        name: str | None = None,
    ) -> Pipeline[dict[str, Array]]: ...
    @overload
    def batch(
        self: Pipeline[Any],
        batch_size: int,
        *,
        allow_smaller_final_batch: bool = False,
        dynamic_pad: bool = False,
        capacity: int | Literal["auto"] | Auto | None = None,
        name: str | None = None,
    ) -> Pipeline[Array]: ...
    def batch(
        self,
        batch_size: int,
        *,
        allow_smaller_final_batch: bool = False,
        dynamic_pad: bool = False,
        capacity: int | Literal["auto"] | Auto | None = None,
        name: str | None = None,
    ) -> Pipeline[Any]:
        """Stack ``batch_size`` items into one batch (on a worker thread).

        Arrays are stacked on a new axis 0; tuples and dicts per component. At the end,
        leftovers are dropped unless ``allow_smaller_final_batch``. ``dynamic_pad``
        pads arrays of one rank to the largest shape in the batch (0 or ``""``).
        ``capacity`` is its output queue's, in batches, as for ``map``.
        """
        return self._then(
            batch_stage(batch_size, allow_smaller_final_batch, dynamic_pad, capacity, name)
        )

    def prefetch(
        self, buffer_size: int | Literal["auto"] | Auto, *, name: str | None = None
    ) -> Pipeline[T]:
        """Keep up to ``buffer_size`` items ready ahead of the consumer.

        Args:
            buffer_size: Items held, or ``"auto"`` (``aqueue.Auto(min=, max=,
                start=)`` for a range): the tuner starts it at 8 and grows it while
                the consumer runs dry although the stages before it produce enough on
                average (in bursts), within the memory budget (``aqueue.Autotune``),
                and shrinks it back when it never runs empty.
            name: Label in statistics (default ``"prefetch(<buffer_size>)"``).

        Raises:
            ElementSpecError: ``buffer_size`` is not an int >= 1, ``"auto"`` or an
                ``aqueue.Auto``.
        """
        return self._then(prefetch_stage(buffer_size, name))

    def repeat(self, num_epochs: int | None = None) -> Pipeline[T]:
        """Read the source ``num_epochs`` times (None: forever).

        Only map, filter and prefetch stages may come between the source and
        ``repeat`` (a shuffle or batch must come after it); the source must be a
        re-iterable (a list, not a one-shot iterator) sync or async iterable.

        Raises:
            ElementSpecError: A bad ``num_epochs``, a source that cannot be re-read,
                ``repeat`` after a shuffle or batch, or a second ``repeat``.
        """
        return Pipeline._of(repeated(self._specs, num_epochs))

    def to_queue(
        self, queue: Sink, *, enqueue_many: bool = False, name: str | None = None
    ) -> Pipeline[T]:
        """Send every item into ``queue`` instead of to the consumer (a last stage).

        ``queue`` is any aqueue queue: an in-process one, or a queue shared through a
        server (``aqueue.redis``), so a loader pipeline on one host feeds trainers on
        others; or a replay table (any ``aqueue.Sink``). Each item is one element of
        ``queue`` (a batch of elements with ``enqueue_many``, e.g. after ``batch``),
        converted and checked by its spec (a bad item fails the stage with the
        ElementSpecError naming ``queue``); items are sent in bursts (one
        ``enqueue_many`` per burst: a table inserts them with the default priority, as
        its rate limiter admits them). The stage registers as a producer of ``queue``:
        the queue (or table) closes when the pipeline (and every other registered
        producer, of any process) has finished. ``open()`` of such a pipeline yields
        no items: its iteration ends when everything was sent; ``await pipe.run()``
        does just that.

        Raises:
            TypeError: ``queue`` is neither an aqueue queue nor a replay table.
        """
        return self._then(to_queue_stage(queue, enqueue_many, name))

    # -- running -------------------------------------------------------------------------

    def open(
        self,
        coord: Coordinator | None = None,
        *,
        state: PipelineState | None = None,
        monitor: Monitor | None = None,
        autotune: Autotune | None = None,
    ) -> OpenPipeline[T]:
        """Run the pipeline: ``async with pipe.open() as items: async for x in items``.

        ``items`` also has ``await items.get()`` (OutOfRangeError after the last item)
        and ``await items.checkpoint()``, a ``PipelineState``: a consistent cut of the
        running pipeline (everything received so far came before it). Leaving the
        block stops every stage. With its own coordinator, an OutOfRangeError raised by
        the body ends the block quietly (TF: OutOfRange ends training).

        A stage that raises fails the run: the stages before it stop, the stages after
        it hand on what had passed it, and the body receives those items and then, at
        its next read (``async for``, ``get()``, ``checkpoint()``), the stage's own
        exception, with a note naming the stage (as DataLoader and tf.data raise at the
        next item; the body is not cancelled). Each later read raises it again. Once a
        read has raised it, leaving the block adds nothing: the exception goes on as
        the body lets it (if the body caught it and finished, the block ends quietly).
        A failure no read raised (the body left the loop early) is raised when the
        block is left, or noted in the body's own exception, if it raised one.

        Args:
            coord: Run the stages in this running Coordinator instead of a new one.
            state: Go on after this checkpoint of the same pipeline: with every random
                stage seeded and every ``map`` ordered, the items received are exactly
                those the checkpointed run would have delivered next; otherwise every
                source item is received once, before or after the cut.
            monitor: Sample the stages' queues and the stages themselves while the
                pipeline runs (see ``Monitor``). With ``coord``, pass the monitor to
                that coordinator too; here it only adds the stages.
            autotune: How this run tunes its ``concurrency="auto"`` maps (None: the
                pipeline's own, see ``Pipeline``).

        Raises:
            ElementSpecError: ``state`` is of another pipeline (the first difference
                is named), or the source is a one-shot iterator (a generator, an
                ``iter(...)``) that an earlier run has read: it can be read once; pass
                a re-iterable (a list, a range) or build a new Pipeline around a fresh
                iterator. Nothing starts.
            CheckpointError: This pipeline's source cannot be resumed (see
                ``checkpoint``).
        """
        fresh(self._specs[0], "Pipeline.open")
        if coord is not None and not isinstance(coord, Coordinator):
            raise TypeError(f"Pipeline.open: expected a Coordinator, got {type(coord).__name__}")
        if monitor is not None and not isinstance(monitor, Monitor):
            raise TypeError(f"Pipeline.open: expected a Monitor, got {type(monitor).__name__}")
        autotune = _autotune_arg(autotune, "Pipeline.open") or self._autotune
        if state is not None:
            if not isinstance(state, PipelineState):
                raise TypeError(
                    f"Pipeline.open: state must be a PipelineState, got {type(state).__name__}"
                )
            why = refusal(self._specs)
            if why is not None:
                raise CheckpointError(f"cannot resume this pipeline: {why}")
            check_state(self._specs, state)
        return OpenPipeline(self._specs, coord, self._remember, state, monitor, autotune)

    async def run(self, coord: Coordinator | None = None) -> int:
        """Run the pipeline to its end, discarding what reaches the consumer (for a
        pipeline that ends with ``to_queue``, or is run for its side effects); return
        the number of items discarded.

        Args:
            coord: Run the stages in this running Coordinator instead of a new one.

        Raises:
            Exception: A stage failed: its exception (see ``open``).
        """
        count = 0
        async with self.open(coord) as items:
            async for _ in items:
                count += 1
        return count

    def statistics(self) -> tuple[StageStatistics, ...]:
        """One StageStatistics per stage, in order, for the latest run (zeros before)."""
        if self._run is None:
            return zero_statistics(self._specs)
        return self._run.statistics()

    def describe(self) -> str:
        """A text report: one line per stage with its statistics, and the bottleneck."""
        if self._run is None:
            return describe_run(self.statistics(), None, self._specs)
        run = self._run
        return describe_run(self.statistics(), run.elapsed, self._specs, run.notes(), run.startup())


def _autotune_arg(autotune: Any, owner: str) -> Autotune | None:
    """None or an ``aqueue.Autotune``, else TypeError naming ``owner``."""
    if autotune is not None and not isinstance(autotune, Autotune):
        raise TypeError(
            f"{owner}: autotune must be an aqueue.Autotune, got {type(autotune).__name__}"
        )
    return autotune
