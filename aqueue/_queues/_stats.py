"""QueueStatistics: a frozen snapshot of one queue's counters."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QueueStatistics"]


@dataclass(frozen=True)
class QueueStatistics:
    """A snapshot returned by ``q.statistics()``. Counts are in elements, times in seconds."""

    size: int
    """Elements stored now (elements claimed by a waiting batch dequeue are not counted)."""
    capacity: int
    """The queue's capacity, in elements."""
    closed: bool
    """Whether ``close()`` has been called."""
    enqueued_total: int
    """Elements admitted since creation (restored claims are not counted again)."""
    dequeued_total: int
    """Elements handed to callers since creation (claims that were put back are not counted)."""
    peak_size: int
    """Largest ``size`` seen since creation, in elements."""
    tasks_waiting_enqueue: int
    """Tasks and threads blocked in an enqueue now."""
    tasks_waiting_dequeue: int
    """Tasks and threads blocked in a dequeue now."""
    time_full_s: float
    """Total seconds during which at least one enqueuer was blocked."""
    time_empty_s: float
    """Total seconds during which at least one dequeuer was blocked."""
