"""Argument checks of a trajectory table: its settings, and the steps its writers append.

Each check runs before anything touches a table and raises ElementSpecError (a
ValueError) naming the table, the argument, what was expected and what was given; it
returns the value converted, so a refused call changes nothing.

- ``step_settings``: ``max_steps``, ``length`` and ``stride`` ints >= 1 with ``length <=
  max_steps`` (a longer window could never be held), ``max_size`` None or an int >= 1,
  and the step's fields declared as a replay table's items are (fully defined shapes,
  no object or structured dtypes). ``capacity`` is the most items the table can hold:
  ``max_steps`` held steps hold at most ``max_steps // min(stride, length)`` windows,
  and ``max_size`` caps that.
- ``StepArgs``: one step (``append``) or a batch of consecutive steps (``append_many``)
  in the table's element form, and their priorities (the replay tables' rules: finite
  numbers >= 0, or None for the default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..._errors import ElementSpecError, int_arg
from ..._queues._declare import Components, FixedShape
from ..._queues._spec import ElementSpec
from .._checks import (
    PriorityLimit,
    TableSettings,
    priorities_arg,
    priority_arg,
    stored_spec,
    table_settings,
)

__all__ = ["StepArgs", "StepSettings", "step_settings", "window_settings"]


@dataclass(frozen=True)
class StepSettings:
    """A trajectory table's step and window arguments, checked (``step_settings``)."""

    owner: str
    """How messages name the table (``"TrajectoryTable 'name'"``)."""
    max_steps: int
    spec: ElementSpec
    shapes: tuple[FixedShape, ...]
    """The spec's shapes, every one fully defined."""
    length: int
    stride: int
    max_size: int | None
    capacity: int
    """The most items the table can hold (``max_size`` or what ``max_steps`` allows)."""


def step_settings(
    owner: str,
    max_steps: Any,
    dtypes: Any,
    shapes: Any,
    names: Any,
    *,
    length: Any,
    stride: Any,
    max_size: Any = None,
) -> StepSettings:
    """A trajectory table's step settings, checked in the order of its arguments.

    Raises:
        ElementSpecError: A bad argument (naming it, what was expected and what was
            given).
    """
    max_steps = int_arg(max_steps, "max_steps", owner, 1)
    spec, fixed = stored_spec(
        owner,
        dtypes,
        shapes,
        names,
        ("steps", "max_steps", "TrajectoryTable(200_000, np.uint8, (84, 84), length=4)"),
        ("field", "a trajectory table"),
    )
    length = int_arg(length, "length", owner, 1)
    stride = int_arg(stride, "stride", owner, 1)
    if length > max_steps:
        raise ElementSpecError(
            f"{owner}: length must be <= max_steps = {max_steps} (a longer window could "
            f"never be held), got {length}"
        )
    if max_size is not None:
        max_size = int_arg(max_size, "max_size", owner, 1)
    capacity = max_steps // min(stride, length)
    if max_size is not None:
        capacity = min(capacity, max_size)
    return StepSettings(
        owner=owner,
        max_steps=max_steps,
        spec=spec,
        shapes=fixed,
        length=length,
        stride=stride,
        max_size=max_size,
        capacity=capacity,
    )


def window_settings(st: StepSettings, **selection: Any) -> TableSettings:
    """The settings of a trajectory table's items, the windows: one int64 row of
    ``length`` step slots each, at most ``capacity`` of them; ``selection`` is the
    sampler, remover, max_times_sampled, rate_limiter and seed (``table_settings``'s).

    Raises:
        ElementSpecError: A bad selection argument (as for a replay table).
    """
    return table_settings(st.owner, st.capacity, np.int64, (st.length,), None, **selection)


class StepArgs:
    """The checks and conversions of appended steps (nothing here touches a table, so a
    refused call changes nothing)."""

    __slots__ = ("limit", "owner", "spec")

    def __init__(self, settings: StepSettings, limit: PriorityLimit) -> None:
        self.spec = settings.spec
        self.owner = settings.owner
        self.limit = limit

    def step(self, step: Any, priority: Any) -> tuple[Components, npt.NDArray[np.float64] | None]:
        """``append(step, priority)``'s arguments: the step as a batch of one (one array
        per field) and the priority of the window it completes (None: the default)."""
        comps = self.spec.element(step)
        prio = priority_arg(priority, self.owner, self.limit)
        return tuple(np.asarray(c)[np.newaxis] for c in comps), prio

    def steps(
        self, batch: Any, priorities: Any
    ) -> tuple[Components, int, npt.NDArray[np.float64] | None]:
        """``append_many(batch, priorities)``'s arguments: fields, count, and one priority
        per step (of the window that step completes, if any) or None."""
        comps, k = self.spec.batch(batch)
        prios = priorities_arg(priorities, k, self.owner, self.limit)
        return comps, k, prios
