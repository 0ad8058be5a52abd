"""The context-local registry of queue runners (TF's QUEUE_RUNNERS collection), and the
coordinator's warning for registered runners that were never started.

``add_queue_runner`` registers runners while a pipeline is built, and does nothing
else (no thread, no task, no timer); ``coord.start_queue_runners()`` starts them
together. The registry lives in a ``contextvars.ContextVar`` holding a list that is
created on first use and emptied in place when taken, so contexts copied from the one
that created it (tasks started later) share it.

TF's most common silent hang is a consumer blocked on the queue of a runner that was
registered and never started. A Coordinator warns about it: when its block is entered
and its context's registry holds runners not yet started, it runs an
``UnstartedWatch`` as a task in its task group (cancelled when the block is left, like
the stall watchdog). Every ``POLL_S`` seconds the watch reads the registry (runners
registered later in the same registry count too), each unstarted runner's
``runner.started`` and its queue's ``statistics()``, and logs one warning per queue
once a consumer has waited on it for ``AFTER_S`` seconds. Queues whose statistics need
a server (shared queues) are not watched. Without a coordinator nothing warns:
``aqueue.testing``'s stall guard and ``drain`` name such runners instead (they read
``unstarted_runners`` in ``_alive.py``).

Invariants: the registry list of a context only grows (``add_queue_runner``, once per
runner) or is emptied at once (``take_registered_runners``); a watch belongs to one
coordinator's block, warns at most once per queue, and holds its runners only while
that block runs.
"""

from __future__ import annotations

import contextvars
import logging
import time

import anyio

from .._queues._protocol import AsyncQueue, Sink, local_statistics
from .._replay._protocol import AsyncReplayTable, local_table_statistics
from . import _alive
from ._runner import QueueRunner

__all__ = [
    "UnstartedWatch",
    "add_queue_runner",
    "registered_runners",
    "take_registered_runners",
]

logger = logging.getLogger("aqueue")

_registry: contextvars.ContextVar[list[QueueRunner]] = contextvars.ContextVar(
    "aqueue_queue_runners"
)


def add_queue_runner(runner: QueueRunner) -> None:
    """Register ``runner`` in the current context's collection of queue runners.

    ``coord.start_queue_runners()`` later starts every registered runner. The collection
    is context-local (a ``contextvars.ContextVar``): runners registered at module level
    are seen by every task started afterwards; runners registered inside a task are seen
    by that task (and the tasks it starts later).

    Inside ``async with Coordinator() as coord:``, a consumer that blocks for about a
    second on the queue of a registered runner that was never started gets a warning
    on the "aqueue" logger naming the queue (the silent hang of TensorFlow pipelines
    whose runners were never started): the coordinator gives it.

    Raises:
        TypeError: ``runner`` is not a QueueRunner.
    """
    if not isinstance(runner, QueueRunner):
        raise TypeError(f"add_queue_runner: expected a QueueRunner, got {type(runner).__name__}")
    try:
        runners = _registry.get()
    except LookupError:
        runners = []
        _registry.set(runners)
    if runner not in runners:
        runners.append(runner)
    _alive.runner_registered(runner)


def registered_runners() -> list[QueueRunner]:
    """The runners registered in the current context, left registered."""
    try:
        return list(_registry.get())
    except LookupError:
        return []


def take_registered_runners() -> list[QueueRunner]:
    """Return the runners registered in the current context and clear the collection."""
    try:
        runners = _registry.get()
    except LookupError:
        return []
    taken = list(runners)
    runners.clear()  # in place: outer contexts that share the list see it empty too
    return taken


class UnstartedWatch:
    """A coordinator's warning for registered runners never started (module docstring).

    ``UnstartedWatch.needed()`` tells the coordinator whether to run one; ``run`` is
    its task; ``check`` is one look (what ``run`` does every ``POLL_S`` seconds).
    """

    POLL_S = 0.25
    """Seconds between two looks at the registry and the queues."""
    AFTER_S = 1.0
    """Seconds a consumer waits on the queue of an unstarted runner before the warning."""

    def __init__(self) -> None:
        self._blocked_since: dict[QueueRunner, float] = {}
        self._warned: list[Sink] = []  # warned about (compared by identity)

    @staticmethod
    def needed() -> bool:
        """Whether the current context's registry holds a runner never started."""
        return any(not r.started for r in registered_runners())

    async def run(self) -> None:
        """Look every ``POLL_S`` seconds until cancelled (the coordinator's exit)."""
        while True:
            await anyio.sleep(self.POLL_S)
            self.check(time.monotonic())

    def check(self, now: float) -> list[str]:
        """Log (and return) a warning for each queue whose consumers have waited
        ``AFTER_S`` seconds for a registered runner never started."""
        messages = []
        unstarted = [r for r in registered_runners() if not r.started]
        for r in list(self._blocked_since):
            if r not in unstarted:
                del self._blocked_since[r]
        for r in unstarted:
            q = r.queue
            reading = _consumers(q)
            if reading is None or any(w is q for w in self._warned):
                continue  # (a shared one's statistics need its server: not watched here)
            what, waiting, closed = reading
            if waiting == 0 or closed:
                self._blocked_since.pop(r, None)
                continue
            since = self._blocked_since.setdefault(r, now)
            if now - since < self.AFTER_S:
                continue
            self._warned.append(q)
            message = (
                f"{what} '{q.name}' has {waiting} consumer(s) waiting, but "
                f"QueueRunner '{r.name}' that feeds it was registered with add_queue_runner() "
                "and never started; call coord.start_queue_runners() (or coord.start(runner)) "
                "inside `async with Coordinator() as coord:`"
            )
            logger.warning("%s", message)
            messages.append(message)
        return messages


def _consumers(sink: Sink) -> tuple[str, int, bool] | None:
    """What ``sink`` is called, how many consumers wait on it (a queue's dequeuers, a
    table's samplers) and whether it is closed; None when that cannot be read without
    waiting (a shared one) or it is neither a queue nor a table."""
    if isinstance(sink, AsyncQueue):
        st = local_statistics(sink)
        return None if st is None else ("queue", st.tasks_waiting_dequeue, st.closed)
    if isinstance(sink, AsyncReplayTable):
        rs = local_table_statistics(sink)
        return None if rs is None else ("replay table", rs.samples_waiting, rs.closed)
    return None
