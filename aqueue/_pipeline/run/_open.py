"""The public objects of a running pipeline: ``OpenPipeline`` (what ``Pipeline.open``
returns) and ``PipelineItems`` (what its block gives).

``OpenPipeline`` enters a Coordinator if none was given, builds a ``PipelineRun``
(``_run.py``) and starts it; leaving the block finishes the run (every stage stops
taking items, every queue is closed with ``cancel_pending_enqueues``, ordered-map
workers waiting for their turn are woken), leaves the coordinator, and waits until the
run's worker processes are reaped. ``PipelineItems`` reads the last stage's queue.

A stage's failure is the run's (``PipelineRun.fail``): where the last queue ends, a
read raises it instead of the end (``raise_failure``), at that read and each later one.
Leaving the block: a failure a read has raised is not raised again (the body's own exit
stands); one no read raised is raised, or noted in the body's own exception
(``raise_unread``, ``note_unread``).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar

from ..._errors import OutOfRangeError
from ..._queues._queue import QueueBase
from ..._running._coordinator import Coordinator
from ..._running._monitor import Monitor
from ..defs._stage_spec import StageSpec, fresh
from ..defs._state import PipelineState
from ..tune._settings import Autotune
from ._checkpoint import take_checkpoint
from ._run import PipelineRun

__all__ = ["OpenPipeline", "PipelineItems"]

T = TypeVar("T")


class PipelineItems(Generic[T]):
    """The items of a running pipeline: what ``async with pipe.open() as items`` gives.

    ``async for item in items`` iterates until the pipeline has delivered everything;
    ``await items.get()`` takes the next one (OutOfRangeError after the last);
    ``await items.checkpoint()`` takes a ``PipelineState``. When a stage has failed,
    each of them raises the stage's exception once the items handed on before it are
    taken (see ``Pipeline.open``).
    """

    __slots__ = ("_queue", "_run")

    def __init__(self, run: PipelineRun) -> None:
        self._run = run
        self._queue = run.queues[-1]

    @property
    def queue(self) -> QueueBase[Any]:
        """The last stage's output queue (one object component: the items)."""
        return self._queue

    async def get(self) -> T:
        """The next item.

        Raises:
            OutOfRangeError: The pipeline has ended and every item was taken.
            Exception: A stage failed: its exception, once every item it had handed on
                was taken (again at each later call).
        """
        try:
            item: T = await self._queue.dequeue()
        except OutOfRangeError as exc:
            end = exc
        else:
            return item
        self._run.raise_failure()  # (outside the except clause: not chained to the end)
        raise end

    async def checkpoint(self) -> PipelineState:
        """A consistent cut of the running pipeline (see ``Pipeline.open``).

        Everything received so far came before it; opening the same pipeline with it
        (``pipe.open(state=...)``) delivers what this run would deliver next. The
        workers pause at their next item boundary for as short a time as the items
        they hold take to finish; cancelling this call leaves the run going unchanged.

        The state refers to the items themselves, not copies (so the pause stays
        short): the items it holds are the ones this run delivers next. Save it (or
        copy it) before changing delivered items in place.

        Raises:
            CheckpointError: A stage cannot say where it is (a one-shot source, an
                external queue, ``to_queue``); nothing was paused.
            Exception: A stage failed: its exception.
        """
        return await take_checkpoint(self._run)

    def __aiter__(self) -> PipelineItems[T]:
        return self

    async def __anext__(self) -> T:
        try:
            item: T = await self._queue.dequeue()
        except OutOfRangeError:
            pass
        else:
            return item
        self._run.raise_failure()  # (outside the except clause: see ``get``)
        raise StopAsyncIteration


class OpenPipeline(Generic[T]):
    """What ``Pipeline.open()`` returns: an async context manager that runs the
    pipeline while the block runs and gives its ``PipelineItems``; leaving the block
    stops every stage (see ``Pipeline.open``)."""

    __slots__ = ("_autotune", "_coord", "_monitor", "_on_run", "_own", "_run", "_specs", "_state")

    def __init__(
        self,
        specs: tuple[StageSpec, ...],
        coord: Coordinator | None,
        on_run: Callable[[PipelineRun], None],
        state: PipelineState | None,
        monitor: Monitor | None,
        autotune: Autotune | None = None,
    ) -> None:
        self._autotune = autotune
        self._specs = specs
        self._on_run = on_run  # the pipeline remembers its latest run
        self._coord = coord
        self._state = state
        self._monitor = monitor
        self._own: Coordinator | None = None
        self._run: PipelineRun | None = None

    async def __aenter__(self) -> PipelineItems[T]:
        source = self._specs[0]
        fresh(source, "Pipeline.open")  # (another open of it may have run since)
        if source.reads is not None:
            source.reads.opened = True
        coord = self._coord
        if coord is None:
            self._own = Coordinator(monitor=self._monitor)
            coord = await self._own.__aenter__()
        try:
            run = self._run = PipelineRun(self._specs, coord, self._autotune, self._state)
            self._on_run(run)
            if self._monitor is not None:
                self._monitor.attach_stages("pipeline", run.statistics)
            run.start(self._state)
            coord.watch(run.queues[-1])  # the queue the body consumes (input-bound)
        except BaseException as exc:
            if self._run is not None:
                self._run.finish()
            if self._own is not None:
                await self._own.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return PipelineItems(run)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        run = self._run
        assert run is not None
        run.finish()
        try:
            try:
                suppress = False
                if self._own is not None:
                    suppress = await self._own.__aexit__(exc_type, exc, tb)
            finally:
                await run.closed()
        except BaseException as escaped:  # the body's exception, or the coordinator's
            run.note_unread(escaped)
            raise
        if exc is None or suppress or isinstance(exc, OutOfRangeError):
            run.raise_unread()  # a failure nobody read beats a clean end
        else:
            run.note_unread(exc)
        return suppress
