"""Control: how a pipeline run tells its workers to stop or to pause.

Every step of every stage holds the run's ``Control`` and its stage number. At the
start of each call, before it takes new input and while it holds no item, a step
calls ``check(stage)`` (a stopping stage ends it cleanly: QueueClosedError) and then its
*pause point*: ``pause_thread(stage)`` on a worker thread, ``await pause_task(stage)``
in a task. While a pause is requested the worker waits there, counted in
``paused[stage]``, until ``resume()``.

Stopping goes from the source down: ``stop_through(i)`` stops stages ``0..i`` (``cut``
becomes ``i + 1``), which is what a failure of stage ``i`` does (the stages after it
go on with what had passed it); ``stop()`` stops every stage (the run is finishing).
``cut`` only grows.

A checkpoint requests a pause and waits until the run is at rest (see
``run/_checkpoint.py``); so every item is then in a stage queue, in a stage's own buffer
(a shuffle), or not yet read (the source): never in a worker's hands.

Async sources wait for their next item inside ``interruptible()``: stopping cancels
those waits, since an external source (a queue nobody closes, a network stream) may
never deliver again.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..._errors import QueueClosedError
from ..tune._gate import Gate

__all__ = ["Control", "Stage"]


class Control:
    """The stop flag and the pause of one run (see the module docstring)."""

    __slots__ = (
        "_lock",
        "_resumed",
        "_scopes",
        "_task_resumed",
        "cut",
        "paused",
        "pausing",
        "stages",
    )

    def __init__(self, stages: int) -> None:
        self.stages = stages
        self.cut = 0  # stages 0..cut-1 are stopping
        self.pausing = False  # a pause is requested
        self.paused = [0] * stages  # workers waiting at their pause point, per stage
        self._lock = threading.Lock()
        self._resumed = threading.Event()  # threads wait on it (set: not paused)
        self._resumed.set()
        self._task_resumed: anyio.Event | None = None  # tasks wait on it
        self._scopes: set[anyio.CancelScope] = set()

    # -- stopping ------------------------------------------------------------------------

    @property
    def set(self) -> bool:
        """Whether every stage is stopping (the run is finishing)."""
        return self.cut >= self.stages

    def check(self, stage: int) -> None:
        """Raise QueueClosedError (a clean end) if ``stage`` is stopping."""
        if stage < self.cut:
            raise QueueClosedError("the pipeline is stopping")

    def stop(self) -> None:
        """Stop the run: steps end at their next check, pauses end, waits are cancelled."""
        self.stop_through(self.stages - 1)

    def stop_through(self, stage: int) -> None:
        """Stop stages ``0..stage``: their steps end at their next check, the source's
        waits are cancelled; a pause ends (a checkpoint of a failing run fails)."""
        self.cut = max(self.cut, stage + 1)
        for scope in list(self._scopes):  # (only sources wait in ``interruptible``)
            scope.cancel()
        self.resume()

    async def interruptible(self, stage: int, fn: Callable[[], Awaitable[Any]]) -> Any:
        """``await fn()``, ended with QueueClosedError (a clean end) when ``stage`` stops."""
        self.check(stage)
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                return await fn()
            finally:
                self._scopes.discard(scope)
        raise QueueClosedError("the pipeline is stopping")

    # -- pausing (event-loop side) -------------------------------------------------------

    def pause(self) -> None:
        """Ask every worker to wait at its next pause point (called on the loop)."""
        if not self.pausing:
            self._task_resumed = anyio.Event()
            self._resumed.clear()
            self.pausing = True

    def resume(self) -> None:
        """Let every paused worker go on (called on the loop, or by ``stop``)."""
        self.pausing = False
        self._resumed.set()
        if self._task_resumed is not None:
            self._task_resumed.set()
            self._task_resumed = None

    # -- pause points ----------------------------------------------------------------------

    def pause_thread(self, stage: int) -> None:
        """A worker thread's pause point."""
        if not self.pausing:
            return
        with self._lock:
            self.paused[stage] += 1
        try:
            while self.pausing and stage >= self.cut:
                self._resumed.wait(0.1)
        finally:
            with self._lock:
                self.paused[stage] -= 1
        self.check(stage)

    async def pause_task(self, stage: int) -> None:
        """A task worker's pause point."""
        while self.pausing and stage >= self.cut:
            event = self._task_resumed
            if event is None:
                break
            with self._lock:
                self.paused[stage] += 1
            try:
                await event.wait()
            finally:
                with self._lock:
                    self.paused[stage] -= 1
        self.check(stage)


class Stage:
    """What a stage's steps share: the run's control, the stage's number, label and
    meter, and for a map whose concurrency is tuned, its ``Gate`` (None otherwise: one
    ``is None`` test per burst)."""

    __slots__ = ("control", "gate", "index", "label", "meter")

    def __init__(
        self, control: Control, index: int, label: str, meter: Any, gate: Gate | None = None
    ) -> None:
        self.control = control
        self.index = index
        self.label = label
        self.meter = meter
        self.gate = gate

    def check(self) -> None:
        """Raise QueueClosedError (a clean end) if this stage is stopping."""
        if self.index < self.control.cut:
            raise QueueClosedError("the pipeline is stopping")

    def start_thread(self, slot: int = 0) -> None:
        """The start of a thread step: end if stopping, wait at a tuned map's gate
        while ``slot`` is beyond its limit, wait while paused."""
        self.check()
        if self.gate is not None:
            self.gate.pass_thread(slot, self.check)
        self.control.pause_thread(self.index)

    async def start_task(self, slot: int = 0) -> None:
        """The start of a task step (see ``start_thread``)."""
        self.check()
        if self.gate is not None:
            await self.gate.pass_task(slot, self.check)
        if self.control.pausing:
            await self.control.pause_task(self.index)

    async def interruptible(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """``await fn()``, ended with QueueClosedError (a clean end) when this stage
        stops (see ``Control.interruptible``)."""
        return await self.control.interruptible(self.index, fn)
