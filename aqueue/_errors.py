"""Exceptions raised by aqueue.

The tree::

    QueueError(Exception)
    ├── QueueClosedError(QueueError, anyio.ClosedResourceError)
    │       enqueue into a closed queue, or a pending enqueue cancelled by
    │       ``close(cancel_pending_enqueues=True)``
    ├── OutOfRangeError(QueueError, anyio.EndOfStream)
    │       dequeue from a closed queue that holds too few elements
    ├── QueueFull(QueueError, anyio.WouldBlock, asyncio.QueueFull)
    │       a ``*_nowait`` enqueue that would have to wait
    ├── QueueEmpty(QueueError, anyio.WouldBlock, asyncio.QueueEmpty)
    │       a ``*_nowait`` dequeue that would have to wait
    ├── ElementSpecError(QueueError, ValueError)
    │       bad element, batch, spec or argument
    ├── CheckpointError(QueueError, ValueError)
    │       a snapshot or pipeline state that cannot be taken, saved, loaded or
    │       restored (a one-shot source, an unsavable object, a bad file)
    └── WorkerProcessError(QueueError, anyio.BrokenResourceError)
            a worker process of ``map(..., executor="process")`` died (a signal,
            ``os._exit``) or could not load the function

One warning, beside the tree: ``CheckpointWarning(UserWarning)``, from
``checkpoint()`` of a pipeline whose resume delivers every item once but not in the
same order (an unordered map with several workers, an unseeded shuffle).

Each leaf also derives from the matching anyio and asyncio base, so code written
against either ecosystem catches aqueue's errors with the ``except`` clauses it
already has. "Closed for enqueue" (QueueClosedError), "exhausted" (OutOfRangeError)
and "this waiter was cancelled" (the event loop's own cancellation exception) are
three distinct types on purpose: conflating them hides the real cause of a stop.

Every exception is constructible from a message alone (``raise OutOfRangeError("no
more files")`` ends a producer cleanly, as in TensorFlow) and survives pickling.

Below the tree: the argument checks shared by every constructor and function (each
raises ElementSpecError naming the owner, the argument, what was expected and what was
given, and returns the normalised value), and ``add_note``, which attaches a note
(PEP 678) naming where an exception was raised.
"""

from __future__ import annotations

import asyncio
import numbers
import sys
from typing import Any

import anyio

__all__ = [
    "CheckpointError",
    "CheckpointWarning",
    "ElementSpecError",
    "add_note",
    "epochs_arg",
    "int_arg",
    "name_arg",
    "seed_arg",
    "OutOfRangeError",
    "QueueClosedError",
    "QueueEmpty",
    "QueueError",
    "QueueFull",
    "WorkerProcessError",
]


class QueueError(Exception):
    """Base class of every error aqueue raises on purpose."""


class QueueClosedError(QueueError, anyio.ClosedResourceError):
    """Raised when enqueueing into a closed queue, or by a pending enqueue that
    ``close(cancel_pending_enqueues=True)`` cancelled."""


class OutOfRangeError(QueueError, anyio.EndOfStream):
    """Raised when a dequeue can no longer be satisfied: the queue is closed, holds
    fewer elements than requested and no pending enqueue can supply more.

    Raise it yourself to signal the end of data, as in TensorFlow:
    ``raise aqueue.OutOfRangeError("no more files")``. The queues fill in the
    structured fields (``queue_name``, ``requested``, ``size``); they are None
    otherwise.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        queue_name: str | None = None,
        requested: int | None = None,
        size: int | None = None,
    ) -> None:
        if message is None:
            message = (
                "end of data"
                if queue_name is None
                else f"queue '{queue_name}' is closed and has insufficient elements "
                f"(requested {requested}, current size {size})"
            )
        super().__init__(message)
        self.queue_name = queue_name
        self.requested = requested
        self.size = size

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {"queue_name": self.queue_name, "requested": self.requested, "size": self.size}
        return (_rebuild_out_of_range, (str(self), fields))


def _rebuild_out_of_range(message: str, fields: dict[str, Any]) -> OutOfRangeError:
    return OutOfRangeError(message, **fields)


class QueueFull(QueueError, anyio.WouldBlock, asyncio.QueueFull):
    """Raised by a ``*_nowait`` enqueue when the queue has no room for it now."""


class QueueEmpty(QueueError, anyio.WouldBlock, asyncio.QueueEmpty):
    """Raised by a ``*_nowait`` dequeue when the queue cannot supply it now."""


class ElementSpecError(QueueError, ValueError):
    """Raised for an element, batch, spec or argument that does not fit the queue."""


class CheckpointError(QueueError, ValueError):
    """Raised for a snapshot or pipeline state that cannot be taken, saved, loaded or
    restored: a source that cannot say where it is, an object that cannot be saved
    without pickle, a truncated, corrupt, foreign or newer-version file."""


class WorkerProcessError(QueueError, anyio.BrokenResourceError):
    """Raised when a worker process of a process map (``map(fn, executor="process")``)
    ends while the pipeline runs (killed by a signal, ``os._exit``, out of memory) or
    cannot load the function. The message names the stage, the pid and the signal or
    exit code; ``stage``, ``pid`` and ``exitcode`` (negative: the signal number) hold
    them, None when not known."""

    def __init__(
        self,
        message: str,
        *,
        stage: str | None = None,
        pid: int | None = None,
        exitcode: int | None = None,
    ) -> None:
        super().__init__(message)
        self.stage = stage
        self.pid = pid
        self.exitcode = exitcode

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {"stage": self.stage, "pid": self.pid, "exitcode": self.exitcode}
        return (_rebuild_worker_error, (str(self), fields))


def _rebuild_worker_error(message: str, fields: dict[str, Any]) -> WorkerProcessError:
    return WorkerProcessError(message, **fields)


class CheckpointWarning(UserWarning):
    """A pipeline checkpoint whose resume delivers every item once, but not the same
    batches: a stage's order depends on timing (a ``map`` with several workers and
    ``ordered=False``, a ``shuffle`` without a seed). ``state.inexact`` names them."""


# -- argument checks ----------------------------------------------------------------------


def int_arg(value: Any, what: str, owner: str, minimum: int) -> int:
    """``value`` as an int >= ``minimum`` (bools are refused; numpy integers accepted)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ElementSpecError(f"{owner}: {what} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ElementSpecError(f"{owner}: {what} must be >= {minimum}, got {value}")
    return int(value)


def epochs_arg(num_epochs: Any, owner: str) -> int | None:
    """None (no limit) or a number of epochs >= 1."""
    return None if num_epochs is None else int_arg(num_epochs, "num_epochs", owner, 1)


def seed_arg(seed: Any, owner: str) -> int | None:
    """None (fresh entropy) or a seed >= 0."""
    return None if seed is None else int_arg(seed, "seed", owner, 0)


def name_arg(name: Any, default: str, what: str = "name") -> str:
    """``default`` when ``name`` is None, else ``name``, which must be a non-empty str
    (a name is what messages and reports call the object: an empty one names nothing).
    ``what`` starts the message (``"FIFOQueue: name"``)."""
    if name is None:
        return default
    if not isinstance(name, str):
        raise ElementSpecError(f"{what} must be a str, got {type(name).__name__}")
    if not name:
        raise ElementSpecError(
            f"{what} must not be empty (messages and reports name it); pass None for "
            f"the default, {default!r}"
        )
    return name


def add_note(exc: BaseException, note: str) -> None:
    """Attach ``note`` to ``exc`` once (``__notes__``, PEP 678)."""
    if note in getattr(exc, "__notes__", ()):
        return
    if sys.version_info >= (3, 11):
        exc.add_note(note)
    else:  # pragma: no cover - the exceptiongroup backport prints __notes__ on 3.10
        exc.__dict__["__notes__"] = [*getattr(exc, "__notes__", ()), note]
