"""The tuner: readings of a running pipeline in, decisions with their reasons out.

Pure: no clock, no I/O, no randomness. Whoever drives it (the run's tuner task, a
simulator in the tests) calls ``observe(reading)`` at ``next_at`` or later and applies
the decisions it returns; the same readings always give the same decisions.

The goal is the consumer's, not the pipeline's: the training loop should never wait
for its next item (tf.data's STAGE_BASED target, the gap between ``get`` calls), with
as few workers and as small buffers as do that. Maximum throughput is the goal only
when the consumer takes items as fast as they come (``run()``, a loader into a queue).

The model, per window between two readings:

- *Demand.* The consumer's own seconds per item (the gaps between its calls for
  items; else the window minus its waits, over the items it took) say how many items
  per second it would take if it never waited: ``D``. It is known once it took two
  items, and measured whether it waits or not.
- *Service time.* A stage's seconds of work per item done ``s`` (for a task, the
  awaits in the function included: a 6 ms fetch costs 6 ms whether it computes or
  waits).
- *Little's law.* Keeping up takes ``D x rho x s`` workers at work at once, where
  ``rho`` is the stage's items per consumer item (a batch size before a batch stage).
  The tuner aims at ``HEADROOM`` (1.25) times that: a latency-bound stage gets its
  requests in flight, however far past the core count (where tf.data's model stops:
  its parallelism is capped at the core count, its output-time target assumes work
  that holds a core).
- *Budgets.* What a worker costs is measured, not assumed: a thread's CPU seconds per
  second of work ``f`` (for a process map, its workers'). A stage may have as many
  workers as the CPU left by everything else can run (``cores_left / f``), so a
  CPU-bound stage stays within the CPU budget while one that waits (``f`` small) goes
  far past it; tasks share the event loop, whose thread is measured instead (busy
  above ``LOOP_BUSY``: no more tasks). Buffers and items in flight stay within the
  memory budget, from the measured bytes per item. A stage is not raised past what
  the slowest stage after it takes once that one cannot grow (the user's, or at its
  cap). The user's numbers always win: a fixed setting is never changed, a range is
  never left.

The rule, on each window with enough evidence:

1. *Behind* (the consumer waited more than ``WAIT_HIGH``): every tuned stage whose
   Little's-law target is above its concurrency is raised to it (at most ``STEP_MAX``
   times at once, a process map by half its workers at once, once the consumer has
   waited for ``PROCESS_SUSTAIN_S``, one change per ``PROCESS_DWELL_S``; a process map
   is never cut below the workers busy). Before the demand is known (the consumer took
   nothing yet, or takes whatever comes), a saturated stage (busy, fed, not blocked,
   its output queue less than half full: the one that limits) is doubled: slow start.
2. *Verify.* The window after a raise judges it: a stage still saturated whose output
   grew by less than ``GAIN_MIN`` of the proportional gain had reached a knee (a
   shared core, the GIL, a service that does not scale); the raise is undone and the
   knee remembered as a ceiling for ``CEILING_S``. So more workers are never kept when
   they are not faster.
3. *Ahead* (the consumer waited less than ``WAIT_LOW`` for ``CALM_S``): a stage with
   more than ``OVER`` times its need is cut, to its target but by at most half at once.
   If the consumer waits again within ``CUT_TRIAL_S`` of a cut (its buffers drain
   first), the cut is undone and that value is a floor for ``FLOOR_S``.
4. *Hold* in between: a dead band, so noise does not move anything.
5. A capacity the tuner holds follows the concurrency on both sides of its queue
   (twice the larger, as the default rule), grows when its queue's two sides take
   turns waiting on it (bursts) and shrinks when it never runs empty, within the
   memory budget (``_buffers.py``).

Hysteresis: a raise lands at 1.25 times the need and a cut needs 1.6 times it, so the
two never chase each other at one demand; a cut comes ``DWELL_S`` after the knob's last
change at the earliest (a raise never waits: the consumer pays for it); a ceiling or
a floor holds for a while. A *new regime* (a stage's seconds per item or the
consumer's changing by ``REGIME`` in a window of enough items, not by the tuner's own
change) forgets ceilings and floors, ticks fast again, and skips the window that
straddles it. A raise judged "no gain" is checked once more at the old concurrency: if
its seconds per item stay far above those before the raise, the latency rose during
the trial (no knee) and the ceiling goes.

Schedule: every ``TICK_MIN_S`` while it changes things, then each quiet tick a half
longer, up to ``TICK_MAX_S``; after a change it first waits for a fresh window (the
queues refill). A window needs ``MIN_ITEMS`` items at every tuned stage or
``WINDOW_MAX_S`` seconds; while the consumer waits (each window of delay costs it),
a *round* is enough: each tuned stage did ``ROUND_ITEMS`` items or more (its time
per item is measured on them), checked every ``ROUND_TICK_S``. A stage of 35 ms items
on 2 threads is so judged after its first two items (about 50 ms), not after sixteen
(0.3 s). (tf.data backs off to a minute between optimizations, which cost it a model
evaluation each; a tick here costs a few microseconds per stage, so it keeps reacting
within a few tenths of a second to a regime change.)

In ``recommend`` mode nothing changes: the model's targets are reported, each time
they move, as decisions with ``applied=False`` (no slow start and no verification,
which need a change to watch).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence

from ._buffers import Buffers
from ._estimates import Estimates
from ._knobs import Decision, Knob, KnobSpec, Setting, Trial
from ._limits import cpu_limit, downstream_limit, memory_room
from ._readings import Reading, StageInfo, Window, in_per_out
from ._settings import Budget

__all__ = ["Tuner"]

TICK_MIN_S = 0.05
TICK_MAX_S = 0.25
SETTLE_S = 0.02  # after a change, the next window opens this much later
WINDOW_MAX_S = 0.5
MIN_ITEMS = 16
ROUND_ITEMS = 2  # items per tuned stage in a round (see the schedule)
ROUND_TICK_S = 0.01  # while a round is not done, look again this often (tf.data's 10 ms)
WAIT_HIGH = 0.03
WAIT_LOW = 0.005
HEADROOM = 1.25
OVER = 1.6
CALM_S = 1.0
DWELL_S = 2.0
STEP_MAX = 8
CUT = 0.5
CUT_TRIAL_S = 1.0
GAIN_MIN = 0.3
CEILING_S = 10.0
FLOOR_S = 30.0
REGIME = 1.5
PROCESS_DWELL_S = 5.0
PROCESS_SUSTAIN_S = 3.0  # a process map grows only once the consumer waited this long
PROCESS_CALM_S = 30.0
LOOP_BUSY = 0.85
CPU_BOUND = 0.5
_HISTORY = 64


class Tuner:
    """The controller (see the module docstring).

    Args:
        stages: What each stage is, source first.
        knobs: The settings handed to the tuner (the user's included, for reports).
        budget: The CPU and memory budget.
        acts: False for ``recommend`` mode.
    """

    def __init__(
        self,
        stages: Sequence[StageInfo],
        knobs: Sequence[KnobSpec],
        budget: Budget,
        *,
        acts: bool = True,
    ) -> None:
        self.stages = tuple(stages)
        self.budget = budget
        self.acts = acts
        self.knobs = [Knob(k, self.stages[k.stage].label) for k in knobs]
        self.next_at = 0.0
        self.decisions: collections.deque[Decision] = collections.deque(maxlen=_HISTORY)
        self._base: Reading | None = None
        self._interval = TICK_MIN_S
        self._calm_since: float | None = None
        self._behind_since: float | None = None  # since when the consumer has waited
        self._est = Estimates(self.stages, REGIME, MIN_ITEMS)
        self._moved: set[int] = set()  # stages changed just before the current window
        self._buffers = Buffers(WAIT_HIGH, self.stages)

    # -- what it reports -----------------------------------------------------------------

    def settings(self) -> list[Setting]:
        """Every knob: its value, who set it, its note and its last decisions."""
        out = []
        for k in self.knobs:
            mine = [d for d in self.decisions if d.stage == k.stage and d.knob == k.spec.what]
            last = tuple(mine[-3:])
            out.append(
                Setting(k.stage, k.label, k.spec.what, k.value, k.by, k.recommended, k.note, last)
            )
        return out

    def value(self, stage: int, what: str) -> int | None:
        """The value in force of a knob (None: not a knob)."""
        for k in self.knobs:
            if k.stage == stage and k.spec.what == what:
                return k.value
        return None

    # -- one tick ------------------------------------------------------------------------

    def observe(self, reading: Reading) -> list[Decision]:
        """Take a reading; return the decisions made on it (see the module docstring)."""
        if self._base is None or reading.t <= self._base.t:
            self._base = reading
            self.next_at = reading.t + TICK_MIN_S
            return []
        if reading.t < self.next_at:
            return []
        win = Window.between(self._base, reading)
        if not self._enough(win):
            soon = win.wait > WAIT_HIGH and win.seconds >= TICK_MIN_S * 0.9
            self.next_at = reading.t + (ROUND_TICK_S if soon else TICK_MIN_S)
            return []
        # A new regime began inside this window, which mixes the old and the new: decide
        # on the next one, all of the new.
        regime = self._learn(win)
        out = [] if regime else self._rule(win, reading)
        self.decisions.extend(out)
        if any(d.applied for d in out):
            self._base = None
            self.next_at = reading.t + SETTLE_S
            self._interval = TICK_MIN_S
            return out
        self._base = reading
        quick = out or regime
        self._interval = TICK_MIN_S if quick else min(TICK_MAX_S, self._interval * 1.5)
        self.next_at = reading.t + self._interval
        return out

    def _concurrency(self) -> list[Knob]:
        return [k for k in self.knobs if k.spec.what == "concurrency" and k.spec.tunable]

    def _enough(self, win: Window) -> bool:
        if win.seconds >= WINDOW_MAX_S:
            return True
        if win.seconds < TICK_MIN_S * 0.9:
            return False
        stages = [k.stage for k in self._concurrency()]
        if all(win.stages[i].items >= MIN_ITEMS for i in stages):
            return True
        # The consumer waits: a round (each stage did a few items) is evidence enough.
        return win.wait > WAIT_HIGH and all(win.stages[i].items >= ROUND_ITEMS for i in stages)

    def _learn(self, win: Window) -> bool:
        """Update the estimates; True on a new regime (whose knobs forget what they
        learned of the old one)."""
        moved, self._moved = self._moved, set()
        learned = self._est.learn(win, moved)
        for k in self.knobs:
            if k.stage in learned.stages:
                k.forget()
        regime = learned.regime
        for i, service_s in learned.restarted.items():
            regime |= self._recheck(i, service_s)
        return regime

    def _recheck(self, stage: int, service_s: float) -> bool:
        """After a raise judged "no gain" was undone: a knee gives the old seconds per
        item back at the old concurrency; if they stay far above, the latency rose
        during the trial (a new regime, not a knee): the ceiling goes."""
        regime = False
        for k in self.knobs:
            if k.stage == stage and k.recheck_s is not None:
                if service_s > k.recheck_s * REGIME:
                    k.forget()
                    k.note = "new regime: the ceiling found during it is forgotten"
                    regime = True
                k.recheck_s = None
        return regime

    # -- the rule --------------------------------------------------------------------------

    def _rule(self, win: Window, reading: Reading) -> list[Decision]:
        out: list[Decision] = []
        needs = self._est.needs(reading)
        for k in self._concurrency():
            if k.trial is not None:
                out.extend(self._verify(k, win, reading))
        # (a knob under trial, or just undone, waits for the next window)
        free = [k for k in self._concurrency() if k.trial is None and k.changed_t < win.t1]
        if win.wait > WAIT_HIGH:
            self._calm_since = None
            if self._behind_since is None:
                self._behind_since = win.t0
            for k in free:
                out.extend(self._raise(k, win, reading, needs[k.stage]))
        elif win.wait < WAIT_LOW:
            self._behind_since = None
            if self._calm_since is None:
                self._calm_since = win.t0
            if win.t1 - self._calm_since >= CALM_S and self._est.demand() is not None:
                for k in free:
                    need = needs[k.stage]
                    if need is not None:
                        out.extend(self._cut(k, win, need))
        else:
            self._calm_since = self._behind_since = None
        out.extend(self._follow(win, reading))
        return out

    def _raise(self, k: Knob, win: Window, r: Reading, need: float | None) -> list[Decision]:
        sw, now = win.stages[k.stage], win.t1
        if need is not None:
            target, verdict = math.ceil(need * HEADROOM), self._kind(k, win)
            if target <= k.value and sw.saturated:  # (more overhead than work measured)
                target, verdict = math.ceil(k.value * 1.5), "saturated: probing"
        elif sw.saturated and self.acts:
            target, verdict = k.value * 2, "slow start: this stage limits and the demand is unknown"
        else:
            return []
        if self.acts:  # (a recommendation is the target itself)
            if self.stages[k.stage].executor == "process":  # (a spawn costs a while)
                behind = now - (self._behind_since if self._behind_since is not None else now)
                if now - k.changed_t < PROCESS_DWELL_S or behind < PROCESS_SUSTAIN_S:
                    return []
                target = min(target, k.value + max(1, k.value // 2))
            target = min(target, k.value * STEP_MAX)
        cap, why = self._cap(k, win, r)
        new = min(target, cap)
        if new <= k.current(self.acts):
            if target > k.current(self.acts):
                k.note = why
            return []
        extra = ""
        if need is not None:
            extra = (
                f" ({sw.service_s * 1e3:.1f} ms per item; {need * HEADROOM:.0f} in flight keep up)"
            )
        if new < target:
            extra += f"; {why}"
        return [self._change(k, new, win, verdict, extra)]

    def _cut(self, k: Knob, win: Window, need: float) -> list[Decision]:
        now, value = win.t1, k.current(self.acts)
        process = self.stages[k.stage].executor == "process"
        calm = now - (self._calm_since or now)
        if value <= need * OVER or now - k.changed_t < DWELL_S:
            return []
        if process and (calm < PROCESS_CALM_S or now - k.changed_t < PROCESS_CALM_S):
            return []
        new = max(math.ceil(need * HEADROOM), math.ceil(value * CUT), k.low(now))
        if process:  # never below the workers busy
            sw = win.stages[k.stage]
            new = max(new, math.ceil(sw.busy * sw.workers))
        if new >= value:
            return []
        verdict = "backing off: the consumer does not wait"
        extra = f" ({need * HEADROOM:.1f} in flight keep up)"
        return [self._change(k, new, win, verdict, extra)]

    def _verify(self, k: Knob, win: Window, r: Reading) -> list[Decision]:
        trial, sw, now = k.trial, win.stages[k.stage], win.t1
        assert trial is not None
        if trial.raised and sw.workers_before < trial.new:  # (process workers starting:
            return []  # judge on a window that has them all)
        k.trial = None
        if trial.raised:
            wanted = trial.rate * (1 + GAIN_MIN * (trial.new / trial.old - 1))
            if not (win.wait > WAIT_HIGH and sw.saturated and trial.saturated):
                return []
            if sw.rate >= wanted:
                return []
            k.ceiling, k.ceiling_until = trial.old, now + CEILING_S
            k.recheck_s = trial.service_s
            why = (
                f"no gain above {trial.old}: {sw.rate:.0f} items/s at {trial.new}, "
                f"{trial.rate:.0f} at {trial.old}"
            )
            k.note = why
            return [self._change(k, trial.old, win, "no gain", f" ({why})", verify=False)]
        if win.wait <= WAIT_HIGH:
            if now - trial.t < CUT_TRIAL_S:  # (the buffers drain first: watch a while)
                k.trial = trial
            return []
        k.floor, k.floor_until = trial.old, now + FLOOR_S
        why = f"the consumer waited {win.wait:.0%} after the cut to {trial.new}"
        k.note = f"kept at {trial.old} or more: {why}"
        return [self._change(k, trial.old, win, "cut undone", f" ({why})", verify=False)]

    def _kind(self, k: Knob, win: Window) -> str:
        """Why a stage needs its workers: it computes, or it waits."""
        sw = win.stages[k.stage]
        if sw.cpu_per_busy is not None:
            if sw.cpu_per_busy >= CPU_BOUND:
                return "cpu-bound"
            return f"latency-bound (CPU {sw.cpu_per_busy:.0%} of its work time)"
        if win.loop is not None:
            return f"latency-bound (event loop {win.loop:.0%} busy)"
        return "latency-bound"

    def _cap(self, k: Knob, win: Window, r: Reading) -> tuple[int, str]:
        """The most ``k`` may be raised to now, and why (the binding limit)."""
        now = win.t1
        cap, why = k.high(now), f"at its cap {k.high(now)}"
        if k.ceiling is not None and now < k.ceiling_until and cap == k.ceiling:
            why = f"at {cap}: no gain above it"
        cpu = cpu_limit(k.stage, win, self.stages, self.budget)
        if cpu is not None and cpu[0] < cap:
            cap, why = cpu
        loop = win.loop
        task = self.stages[k.stage].executor == "task"
        if cpu is None and task and loop is not None and loop >= LOOP_BUSY and k.value < cap:
            cap, why = k.value, f"event loop {loop:.0%} busy"
        room = memory_room(k.stage, r, self.budget)
        if room is not None and room < cap:
            cap, why = max(k.spec.low, room), "at the memory budget"
        growing = [k.stage for k in self._concurrency() if k.value < k.high(now)]
        workers = [s.workers for s in r.stages]
        for other in self._concurrency():
            workers[other.stage] = other.value
        service = [e.value for e in self._est.service]
        ratios = in_per_out(self.stages, r.stages)
        labels = [s.label for s in self.stages]
        down = downstream_limit(k.stage, service, workers, ratios, growing, labels, HEADROOM)
        if down is not None and down[0] < cap:
            cap, why = down
        return cap, why

    def _change(
        self,
        k: Knob,
        new: int,
        win: Window,
        verdict: str,
        extra: str,
        *,
        verify: bool = True,
    ) -> Decision:
        sw, old = win.stages[k.stage], k.current(self.acts)
        reason = (
            f"{k.label}: {old} -> {new}, consumer waited {win.wait:.0%}, stage starved "
            f"{sw.starved:.0%}, busy {sw.busy:.0%}: {verdict}{extra}"
        )
        if self.acts:
            if verify:
                k.trial = Trial(
                    old, new, new > old, sw.rate, sw.saturated, win.wait, win.t1, sw.service_s
                )
            k.value, k.by = new, "tuner"
            self._moved.add(k.stage)
            k.changed_t, k.direction = win.t1, 1 if new > old else -1
        else:
            k.recommended = new
        if verify:
            k.note = verdict
        return Decision(win.t1, k.stage, k.label, k.spec.what, old, new, self.acts, verdict, reason)

    def _follow(self, win: Window, r: Reading) -> list[Decision]:
        """Capacities the tuner holds: the buffer rule (``_buffers.py``)."""
        out = []
        workers = [s.workers for s in r.stages]
        for k in self.knobs:
            if k.spec.what == "concurrency":
                workers[k.stage] = k.current(self.acts)
        for k in self.knobs:
            if k.spec.what != "capacity" or not k.spec.tunable:
                continue
            move = self._buffers.decide(k, win, r, self.budget, workers, self.acts)
            if move is not None:
                new, verdict, extra = move
                out.append(self._change(k, new, win, verdict, extra, verify=False))
        return out
