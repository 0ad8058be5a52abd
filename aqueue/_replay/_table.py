"""ReplayTable: the public in-process replay table.

One concept in one file (the public class: about half of it is its overloads and
docstrings); its sampling side (``sample``, ``samples``, ``update_priorities``,
``delete``, the settings' properties) is ``SamplingSide`` of ``_sampling.py``, which
trajectory tables share. Every operation has the waiting kernel's shape
(``aqueue/_waiting/_wait.py``): check the arguments (nothing changes on bad input, see
``_ops.py``), ``await checkpoint()`` once, one engine step under the table's lock
(``ReplayEngine.start``) that returns the result or the request it parked, then
``wait_task`` until the engine completes it. ``update_priorities`` and ``delete``
never wait: checkpoint, then one step. The thread view (``blocking()``) runs the same
steps with ``wait_thread``. Invariants and semantics: ``_engine.py`` (waiting,
closing), ``_core.py`` (what a batch means), ``_store.py`` (storage and keys).

A table is a ``Sink`` (``aqueue/_queues/_protocol.py``), so a ``QueueRunner`` fills it
and ``Pipeline.to_queue`` sends into it: ``enqueue`` is ``insert`` with the default
priority (its key dropped), ``enqueue_many`` inserts a batch progressively (the
queues' ``enqueue_many``: in pieces as the limiter admits them, never refused for its
size), and producer accounting is held (``Producers``, as a queue's): the last clean
producer's end closes the table, and so does an unclean one (closing fails waiting
inserts at once either way). These methods are public so that the table, not a
wrapper, is what a runner holds and a coordinator watches.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from types import TracebackType
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .._errors import CheckpointError, ElementSpecError, name_arg
from .._queues._accounting import Producers
from .._queues._declare import Array, FixedShape, NumericDType, T, U
from .._queues._snapshot import snapshot_expected
from .._waiting._backend import checkpoint, make_waker
from .._waiting._wait import wait_task
from ._checks import table_settings
from ._core import TableCore
from ._engine import ReplayEngine
from ._limiter import MinSize, RateLimiter
from ._ops import TableOps
from ._results import ReplayStatistics
from ._sampling import SamplingSide
from ._selectors import Fifo, Lifo, Selector, Uniform
from ._snapshot import ReplaySnapshot, check_snapshot, snapshot_state
from ._views import BlockingReplayTable, loop_thread

__all__ = ["ReplayTable"]

Keys = npt.NDArray[np.int64]
Found = npt.NDArray[np.bool_]


class ReplayTable(SamplingSide[T]):
    """A replay table: items stay and are sampled many times, by a selector, paced by a
    rate limiter; at ``max_size`` a remover evicts (DeepMind Reverb's ``Table``, in
    process, for asyncio and trio, with a thread view).

    Args:
        max_size: the most items held; each insert beyond it evicts one (the remover's
            pick, possibly the new item itself).
        dtypes: one dtype, or one per component (object dtypes are not supported).
        shapes: one fully defined shape, or one per component (required: items live
            in preallocated arrays of shape ``(max_size, *shape)``; ``()`` for scalars).
        names: component names; items are then dicts with exactly these keys.
        sampler: which item a sample draws: ``Uniform()`` (default), ``Prioritized(e)``,
            ``Fifo()``, ``Lifo()``, ``MinHeap()``, ``MaxHeap()``.
        remover: which item is evicted at ``max_size``: any selector (default ``Fifo()``).
        max_times_sampled: an item leaves once sampled this many times (0: never).
        rate_limiter: ``MinSize(n)`` (default ``MinSize(1)``), ``SampleToInsertRatio``
            or ``RateLimiter``.
        seed: seeds the table's random generator (samples and random evictions); a
            seeded table draws the same samples for the same operations.
        name: used in messages and reports (default ``"replay_table"``).

    Items come back in the element form of a queue: a bare array for one unnamed
    component, a tuple for several, a dict with ``names``; ``T`` is that form,
    inferred from the arguments where they tell.

    Raises:
        ElementSpecError: A bad argument (the message names it, what was expected and
            what was given), or a rate limiter whose ``min_size_to_sample`` exceeds
            ``max_size`` (no sample could ever be served).
    """

    default_name = "replay_table"

    @overload
    def __init__(
        self: ReplayTable[dict[str, Array]],
        max_size: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
        name: str | None = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: ReplayTable[dict[str, Array]],
        max_size: int,
        dtypes: Any,
        shapes: Any = ...,
        *,
        names: Sequence[str],
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
        name: str | None = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: ReplayTable[tuple[Array, Array]],
        max_size: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
        name: str | None = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: ReplayTable[tuple[Array, Array, Array]],
        max_size: int,
        dtypes: tuple[NumericDType, NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
        name: str | None = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: ReplayTable[Array],
        max_size: int,
        dtypes: NumericDType,
        shapes: Any = ...,
        names: None = ...,
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
        name: str | None = ...,
    ) -> None: ...
    @overload
    def __init__(
        self: ReplayTable[T],
        max_size: int,
        dtypes: Any,
        shapes: Any = ...,
        names: Any = ...,
        *,
        sampler: Selector = ...,
        remover: Selector = ...,
        max_times_sampled: int = ...,
        rate_limiter: RateLimiter = ...,
        seed: int | None = ...,
        name: str | None = ...,
    ) -> None: ...

    def __init__(
        self,
        max_size: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        sampler: Selector = Uniform(),  # noqa: B008 - frozen, shared safely
        remover: Selector = Fifo(),  # noqa: B008
        max_times_sampled: int = 0,
        rate_limiter: RateLimiter = MinSize(1),  # noqa: B008
        seed: int | None = None,
        name: str | None = None,
    ) -> None:
        tname = name_arg(name, self.default_name, "ReplayTable: name")
        settings = table_settings(
            f"ReplayTable '{tname}'",
            max_size,
            dtypes,
            shapes,
            names,
            sampler=sampler,
            remover=remover,
            max_times_sampled=max_times_sampled,
            rate_limiter=rate_limiter,
            seed=seed,
        )
        self._seed = settings.seed
        self._name = tname
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
        spec = settings.spec
        single = spec.names is None and len(spec.dtypes) == 1
        pack = operator.itemgetter(0) if single else spec.pack
        self._engine = engine = ReplayEngine(core, tname, pack)
        self._ops: TableOps[T] = TableOps(settings, engine)
        self._producers = Producers(tname, self._close_for_producers, "replay table")

    # -- Reverb's queue and stack shapes --------------------------------------------------

    @overload
    @classmethod
    def queue(
        cls,
        max_size: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
        *,
        name: str | None = ...,
    ) -> ReplayTable[dict[str, Array]]: ...
    @overload
    @classmethod
    def queue(
        cls,
        max_size: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
        *,
        name: str | None = ...,
    ) -> ReplayTable[tuple[Array, Array]]: ...
    @overload
    @classmethod
    def queue(
        cls,
        max_size: int,
        dtypes: NumericDType,
        shapes: Any = ...,
        names: None = ...,
        *,
        name: str | None = ...,
    ) -> ReplayTable[Array]: ...
    @overload
    @classmethod
    def queue(
        cls,
        max_size: int,
        dtypes: Any,
        shapes: Any = ...,
        names: Any = ...,
        *,
        name: str | None = ...,
    ) -> ReplayTable[Any]: ...

    @classmethod
    def queue(
        cls,
        max_size: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        name: str | None = None,
    ) -> ReplayTable[Any]:
        """A table that behaves as a FIFO queue (Reverb's ``Table.queue``): Fifo sampler
        and remover, each item sampled once, inserts wait while ``max_size`` items are
        held, samples wait while none is.
        """
        return cls(
            max_size,
            dtypes,
            shapes,
            names,
            sampler=Fifo(),
            remover=Fifo(),
            max_times_sampled=1,
            rate_limiter=RateLimiter(1.0, 1, 0.0, float(max_size)),
            name=name,
        )

    @overload
    @classmethod
    def stack(
        cls,
        max_size: int,
        dtypes: Any,
        shapes: Any,
        names: Sequence[str],
        *,
        name: str | None = ...,
    ) -> ReplayTable[dict[str, Array]]: ...
    @overload
    @classmethod
    def stack(
        cls,
        max_size: int,
        dtypes: tuple[NumericDType, NumericDType],
        shapes: Any = ...,
        names: None = ...,
        *,
        name: str | None = ...,
    ) -> ReplayTable[tuple[Array, Array]]: ...
    @overload
    @classmethod
    def stack(
        cls,
        max_size: int,
        dtypes: NumericDType,
        shapes: Any = ...,
        names: None = ...,
        *,
        name: str | None = ...,
    ) -> ReplayTable[Array]: ...
    @overload
    @classmethod
    def stack(
        cls,
        max_size: int,
        dtypes: Any,
        shapes: Any = ...,
        names: Any = ...,
        *,
        name: str | None = ...,
    ) -> ReplayTable[Any]: ...

    @classmethod
    def stack(
        cls,
        max_size: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        *,
        name: str | None = None,
    ) -> ReplayTable[Any]:
        """A table that behaves as a LIFO stack (Reverb's ``Table.stack``): as
        ``queue`` with a Lifo sampler and remover."""
        return cls(
            max_size,
            dtypes,
            shapes,
            names,
            sampler=Lifo(),
            remover=Lifo(),
            max_times_sampled=1,
            rate_limiter=RateLimiter(1.0, 1, 0.0, float(max_size)),
            name=name,
        )

    # -- properties ---------------------------------------------------------------------

    @property
    def dtypes(self) -> tuple[np.dtype[Any], ...]:
        """One numpy dtype per component."""
        return self._ops.spec.dtypes

    @property
    def shapes(self) -> tuple[FixedShape, ...]:
        """One shape per component."""
        fixed = self._ops.spec.fixed_shapes
        assert fixed is not None
        return fixed

    @property
    def names(self) -> tuple[str, ...] | None:
        """Component names, or None."""
        return self._ops.spec.names

    def __repr__(self) -> str:
        engine: ReplayEngine | None = getattr(self, "_engine", None)
        if engine is None:  # the constructor raised (a repr in its traceback)
            return "<ReplayTable (not constructed)>"
        state = "closed" if engine.closed else "open"
        return (
            f"<ReplayTable '{self._name}' size={engine.core.store.size}/"
            f"{engine.core.max_size} sampler={self._sampler!r} remover={self._remover!r} "
            f"{state}>"
        )

    # -- operations -----------------------------------------------------------------------

    async def insert(self, element: Any, priority: float | None = None) -> int:
        """Insert one item: its key (keys grow with each insert, never reused).

        Waits while the rate limiter holds inserts back. At ``max_size`` the remover
        evicts one item (possibly this one) after it is in.

        Args:
            element: the item, in the table's element form.
            priority: a finite number >= 0; None (default) gives it the largest
                priority held (1.0 in an empty table), so it is sampled at least as
                likely as any (the prioritized-replay convention).

        Raises:
            ElementSpecError: A bad element or priority (nothing inserted).
            QueueClosedError: The table is closed, or was closed while this waited.

        If cancelled, nothing was inserted, evicted or counted.
        """
        engine = self._engine
        req = self._ops.insert_request(element, priority)
        await checkpoint()
        keys = engine.start(req, make_waker)
        if keys is req:
            keys = await wait_task(engine, req)
        return int(keys[0])

    async def insert_many(self, batch: Any, priorities: Any = None) -> Keys:
        """Insert a batch of items (sliced along axis 0), all or nothing: their keys.

        Waits until the rate limiter admits the whole batch; then it goes in as that
        many inserts in a row (one eviction per item beyond ``max_size``). An empty
        batch returns no keys.

        Args:
            batch: the items, in the table's batch form.
            priorities: a 1-d sequence of one priority per item (finite, >= 0), or None
                for the largest priority held (1.0 in an empty table) for every item.

        Raises:
            ElementSpecError: A bad batch or priority (nothing inserted), or a batch the
                rate limiter could never admit at once (the message names the numbers).
            QueueClosedError: The table is closed, or was closed while this waited.

        If cancelled, nothing was inserted, evicted or counted.
        """
        engine = self._engine
        req = self._ops.insert_many_request(batch, priorities)
        await checkpoint()
        if req is None:
            return np.empty(0, dtype=np.int64)
        keys = engine.start(req, make_waker)
        if keys is req:
            keys = await wait_task(engine, req)
        result: Keys = keys
        return result

    # -- as a sink: what runners and pipelines fill -------------------------------------

    async def enqueue(self, element: Any) -> None:
        """``insert(element)`` with the default priority (the largest held), its key
        dropped: what a ``QueueRunner``'s producers and ``Pipeline.to_queue`` call.

        Raises:
            ElementSpecError: A bad element (nothing inserted).
            QueueClosedError: The table is closed, or was closed while this waited.
        """
        await self.insert(element)

    async def enqueue_many(self, batch: Any) -> None:
        """Insert the items of ``batch`` (sliced along axis 0) in order, with the default
        priority, progressively: each step inserts as many as the rate limiter admits
        then, and the call waits only while it admits none (so a batch of any size is
        accepted, and the table paces it as it would single inserts in a row). If
        cancelled (or the table is closed) meanwhile, exactly a prefix of the batch is
        in, as with a queue's ``enqueue_many``. Use ``insert_many`` for all or nothing,
        priorities and keys.

        Raises:
            ElementSpecError: A bad batch (nothing inserted).
            QueueClosedError: The table is closed, or was closed while this waited.
        """
        engine = self._engine
        req = self._ops.enqueue_many_request(batch)
        await checkpoint()
        if req is None:
            return
        if engine.start(req, make_waker) is req:
            await wait_task(engine, req)

    async def register_producer(self) -> str:
        """Producer accounting, as a queue's: count one more producer of this table and
        return its id for ``producer_done``. A ``QueueRunner`` (and a pipeline's
        ``to_queue`` stage) does this for each of its producers; call it yourself for
        producers of your own. With producers registered, the table closes after the
        last one has ended. Completes without waiting.

        Raises:
            QueueClosedError: The table is closed (a producer would have nothing to do).
        """
        return self._producers.register(self._engine.closed)

    async def producer_done(self, producer_id: str, *, clean: bool = True) -> None:
        """Producer ``producer_id`` has ended (see ``register_producer``). The clean end
        of the last registered producer closes the table (samples that can be served
        still are, then ``samples(n)`` ends); an unclean end (``clean=False``: the
        producer failed) closes it at once, whoever else produces. Either way closing
        fails the inserts waiting then (a table has no "let waiting inserts finish":
        they wait for the learner, who may never sample again). Completes without
        waiting.

        Raises:
            ElementSpecError: ``producer_id`` is not registered (or already done).
        """
        self._producers.done(producer_id, clean)

    def release_producers(self) -> None:
        """Called by a ``Coordinator`` when it stops (user code does not need it):
        close the table, which fails every insert waiting now (producers end cleanly)."""
        self.close()

    def _close_for_producers(self, cancel_pending_enqueues: bool) -> None:
        self.close()  # (inserts waiting fail on a close either way)

    def statistics(self) -> ReplayStatistics:
        """The table's counters now (``await table.statistics()`` works too)."""
        return self._engine.statistics()

    def blocking(self) -> BlockingReplayTable[T]:
        """A view whose blocking methods may be called from threads that run no event
        loop (RuntimeError there otherwise), each with ``timeout=``."""
        return BlockingReplayTable(self, self._ops, loop_thread())

    # -- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the table; idempotent.

        Later inserts raise QueueClosedError, and so do inserts waiting now (they
        inserted nothing). A sample that can be served still is; one that would have
        to wait raises OutOfRangeError (so ``async for s in table.samples(n)`` ends).
        ``update_priorities`` and ``delete`` still work.
        """
        self._engine.close()

    async def __aenter__(self) -> ReplayTable[T]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> ReplaySnapshot[T]:
        """Everything the table holds now, consistent (one acquisition of its lock, for
        as long as a copy of the items takes): items in key order, keys, priorities,
        times_sampled, the limiter's counters, the selectors' state, the next key, the
        statistics and the random generator's state. Changes nothing.

        ``ReplayTable.from_snapshot(snap)`` builds a table that goes on exactly as this
        one would (the same samples for the same operations); ``snap.save(path)`` and
        ``ReplaySnapshot.load(path)`` keep it in a file.
        """
        engine = self._engine
        ops = self._ops
        with engine.lock:
            state = engine.core.dump()
            stats = engine.statistics_locked()
        return ReplaySnapshot(
            name=self._name,
            max_size=engine.core.max_size,
            dtypes=ops.spec.dtypes,
            shapes=self.shapes,
            names=ops.spec.names,
            sampler=self._sampler,
            remover=self._remover,
            max_times_sampled=ops.mts,
            rate_limiter=self._limiter,
            seed=self._seed,
            closed=engine.closed,
            keys=state["keys"],
            priorities=state["priorities"],
            times_sampled=state["times_sampled"],
            items=state["items"],
            next_key=state["next_key"],
            statistics=stats,
            rng_state=state["rng_state"],
            layout=state["layout"],
        )

    @classmethod
    def from_snapshot(cls, snap: ReplaySnapshot[U]) -> ReplayTable[U]:
        """A table equal to the one ``snap`` was taken from, going on exactly as it would.

        Raises:
            ElementSpecError: ``snap`` is not a ReplaySnapshot (a path: load it first
                with ``aqueue.ReplaySnapshot.load``; a queue's snapshot: restore it with
                ``aqueue.QueueBase.from_snapshot``).
            CheckpointError: The snapshot is inconsistent (the message names what).
        """
        if not isinstance(snap, ReplaySnapshot):
            raise ElementSpecError(
                snapshot_expected("ReplayTable.from_snapshot", ReplaySnapshot, snap)
            )
        where = f"snapshot of replay table '{snap.name}'"
        check_snapshot(snap, where)
        try:
            table: ReplayTable[U] = cls(
                snap.max_size,
                list(snap.dtypes),
                list(snap.shapes),
                snap.names,
                sampler=snap.sampler,
                remover=snap.remover,
                max_times_sampled=snap.max_times_sampled,
                rate_limiter=snap.rate_limiter,
                seed=snap.seed,
                name=snap.name,
            )
        except ElementSpecError as exc:
            raise CheckpointError(f"{where}: its settings make no table: {exc}") from exc
        engine = table._engine
        engine.core.load(snapshot_state(snap))
        engine.restore_waits(snap.statistics.insert_wait_s, snap.statistics.sample_wait_s)
        if snap.closed:
            engine.close()
        return table
