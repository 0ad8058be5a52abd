"""TrajectoryTable: the public in-process trajectory table.

One concept in one file (the public class: about half of it is its overloads and
docstrings).
A replay table whose items are windows of timesteps stored once (the design:
``_steps.py``; the joints with the replay core: ``_items.py``). Built from the replay
layer's parts, unchanged: ``TableCore`` holds the items (int64 rows of step slots, so
selectors, priorities, the rate limiter, ``max_times_sampled``, update and delete by
key apply as they are), ``ReplayEngine`` the waiting (a writer's append is an
``AppendRequest``), ``TableOps`` the checks of samples, keys and priorities. A
sample's rows become steps inside its engine step (the engine's ``pack``: one gather
per field), so what it returns is read under the same lock as what it drew.

Writers (``_writer.py``) append; the table samples, updates, deletes, closes and
takes snapshots (``_snapshot.py``). A trajectory table is not a ``Sink`` (its items
are made by writers, one stream each, not inserted), but it is what the coordinator
watches and reports as a replay table (``SampledTable``: name, ``max_size``,
``statistics()``, samples).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from types import TracebackType
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from ..._errors import CheckpointError, ElementSpecError, QueueClosedError, int_arg, name_arg
from ..._queues._declare import Array, FixedShape, NumericDType, T
from ..._queues._snapshot import snapshot_expected
from .._core import TableCore
from .._engine import ReplayEngine
from .._limiter import MinSize, RateLimiter
from .._ops import TableOps
from .._sampling import SamplingSide
from .._selectors import Fifo, Selector, Uniform
from .._snapshot import ReplaySnapshot, snapshot_state
from .._views import loop_thread
from ._checks import StepArgs, StepSettings, step_settings, window_settings
from ._items import CoreWindows, TableSteps
from ._results import TrajectoryStatistics, trajectory_statistics
from ._snapshot import TrajectorySnapshot, check_steps
from ._state import dump_steps, index_of, load_steps
from ._steps import StepStore
from ._writer import BlockingTrajectoryTable, TrajectoryWriter

__all__ = ["TrajectoryTable"]

Keys = npt.NDArray[np.int64]
Found = npt.NDArray[np.bool_]


class TrajectoryTable(SamplingSide[T]):
    """A table of timesteps stored once, whose items are windows of them: frame stacks,
    n-step transitions, sequences (Reverb's ``TrajectoryWriter`` and item windows,
    TorchRL's ``SliceSampler``, in process, for asyncio and trio).

    Writers (``table.writer()``, one per actor stream) append steps to their current
    episode; the window of ``length`` consecutive steps starting at every ``stride``-th
    step of an episode becomes an item when its last step is appended, and a window
    never crosses an episode's end. Every step is stored once, in preallocated arrays of
    ``max_steps`` rows per field, however many windows hold it; a sample of ``n`` items
    returns per field an array of shape ``(n, length, *shape)``, gathered at once.

    When the steps are full, storing one evicts the oldest step held and every item
    and pending window that needs it (never a window with a hole); steps no item or
    pending window needs any more (their items were sampled ``max_times_sampled``
    times, deleted, or removed by the item cap) are freed and their room reused first.

    Args:
        max_steps: the most steps held at once.
        dtypes: one dtype per field (object dtypes are not supported).
        shapes: one fully defined shape per field (``()`` for scalars).
        names: field names; steps are then dicts with exactly these keys.
        length: the steps in a window (4 for a frame stack; n + 1 for n-step returns).
        stride: a window starts every ``stride`` steps of an episode (1: every step;
            ``length // 2`` for R2D2's overlapping sequences; past ``length``, the steps
            between windows are not stored).
        sampler: which item a sample draws (``Uniform()``, ``Prioritized(e)``, ...).
        remover: which item goes when an item cap ``max_size`` is reached.
        max_times_sampled: an item leaves once sampled this many times (0: never).
        rate_limiter: paces writers and samples, counting items (default ``MinSize(1)``).
        max_size: an optional cap on the items held (None: only ``max_steps`` bounds
            them, and the remover never runs).
        seed: seeds the table's random generator.
        name: used in messages and reports (default ``"trajectory_table"``).

    Raises:
        ElementSpecError: A bad argument (the message names it, what was expected and
            what was given): ``length`` or ``stride`` < 1, ``length > max_steps``, shapes
            not fully defined, ...
    """

    default_name = "trajectory_table"

    @overload
    def __init__(
        self: TrajectoryTable[dict[str, Array]],
        max_steps: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
        *,
        length: int,
        stride: int = ...,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        max_size: int | None = ...,
        seed: int | None = ...,
        name: str | None = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: TrajectoryTable[Array],
        max_steps: int,
        dtypes: NumericDType,
        shapes: Any = ...,
        names: None = ...,
        *,
        length: int,
        stride: int = ...,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        max_size: int | None = ...,
        seed: int | None = ...,
        name: str | None = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: TrajectoryTable[T],
        max_steps: int,
        dtypes: Any,
        shapes: Any = ...,
        names: Any = ...,
        *,
        length: int,
        stride: int = ...,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        max_size: int | None = ...,
        seed: int | None = ...,
        name: str | None = ...,
    ) -> None: ...

    def __init__(
        self,
        max_steps: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        length: int,
        stride: int = 1,
        sampler: Selector = Uniform(),  # noqa: B008 - frozen, shared safely
        remover: Selector = Fifo(),  # noqa: B008
        max_times_sampled: int = 0,
        rate_limiter: RateLimiter = MinSize(1),  # noqa: B008
        max_size: int | None = None,
        seed: int | None = None,
        name: str | None = None,
    ) -> None:
        tname = name_arg(name, self.default_name, "TrajectoryTable: name")
        owner = f"TrajectoryTable '{tname}'"
        st = step_settings(
            owner, max_steps, dtypes, shapes, names, length=length, stride=stride, max_size=max_size
        )
        settings = window_settings(
            st,
            sampler=sampler,
            remover=remover,
            max_times_sampled=max_times_sampled,
            rate_limiter=rate_limiter,
            seed=seed,
        )
        self._name = tname
        self._st = st
        self._seed = settings.seed
        self._sampler = settings.sampler
        self._remover = settings.remover
        self._limiter = settings.rate_limiter
        core = TableCore(
            settings.max_size,
            settings.spec.dtypes,
            settings.shapes,
            sampler=settings.sampler,
            remover=settings.remover,
            limiter=settings.rate_limiter,
            max_times_sampled=settings.max_times_sampled,
            rng=np.random.default_rng(self._seed),
        )
        windows = CoreWindows(core)
        self._store = store = StepStore(
            st.max_steps,
            st.spec.dtypes,
            st.shapes,
            length=st.length,
            stride=st.stride,
            items=windows,
            # (an item cap's remover frees steps as windows go in)
            frees_on_insert=st.max_size is not None and st.capacity == st.max_size,
        )
        core.store.watcher = store
        spec = st.spec
        pack = operator.itemgetter(0) if spec.names is None and len(spec.dtypes) == 1 else spec.pack
        gather = store.gather
        self._engine = engine = ReplayEngine(
            core,
            tname,
            lambda data: pack(gather(data[0])),
            TableSteps(store, windows),
            "trajectory table",
        )
        self._ops: TableOps[T] = TableOps(settings, engine)
        self._args = StepArgs(st, settings.limit)
        self._attached: set[int] = set()  # writers with a TrajectoryWriter

    # -- properties ---------------------------------------------------------------------

    @property
    def max_steps(self) -> int:
        """The most steps held at once."""
        return self._st.max_steps

    @property
    def max_size(self) -> int:
        """The most items the table holds (``max_size``, or the most windows
        ``max_steps`` steps can hold: ``max_steps // min(stride, length)``)."""
        return self._engine.core.max_size

    @property
    def length(self) -> int:
        """The steps in a window."""
        return self._st.length

    @property
    def stride(self) -> int:
        """A window starts every ``stride`` steps of an episode."""
        return self._st.stride

    @property
    def dtypes(self) -> tuple[np.dtype[Any], ...]:
        """One numpy dtype per field."""
        return self._st.spec.dtypes

    @property
    def shapes(self) -> tuple[FixedShape, ...]:
        """One shape per field (of one step)."""
        return self._st.shapes

    @property
    def names(self) -> tuple[str, ...] | None:
        """Field names, or None."""
        return self._st.spec.names

    @property
    def settings(self) -> StepSettings:
        """The step and window settings, checked."""
        return self._st

    def __repr__(self) -> str:
        engine: ReplayEngine | None = getattr(self, "_engine", None)
        if engine is None:  # the constructor raised (a repr in its traceback)
            return "<TrajectoryTable (not constructed)>"
        state = "closed" if engine.closed else "open"
        return (
            f"<TrajectoryTable '{self._name}' size={engine.core.store.size}/"
            f"{engine.core.max_size} steps={self._store.ring.held}/{self._st.max_steps} "
            f"length={self._st.length} stride={self._st.stride} {state}>"
        )

    # -- writers --------------------------------------------------------------------------

    def writer(self, *, resume: int | None = None) -> TrajectoryWriter:
        """A new writer, one stream of steps, at the start of an episode; or, with
        ``resume``, the writer of that id restored by ``from_snapshot`` (in the middle
        of its episode, as it was).

        Raises:
            QueueClosedError: The table is closed (a new writer could append nothing).
            ElementSpecError: ``resume`` is not a restored writer's id without a writer
                object yet (the message lists the ids that are).
        """
        engine = self._engine
        with engine.lock:
            if resume is None:
                if engine.closed:
                    raise QueueClosedError(
                        f"trajectory table '{self._name}' is closed; writer() needs an open table"
                    )
                wid = self._store.open_writer()
            else:
                wid = int_arg(resume, "resume", f"TrajectoryTable '{self._name}': writer", 0)
                free = sorted(set(self._store.writers) - self._attached)
                if wid not in free:
                    raise ElementSpecError(
                        f"TrajectoryTable '{self._name}': writer(resume={wid}): expected the "
                        f"id of a restored writer not resumed yet, one of {free}"
                    )
            self._attached.add(wid)
        return TrajectoryWriter(engine, self._store, self._args, wid)

    # -- the counters ------------------------------------------------------------------

    def statistics(self) -> TrajectoryStatistics:
        """The counters of the items and the steps now (``await table.statistics()``
        works too)."""
        engine = self._engine
        with engine.lock:
            return trajectory_statistics(engine.statistics_locked(), self._store.statistics())

    def blocking(self) -> BlockingTrajectoryTable[T]:
        """A view whose blocking methods (a learner thread's ``sample``, ``samples``,
        ``update_priorities``, ``delete``, ``statistics``) may be called from threads
        that run no event loop (RuntimeError there otherwise), each with ``timeout=``."""
        return BlockingTrajectoryTable(self, self._ops, loop_thread())

    # -- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the table; idempotent. Appends (later ones and those waiting now) raise
        QueueClosedError and write nothing; a sample that can be served still is, one
        that would have to wait raises OutOfRangeError. ``end_episode``, writers'
        ``close``, ``update_priorities`` and ``delete`` still work."""
        self._engine.close()

    async def __aenter__(self) -> TrajectoryTable[T]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> TrajectorySnapshot:
        """Everything the table holds now, consistent (one acquisition of its lock, for
        as long as copies of the held steps and items take): the steps, the windows
        (keys, priorities, times sampled, selector states), the writers' episodes, the
        counters and the random generator's state. Changes nothing.

        ``TrajectoryTable.from_snapshot(snap)`` builds a table that goes on exactly as
        this one would; ``snap.save(path)`` and ``TrajectorySnapshot.load(path)`` keep it
        in a file.
        """
        engine = self._engine
        core = engine.core
        st = self._st
        with engine.lock:
            state = core.dump()
            stats = engine.statistics_locked()
            steps = dump_steps(self._store)
            where = index_of(self._store)
            closed = engine.closed
        items = ReplaySnapshot[Any](
            name=self._name,
            max_size=core.max_size,
            dtypes=(np.dtype(np.int64),),
            shapes=((st.length,),),
            names=None,
            sampler=self._sampler,
            remover=self._remover,
            max_times_sampled=self._ops.mts,
            rate_limiter=self._limiter,
            seed=self._seed,
            closed=closed,
            keys=state["keys"],
            priorities=state["priorities"],
            times_sampled=state["times_sampled"],
            items=(where[state["items"][0]],),
            next_key=state["next_key"],
            statistics=stats,
            rng_state=state["rng_state"],
            layout=state["layout"],
        )
        return TrajectorySnapshot(
            name=self._name,
            max_steps=st.max_steps,
            dtypes=st.spec.dtypes,
            shapes=st.shapes,
            names=st.spec.names,
            length=st.length,
            stride=st.stride,
            max_size=st.max_size,
            items=items,
            ids=steps["ids"],
            fields=steps["fields"],
            next_id=steps["next_id"],
            next_writer=steps["next_writer"],
            counters=steps["counters"],
            writers=tuple(steps["writers"]),
            slots=steps["layout"]["slots"],
            free=steps["layout"]["free"],
        )

    @classmethod
    def from_snapshot(cls, snap: TrajectorySnapshot) -> TrajectoryTable[Any]:
        """A table equal to the one ``snap`` was taken from, going on exactly as it
        would. Its writers are restored detached: ``table.writer(resume=id)`` takes one
        up in the middle of its episode.

        Raises:
            ElementSpecError: ``snap`` is not a TrajectorySnapshot.
            CheckpointError: The snapshot is inconsistent (the message names what).
        """
        if not isinstance(snap, TrajectorySnapshot):
            raise ElementSpecError(
                snapshot_expected("TrajectoryTable.from_snapshot", TrajectorySnapshot, snap)
            )
        where = f"snapshot of trajectory table '{snap.name}'"
        check_steps(snap, where)
        items = snap.items
        try:
            table: TrajectoryTable[Any] = cls(
                snap.max_steps,
                list(snap.dtypes),
                list(snap.shapes),
                snap.names,
                length=snap.length,
                stride=snap.stride,
                sampler=items.sampler,
                remover=items.remover,
                max_times_sampled=items.max_times_sampled,
                rate_limiter=items.rate_limiter,
                max_size=snap.max_size,
                seed=items.seed,
                name=snap.name,
            )
        except ElementSpecError as exc:
            raise CheckpointError(f"{where}: its settings make no table: {exc}") from exc
        engine = table._engine
        rows = items.items[0]
        state = snapshot_state(items)
        state["items"] = (snap.slots[rows],)
        engine.core.load(state)
        load_steps(table._store, snap.steps_state(), items.keys, rows)
        engine.restore_waits(items.statistics.insert_wait_s, items.statistics.sample_wait_s)
        if items.closed:
            engine.close()
        return table
