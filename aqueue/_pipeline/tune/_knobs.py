"""The tuner's knobs (the settings it may change) and its decisions.

- ``KnobSpec``: a setting handed to the tuner when a run starts: which stage, which
  setting (``"concurrency"`` or ``"capacity"``), where it starts and its range, and
  whether the tuner may change it (a user's number: never; it is only reported).
- ``Knob``: the tuner's state for one setting: its value in force, what it would set
  in ``recommend`` mode, the change being verified (a ``Trial``), and what it learned:
  a *ceiling* (raising above it gave nothing) and a *floor* (cutting below it made the
  consumer wait), each remembered for a while, or until the regime changes.
- ``Decision``: one change (or, in ``recommend`` mode, one change it would make) with
  its reason in words; ``Setting``: what ``describe()`` shows per knob.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["Decision", "Knob", "KnobSpec", "Setting", "Trial"]

KNOBS = ("concurrency", "capacity")
WHO = ("user", "default", "tuner", "checkpoint")


@dataclass(frozen=True)
class KnobSpec:
    """A setting of a stage, as the run hands it to the tuner."""

    stage: int
    what: str
    """``"concurrency"`` (a map's workers) or ``"capacity"`` (its output queue)."""
    start: int
    low: int = 1
    high: int = 1
    tunable: bool = True
    """False: the user's number, never changed."""
    by: str = "default"
    """Who set ``start``: ``"user"``, ``"default"`` or ``"checkpoint"`` (a resume)."""

    def __post_init__(self) -> None:
        if self.what not in KNOBS or self.by not in WHO:
            raise ValueError(f"KnobSpec: unknown setting {self.what!r} or origin {self.by!r}")
        if not 1 <= self.low <= self.start <= max(self.high, self.start) or self.high < self.low:
            raise ValueError(
                f"KnobSpec: need 1 <= low <= start and low <= high, got "
                f"low={self.low} start={self.start} high={self.high}"
            )


@dataclass
class Trial:
    """A change whose effect the next window judges."""

    old: int
    new: int
    raised: bool
    rate: float  # the stage's items/s before the change
    saturated: bool  # whether the stage was saturated before it
    wait: float  # the consumer's wait share before it
    t: float = 0.0  # when it was made
    service_s: float = 0.0  # the stage's seconds per item before it


@dataclass
class Knob:
    """The tuner's state for one setting (see the module docstring)."""

    spec: KnobSpec
    label: str
    value: int = 0
    recommended: int = 0
    by: str = "default"
    changed_t: float = -math.inf
    direction: int = 0  # +1 raised last, -1 cut last
    ceiling: int | None = None
    ceiling_until: float = 0.0
    floor: int | None = None
    floor_until: float = 0.0
    trial: Trial | None = None
    recheck_s: float | None = None  # seconds per item before a raise judged "no gain"
    note: str = ""

    def __post_init__(self) -> None:
        self.value = self.recommended = self.spec.start
        self.by = self.spec.by if self.spec.tunable else "user"

    @property
    def stage(self) -> int:
        return self.spec.stage

    def current(self, acts: bool) -> int:
        """The value the rule compares with: in force when acting, else the last
        recommendation."""
        return self.value if acts else self.recommended

    def high(self, now: float) -> int:
        """The most it may be now: its range, below a ceiling still remembered."""
        high = self.spec.high
        if self.ceiling is not None and now < self.ceiling_until:
            high = min(high, self.ceiling)
        return max(high, self.spec.low)

    def low(self, now: float) -> int:
        """The least it may be now: its range, above a floor still remembered."""
        low = self.spec.low
        if self.floor is not None and now < self.floor_until:
            low = max(low, min(self.floor, self.spec.high))
        return low

    def forget(self) -> None:
        """A new regime: what was learned about the old one no longer holds."""
        self.ceiling = self.floor = None
        self.trial = self.recheck_s = None


@dataclass(frozen=True)
class Decision:
    """One change of a setting (``applied``), or one the tuner recommends."""

    t: float
    """When (the reading's clock)."""
    stage: int
    label: str
    knob: str
    """``"concurrency"`` or ``"capacity"``."""
    old: int
    new: int
    applied: bool
    """False in ``recommend`` mode: nothing changed."""
    verdict: str
    """In a few words: ``"latency-bound"``, ``"cpu-bound"``, ``"backing off"``, ..."""
    reason: str
    """The whole line, e.g. ``"map(fetch): 8 -> 16, consumer waited 41%, stage starved
    2%, busy 97%: latency-bound (6.1 ms per item; 30 in flight keep up)"``."""

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Setting:
    """A knob as ``describe()`` shows it."""

    stage: int
    label: str
    knob: str
    value: int
    by: str
    """``"user"``, ``"default"``, ``"tuner"`` or ``"checkpoint"``."""
    recommended: int
    note: str = ""
    last: tuple[Decision, ...] = field(default_factory=tuple)
