"""What the tuner has learned: the consumer's demand and each stage's time per item.

- ``PerItem``: seconds per item over about the last ``span`` items, which starts
  afresh when a window of enough items differs from it by the regime factor (the
  storage got slower, the training step longer). The consumer's own time, when it is
  what a window left outside its waits, shows a new regime only in a window it spent
  mostly at work (``MOSTLY_WAITING``).
- ``Estimates``: one ``PerItem`` for the consumer (its own time per item: the gaps
  between its calls for items, else the window's time outside its waits) and one per
  stage (seconds of work per item done). ``learn(window, moved)`` takes a window in and
  says which estimates entered a new regime; a stage the tuner itself just changed
  (``moved``) starts afresh instead (its time per item moving after a raise is a
  knee's sign, not a new regime). ``needs(reading)`` applies Little's law: the workers
  at work at once that keep up with the demand, per stage.

The demand is in consumer items per second; a stage's need counts its own items (a
batch stage's input holds ``batch`` of them per consumer item: ``in_per_out``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ._readings import Reading, StageInfo, Window, in_per_out

__all__ = ["Estimates", "Learned", "PerItem"]

CONSUMER_SPAN = 64  # consumer items the demand is estimated over, about
STAGE_SPAN = 256  # stage items a time per item is estimated over, about
CONSUMER_MIN = 4  # consumer items in a window before it may show a new regime
AS_FAST_AS_IT_COMES_S = 1e-5  # a consumer's own time per item below this: no demand
MOSTLY_WAITING = 0.5  # a consumer waiting this share of a window shows no new regime


class PerItem:
    """Seconds per item over about the last ``span`` items (see the module docstring)."""

    __slots__ = ("_items", "_seconds", "span")

    def __init__(self, span: float) -> None:
        self.span = span
        self._seconds = 0.0
        self._items = 0.0

    @property
    def known(self) -> bool:
        return self._items >= 2 and self._seconds > 0

    @property
    def value(self) -> float:
        """Seconds per item (0.0 while not known)."""
        return self._seconds / self._items if self.known else 0.0

    def restart(self, seconds: float, items: int) -> None:
        """Start afresh from a window (the estimate before it no longer holds)."""
        self._seconds, self._items = seconds, float(items)

    def add(self, seconds: float, items: int, regime: float, min_items: int) -> bool:
        """Add a window's ``seconds`` over ``items``; start afresh (and return True)
        when a window of at least ``min_items`` items differs by more than the factor
        ``regime`` from what was known."""
        if items >= min_items and self.known and seconds > 0:
            ratio = (seconds / items) / self.value
            if ratio > regime or ratio < 1 / regime:
                self._seconds, self._items = seconds, float(items)
                return True
        self._seconds += seconds
        self._items += items
        if self._items > self.span:
            scale = self.span / self._items
            self._seconds *= scale
            self._items = self.span
        return False


@dataclass
class Learned:
    """What one window changed in the estimates."""

    consumer: bool = False
    """The consumer's time per item entered a new regime."""
    stages: set[int] = field(default_factory=set)
    """Stages whose time per item entered a new regime."""
    restarted: dict[int, float] = field(default_factory=dict)
    """Stages the tuner had just changed: their fresh seconds per item."""

    @property
    def regime(self) -> bool:
        return self.consumer or bool(self.stages)


class Estimates:
    """The demand and the stages' times per item (see the module docstring)."""

    def __init__(self, stages: Sequence[StageInfo], regime: float, min_items: int) -> None:
        self.stages = tuple(stages)
        self.regime = regime
        self.min_items = min_items
        self.consumer = PerItem(CONSUMER_SPAN)
        self.service = [PerItem(STAGE_SPAN) for _ in self.stages]

    def learn(self, win: Window, moved: set[int]) -> Learned:
        """Take ``win`` in; ``moved``: stages the tuner changed just before it."""
        out = Learned()
        if win.gaps_s is not None:  # measured per item: exact
            out.consumer = self.consumer.add(win.gaps_s, win.gaps, self.regime, CONSUMER_MIN)
        else:  # the window's time outside waits: items at its edges blur it
            # (a consumer that waited most of the window has for its own time the
            # residue of its waits, microseconds that no regime is read from)
            regime = self.regime if win.wait < MOSTLY_WAITING else math.inf
            out.consumer = self.consumer.add(win.own_s, win.taken, regime, CONSUMER_MIN)
        for i, sw in enumerate(win.stages):
            if not sw.worked:
                continue
            work = sw.service_s * sw.worked
            if i in moved:
                self.service[i].restart(work, sw.worked)
                out.restarted[i] = sw.service_s
            elif self.service[i].add(work, sw.worked, self.regime, self.min_items):
                out.stages.add(i)
        return out

    def demand(self) -> float | None:
        """Consumer items per second it would take without waiting (None: not known,
        or as many as come)."""
        per = self.consumer.value
        return 1.0 / per if self.consumer.known and per > AS_FAST_AS_IT_COMES_S else None

    def needs(self, reading: Reading) -> list[float | None]:
        """Per stage: workers at work at once that keep up with the demand (None: the
        demand or the stage's time per item is not known)."""
        demand = self.demand()
        ratios = in_per_out(self.stages, reading.stages)
        rho = 1.0  # the stage's items per consumer item
        out: list[float | None] = [None] * len(self.stages)
        for i in range(len(self.stages) - 1, -1, -1):
            s = self.service[i].value
            if demand is not None and s > 0:
                out[i] = demand * rho * s
            rho *= ratios[i]
        return out
