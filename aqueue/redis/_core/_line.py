"""One line per process for the waiting side of a shared object: the ``Gate`` and
``Ungate`` requests, and how the drivers perform them.

Several tasks of one process that enqueue into the same full queue over shards would
each register on every shard, wake together when one shard frees room, and race for it:
most of them find it gone and register again. On one server the server keeps that line
(its waiters wake oldest first); over shards a process keeps its own: an op yields
``Gate(line, seconds)`` and waits its turn at ``line`` for at most ``seconds`` (the
reply: whether it got the turn); ``Ungate(line)`` gives the turn back, and the driver
gives back every turn an op still holds when the op ends, on every way out. While an op
waits in line it holds nothing it must undo except what it already registered (its
undo list covers that), so a cancellation there is as any other.

A ``Line`` has one lock for tasks (``anyio.Lock``; the turn is the task's, and the
driver that took it gives it back in the same task) and one for threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import anyio

__all__ = ["Gate", "Line", "Ungate", "enter", "enter_blocking", "leave"]


class Line:
    """The turn of one process's tasks (and, apart, of its threads) at one object."""

    __slots__ = ("_alock", "tlock")

    def __init__(self) -> None:
        self._alock: anyio.Lock | None = None
        self.tlock = threading.Lock()

    @property
    def alock(self) -> anyio.Lock:
        """The tasks' lock (made on first use, inside an event loop)."""
        if self._alock is None:
            self._alock = anyio.Lock(fast_acquire=True)
        return self._alock


@dataclass(frozen=True)
class Gate:
    """Wait for this process's turn at ``line``, for at most ``seconds`` (0: only if
    it is free now); the reply is whether the op got it."""

    line: Line
    seconds: float


@dataclass(frozen=True)
class Ungate:
    """Give the turn at ``line`` back."""

    line: Line


async def enter(gate: Gate) -> bool:
    """``Gate`` for a task: whether it got the turn (cancellable while it waits)."""
    lock = gate.line.alock
    try:
        lock.acquire_nowait()
        return True
    except anyio.WouldBlock:
        if gate.seconds <= 0:
            return False
    with anyio.move_on_after(gate.seconds):
        await lock.acquire()
        return True
    return False


def enter_blocking(gate: Gate) -> bool:
    """``Gate`` for a thread."""
    return gate.line.tlock.acquire(timeout=max(gate.seconds, 0.0))


def leave(held: list[Any], lock: Any) -> None:
    """``Ungate``: give back the turn whose lock is ``lock``, if the op holds it."""
    if lock in held:
        held.remove(lock)
        lock.release()
