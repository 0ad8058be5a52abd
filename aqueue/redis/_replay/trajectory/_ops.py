"""A trajectory table's own operations on Redis, sans I/O (``_functions.lua`` holds
their functions); update, delete, close and producers are the replay table's.

- an append (``AppendOp``, ``append`` and ``append_many`` of a writer) sends
  ``tt_append`` with its steps staged in the same ``MULTI``/``EXEC`` (``MSET st:<ref>
  ...``). The function stores all k steps, makes the windows they complete items and
  evicts the oldest steps for room, or, when the rate limiter holds the inserts of
  those windows, stores nothing (it deletes the staged steps) and registers the op as a
  waiting insert; the op then waits for its wake-up and sends its steps again;
- a sample (``TrajSampleOp``) is the replay table's ``SampleOp`` calling ``tt_sample``,
  which draws as ``rt_sample`` does and copies the drawn windows' steps to the keys the
  same transaction reads and deletes: ``n * length`` payloads, window by window;
- a writer's first append opens it on the server; ``writer_op`` ends its episode or
  closes it; ``statistics`` reads the
  items' and the steps' counters in one call.

Leaving early yields ``rt_leave`` (deregister, pass the wake-up on) if the op may be
registered, as the replay table's ops do; the calls carry ``keep`` (a call that
completed returns its result, the cancellation comes at the caller's next await).
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import numpy.typing as npt

import aqueue
from aqueue._replay._results import ReplaySample
from aqueue._replay._trajectory._results import TrajectoryStatistics, trajectory_statistics
from aqueue._replay._trajectory._steps import StepStatistics

from ..._core._shared import text, undoing
from ..._core._transport import Call, Op, Wait
from .._ops import SampleOp, sample_of, statistics
from ._open import TrajHandle

__all__ = ["AppendOp", "TrajSampleOp", "traj_statistics", "writer_op"]

Keys = npt.NDArray[np.int64]


class AppendOp:
    """One append or append_many of writer ``writer`` (see the module docstring)."""

    __slots__ = ("args", "h", "member", "opid", "registered", "stage", "writer")

    def __init__(self, h: TrajHandle, writer: str, comps: Any, k: int, priorities: Any) -> None:
        self.h = h
        self.writer = writer  # ('' until the writer's first append opens it)
        self.opid = uuid.uuid4().hex
        self.member = ""  # the waiting insert's registration, once the server names it
        self.registered = False
        prios = [] if priorities is None else [repr(float(p)) for p in priorities]
        payloads = h.step_codec.encode_batch(comps, k)
        refs = [f"{self.opid}.{i}" for i in range(k)]
        self.stage = [(f"{h.prefix}st:{r}", p) for r, p in zip(refs, payloads)]
        self.args: list[Any] = [h.gen, self.opid, writer, k, h.reg_ms, "", len(prios)]
        self.args += [*prios, *refs]

    def run(self) -> Op[Keys]:
        """The operation: it returns the keys of the items the steps completed."""
        return undoing(self._steps(), self.leave_call)

    def _steps(self) -> Op[Keys]:
        h = self.h
        while True:
            self.registered = True
            reply = yield Call("tt_append", h.key, self.args, stage=self.stage, keep=True)
            status = text(reply[0])
            if status == "ok":
                self.registered = False
                base, m = int(reply[1]), int(reply[2])
                self.writer = text(reply[3])
                return np.arange(base, base + m, dtype=np.int64)
            if status == "wait":
                self.member = self.args[5] = text(reply[1])
                yield Wait(f"{h.prefix}wk:{self.opid}", h.wait_timeout)
                continue
            self.registered = False
            if status == "closed":
                why = "was closed while this append waited" if int(reply[1]) else "is closed"
                raise aqueue.QueueClosedError(
                    f"trajectory table '{h.name}' {why} (nothing appended)"
                )
            if status == "nowriter":
                raise aqueue.QueueClosedError(
                    f"trajectory table '{h.name}': this writer is closed on the server"
                )
            raise h.gone()

    def leave_call(self) -> Call | None:
        """The ``rt_leave`` of an early exit, or None."""
        if not self.registered or not self.member:
            return None
        return Call("rt_leave", self.h.key, [self.h.gen, "i", self.member, self.opid])


class TrajSampleOp(SampleOp):
    """``SampleOp`` through ``tt_sample``: the payloads read are the steps of the drawn
    windows, assembled into ``(n, length, ...)`` per field."""

    __slots__ = ()

    def __init__(self, h: TrajHandle, n: int) -> None:
        super().__init__(h, n)
        length = h.steps.length
        out = [f"{h.prefix}o:{self.wid}.{j}" for j in range(1, n * length + 1)]
        self.call = Call(
            "tt_sample", h.key, self.call.args, fetch=out, drop=out, atomic=True, keep=True
        )

    def received(self, reply: list[Any], values: list[Any]) -> ReplaySample[Any]:
        """The sample: the draws from the reply, the steps from the payloads read."""
        h = self.h
        assert isinstance(h, TrajHandle)
        n, length = self.n, h.steps.length
        fields = h.step_codec.decode_batch([b"" if v is None else v for v in values])
        data = h.steps.spec.pack([f.reshape(n, length, *f.shape[1:]) for f in fields])
        return sample_of(data, reply, n)


def writer_op(h: TrajHandle, op: str, writer: str) -> Op[None]:
    """``tt_writer``: ``end`` (the writer's episode) or ``close`` (end, and forget it).

    Raises:
        QueueClosedError: The writer is closed on the server, or the table is gone.
    """
    reply = yield Call("tt_writer", h.key, [h.gen, op, writer], keep=True)
    status = text(reply[0])
    if status == "nowriter":
        raise aqueue.QueueClosedError(
            f"trajectory table '{h.name}': writer {writer} is closed on the server"
        )
    if status != "ok":
        raise h.gone()


def traj_statistics(h: TrajHandle) -> Op[TrajectoryStatistics]:
    """``tt_stats``: the items' counters and the steps' (QueueClosedError: gone)."""
    reply = yield Call("tt_stats", h.key, [h.gen], ro=True)
    if not reply:
        raise h.gone()
    v = [int(x) for x in reply]
    items = statistics(h, v[:10])
    max_steps, held, appended, stored, evicted, freed, dropped, writers = v[10:18]
    steps = StepStatistics(
        max_steps=max_steps,
        held=held,
        appended=appended,
        stored=stored,
        evicted=evicted,
        freed=freed,
        item_evictions=items.evictions,
        windows_dropped=dropped,
        writers=writers,
    )
    return trajectory_statistics(items, steps)
