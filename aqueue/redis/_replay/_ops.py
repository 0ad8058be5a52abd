"""A replay table's operations on Redis, sans I/O: what each sends and what each reply
means, written once for the async table and its thread view (as the queues' ``_ops``
is for the queues; the same drivers run them).

Every operation completes in *one* function call of the library (``_functions.lua``), or
changes nothing but a waiter's registration:

- an insert (``InsertOp``) sends ``rt_insert`` with its payloads staged in the same
  ``MULTI``/``EXEC`` (``MSET st:<ref> ...``, as a queue's enqueue does; payloads under
  1 KiB travel in the call itself). The function inserts all k items, or none and
  registers the op as a waiting insert (deleting the staged payloads). The op then
  waits for its wake-up (``BLPOP wk:<wid>``) and calls again. A process whose last
  insert had to wait starts its next one with a *probe* (``rt_insert`` without
  payloads: may it go now?), and a waiter whose wait timed out probes again, so
  payloads are sent only when they will probably be taken. A sink's ``enqueue_many``
  (``progressive``) asks for the longest prefix the limiter admits now (``part``; its
  probe, ``pprobe``, says how many), so it waits only while none is admitted and a
  cancelled one leaves a prefix in;
- a sample (``SampleOp``) sends ``MULTI; FCALL rt_sample; MGET o:<wid>.1 ..; DEL
  o:<wid>.1 ..; EXEC``: the function draws, counts, copies the payloads to those keys
  (or returns small ones in its reply), and the same transaction reads and deletes
  them. Or it registers the op as a waiting sample;
- ``update`` and ``delete`` are one call each; statistics, close and producers are
  the core's shared ops (``_core/_shared.py``), opening is ``_open``'s.

Leaving early (a cancellation, a timeout, an error) yields ``rt_leave`` (deregister,
and pass the wake-up on) if the op may be registered, and gives the op's random
numbers back to the client's generator if nothing else drew from it since (so a
cancelled sample of a seeded client leaves its sequence as it was). The calls carry
``keep``: under a native asyncio cancellation a call that completed the operation
returns its result, and the cancellation comes at the caller's next await; under anyio
cancel scopes that is how it always goes (the call is shielded).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

import aqueue
from aqueue._replay._results import ReplaySample, ReplayStatistics

from .._core import _shared
from .._core._errors import ServerFullError
from .._core._handle import gone_text
from .._core._shared import text, undoing
from .._core._transport import Call, Op, Wait
from ._handle import TableHandle

__all__ = ["InsertOp", "SampleOp", "delete", "found_of", "sample_of", "statistics", "update"]


class InsertOp:
    """One insert or insert_many (see the module docstring); with ``progressive`` a
    sink's ``enqueue_many``: each call inserts the longest prefix of what is left that
    the limiter admits then (it waits only while it admits none), so a cancelled one
    leaves exactly a prefix in. With ``sink`` it fails once the producers of this table
    object were released (``check_released``)."""

    __slots__ = (
        "done",
        "draw",
        "h",
        "k",
        "member",
        "payloads",
        "prios",
        "progressive",
        "rands",
        "registered",
        "sink",
        "wid",
        "window",
    )

    def __init__(
        self,
        h: TableHandle,
        comps: Any,
        k: int,
        priorities: Any,
        *,
        progressive: bool = False,
        sink: bool = False,
    ) -> None:
        self.h = h
        self.k = k
        self.done = 0
        self.window = 0  # a progressive op's probe: how many the limiter admitted then
        self.progressive = progressive
        self.sink = sink
        self.payloads = h.codec.encode_batch(comps, k)
        self.prios = [] if priorities is None else [repr(float(p)) for p in priorities]
        self.rands: list[str] = []
        self.draw: tuple[Any, Any] | None = None
        if h.evict_rands:
            self.rands, self.draw = h.rands(k)
        self.wid = uuid.uuid4().hex
        self.member = f"{1 if progressive else k}:{self.wid}"
        self.registered = False

    def run(self) -> Op[npt.NDArray[np.int64]]:
        """The operation: it returns the items' keys."""
        return undoing(self._steps(), self.leave_call)

    def _steps(self) -> Op[npt.NDArray[np.int64]]:
        h = self.h
        probe = h.insert_waited
        waited = False
        keys: list[npt.NDArray[np.int64]] = []
        while True:
            if self.sink:
                h.check_released()
            self.registered = True  # from now on the server may hold a registration
            reply = yield self.call(probe)
            status = text(reply[0])
            if status == "ok":
                self.registered = False
                self.draw = None  # (items went in: the numbers are used)
                base, m = int(reply[1]), int(reply[2])
                keys.append(np.arange(base, base + m, dtype=np.int64))
                self.done += m
                self.window = 0
                if self.done == self.k:
                    h.insert_waited = waited
                    return keys[0] if len(keys) == 1 else np.concatenate(keys)
                probe = True  # the limiter admitted no more: ask before sending the rest
                continue
            if status == "go":
                probe = False
                self.window = int(reply[1]) if len(reply) > 1 else 0
            elif status == "wait":
                waited = h.insert_waited = True
                token = yield Wait(f"{h.prefix}wk:{self.wid}", h.wait_timeout)
                probe = token is None  # woken: it can go; a timed-out wait only asks
            else:
                self.registered = False
                if status == "closed":
                    what = "nothing" if not self.done else f"{self.done} of its {self.k} items"
                    why = f"was closed while this insert waited ({what} inserted)"
                    raise aqueue.QueueClosedError(
                        f"replay table '{h.name}' {why if int(reply[1]) else 'is closed'}"
                    )
                raise h.gone()

    def call(self, probe: bool) -> Call:
        """The next ``rt_insert`` (of the items not in yet): a probe, or the insert with
        its payloads staged."""
        h = self.h
        d, e = self.done, self.k
        if self.progressive:
            mode = "pprobe" if probe else "part"
            if self.window and not probe:  # send what the probe saw admitted, no more
                e = min(e, d + self.window)
        else:
            mode = "probe" if probe else "go"
        prios, rands = self.prios[d:e], self.rands[d:e]
        args: list[Any] = [h.gen, self.wid, e - d, h.reg_ms, mode]
        args += [len(prios), len(rands), *prios, *rands]
        if probe:
            return Call("rt_insert", h.key, args, keep=True)
        stage = []
        inline_max = _shared.INLINE_MAX
        for i, p in enumerate(self.payloads[d:e], start=d):
            if len(p) < inline_max:
                args.append(p)
            else:
                ref = f"{self.wid}.{i}"
                stage.append((f"{h.prefix}st:{ref}", p))
                args.append(ref)
        return Call("rt_insert", h.key, args, stage=stage, keep=True)

    def leave_call(self) -> Call | None:
        """The ``rt_leave`` of an early exit, or None; the random numbers go back."""
        self.h.undraw(self.draw)
        if not self.registered:
            return None
        return Call("rt_leave", self.h.key, [self.h.gen, "i", self.member, self.wid])


class SampleOp:
    """One sample(n) (see the module docstring). On a full server, which refuses
    transactions, the call goes as a plain pipeline instead, its copies expiring after
    ``lease_time`` should the client die before its DEL."""

    __slots__ = ("call", "draw", "h", "member", "n", "registered", "wid")

    def __init__(self, h: TableHandle, n: int) -> None:
        self.h = h
        self.n = n
        rands: list[str] = []
        self.draw: tuple[Any, Any] | None = None
        if h.sample_rands:
            rands, self.draw = h.rands(n)
        self.wid = uuid.uuid4().hex
        self.member = f"{n}:{self.wid}"
        self.registered = False
        out = [f"{h.prefix}o:{self.wid}.{j}" for j in range(1, n + 1)]
        args = [h.gen, self.wid, n, h.reg_ms, "0", *rands]
        self.call = Call("rt_sample", h.key, args, fetch=out, drop=out, atomic=True, keep=True)

    def run(self) -> Op[ReplaySample[Any]]:
        """The operation: it returns the sample."""
        return undoing(self._steps(), self.leave_call)

    def _steps(self) -> Op[ReplaySample[Any]]:
        h = self.h
        while True:
            self.registered = True
            try:
                reply, values = yield self.call
            except ServerFullError:
                if not self.call.atomic:
                    raise
                # The server refused the transaction as a whole (nothing ran): the same
                # call without it, the function's copies expiring by themselves.
                args = list(self.call.args)
                args[4] = h.lease_ms
                self.call = replace(self.call, args=args, atomic=False)
                continue
            status = text(reply[0])
            if status == "ok":
                self.registered = False
                self.draw = None  # used: the sample happened, whatever follows
                return self.received(reply, values)
            if status == "wait":
                yield Wait(f"{h.prefix}wk:{self.wid}", h.wait_timeout)
                continue
            self.registered = False
            if status == "oor":
                size = int(reply[1])
                why = (
                    f"replay table '{h.name}' is closed and cannot serve sample({self.n}) "
                    f"(size {size}; the rate limiter or the items held do not allow it, and "
                    "nothing can be inserted any more)"
                )
            else:
                size = 0
                why = f"{gone_text('replay table', h.name)}: it cannot serve sample({self.n})"
            raise aqueue.OutOfRangeError(why, queue_name=h.name, requested=self.n, size=size)

    def received(self, reply: list[Any], values: list[Any]) -> ReplaySample[Any]:
        """The sample, from the function's reply and the payloads read behind it. A
        payload that is not AQ1 raises PayloadError (the sample has happened)."""
        n = self.n
        small = reply[3]
        payloads = [
            v if v is not None else (s if s is not None else b"") for v, s in zip(values, small)
        ]
        return sample_of(self.h.spec.pack(list(self.h.codec.decode_batch(payloads))), reply, n)

    def leave_call(self) -> Call | None:
        """The ``rt_leave`` of an early exit, or None; the random numbers go back."""
        self.h.undraw(self.draw)
        if not self.registered:
            return None
        return Call("rt_leave", self.h.key, [self.h.gen, "s", self.member, self.wid])


def sample_of(data: Any, reply: list[Any], n: int) -> ReplaySample[Any]:
    """The sample of ``data`` (its draws' payloads, decoded) and an ``rt_sample`` reply:
    the size then, and per draw its key, priority, probability and times sampled."""
    return sample_from(data, np.frombuffer(reply[2], dtype="<f8").reshape(n, 4), int(reply[1]))


def sample_from(data: Any, draws: Any, size: int) -> ReplaySample[Any]:
    """The sample of ``data`` and its draws' rows (key, priority, probability, times
    sampled, as float64), the table's size then."""
    return ReplaySample(
        data,
        draws[:, 0].astype(np.int64),
        draws[:, 1].copy(),
        draws[:, 2].copy(),
        draws[:, 3].astype(np.int64),
        size,
    )


def found_of(h: TableHandle, reply: Any) -> npt.NDArray[np.bool_]:
    """Which keys an ``rt_update`` or ``rt_remove_keys`` reply found."""
    if reply is None:
        raise h.gone()
    found: npt.NDArray[np.bool_] = np.frombuffer(
        reply if isinstance(reply, bytes) else b"", dtype=np.uint8
    ) == ord("1")
    return found


def update(
    h: TableHandle, keys: npt.NDArray[np.int64], priorities: npt.NDArray[np.float64]
) -> Op[npt.NDArray[np.bool_]]:
    """``rt_update``: which keys the table held (their priorities are set)."""
    args = [h.gen, len(keys), *keys.tolist(), *(repr(float(p)) for p in priorities)]
    return found_of(h, (yield Call("rt_update", h.key, args, keep=True)))


def delete(h: TableHandle, keys: npt.NDArray[np.int64]) -> Op[npt.NDArray[np.bool_]]:
    """``rt_remove_keys``: which keys the table held (those items are removed)."""
    return found_of(h, (yield Call("rt_remove_keys", h.key, [h.gen, *keys.tolist()], keep=True)))


def statistics(h: TableHandle, v: list[int]) -> ReplayStatistics:
    """The record of the core's ``stats`` reply for a table (microseconds to seconds)."""
    return ReplayStatistics(
        size=v[0],
        max_size=h.settings.max_size,
        inserts=v[1],
        samples=v[2],
        deletes=v[3],
        evictions=v[4],
        insert_wait_s=v[5] / 1e6,
        sample_wait_s=v[6] / 1e6,
        inserts_waiting=v[7],
        samples_waiting=v[8],
        closed=bool(v[9]),
    )
