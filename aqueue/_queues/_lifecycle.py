"""QueueLifecycle: a queue's life beyond single operations (mixed into ``QueueBase``).

Two things the upper layers ask of a queue besides moving elements:

- *Producer accounting* (the AsyncQueue protocol): a QueueRunner registers each
  producer (``register_producer``) and reports its end (``producer_done``); the clean
  end of the last one closes the queue, so consumers drain it and then get
  OutOfRangeError; an unclean end closes it at once with
  ``cancel_pending_enqueues=True``, as does a coordinator's stop
  (``release_producers``). The methods are async for the protocol (aqueue.redis's
  make round trips to the server); these complete without awaiting.
- *Snapshots* (invariants in ``_snapshot.py``): ``snapshot`` reads the spec, the
  elements in dequeue order, the closed flag and a RandomShuffleQueue's generator state
  under one acquisition of the engine's lock (``Engine.dump_with``) and changes
  nothing; ``from_snapshot`` builds an empty queue of the snapshot's kind
  (``_empty_like``), checks the elements against its spec, loads them whatever the
  capacity, sets the generator state and closes it if the snapshot was closed.

Each constructible kind names itself with ``_kind``, the name its snapshots carry;
defining the class registers it in ``_by_kind``, so ``QueueBase.from_snapshot`` can
build any kind. The kinds supply ``_empty_like`` and, where their order or state
differ, ``_in_dequeue_order`` (a PriorityQueue sorts claimed elements back in) and
``_rng_state``/``_set_rng_state`` (a RandomShuffleQueue's generator).

The mixin keeps no state of its own beyond the producer set and counter that
``QueueBase``'s constructor sets; the annotations below tell the type checker what
it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from .._errors import CheckpointError, ElementSpecError, QueueClosedError
from ._declare import Components
from ._engine import Engine
from ._snapshot import QueueSnapshot, checked_contents, frozen_elements
from ._spec import ElementSpec

if TYPE_CHECKING:
    from ._queue import QueueBase

__all__ = ["QueueLifecycle"]

T = TypeVar("T")
U = TypeVar("U")
Q = TypeVar("Q", bound="QueueLifecycle[Any]")


class QueueLifecycle(Generic[T]):
    """Snapshots and producer accounting of a queue (see the module docstring)."""

    _spec: ElementSpec
    _name: str
    _capacity: int
    _engine: Engine
    _producers: set[str]  # registered producers (register_producer)
    _producer_seq: int

    _kind: ClassVar[str | None] = None  # set by each kind: what its snapshots name
    _by_kind: ClassVar[dict[str, type[QueueLifecycle[Any]]]] = {}  # kind name -> class
    _seed: int | None = None  # (RandomShuffleQueue's seed)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("_kind")
        if kind is not None:
            QueueLifecycle._by_kind[kind] = cls

    # -- snapshots (invariants in _snapshot.py) ------------------------------------------

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
            min_after_dequeue=self._engine.rules.floor,
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
            raise ElementSpecError(f"{where}: expected a QueueSnapshot, got {type(snap).__name__}")
        target = QueueLifecycle._by_kind.get(snap.kind) if cls._kind is None else cls
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
        if self._engine.closed:
            raise QueueClosedError(f"queue '{self._name}' is closed: cannot register a producer")
        self._producer_seq += 1
        producer_id = str(self._producer_seq)
        self._producers.add(producer_id)
        return producer_id

    async def producer_done(self, producer_id: str, *, clean: bool = True) -> None:
        """Producer accounting (see ``register_producer``): producer ``producer_id`` has
        ended. A clean end of the last registered producer closes the queue (consumers
        drain it, then get OutOfRangeError); ``clean=False`` (the producer failed)
        closes it with ``cancel_pending_enqueues=True`` at once. Completes without
        waiting. The same signature as on ``aqueue.redis`` queues.

        Raises:
            ElementSpecError: ``producer_id`` is not registered (or already done).
        """
        if producer_id not in self._producers:
            raise ElementSpecError(
                f"queue '{self._name}'.producer_done: producer {producer_id!r} is not "
                f"registered (registered: {sorted(self._producers)})"
            )
        self._producers.discard(producer_id)
        if not clean:
            self.close(cancel_pending_enqueues=True)
        elif not self._producers:
            self.close()

    def release_producers(self) -> None:
        """Called by a ``Coordinator`` when it stops (user code does not need it): close
        with ``cancel_pending_enqueues=True``, which releases every producer waiting to
        enqueue (as TensorFlow's coordinator does)."""
        self.close(cancel_pending_enqueues=True)

    if TYPE_CHECKING:

        def close(self, cancel_pending_enqueues: bool = False) -> None: ...
