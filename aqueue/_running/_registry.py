"""The context-local registry of queue runners (TF's QUEUE_RUNNERS collection).

``add_queue_runner`` registers runners while a pipeline is built, and starts nothing
(no thread, no task, no timer); ``coord.start_queue_runners()`` starts them together.
The registry lives in a ``contextvars.ContextVar`` holding a list that is created on
first use and emptied in place when taken, so contexts copied from the one that
created it (tasks started later) share it.

A runner registered and never started is TF's most common silent hang: registering
one also hands it to ``_unstarted.py``, whose warning reaches a consumer blocked on its
queue, with or without a Coordinator. In tests, ``aqueue.testing``'s stall guard and
``drain`` name such runners too (they read ``unstarted_runners`` in ``_alive.py``).

Invariant: the registry list of a context only grows (``add_queue_runner``, once per
runner) or is emptied at once (``take_registered_runners``).
"""

from __future__ import annotations

import contextvars

from . import _alive, _unstarted
from ._runner import QueueRunner

__all__ = ["add_queue_runner", "registered_runners", "take_registered_runners"]

_registry: contextvars.ContextVar[list[QueueRunner]] = contextvars.ContextVar(
    "aqueue_queue_runners"
)


def add_queue_runner(runner: QueueRunner) -> None:
    """Register ``runner`` in the current context's collection of queue runners.

    ``coord.start_queue_runners()`` later starts every registered runner. The collection
    is context-local (a ``contextvars.ContextVar``): runners registered at module level
    are seen by every task started afterwards; runners registered inside a task are seen
    by that task (and the tasks it starts later).

    A consumer that blocks for about a second on the queue of a registered runner that
    was never started gets a warning on the "aqueue" logger naming the queue, the runner
    and the fix (the silent hang of TensorFlow pipelines whose runners were never
    started), with or without a Coordinator; it goes on waiting.

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
    _unstarted.registered(runner)


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
