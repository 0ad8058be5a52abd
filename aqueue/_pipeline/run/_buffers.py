"""A run's tuned buffers: ``capacity="auto"`` and ``prefetch("auto")`` (``TunedBuffers``).

``Tuning`` (``_tuning.py``) holds one ``TunedBuffers``. It adds a capacity knob to the
tuner for each stage whose output queue is tuned (its range from ``capacity_range``:
from the stage's default capacity up; the rule is ``tune/_buffers.py``), reads each
queue for the tuner (the seconds a reader waited on it empty and a writer waited on
it full, and the bytes per item, from the next item sampled at each tick), puts the
tuner's capacity decisions into force with ``StageQueue.set_capacity`` and writes
describe()'s line per tuned buffer.

A process map whose workers write the batch stage's batches in place hands on a record
per batch: its queue's capacity counts batches and stays where it starts.

Invariants: a capacity given as a number is never changed (its knob is not tunable); a
capacity the tuner sets is within its range; nothing here waits or blocks (a sample
and a resize each take the queue's lock once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..._queues._fifo import StageQueue
from ..._running._samples import SET_BY
from ..defs._stage_spec import StageSpec, default_capacity, fused
from ..tune._knobs import Decision, KnobSpec
from ..tune._settings import capacity_range
from ..tune._sizes import ItemBytes

__all__ = ["TunedBuffers"]


class TunedBuffers:
    """The tuned buffers of one run (see the module docstring).

    Args:
        specs: The run's stages.
        knobs: The tuner's knobs so far; a capacity knob is added per tuned buffer.
    """

    def __init__(self, specs: Sequence[StageSpec], knobs: list[KnobSpec]) -> None:
        self.ranges: dict[int, tuple[int, int]] = {}
        self.last: dict[int, Decision] = {}
        self.values: dict[int, int] = {}  # (shown until the run's queues exist)
        self._sizes = ItemBytes(len(specs))
        for i, spec in enumerate(specs):
            if spec.auto_capacity is None or fused(specs, i):
                continue
            start, low, high = capacity_range(spec.auto_capacity, default_capacity(specs, i))
            knobs.append(KnobSpec(i, "capacity", start, low, high))
            self.ranges[i] = (low, high)
            self.values[i] = start

    def read(self, queues: Sequence[StageQueue], i: int) -> tuple[float, float, float]:
        """Queue ``i``'s seconds empty with a reader waiting, seconds full with a writer
        waiting, and the estimate of its bytes per item."""
        st = queues[i].statistics()
        return st.time_empty_s, st.time_full_s, self._sizes.see(i, queues[i].sample())

    def apply(self, queues: Sequence[StageQueue], decision: Decision) -> None:
        """Put a capacity decision into force (event loop's thread)."""
        i = decision.stage
        if i not in self.ranges:
            return
        queues[i].set_capacity(decision.new)
        self.values[i] = decision.new
        self.last[i] = decision

    def notes(
        self,
        queues: Sequence[StageQueue],
        labels: Callable[[int], str],
        last: Callable[[int], str],
    ) -> list[str]:
        """describe()'s lines: each tuned buffer's capacity in force (its queue's), who
        set it and its last decision (``last(i)``, in the words of the tuned maps' lines)."""
        out = []
        for i, (low, high) in self.ranges.items():
            by = SET_BY["tuner" if i in self.last else "default"]
            cap = queues[i].capacity if i < len(queues) else self.values[i]
            out.append(
                f"{i} {labels(i)}: capacity {cap} (auto {low}..{high}, set by {by}); {last(i)}"
            )
        return out
