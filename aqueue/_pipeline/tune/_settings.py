"""What a user asks of the tuner, checked: ``"auto"`` settings, their ranges, budgets.

- ``concurrency="auto"`` (or ``Auto(...)``, a range: ``Auto(max=64)``) on a map, and
  ``capacity="auto"`` on a stage's output queue, hand that setting to the tuner; an int
  stays the user's, and the tuner never changes it (it only reports on it).
- ``Autotune(...)`` holds the run's settings: the mode (``"act"``: change settings
  live; ``"recommend"``: only say what it would change), the CPU budget in cores
  (default: the cores this process may run on), the memory budget for buffered items
  in bytes (default: ``memory_share`` of the memory available when the run starts),
  and a cap on every tuned map's concurrency.
- ``Budget`` is what the tuner works within, resolved from ``Autotune`` and the
  machine (``_budget.py`` reads the machine).

Every check raises ElementSpecError naming the owner, what was expected and what was
given, and builds nothing on failure.

Defaults, per executor (a tuned map starts at ``start`` and stays within ``min`` and
``max``): tasks start at 16 and may reach 256 (a latency-bound stage wants as many
requests in flight as the consumer's rate times the latency); threads start at 2 (a
stage that computes holds the GIL) and may reach 256 too (one that waits on a blocking
call costs a stack and nothing else while it waits; a raise that brings no more items
is undone); worker processes start at one less than the CPU budget (at least 1)
and may reach the CPU budget (a spawn costs a fraction of a second, and processes are
for work that holds a core). A tuned capacity starts at the stage's default capacity,
never goes below it, and may reach ``CAPACITY_MAX`` items or ``CAPACITY_GROWTH``
times its default, whichever is more, within the memory budget.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from ..._errors import ElementSpecError, int_arg

__all__ = [
    "AUTO",
    "Auto",
    "Autotune",
    "Budget",
    "capacity_arg",
    "capacity_range",
    "concurrency_arg",
    "concurrency_range",
]

AUTO = "auto"
MODES = ("act", "recommend")
# Tasks start at 16: one costs a few kB and nothing while it waits, and a latency-bound
# stage reaches its need one window sooner (from 4, the ramp cost a 2 s run 5%); a
# stage that needs fewer is cut once the consumer has stopped waiting.
_START = {"task": 16, "thread": 2}
# Threads may go as far as tasks: a blocking call of 35 ms wants as many threads in
# flight as a 35 ms await wants tasks, and the tuner keeps no raise that gives nothing.
_MAX = {"task": 256, "thread": 256}
CAPACITY_MAX = 1024  # a tuned capacity's default cap, in items (at least)
CAPACITY_GROWTH = 16  # ... or this many times its default capacity


@dataclass(frozen=True)
class Auto:
    """A setting the tuner chooses, within a range: ``map(fn, concurrency=Auto(max=32))``.

    Args:
        min: The least it may be (>= 1).
        max: The most it may be (None: the executor's default cap, see the module
            docstring).
        start: Where the tuner starts (None: the executor's default start, within
            ``min`` and ``max``).

    Raises:
        ElementSpecError: A bound is not an int >= 1, ``max < min``, or ``start`` is
            outside ``[min, max]``.
    """

    min: int = 1
    max: int | None = None
    start: int | None = None

    def __post_init__(self) -> None:
        owner = "aqueue.Auto"
        low = int_arg(self.min, "min", owner, 1)
        if self.max is not None:
            high = int_arg(self.max, "max", owner, 1)
            if high < low:
                raise ElementSpecError(f"{owner}: max ({high}) must be >= min ({low})")
        if self.start is not None:
            start = int_arg(self.start, "start", owner, 1)
            if start < low or (self.max is not None and start > self.max):
                raise ElementSpecError(
                    f"{owner}: start ({start}) must be within min ({low}) and max ({self.max})"
                )


def _setting(value: Any, what: str, owner: str) -> int | Auto:
    """An int >= 1 (the user's), ``"auto"`` or ``Auto(...)``, else ElementSpecError."""
    if isinstance(value, Auto):
        return value
    if isinstance(value, str) and value == AUTO:
        return Auto()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        shown = repr(value) if isinstance(value, str) else type(value).__name__
        raise ElementSpecError(
            f"{owner}: {what} must be an int >= 1, 'auto' or aqueue.Auto(...), got {shown}"
        )
    return int_arg(value, what, owner, 1)


def concurrency_arg(value: Any, owner: str) -> int | Auto:
    """A map's ``concurrency``: an int >= 1 (the user's), ``"auto"`` or ``Auto(...)``.

    Raises:
        ElementSpecError: Anything else (``"fast"``, 0, 2.5, True), naming ``owner``.
    """
    return _setting(value, "concurrency", owner)


def capacity_arg(value: Any, owner: str, what: str = "capacity") -> int | Auto | None:
    """A stage's output ``capacity`` (or a prefetch's ``buffer_size``, ``what``): None
    (the default rule), an int >= 1, ``"auto"`` or ``Auto(...)``.

    Raises:
        ElementSpecError: Anything else, naming ``owner``.
    """
    return None if value is None else _setting(value, what, owner)


def capacity_range(auto: Auto, default: int) -> tuple[int, int, int]:
    """``(start, min, max)`` of a tuned capacity, from its ``Auto`` and the capacity
    the stage would have without it (``default``, the default rule): it starts there
    and never goes below it (the run relies on that much room), and may grow to
    ``CAPACITY_MAX`` items or ``default`` times ``CAPACITY_GROWTH``, whichever is more
    (the memory budget bounds it too). The user's numbers win: ``Auto(max=...)`` and
    ``Auto(min=...)``/``start`` are kept even where they leave that default."""
    high = auto.max if auto.max is not None else max(CAPACITY_MAX, default * CAPACITY_GROWTH)
    low = max(auto.min, min(default, high))
    start = auto.start if auto.start is not None else low
    return start, min(low, start), high


def concurrency_range(
    auto: Auto, executor: str, cpu: float, cap: int | None
) -> tuple[int, int, int]:
    """``(start, min, max)`` of a tuned map's concurrency, from its ``Auto``, its
    executor, the CPU budget (cores) and the run's cap on every tuned map (the user's
    numbers win: an explicit ``Auto.max`` is kept even above ``cap``)."""
    cores = max(1, math.floor(cpu))
    if executor == "process":
        high, start = cores, max(1, cores - 1)
    else:
        high, start = _MAX[executor], _START[executor]
    if cap is not None:
        high = min(high, cap)
    if auto.max is not None:
        high = auto.max
    high = max(high, auto.min)
    start = auto.start if auto.start is not None else min(max(start, auto.min), high)
    return start, auto.min, high


@dataclass(frozen=True)
class Budget:
    """What the tuner works within (resolved: see ``_budget.resolve``)."""

    cpu: float
    """Cores the pipeline may keep busy (its workers and the main process)."""
    memory: float
    """Bytes the tuned buffers and the items in flight may hold (math.inf: no limit)."""


@dataclass(frozen=True)
class Autotune:
    """How a pipeline's ``"auto"`` settings are tuned: ``pipe.open(autotune=Autotune(...))``.

    Args:
        mode: ``"act"`` (default: change settings while the pipeline runs) or
            ``"recommend"`` (leave them; report what it would change, and why).
        cpu: The CPU budget in cores (None: the cores this process may run on, from
            its affinity and its cgroup's quota).
        memory: The memory budget for buffered items, in bytes (None: ``memory_share``
            of the memory available when the pipeline opens).
        memory_share: See ``memory`` (a fraction, above 0 and at most 1).
        max_concurrency: A cap on every tuned map's concurrency (None: per executor;
            a map's own ``Auto(max=...)`` wins over it).

    Raises:
        ElementSpecError: A mode other than those two, a budget that is not a positive
            number, a share outside (0, 1], a cap below 1.
    """

    mode: str = "act"
    cpu: float | None = None
    memory: int | None = None
    memory_share: float = 0.5
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        owner = "aqueue.Autotune"
        if self.mode not in MODES:
            raise ElementSpecError(f"{owner}: mode must be 'act' or 'recommend', got {self.mode!r}")
        if self.cpu is not None:
            _positive(self.cpu, "cpu", owner)
        if self.memory is not None:
            int_arg(self.memory, "memory", owner, 1)
        share = _positive(self.memory_share, "memory_share", owner)
        if share > 1:
            raise ElementSpecError(f"{owner}: memory_share must be at most 1, got {share}")
        if self.max_concurrency is not None:
            int_arg(self.max_concurrency, "max_concurrency", owner, 1)

    @property
    def acts(self) -> bool:
        """Whether the tuner changes settings (else it only recommends)."""
        return self.mode == "act"


def _positive(value: Any, what: str, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ElementSpecError(f"{owner}: {what} must be a number, got {type(value).__name__}")
    number = float(value)
    if not (number > 0 and math.isfinite(number)):
        raise ElementSpecError(f"{owner}: {what} must be a positive number, got {value!r}")
    return number
