"""The tuner's task: read the run, let the tuner decide, apply, log; until the run ends.

``drive(target, tuner, ended)`` runs in the pipeline's task group, next to its stages
(no thread of its own): each tick it asks the run for a ``Reading`` (``Tunable.reading``,
cheap: counters the stages keep anyway), hands it to the tuner, applies each decision
it returns (``Tunable.apply``: a gate's limit, a queue's capacity, a worker process
started) and logs it at DEBUG on the ``aqueue`` logger, then sleeps until the tuner's
``next_at``. In ``recommend`` mode the decisions are logged, never applied.

The clock and the sleep are parameters, so the tests drive a simulated pipeline with
them and never wait for real time. An exception from the target (a worker process
that cannot start) ends the task with it, and so the run, as a stage failure would;
cancellation (the run ending) ends it quietly at its sleep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio

from ._knobs import Decision
from ._readings import Reading
from ._tuner import Tuner

__all__ = ["Tunable", "drive"]

_MIN_SLEEP_S = 0.001
log = logging.getLogger("aqueue")


class Tunable(Protocol):
    """What a run offers its tuner."""

    def reading(self, now: float) -> Reading:
        """The run's counters now (``now`` becomes the reading's ``t``)."""
        ...

    def apply(self, decision: Decision) -> None:
        """Put an applied decision into force (event loop's thread)."""
        ...


async def drive(
    target: Tunable,
    tuner: Tuner,
    ended: Callable[[], bool],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> None:
    """Tick ``tuner`` on ``target`` until ``ended()`` (see the module docstring)."""
    while not ended():
        for decision in tuner.observe(target.reading(clock())):
            if decision.applied:
                target.apply(decision)
                log.debug("pipeline tuner: %s", decision.reason)
            else:
                log.debug("pipeline tuner recommends: %s", decision.reason)
        await sleep(max(_MIN_SLEEP_S, tuner.next_at - clock()))
