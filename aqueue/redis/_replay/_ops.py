"""A replay table's operations on Redis, sans I/O: what each sends and what each reply
means, written once for the async table and its thread view (as ``_ops`` is for the
queues; the same drivers run them).

Every operation completes in *one* function call of the library (``_replay.lua``), or
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
- ``update``, ``delete``, ``stats``, ``close`` and ``open_table`` are one call each.

Leaving early (a cancellation, a timeout, an error) yields ``rt_leave`` (deregister,
and pass the wake-up on) if the op may be registered, and gives the op's random
numbers back to the client's generator if nothing else drew from it since (so a
cancelled sample of a seeded client leaves its sequence as it was). The calls carry
``keep``: under a native asyncio cancellation a call that completed the operation
returns its result, and the cancellation comes at the caller's next await; under anyio
cancel scopes that is how it always goes (the call is shielded).
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

import aqueue
from aqueue._replay._checks import TableArgs, TableSettings
from aqueue._replay._limiter import limiter_config, limiter_from_config
from aqueue._replay._results import ReplaySample, ReplayStatistics
from aqueue._replay._selectors import (
    Fifo,
    Lifo,
    MaxHeap,
    Prioritized,
    Selector,
    Uniform,
    selector_config,
    selector_from_config,
)

from .._core._codec import Codec
from .._core._errors import ServerFullError
from .._core._transport import Call, Op, Wait
from .._queues import _ops
from .._queues._ops import gone_text, undoing

__all__ = [
    "FANOUT",
    "InsertOp",
    "SampleOp",
    "TableHandle",
    "close",
    "delete",
    "keep_table_producers",
    "open_table",
    "producer_done",
    "register_producer",
    "statistics",
    "stats",
    "update",
]

# Children per node of a sum tree on the server: one GETRANGE reads them all, so a
# descent costs about log_F(max_size) calls and an update two per level (measured in
# benchmarks/README.md; tests patch it).
FANOUT = 16
_FORMAT = "1"


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _kind(selector: Selector) -> str:
    return type(selector).__name__.lower()


class TableHandle:
    """What every operation of one table object needs: identity, settings, codec, this
    client's random numbers, and one hint (``insert_waited``: the last insert of this
    process had to wait).

    The table's identity on the server is ``name`` plus ``gen`` (written by the call
    that created it): a call with another ``gen`` finds the table gone.
    """

    def __init__(
        self,
        *,
        name: str,
        gen: str,
        settings: TableSettings,
        wait_timeout: float,
        lease_time: float,
    ) -> None:
        self.name = name
        self.gen = gen
        self.settings = settings
        self.args = TableArgs(settings)
        self.spec = settings.spec
        self.prefix = f"aq:{{{name}}}:"
        self.key = self.prefix + "meta"
        self.codec = Codec(settings.spec, name)
        self.wait_timeout = wait_timeout
        # A registration outlives a few missed retries, then expires (a crashed waiter).
        self.reg_ms = str(int(wait_timeout * 4000) + 1000)
        self.sample_rands = isinstance(settings.sampler, (Uniform, Prioritized))
        self.evict_rands = isinstance(settings.remover, (Uniform, Prioritized))
        self.lease_ms = str(int(lease_time * 1000))
        self.insert_waited = False
        # Producer accounting of this table object: the ids it registered and has not
        # ended; ``released`` is set by release_producers (a coordinator's stop): this
        # object's sink inserts fail with QueueClosedError from their next step.
        self.producers: set[str] = set()
        self.released = False
        self._rng = np.random.default_rng(settings.seed)
        self._rng_lock = threading.Lock()

    def rands(self, n: int) -> tuple[list[str], tuple[Any, Any]]:
        """``n`` uniform floats in [0, 1) as call arguments, and the token that gives
        them back (``undraw``)."""
        with self._rng_lock:
            before = self._rng.bit_generator.state
            values = self._rng.random(n)
            after = self._rng.bit_generator.state
        return [repr(float(v)) for v in values], (before, after)

    def undraw(self, token: tuple[Any, Any] | None) -> None:
        """Give back the numbers of ``token`` if nothing was drawn since (the op that
        drew them changed nothing)."""
        if token is None:
            return
        with self._rng_lock:
            if self._rng.bit_generator.state == token[1]:
                self._rng.bit_generator.state = token[0]

    def gone(self) -> aqueue.QueueClosedError:
        return aqueue.QueueClosedError(gone_text("replay table", self.name))

    def check_released(self) -> None:
        """Raise QueueClosedError if this object's producers were released."""
        if self.released:
            raise aqueue.QueueClosedError(
                f"replay table '{self.name}': this process's producers were released (a "
                "coordinator stopped); the shared table itself stays open"
            )


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
            status = _text(reply[0])
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
        inline_max = _ops.INLINE_MAX
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
            status = _text(reply[0])
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
        draws = np.frombuffer(reply[2], dtype="<f8").reshape(n, 4)
        small = reply[3]
        payloads = [
            v if v is not None else (s if s is not None else b"") for v, s in zip(values, small)
        ]
        data = self.h.spec.pack(list(self.h.codec.decode_batch(payloads)))
        return ReplaySample(
            data,
            draws[:, 0].astype(np.int64),
            draws[:, 1].copy(),
            draws[:, 2].copy(),
            draws[:, 3].astype(np.int64),
            int(reply[1]),
        )

    def leave_call(self) -> Call | None:
        """The ``rt_leave`` of an early exit, or None; the random numbers go back."""
        self.h.undraw(self.draw)
        if not self.registered:
            return None
        return Call("rt_leave", self.h.key, [self.h.gen, "s", self.member, self.wid])


def _found(h: TableHandle, reply: Any) -> npt.NDArray[np.bool_]:
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
    return _found(h, (yield Call("rt_update", h.key, args, keep=True)))


def delete(h: TableHandle, keys: npt.NDArray[np.int64]) -> Op[npt.NDArray[np.bool_]]:
    """``rt_remove_keys``: which keys the table held (those items are removed)."""
    return _found(h, (yield Call("rt_remove_keys", h.key, [h.gen, *keys.tolist()], keep=True)))


def stats(h: TableHandle) -> Op[list[int]]:
    """``rt_stats``: size, inserts, samples, deletes, evictions, insert wait µs, sample
    wait µs, inserts waiting, samples waiting, closed."""
    reply = yield Call("rt_stats", h.key, [h.gen], ro=True)
    if not reply:
        raise h.gone()
    return [int(x) for x in reply]


def statistics(h: TableHandle, v: list[int]) -> ReplayStatistics:
    """The record of ``stats``' reply (microseconds to seconds)."""
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


def register_producer(h: TableHandle) -> Op[str]:
    """``rt_producer add``: one more registered producer of every process's count; its
    id (QueueClosedError: the table is closed)."""
    pid = uuid.uuid4().hex
    reply = yield Call("rt_producer", h.key, [h.gen, "add", h.lease_ms, "1", pid])
    status = _text(reply[0])
    if status == "gone":
        raise h.gone()
    if status != "ok":
        raise aqueue.QueueClosedError(
            f"replay table '{h.name}' is closed: cannot register a producer"
        )
    return pid


def producer_done(h: TableHandle, pid: str, clean: bool) -> Op[None]:
    """``rt_producer done``: the last clean end (of every process's producers) closes
    the table, an unclean one closes it at once."""
    yield Call("rt_producer", h.key, [h.gen, "done", h.lease_ms, "1" if clean else "0", pid])


def keep_table_producers(h: TableHandle, pids: set[str]) -> Op[None]:
    """The heartbeat: producers ``pids`` are alive for another ``lease_time``."""
    yield Call("rt_producer", h.key, [h.gen, "beat", h.lease_ms, "1", *sorted(pids)])


def close(h: TableHandle) -> Op[None]:
    """``rt_close``: closed for every process (idempotent); wakes the waiters."""
    yield Call("rt_close", h.key, [h.gen])


# -- opening --------------------------------------------------------------------------

_ORDER = [
    "kind",
    "max_size",
    "dtypes",
    "shapes",
    "names",
    "sampler",
    "remover",
    "max_times_sampled",
    "rate_limiter",
    "format",
]


def _stored(settings: TableSettings) -> dict[str, str]:
    """The settings as the server stores them (compared on reopen), in JSON."""
    spec = settings.spec
    return {
        "kind": "table",
        "max_size": str(settings.max_size),
        "dtypes": json.dumps([dt.str for dt in spec.dtypes]),
        "shapes": json.dumps([list(s) for s in settings.shapes]),
        "names": json.dumps(None if spec.names is None else list(spec.names)),
        "sampler": json.dumps(selector_config(settings.sampler), sort_keys=True),
        "remover": json.dumps(selector_config(settings.remover), sort_keys=True),
        "max_times_sampled": str(settings.max_times_sampled),
        "rate_limiter": json.dumps(limiter_config(settings.rate_limiter), sort_keys=True),
        "format": _FORMAT,
    }


def _derived(settings: TableSettings) -> list[str]:
    """What the Lua functions read: the limiter's numbers, the selectors' kinds and
    exponents, the tree fanout, and which ordered sets to keep."""
    lim = settings.rate_limiter
    s, r = settings.sampler, settings.remover
    return [
        repr(lim.samples_per_insert),
        str(lim.min_size_to_sample),
        repr(lim.min_diff),
        repr(lim.max_diff),
        _kind(s),
        repr(s.exponent if isinstance(s, Prioritized) else 0.0),
        _kind(r),
        repr(r.exponent if isinstance(r, Prioritized) else 0.0),
        str(FANOUT),
        "1" if isinstance(s, (Fifo, Lifo)) or isinstance(r, (Fifo, Lifo)) else "0",
        "1" if isinstance(s, MaxHeap) or isinstance(r, MaxHeap) else "0",
    ]


def open_table(
    name: str, settings: TableSettings, wait_timeout: float, lease_time: float, readable: Any
) -> Op[TableHandle]:
    """``rt_open``: create the table, or check that the one stored has these settings
    (ElementSpecError naming the first field that differs; ``readable(field, text)``
    renders a stored value)."""
    given = _stored(settings)
    args = [uuid.uuid4().hex, *(given[f] for f in _ORDER), *_derived(settings)]
    reply = yield Call("rt_open", f"aq:{{{name}}}:meta", args)
    texts = [None if v is None else _text(v) for v in reply]
    if texts[0] == "exists":
        for field, stored in zip(_ORDER, texts[2:]):
            if stored != given[field]:
                raise aqueue.ElementSpecError(
                    f"{settings.owner}: the table already exists on the server with {field} "
                    f"{_readable(field, stored, readable)}, but "
                    f"{_readable(field, given[field], readable)} was given (processes "
                    "sharing a table must open it with the same settings: max_size, "
                    "dtypes, shapes, names, sampler, remover, max_times_sampled and "
                    "rate_limiter)"
                )
    gen = texts[1]
    assert gen is not None
    return TableHandle(
        name=name, gen=gen, settings=settings, wait_timeout=wait_timeout, lease_time=lease_time
    )


def _readable(field: str, stored: str | None, readable: Any) -> str:
    """A stored setting in the notation users write it in (``readable`` renders the
    element spec's fields as the queues do)."""
    if stored is None:
        return "None"
    try:
        if field in ("sampler", "remover"):
            return repr(selector_from_config(json.loads(stored)))
        if field == "rate_limiter":
            return repr(limiter_from_config(json.loads(stored)))
    except (ValueError, TypeError, aqueue.ElementSpecError):
        return stored
    if field == "kind":
        return "RedisReplayTable" if stored == "table" else f"a queue ({stored!r})"
    if field == "format":
        version = "this" if stored == _FORMAT else "another"
        return f"{stored} (the stored layout of {version} aqueue version)"
    if field in ("dtypes", "shapes", "names"):
        text: str = readable(field, stored)
        return text
    return stored
