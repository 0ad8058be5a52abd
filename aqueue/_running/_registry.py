"""The context-local registry of queue runners (TF's QUEUE_RUNNERS collection), and the
watch for runners registered but never started.

``add_queue_runner`` registers runners while a pipeline is built;
``coord.start_queue_runners()`` starts them together. The registry lives in a
``contextvars.ContextVar`` holding a list that is created on first use and emptied in
place when taken, so contexts copied from the one that created it (tasks started
later) share it.

Registration may happen before any event loop runs, so a small daemon thread watches
for TF's most common silent hang: it lives only while some registered runner has not
been started, polls every 0.25 s, reads nothing but the queue's ``statistics()``
(which takes the queue's lock) and ``runner.started``, and logs one warning per queue
once a consumer has waited on it for a second while its runner was never started.
Queues whose statistics need a server (shared queues) are not watched.
``unstarted_runners()`` lists the runners of that watch, and ``registered_runners()``
those of the current context (both for ``aqueue.testing``).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from .._queues._protocol import local_statistics

if TYPE_CHECKING:
    from ._runner import QueueRunner

__all__ = [
    "add_queue_runner",
    "registered_runners",
    "take_registered_runners",
    "unstarted_runners",
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

    A consumer that blocks for about a second on the queue of a registered runner that
    was never started gets a warning on the "aqueue" logger naming the queue: the silent
    hang of TensorFlow pipelines whose runners were never started.

    Raises:
        TypeError: ``runner`` is not a QueueRunner.
    """
    from ._runner import QueueRunner  # (the runner module imports this one)

    if not isinstance(runner, QueueRunner):
        raise TypeError(f"add_queue_runner: expected a QueueRunner, got {type(runner).__name__}")
    try:
        runners = _registry.get()
    except LookupError:
        runners = []
        _registry.set(runners)
    if runner not in runners:
        runners.append(runner)
    if not runner.started:
        _watch_unstarted(runner)


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


_UNSTARTED_POLL_S = 0.25
_UNSTARTED_AFTER_S = 1.0

_pending: weakref.WeakSet[QueueRunner] = weakref.WeakSet()
_pending_lock = threading.Lock()
_watcher: threading.Thread | None = None
_blocked_since: weakref.WeakKeyDictionary[QueueRunner, float] = weakref.WeakKeyDictionary()
_warned: weakref.WeakSet[Any] = weakref.WeakSet()


def unstarted_runners() -> list[QueueRunner]:
    """Runners registered with add_queue_runner (in any context) and never started, not
    yet garbage-collected."""
    with _pending_lock:
        return [r for r in _pending if not r.started]


def _watch_unstarted(runner: QueueRunner) -> None:
    global _watcher
    with _pending_lock:
        _pending.add(runner)
        if _watcher is None:
            _watcher = threading.Thread(
                target=_unstarted_loop, name="aqueue-unstarted-runner-watch", daemon=True
            )
            _watcher.start()


def _unstarted_loop() -> None:
    global _watcher
    while True:
        time.sleep(_UNSTARTED_POLL_S)
        with _pending_lock:
            for r in [r for r in _pending if r.started]:
                _pending.discard(r)
            runners = list(_pending)
            if not runners:
                _watcher = None
                return
        _check_unstarted(runners, time.monotonic())


def _check_unstarted(runners: list[QueueRunner], now: float) -> None:
    for r in runners:
        q = r.queue
        st = local_statistics(q)
        if st is None or q in _warned:
            continue  # (a shared queue's statistics need its server: not watched here)
        if st.tasks_waiting_dequeue == 0 or st.closed:
            _blocked_since.pop(r, None)
            continue
        since = _blocked_since.setdefault(r, now)
        if now - since >= _UNSTARTED_AFTER_S and not r.started:
            _warned.add(q)
            logger.warning(
                "queue '%s' has %d consumer(s) waiting, but QueueRunner '%s' that feeds it "
                "was registered with add_queue_runner() and never started; call "
                "coord.start_queue_runners() (or coord.start(runner)) inside "
                "`async with Coordinator() as coord:`",
                q.name,
                st.tasks_waiting_dequeue,
                r.name,
            )
