"""QueueBase: the public operations of every in-process queue.

One concept in one file (the public class; with its snapshots and the kinds'
registry). Every operation has one shape (the waiting kernel's,
``aqueue/_waiting/_wait.py``): check the arguments with the queue's ``ElementSpec``;
checkpoint (the async operations, once per call); one step of its ``Engine`` under the
queue's lock, which returns the result or a request it parked; then wait for that
request, which leaves the queue's lists on every way out. The ``_nowait`` twins are
the engine step alone (it raises instead of parking); the thread view (``blocking()``,
``_views.py``) waits on a ``threading.Event``.

A batch dequeue that cannot complete parks *before* its checkpoint, so that an enqueue
running meanwhile copies straight into its batch (one copy per element instead of two);
its wait is then its checkpoint. Whether it can complete is a lock-free guess
(``Engine.parks_first``): a wrong guess costs a wait step, never data, and its step
under the lock takes nothing before the checkpoint.

Beyond single operations a queue offers producer accounting (held: ``Producers``,
``_accounting.py``) and snapshots (``snapshot``/``from_snapshot``; invariants in
``_snapshot.py``): ``snapshot`` reads the spec, the elements in dequeue order, the
closed flag and a RandomShuffleQueue's generator state under one acquisition of the
engine's lock; ``from_snapshot`` builds an empty queue of the snapshot's kind, checks
the elements against its spec, loads them whatever the capacity, sets the generator
state and closes it if the snapshot was closed. Each constructible kind names itself
with ``_kind``; defining the class registers it, so ``QueueBase.from_snapshot`` can
build any kind. The kinds supply ``_empty_like`` and, where their order or state
differ, ``_in_dequeue_order`` and ``_rng_state``/``_set_rng_state``.

Live queues: while the test-only bookkeeping is on (``tracking`` of
``aqueue/_waiting/_tracking.py``, which ``aqueue.testing`` turns on), every queue joins
a module-level ``weakref.WeakSet`` at the end of its constructor, and ``live_queues()``
lists the ones not yet garbage-collected, so that ``aqueue.testing`` can name the
queues a hung test is stuck on. The set holds weak references only (it never keeps a
queue alive) and is read, never written, outside the constructor.
"""

from __future__ import annotations

import threading
import weakref
from types import TracebackType
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from .._errors import CheckpointError, ElementSpecError
from .._waiting._backend import checkpoint, in_event_loop, make_waker
from .._waiting._tracking import tracking, weak_snapshot
from .._waiting._wait import wait_task
from ._accounting import Producers
from ._declare import Components
from ._engine import Engine
from ._protocol import QueueStatistics
from ._requests import MANY, ONE, SOME, UP_TO, GetRequest
from ._snapshot import QueueSnapshot, checked_contents, frozen_elements, snapshot_expected
from ._spec import ElementSpec
from ._storage import FillableStorage, Storage
from ._views import BatchIterator, BlockingQueue, ElementIterator

__all__ = ["QueueBase", "live_queues"]

T = TypeVar("T")
U = TypeVar("U")
Q = TypeVar("Q", bound="QueueBase[Any]")

_live: weakref.WeakSet[QueueBase[Any]] = weakref.WeakSet()


def live_queues() -> list[QueueBase[Any]]:
    """Every in-process queue created while the test-only bookkeeping was on and not
    yet garbage-collected, in no particular order."""
    return weak_snapshot(_live)


class QueueBase(Generic[T]):
    """Shared implementation of every aqueue queue; see the subclasses for constructors.

    Generic in the type ``T`` of what comes out (an element, and a batch of elements,
    have the same form): ``numpy.ndarray`` for one unnamed component, a tuple of arrays
    for several, ``dict[str, numpy.ndarray]`` with ``names``. The kinds' constructors
    infer it where the arguments tell; otherwise name it: ``FIFOQueue[MyTuple](...)``.
    A scalar component (shape ``()``) comes back as a numpy scalar, which offers the
    same operations as a 0-d array.
    """

    default_name = "queue"
    """The name a queue of this kind gets when none is given."""

    _kind: ClassVar[str | None] = None  # set by each kind: what its snapshots name
    _by_kind: ClassVar[dict[str, type[QueueBase[Any]]]] = {}  # kind name -> class
    _seed: int | None = None  # (RandomShuffleQueue's seed)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("_kind")
        if kind is not None:
            QueueBase._by_kind[kind] = cls

    def __init__(
        self,
        capacity: int,
        spec: ElementSpec,
        storage: Storage,
        *,
        name: str,
        fill: FillableStorage | None = None,
        min_after_dequeue: int = 0,
    ) -> None:
        self._spec = spec
        self._name = name
        self._engine = Engine(
            capacity, storage, name=name, fill=fill, min_after_dequeue=min_after_dequeue
        )
        self._capacity = capacity
        self._single = spec.names is None and len(spec.dtypes) == 1
        self._batches = spec.shapes is not None  # (batch operations need shapes)
        self._producers = Producers(name, self.close)
        if tracking.on:  # (see "Live queues" in the module docstring)
            _live.add(self)

    # -- properties ----------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """Maximum number of elements the queue holds (enqueuers wait beyond it)."""
        return self._capacity

    @property
    def dtypes(self) -> tuple[np.dtype[Any], ...]:
        """One numpy dtype per component."""
        return self._spec.dtypes

    @property
    def shapes(self) -> tuple[tuple[int | None, ...], ...] | None:
        """One shape per component, or None when shapes were not declared."""
        return self._spec.shapes

    @property
    def names(self) -> tuple[str, ...] | None:
        """Component names, or None for unnamed components."""
        return self._spec.names

    @property
    def name(self) -> str:
        """The queue's name, used in error messages and reports."""
        return self._name

    @property
    def min_after_dequeue(self) -> int:
        """Elements a dequeue leaves behind while the queue is open (0 but for a
        RandomShuffleQueue)."""
        return self._engine.floor

    @property
    def closed(self) -> bool:
        """Whether ``close()`` has been called."""
        return self._engine.closed

    def size(self) -> int:
        """Number of elements stored now."""
        return self._engine.storage.size

    def __len__(self) -> int:
        return self._engine.storage.size

    def __repr__(self) -> str:
        engine: Engine | None = getattr(self, "_engine", None)
        if engine is None:  # the constructor raised (a repr in its traceback)
            return f"<{type(self).__name__} (not constructed)>"
        state = "closed" if engine.closed else "open"
        return (
            f"<{type(self).__name__} '{self._name}' size={engine.storage.size}/"
            f"{self._capacity} {state}>"
        )

    # -- async operations ----------------------------------------------------------------

    async def enqueue(self, element: Any) -> None:
        """Add one element, waiting while the queue is full.

        Raises:
            ElementSpecError: the element does not fit the spec (nothing is admitted).
            QueueClosedError: the queue is closed, or it was closed with
                ``cancel_pending_enqueues=True`` while this call waited.

        If cancelled, the element was not admitted.
        """
        comps = self._spec.element(element)
        await checkpoint()
        req = self._engine.put(ONE, comps, 1, make_waker)
        if req is not None:
            await wait_task(self._engine, req)

    async def enqueue_many(self, batch: Any) -> None:
        """Add the elements of ``batch`` (sliced along axis 0), in order.

        A batch larger than the free space is admitted progressively, as room frees, and
        the call returns once its last element is in; its elements stay contiguous. If
        the call is cancelled (or its queue is closed with ``cancel_pending_enqueues``)
        meanwhile, exactly a prefix of the batch has been admitted and stays queued.
        An empty batch is a no-op.
        """
        comps, count = self._spec.batch(batch)
        await checkpoint()
        if count:
            req = self._engine.put(MANY, comps, count, make_waker)
            if req is not None:
                await wait_task(self._engine, req)

    async def dequeue(self) -> T:
        """Remove and return one element, waiting while none can be taken.

        Raises:
            OutOfRangeError: the queue is closed and empty (and nothing is pending).

        If cancelled, nothing was consumed.
        """
        await checkpoint()
        got = self._engine.get(ONE, 1, make_waker)
        if type(got) is GetRequest:
            got = await wait_task(self._engine, got, self)
        result: T = got[0] if self._single else self._spec.pack(got)
        return result

    async def dequeue_many(self, n: int) -> T:
        """Remove and return exactly ``n`` elements as a batch, waiting for them.

        Raises:
            OutOfRangeError: the queue is closed and holds fewer than ``n``; nothing is
                consumed (elements this call had claimed are put back in order).
            ElementSpecError: ``n < 0`` or the queue has no declared shapes.

        If cancelled, nothing was consumed.
        """
        if type(n) is not int or n < 0 or not self._batches:  # (the spec says why)
            n = self._spec.batch_count(n, "dequeue_many")
        return await self._get_batch(MANY, n)

    async def dequeue_up_to(self, n: int) -> T:
        """Like dequeue_many, but once the queue is closed return the 1..n that remain.

        As in TensorFlow, on an *open* queue this waits for all ``n`` elements; use
        ``dequeue_up_to_nowait`` or ``dequeue_burst`` to take whatever is there now.
        """
        if type(n) is not int or n < 0 or not self._batches:  # (the spec says why)
            n = self._spec.batch_count(n, "dequeue_up_to")
        return await self._get_batch(UP_TO, n)

    async def dequeue_burst(self, n: int) -> T:
        """Wait until at least one element can be taken, then take up to ``n`` at once.

        Returns a batch of 1..n elements: as many as the queue can give at that moment
        (unlike ``dequeue_up_to``, which on an open queue waits for all ``n``). Made for
        workers that move items in bursts: one hand-off per burst instead of one per
        element.

        Raises:
            OutOfRangeError: the queue is closed and empty (and nothing is pending).
            ElementSpecError: ``n < 0`` or the queue has no declared shapes.

        If cancelled, nothing was consumed.
        """
        n = self._spec.batch_count(n, "dequeue_burst")
        await checkpoint()
        got = self._engine.get(SOME, n, make_waker)
        if type(got) is GetRequest:
            got = await wait_task(self._engine, got, self)
        return self._batch(got)

    async def _get_batch(self, mode: int, n: int) -> T:
        """dequeue_many and dequeue_up_to: park first if it must wait (see the module
        docstring), else checkpoint first."""
        engine = self._engine
        first = engine.parks_first(n)
        if not first:
            await checkpoint()
        got = engine.get(mode, n, make_waker, first)
        if type(got) is GetRequest:
            got = await wait_task(engine, got, self, checkpointed=not first)
        return self._batch(got)

    def _batch(self, comps: Any) -> T:
        """A dequeued batch in user form (None: a batch of 0)."""
        result: T
        if comps is None:
            result = self._spec.empty_batch()
        else:
            result = comps[0] if self._single else self._spec.pack(comps)
        return result

    # -- sync operations -----------------------------------------------------------------

    def enqueue_nowait(self, element: Any) -> None:
        """Add one element now, or raise QueueFull (or QueueClosedError)."""
        self._engine.put(ONE, self._spec.element(element), 1)

    def enqueue_many_nowait(self, batch: Any) -> None:
        """Add the whole batch now, or nothing and raise QueueFull (all-or-nothing)."""
        comps, count = self._spec.batch(batch)
        if count:
            self._engine.put(MANY, comps, count)

    def dequeue_nowait(self) -> T:
        """Remove one element now, or raise QueueEmpty (OutOfRangeError when final)."""
        result: T = self._spec.pack(self._engine.get(ONE, 1))
        return result

    def dequeue_many_nowait(self, n: int) -> T:
        """Remove exactly ``n`` elements now, or raise QueueEmpty (OutOfRangeError when final)."""
        n = self._spec.batch_count(n, "dequeue_many_nowait")
        return self._batch(self._engine.get(MANY, n))

    def dequeue_up_to_nowait(self, n: int) -> T:
        """Remove 1..n elements available now, or raise QueueEmpty (OutOfRangeError when final)."""
        n = self._spec.batch_count(n, "dequeue_up_to_nowait")
        return self._batch(self._engine.get(UP_TO, n))

    # -- closing, statistics -------------------------------------------------------------

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue for new enqueues; idempotent.

        Enqueues already waiting still complete as room frees, unless
        ``cancel_pending_enqueues`` is true: then each fails at once with
        QueueClosedError (elements a pending enqueue_many had admitted stay). Remaining
        elements can be dequeued; every blocked dequeuer is woken and either gets data
        or OutOfRangeError, so nobody waits on a closed queue forever.
        """
        self._engine.close(bool(cancel_pending_enqueues))

    async def aclose(self, cancel_pending_enqueues: bool = False) -> None:
        """Close the queue (as ``close()``), then checkpoint."""
        self.close(cancel_pending_enqueues)
        await checkpoint()

    async def __aenter__(self: Q) -> Q:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def statistics(self) -> QueueStatistics:
        """A frozen snapshot of the queue's counters."""
        return self._engine.statistics()

    # -- producer accounting (the AsyncQueue protocol) -----------------------------------

    async def register_producer(self) -> str:
        """Producer accounting, for runners and producer processes of your own: count
        one more producer of this queue and return its id for ``producer_done``.

        A ``QueueRunner`` does this for each of its producers; call it yourself only for
        producers that are not run by one (an actor process feeding a shared queue).
        With producers registered, the queue closes after the last one has ended (see
        ``producer_done``). Completes without waiting.

        Raises:
            QueueClosedError: The queue is closed (a producer would have nothing to do).
        """
        return self._producers.register(self._engine.closed)

    async def producer_done(self, producer_id: str, *, clean: bool = True) -> None:
        """Producer accounting (see ``register_producer``): producer ``producer_id`` has
        ended. A clean end of the last registered producer closes the queue (consumers
        drain it, then get OutOfRangeError); ``clean=False`` (the producer failed)
        closes it with ``cancel_pending_enqueues=True`` at once. Completes without
        waiting. The same signature as on ``aqueue.redis`` queues.

        Raises:
            ElementSpecError: ``producer_id`` is not registered (or already done).
        """
        self._producers.done(producer_id, clean)

    def release_producers(self) -> None:
        """Called by a ``Coordinator`` when it stops (user code does not need it): close
        with ``cancel_pending_enqueues=True``, which releases every producer waiting to
        enqueue (as TensorFlow's coordinator does)."""
        self.close(cancel_pending_enqueues=True)

    # -- snapshots (see the module docstring) --------------------------------------------

    def snapshot(self) -> QueueSnapshot[T]:
        """What the queue holds now: spec, elements in dequeue order, closed flag and,
        for a RandomShuffleQueue, its generator's state.

        Consistent (taken under the queue's lock) and changes nothing: callable from
        the event loop or any thread while producers and consumers wait. Elements a
        waiting batch dequeue has claimed are included, first; elements of pending
        enqueues are not (they have not been admitted).
        """
        kind = self._kind
        if kind is None:  # (only the four kinds are constructible)
            raise CheckpointError(f"{type(self).__name__} has no snapshot")
        elements, closed, rng_state = self._engine.dump_with(self._rng_state)
        return QueueSnapshot(
            kind=kind,
            name=self._name,
            capacity=self._capacity,
            dtypes=self._spec.dtypes,
            shapes=self._spec.shapes,
            names=self._spec.names,
            min_after_dequeue=self._engine.floor,
            seed=self._seed,
            closed=closed,
            elements=frozen_elements(self._in_dequeue_order(elements)),
            rng_state=rng_state,
        )

    @classmethod
    def from_snapshot(cls, snap: QueueSnapshot[U]) -> QueueBase[U]:
        """A new queue equal to the one ``snap`` was taken from: same spec, the same
        elements in the same order (all of them, even beyond the capacity), the same
        random generator state, closed if it was. Called on ``QueueBase`` it builds the
        snapshot's kind; on a kind, the snapshot must be of that kind.

        Raises:
            ElementSpecError: ``snap`` is not a QueueSnapshot, is of another kind (the
                message names both), its spec is invalid, or an element does not fit it.
            CheckpointError: its ``rng_state`` is not a state of the queue's generator.
        """
        restored: QueueBase[U] = cls._restore(snap)
        return restored

    @classmethod
    def _restore(cls, snap: QueueSnapshot[Any]) -> Any:
        where = f"{cls.__name__}.from_snapshot"
        if not isinstance(snap, QueueSnapshot):
            raise ElementSpecError(snapshot_expected(where, QueueSnapshot, snap))
        target = QueueBase._by_kind.get(snap.kind) if cls._kind is None else cls
        if target is None:
            raise ElementSpecError(f"{where}: unknown queue kind {snap.kind!r}")
        if snap.kind != target._kind:
            raise ElementSpecError(
                f"{where}: the snapshot is of a {snap.kind} (queue '{snap.name}'), not a "
                f"{target._kind}; restore it with aqueue.{snap.kind}.from_snapshot"
            )
        queue = target._empty_like(snap)
        contents = checked_contents(queue._spec, snap.elements, where)
        if snap.rng_state is not None:
            queue._set_rng_state(snap.rng_state, where)
        if isinstance(contents, list):
            queue._engine.load(contents)
        else:
            queue._engine.load_rows(*contents)
        if snap.closed:
            queue.close()
        return queue

    @classmethod
    def _empty_like(cls: type[Q], snap: QueueSnapshot[Any]) -> Q:
        """An empty queue of this kind with ``snap``'s spec."""
        raise NotImplementedError

    def _rng_state(self) -> dict[str, Any] | None:
        """The state of the random generator the storage draws from (lock held)."""
        return None

    def _set_rng_state(self, state: dict[str, Any], where: str) -> None:
        raise CheckpointError(f"{where}: a {self._kind} has no random generator state")

    def _in_dequeue_order(self, elements: list[Components]) -> list[Components]:
        """``Engine.dump``'s elements (claims first) in the order dequeues see them."""
        return elements

    # -- iteration and the thread view ---------------------------------------------------

    def __aiter__(self) -> ElementIterator[T]:
        return ElementIterator(self)

    def batches(self, n: int, *, allow_smaller_final_batch: bool = False) -> BatchIterator[T]:
        """An async iterator of batches of ``n``; ends cleanly when the queue is final.

        Leftovers smaller than ``n`` are left in the queue, unless
        ``allow_smaller_final_batch`` is true (then they come as one short final batch).
        Iterating never closes the queue.
        """
        n = self._spec.batch_count(n, "batches")
        if n == 0:
            raise ElementSpecError(f"queue '{self._name}'.batches: n must be >= 1, got 0")
        return BatchIterator(self, n, allow_smaller_final_batch)

    def blocking(self) -> BlockingQueue[T]:
        """A view whose blocking methods may be called from other threads.

        It may be created anywhere. Its methods must be called from threads that do
        not run an event loop (RuntimeError otherwise): there, blocking would stall
        every task of that loop.
        """
        loop_thread = threading.get_ident() if in_event_loop() else None
        return BlockingQueue(self, self._spec, self._engine, loop_thread)
