"""How the tuner sizes a buffer: ``capacity="auto"`` and ``prefetch("auto")``.

A buffer is a stage's output queue. It is worth growing when its two sides take turns
waiting on it: in the same stretch of time the side that reads it ran dry (the queue
was empty while a reader waited) and the side that fills it was held up (the queue was
full while a writer waited). The writer then has throughput to spare on average but
delivers it in bursts, and a larger buffer carries the reader over the gaps between
bursts. If only the reader waits, the writer is slower on average and room does not
help (more workers might: that is the concurrency rule's business); if only the writer
waits, the reader is the slow side and the buffer is already big enough.

The rule, per tuned buffer, over a stretch of at least ``SPAN_S`` seconds of windows
(so a burst and the gap after it fall in one stretch however often the tuner ticks):

1. *Grow* (``GROW`` times) when the pipeline's consumer waited (more than the tuner's
   ``WAIT_HIGH`` share), the buffer ran empty for ``BURSTY`` of the stretch and was
   full for ``BURSTY`` of it. A buffer cut less than ``FLOOR_S`` ago that must grow
   again keeps the value it was cut from as a floor (hysteresis: no cut-grow cycle).
2. *Shrink* (by half) when it never ran empty (under ``EMPTY_LOW`` of the time) for
   ``CALM_S``, ``DWELL_S`` after its last change at the earliest, and not below a
   floor still remembered.
3. It always stays within its range (``capacity_range``: never below the stage's
   default capacity), at least the capacity the concurrency around it asks for
   (``followed``: twice the larger concurrency on either side), and within the memory
   budget: the queues' capacities plus the items in the stages' hands (the most seen
   taken in and not yet put out: a worker holds a burst of results; at least one per
   worker), times the bytes per item measured, never above the budget; a buffer above
   it is cut back to it.

Pure, as the controller: readings in, a new value and its reason out. In ``recommend``
mode one recommendation stands until the buffer's side of the pipeline changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._knobs import Knob
from ._limits import followed
from ._readings import Reading, StageInfo, Window
from ._settings import Budget

__all__ = ["Buffers"]

SPAN_S = 0.4
BURSTY = 0.02
EMPTY_LOW = 0.002
CALM_S = 3.0
DWELL_S = 2.0
FLOOR_S = 60.0
GROW = 2


@dataclass
class _Stretch:
    """What a buffer saw since the rule last looked at it (summed over windows)."""

    seconds: float = 0.0
    empty_s: float = 0.0
    full_s: float = 0.0
    wait_s: float = 0.0
    calm_since: float | None = None  # since when it has not run empty


class Buffers:
    """The buffer rule (see the module docstring).

    Args:
        wait_high: The consumer's wait share above which the pipeline is behind.
    """

    def __init__(self, wait_high: float, stages: Sequence[StageInfo]) -> None:
        self.wait_high = wait_high
        self._seen: dict[int, _Stretch] = {}
        # Items in a stage's hands at most (taken in, not yet put out: a worker's burst
        # of results), where one item in gives one out; at least one per worker.
        self._one_to_one = [s.kind in ("map", "prefetch") for s in stages]
        self._hands = [0] * len(stages)

    def decide(
        self,
        k: Knob,
        win: Window,
        r: Reading,
        budget: Budget,
        workers: Sequence[int],
        acts: bool,
    ) -> tuple[int, str, str] | None:
        """A tuned capacity's new value, verdict and figures, or None: it stays.

        ``workers`` is each stage's concurrency in force (or about to be).
        """
        i, now, value = k.stage, win.t1, k.current(acts)
        self._held_in_hands(r)
        sw = win.stages[i]
        st = self._seen.setdefault(i, _Stretch())
        st.seconds += win.seconds
        st.empty_s += sw.empty * win.seconds
        st.full_s += sw.full * win.seconds
        st.wait_s += win.wait * win.seconds
        if sw.empty >= EMPTY_LOW:
            st.calm_since = None
        elif st.calm_since is None:
            st.calm_since = win.t0
        low = max(k.low(now), followed(i, k.spec.low, k.spec.high, workers, r, budget))
        fit = self._fit(i, r, budget, workers)
        move: tuple[int, str, str] | None = None
        if fit is not None and value > max(fit, low):
            move = max(fit, low), "at the memory budget", self._bytes(r, i, budget)
        elif value < low:
            move = low, "follows the concurrency", ""
        elif st.seconds >= SPAN_S:
            self._seen[i] = _Stretch(calm_since=st.calm_since)
            move = self._stretch(k, st, now, low, fit, acts)
        if move is not None:  # (what it saw before the change says nothing of after)
            self._seen[i] = _Stretch()
        return move

    def _stretch(
        self, k: Knob, st: _Stretch, now: float, low: int, fit: int | None, acts: bool
    ) -> tuple[int, str, str] | None:
        """The rule on a stretch of ``SPAN_S`` or more: grow on bursts, shrink when calm."""
        value = k.current(acts)
        empty, full, wait = st.empty_s / st.seconds, st.full_s / st.seconds, st.wait_s / st.seconds
        figures = (
            f" (over {st.seconds:.1f} s: the consumer waited {wait:.0%}, the buffer ran "
            f"empty {empty:.0%} of the time and was full {full:.0%})"
        )
        if wait > self.wait_high and empty >= BURSTY and full >= BURSTY:
            if not acts and k.recommended > k.value:
                return None  # (a recommendation stands)
            new = min(k.high(now), value * GROW)
            if fit is not None:
                new = min(new, fit)
            if new <= value:
                if fit is not None and fit <= value < k.high(now):
                    k.note = "at the memory budget"
                return None
            if acts and k.direction < 0 and now - k.changed_t < FLOOR_S:
                k.floor, k.floor_until = new, now + FLOOR_S  # (it was cut from about this)
            verdict = "bursts: its reader ran dry while its writer waited for room"
            return new, verdict, figures
        calm = st.calm_since is not None and now - st.calm_since >= CALM_S
        if calm and now - k.changed_t >= DWELL_S and value > low:
            if not acts and k.recommended < k.value:
                return None
            new = max(low, math.ceil(value / GROW))  # (``low`` holds a floor remembered)
            if new < value:
                assert st.calm_since is not None
                quiet = f" (for {now - st.calm_since:.1f} s; it was full {full:.0%} of the time)"
                return new, "backing off: it never ran empty", quiet
        return None

    def _held_in_hands(self, r: Reading) -> None:
        for j, s in enumerate(r.stages):
            hand = s.workers
            if self._one_to_one[j]:
                hand = max(hand, s.items_in - s.items_out)
            self._hands[j] = max(self._hands[j], hand)

    def _fit(self, i: int, r: Reading, budget: Budget, workers: Sequence[int]) -> int | None:
        """The most items buffer ``i`` may hold within the memory budget (None: no
        limit known): what the other queues and every stage's hands hold comes first."""
        size = r.stages[i].item_bytes
        if size <= 0 or math.isinf(budget.memory):
            return None
        hands = [max(h, w) for h, w in zip(self._hands, workers)]
        others = sum(
            (s.capacity + hands[j]) * s.item_bytes for j, s in enumerate(r.stages) if j != i
        )
        return max(0, math.floor((budget.memory - others) / size) - hands[i])

    @staticmethod
    def _bytes(r: Reading, i: int, budget: Budget) -> str:
        return f" ({r.stages[i].item_bytes:,.0f} bytes per item, budget {budget.memory:,.0f} bytes)"
