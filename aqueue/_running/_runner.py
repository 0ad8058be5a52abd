"""QueueRunner: producers that keep one queue filled.

A runner holds a sink (any ``Sink``: a queue, in-process or shared through a server,
or a replay table) and a list of producers. A Coordinator starts it
(``coord.start(runner)``, which calls ``runner.launch`` with the ``Supervisor`` the
coordinator offers); each producer then runs until it ends cleanly, fails, or the
coordinator stops. Async producers run as tasks in the coordinator's task group, sync
ones on dedicated, named daemon threads.

This module holds the runner's public surface (construction, properties, ``join``,
``producer_states``, ``source_queues``, ``launch``) and the ``Supervisor`` protocol.
What runs the producers of one start is a ``Launch`` (``_launch.py``) that the runner
holds: registering and starting the producers, their loops, and the invariants they
keep (registration before any start, every end reported to the queue, clean and failed
ends, threads never touching the event loop).

Invariants:

- Each ``launch`` makes a fresh ``Launch`` with fresh producer slots and clears
  ``exceptions_raised`` (a new list, which the launch appends to); a runner launches
  again only once no producer of its current launch is running.
- Producer kinds are told apart once, at construction (``classify``).
- The runner reaches its sink through the ``Sink`` protocol only (``name``,
  ``enqueue``/``enqueue_many``, the thread view's two, producer accounting), so a
  queue and a replay table of any backend are filled alike, with no per-item work
  that depends on which it is. ``QueueRunner`` is generic in its sink's type, so
  ``runner.queue`` keeps it (a queue stays a queue to the type checker).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from .._errors import OutOfRangeError, QueueClosedError, name_arg
from .._queues._protocol import AsyncQueue, Sink
from . import _alive, _unstarted
from ._launch import Launch, ProducerSupervisor
from ._producers import ProducerSlot, classify

__all__ = ["Producer", "QueueRunner", "Supervisor"]

Producer = Callable[[], Any] | AsyncIterable[Any] | Iterable[Any]
"""An async or sync callable (called repeatedly) or an async or sync iterable."""

if TYPE_CHECKING:  # a bare ``QueueRunner`` annotation means any sink's runner
    from typing_extensions import TypeVar as _DefaultTypeVar

    S = _DefaultTypeVar("S", bound=Sink, covariant=True, default=Sink)
else:
    S = TypeVar("S", bound=Sink, covariant=True)


class Supervisor(ProducerSupervisor, Protocol):
    """What a coordinator offers the runners it starts: what their launches need, and
    starting another runner (a batch runner's stand-in starts the real one)."""

    def start(self, runner: QueueRunner) -> None:
        """Start another runner under the same coordinator."""
        ...


class QueueRunner(Generic[S]):
    """Producers that keep one queue (or replay table) filled, started and stopped by
    a Coordinator.

    Args:
        queue: The sink the producers fill: an in-process queue, a shared one from
            ``aqueue.redis``, or a replay table (each value is inserted with the
            default priority; with ``enqueue_many``, a batch goes in as the table's
            rate limiter admits it). Anything implementing ``aqueue.Sink``.
        producers: A non-empty sequence. Each item is an async callable (awaited
            repeatedly, each result enqueued), an async iterable (each item enqueued), a
            sync callable (called repeatedly on a dedicated thread) or a sync iterable
            (advanced on a dedicated thread). Listing the same callable k times gives k
            concurrent producers; an iterator listed k times is shared by k producers.
        enqueue_many: Each produced value is a batch (``enqueue_many``) instead of one
            element.
        name: The runner's name (default: the queue's name).
        queue_closed_exception_types: Exceptions that end a producer cleanly (an
            upstream queue is exhausted, or this queue was closed).

    Raises:
        TypeError: A producer is none of the four kinds, ``queue`` is not a sink, or
            ``queue_closed_exception_types`` is not a tuple of exception classes.
        ValueError: ``producers`` is empty, or ``name`` is empty (ElementSpecError, a
            ValueError; a name that is not a str too).
    """

    def __init__(
        self,
        queue: S,
        producers: Sequence[Producer],
        *,
        enqueue_many: bool = False,
        name: str | None = None,
        queue_closed_exception_types: tuple[type[BaseException], ...] = (
            OutOfRangeError,
            QueueClosedError,
        ),
    ) -> None:
        if not isinstance(queue, Sink):
            raise TypeError(
                "QueueRunner: queue must be an aqueue queue or replay table (an "
                f"aqueue.Sink), got {type(queue).__name__}"
            )
        if callable(producers) or not isinstance(producers, Sequence) or isinstance(producers, str):
            raise TypeError(
                "QueueRunner: producers must be a sequence of producers (e.g. [load] or "
                f"[load] * 4), got {type(producers).__name__}"
            )
        if len(producers) == 0:
            raise ValueError(f"QueueRunner for queue '{queue.name}': producers must not be empty")
        types = queue_closed_exception_types
        if (
            not isinstance(types, tuple)
            or not types
            or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types)
        ):
            raise TypeError(
                "QueueRunner: queue_closed_exception_types must be a non-empty tuple of "
                f"exception classes, got {types!r}"
            )
        self._queue = queue
        self._producers = [ProducerSlot(i, p, classify(i, p)) for i, p in enumerate(producers)]
        self._enqueue_many = bool(enqueue_many)
        self._name = name_arg(name, queue.name, f"QueueRunner for queue '{queue.name}': name")
        self._closed_types = types
        self._clean_types: tuple[type[BaseException], ...] = (
            StopIteration,
            StopAsyncIteration,
            *types,
        )
        self._launch: Launch | None = None
        self._started = False
        self.exceptions_raised: list[BaseException] = []
        """Non-clean exceptions raised by producers since the last start, first first."""

    @property
    def name(self) -> str:
        """The runner's name (by default its queue's name)."""
        return self._name

    @property
    def queue(self) -> S:
        """The queue (or replay table) this runner fills."""
        return self._queue

    @property
    def enqueue_many(self) -> bool:
        """Whether each produced value is a batch."""
        return self._enqueue_many

    @property
    def queue_closed_exception_types(self) -> tuple[type[BaseException], ...]:
        """Exceptions that end a producer cleanly."""
        return self._closed_types

    @property
    def running(self) -> bool:
        """Whether any producer of the current start is still running."""
        return self._launch is not None and self._launch.live > 0

    @property
    def started(self) -> bool:
        """Whether the runner was ever started."""
        return self._started

    def __repr__(self) -> str:
        live = self._launch.live if self._launch is not None else 0
        return (
            f"<QueueRunner '{self._name}' queue='{self._queue.name}' "
            f"producers={len(self._producers)} live={live}>"
        )

    async def join(self) -> None:
        """Wait until every producer of the current start has ended (and the queue has
        been told, so it closed if they were its last producers).

        Raises:
            RuntimeError: The runner was never started.
        """
        launch = self._launch
        if launch is None:
            raise RuntimeError(f"QueueRunner '{self._name}'.join(): the runner was never started")
        await launch.ended.wait()

    def producer_states(self) -> list[tuple[str, str]]:
        """``(label, state)`` of each producer of the current start: ``idle``,
        ``producing``, ``enqueueing`` or ``done`` (empty before the first start)."""
        launch = self._launch
        if launch is None:
            return []
        return [(p.label, p.state) for p in launch.producers]

    def source_queues(self) -> list[AsyncQueue[Any]]:
        """Queues this runner's producers read from (detected: a queue, its bound
        method, or its iterator, listed as a producer)."""
        found = []
        for p in self._producers:
            for cand in (p.target, getattr(p.target, "__self__", None)):
                cand = getattr(cand, "queue", cand)  # a queue's element/batch iterator
                if isinstance(cand, AsyncQueue) and cand is not self._queue:
                    found.append(cand)
        return found

    def launch(self, supervisor: Supervisor) -> None:
        """Start every producer under ``supervisor`` (``Coordinator.start`` calls this,
        on the event-loop thread).

        Raises:
            RuntimeError: The runner is already running.
        """
        if self.running:
            raise RuntimeError(f"QueueRunner '{self._name}' is already running")
        self._started = True
        _unstarted.started(self)
        _alive.runner_launched(self)
        self.exceptions_raised = []
        self._launch = Launch(
            self._queue,
            self._name,
            [ProducerSlot(p.index, p.target, p.kind) for p in self._producers],
            supervisor,
            enqueue_many=self._enqueue_many,
            clean_types=self._clean_types,
            exceptions=self.exceptions_raised,
        )
        self._launch.start()
