"""Producers: who still produces into one queue (producer accounting).

"The queue closes after its last producer" is part of the ``AsyncQueue`` protocol,
because it must hold across processes for a shared queue: a producer registers
(``register_producer``) before its first enqueue and reports its end
(``producer_done``). A queue holds one ``Producers``; its methods complete without
waiting (the protocol's methods are async for the shared queues, which ask a server).

Invariants:

- ``_ids`` are the producers registered and not yet done; ids are never reused.
- The clean end of the last registered producer closes the queue (consumers drain it,
  then get OutOfRangeError); an unclean end closes it at once with
  ``cancel_pending_enqueues=True``. Registering on a closed queue is refused.

A replay table holds one too (``kind="replay table"``, in messages); its close fails
waiting inserts either way.
"""

from __future__ import annotations

from collections.abc import Callable

from .._errors import ElementSpecError, QueueClosedError

__all__ = ["Producers"]


class Producers:
    """The producers registered with one queue (see the module docstring)."""

    __slots__ = ("_close", "_ids", "_kind", "_name", "_seq")

    def __init__(self, name: str, close: Callable[[bool], None], kind: str = "queue") -> None:
        self._name = name
        self._kind = kind  # what the owner is called in messages
        self._close = close  # the queue's close(cancel_pending_enqueues)
        self._ids: set[str] = set()
        self._seq = 0

    def register(self, closed: bool) -> str:
        """One more producer; its id.

        Raises:
            QueueClosedError: The queue is ``closed`` (a producer would have nothing to do).
        """
        if closed:
            raise QueueClosedError(
                f"{self._kind} '{self._name}' is closed: cannot register a producer"
            )
        self._seq += 1
        producer_id = str(self._seq)
        self._ids.add(producer_id)
        return producer_id

    def done(self, producer_id: str, clean: bool) -> None:
        """Producer ``producer_id`` has ended (see the module docstring).

        Raises:
            ElementSpecError: ``producer_id`` is not registered (or already done).
        """
        if producer_id not in self._ids:
            raise ElementSpecError(
                f"{self._kind} '{self._name}'.producer_done: producer {producer_id!r} is not "
                f"registered (registered: {sorted(self._ids)})"
            )
        self._ids.discard(producer_id)
        if not clean:
            self._close(True)
        elif not self._ids:
            self._close(False)
