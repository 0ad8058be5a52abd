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
    └── ElementSpecError(QueueError, ValueError)
            bad element, batch, spec or argument

Each leaf also derives from the matching anyio and asyncio base, so code written
against either ecosystem catches aqueue's errors with the ``except`` clauses it
already has. "Closed for enqueue" (QueueClosedError), "exhausted" (OutOfRangeError)
and "this waiter was cancelled" (the event loop's own cancellation exception) are
three distinct types on purpose: conflating them hides the real cause of a stop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

__all__ = [
    "ElementSpecError",
    "OutOfRangeError",
    "QueueClosedError",
    "QueueEmpty",
    "QueueError",
    "QueueFull",
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
