"""How far a setting may go: the CPU and memory budgets, and capacities that follow.

Pure functions of a window, a reading and the budget (``_tuner.py`` calls them):

- ``cpu_limit``: the most workers a stage whose CPU is measured may have: as many as
  the cores left by everything else can run at its CPU per second of work ``f``
  (``round(left / f)``, and never more than ``floor(budget / f)``). A stage that
  computes (``f`` near 1) stays within the budget; one that waits (``f`` small) may
  go far past the cores. None when its CPU is not measured (tasks) or negligible.
- ``memory_room``: the most workers a stage may have within the memory budget, each
  worker holding an item and bringing two slots of queue (the capacity follows).
- ``downstream_limit``: the most workers a stage may have to feed the slowest stage
  after it that cannot grow any more (the user's, or at its cap): more would only fill
  the queues between them.
- ``followed``: a tuned capacity: twice the larger concurrency on either side of its
  queue (the default rule), never below the default rule's value, within the memory
  budget.

Accounting: the memory a run holds is ``sum((capacity + workers) x bytes per item)``
over its stages, with bytes per item measured by the run (0: not known, not counted).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ._readings import Reading, StageInfo, StageReading, Window
from ._settings import Budget

__all__ = ["cpu_limit", "downstream_limit", "followed", "held_bytes", "memory_room"]

_NEGLIGIBLE_CPU = 0.05  # a stage using less CPU per second of work is not CPU-limited


def held_bytes(stages: Sequence[StageReading], skip: int = -1) -> float:
    """Bytes the stages' queues and workers hold (stage ``skip`` left out)."""
    return sum((s.capacity + s.workers) * s.item_bytes for i, s in enumerate(stages) if i != skip)


def cpu_limit(
    stage: int, win: Window, info: Sequence[StageInfo], budget: Budget
) -> tuple[int, str] | None:
    """The most workers ``stage`` may have within the CPU budget, and why (None: its
    CPU is not measured, or negligible)."""
    sw = win.stages[stage]
    f = sw.cpu_per_busy
    if f is None or f < _NEGLIGIBLE_CPU:
        return None
    # Everything the pipeline uses: the main process, and the worker processes' own.
    used = win.cores + sum(
        w.cores or 0.0 for i, w in enumerate(win.stages) if info[i].executor == "process"
    )
    left = max(0.0, budget.cpu - (used - (sw.cores or 0.0)))
    limit = max(1, min(round(left / f), math.floor(budget.cpu / f)))
    return limit, f"at the CPU budget ({budget.cpu:g} cores, {f:.0%} CPU per worker)"


def memory_room(stage: int, reading: Reading, budget: Budget) -> int | None:
    """The most workers ``stage`` may have within the memory budget (None: no limit
    known)."""
    size = reading.stages[stage].item_bytes
    if size <= 0 or math.isinf(budget.memory):
        return None
    room = (budget.memory - held_bytes(reading.stages)) / (3 * size)
    return reading.stages[stage].workers + math.floor(room)


def downstream_limit(
    stage: int,
    service: Sequence[float],
    workers: Sequence[int],
    ratios: Sequence[float],
    growing: Sequence[int],
    labels: Sequence[str],
    headroom: float,
) -> tuple[int, str] | None:
    """The most workers ``stage`` may have to feed the slowest stage after it that
    cannot grow (not in ``growing``), with ``headroom``, and why; None: none limits.

    ``service[j]`` is stage ``j``'s seconds per item (0: not known), ``workers[j]`` its
    workers, ``ratios[j]`` its input items per output item.
    """
    if service[stage] <= 0:
        return None
    per, slowest = 1.0, None  # (per: items of ``stage`` per item of stage j)
    for j in range(stage + 1, len(service)):
        per *= ratios[j]
        if service[j] <= 0 or j in growing:
            continue
        rate = max(1, workers[j]) / service[j] * per
        if slowest is None or rate < slowest[0]:
            slowest = (rate, labels[j])
    if slowest is None:
        return None
    limit = max(1, math.ceil(slowest[0] * service[stage] * headroom))
    return limit, f"{slowest[1]} after it takes at most {slowest[0]:.0f} items/s"


def followed(
    stage: int, low: int, high: int, workers: Sequence[int], reading: Reading, budget: Budget
) -> int:
    """A tuned capacity of ``stage``'s queue, from the concurrency in force (or about
    to be) on either side, ``workers`` (see the module docstring)."""
    around = workers[stage : stage + 2]
    want = min(high, max(low, 2 * max(around)))
    size = reading.stages[stage].item_bytes
    if size > 0 and not math.isinf(budget.memory):
        fit = math.floor((budget.memory - held_bytes(reading.stages, stage)) / size)
        want = min(want, fit - reading.stages[stage].workers)
    return max(low, want)  # (never below the default rule: the run holds that anyway)
