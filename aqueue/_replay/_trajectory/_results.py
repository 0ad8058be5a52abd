"""TrajectoryStatistics: a trajectory table's counters, its items' and its steps'."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .._results import ReplayStatistics
from ._steps import StepStatistics

__all__ = ["TrajectoryStatistics", "trajectory_statistics"]


@dataclass(frozen=True)
class TrajectoryStatistics(ReplayStatistics):
    """A trajectory table's counters at one moment (``table.statistics()``; also
    ``await table.statistics()``): a ``ReplayStatistics`` of its items (the windows:
    ``size``, ``inserts``, ``samples``, ``evictions``, which count the windows evicted
    with their first step too, ...), and its steps' counters."""

    max_steps: int
    """The most steps held at once."""
    steps_held: int
    """Steps held now (needed by an item, or by a window still being written)."""
    steps_appended: int
    """Steps appended by the writers (those no window needs are never stored)."""
    steps_stored: int
    """Steps written into the table (``steps_held + steps_evicted + steps_freed``)."""
    steps_evicted: int
    """Steps evicted to make room, with the items and pending windows that needed them."""
    steps_freed: int
    """Steps released because nothing needed them any more (their items left)."""
    windows_dropped: int
    """Windows that never became items (the episode ended first, or a step of theirs was
    evicted before the last one came)."""
    writers: int
    """Writers open now."""


def trajectory_statistics(items: ReplayStatistics, steps: StepStatistics) -> TrajectoryStatistics:
    """One record of both sides' counters."""
    return TrajectoryStatistics(
        **{f.name: getattr(items, f.name) for f in dataclasses.fields(ReplayStatistics)},
        max_steps=steps.max_steps,
        steps_held=steps.held,
        steps_appended=steps.appended,
        steps_stored=steps.stored,
        steps_evicted=steps.evicted,
        steps_freed=steps.freed,
        windows_dropped=steps.windows_dropped,
        writers=steps.writers,
    )
