"""One queue operation as a sequence of server calls, shared by the async queue and the
thread view: which arguments each function call gets, and what its reply means.

A dequeue (``TakeOp``) runs ``aq_take`` until it returns elements, decodes them,
then runs ``aq_ack``. The take moves the elements' refs into its lease and renames
their payload keys to ``e:<lease>.1 ..``, which an ``MGET`` pipelined behind the take
reads (a progressive dequeue, whose lease fills over several calls, reads them once
after the last call instead):

    stage "take"  the take call is in flight: if the caller leaves now, the outcome is
                  unknown, so ``aq_leave`` restores the lease if it exists, else voids
                  the lease id so a take arriving late does nothing;
    stage "wait"  the op is registered and waits for a wake-up; its lease may hold
                  elements a progressive dequeue claimed (``aq_leave`` restores them);
    stage "got"   the lease holds the elements and the payloads were (or are being)
                  read and decoded: leaving now (a bad payload: PayloadError) restores
                  the lease;
    stage "ack"   the ack is in flight or done: leaving now gives the elements back,
                  from the lease if the ack did not run, else from the payloads this op
                  holds (unless the lease expired and they went back already);
    stage "done"  nothing to undo: returned, or the server already undid everything
                  (OutOfRange, queue deleted).

An enqueue (``PutOp``) sends its payloads in calls of at most ``max_call_bytes``:
each call is one transaction that stages the payloads under fresh refs (``MSET``)
and runs ``aq_put`` with the refs (a payload shorter than ``INLINE_MAX`` goes in the
call itself, in place of its ref); ``aq_put`` admits what fits (all or nothing when
``atomic``) and deletes the staged payloads it did not admit. While any remain, the op is
registered as pending (a plain close lets it finish, as in-process) and waits for
room; the wake-up carries this waiter's share of the free room (waiters woken
together split it, oldest first, by what each still has to send), so the next call
sends about that many. A new op starts from the room the last call of this process
saw, so on a full queue it sends one payload, not a chunk that would be refused.
Leaving early keeps the admitted prefix and only deregisters.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Final, Protocol

import numpy as np

import aqueue

from ._codec import Codec
from ._spec import ElementSpec

__all__ = ["WAIT", "Handle", "PutOp", "TakeOp"]


class _Sentinel:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


# Payloads shorter than this travel inline, through the Lua functions, instead of
# under their own keys: below it, a key per element costs the server more than Lua's
# per-byte cost (it interns and hashes every string it sees). Measured on Redis 7.0.
INLINE_MAX = 1024  # (tests patch it)

WAIT: Final = _Sentinel("WAIT")  # the op must wait for a wake-up
MORE: Final = _Sentinel("MORE")  # the op continues at once (next chunk)
DONE: Final = _Sentinel("DONE")


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class Handle:
    """What every operation of one queue needs: identity, spec, codec, settings."""

    def __init__(
        self,
        *,
        name: str,
        kind: str,
        gen: str,
        capacity: int,
        min_after_dequeue: int,
        spec: ElementSpec,
        owner: str,
        seed: int | None,
        lease_time: float,
        wait_timeout: float,
        max_call_bytes: int,
    ) -> None:
        self.name = name
        self.kind = kind
        self.gen = gen
        self.capacity = capacity
        self.mad = min_after_dequeue
        self.spec = spec
        self.owner = owner
        self.seed = seed
        self.prefix = f"aq:{{{name}}}:"
        self.key = self.prefix + "meta"
        self.codec = Codec(spec, name)
        self.lease_ms = str(int(lease_time * 1000))
        self.wait_timeout = wait_timeout
        # A registration outlives a few missed retries, then expires (crashed waiter).
        self.reg_ms = str(int(wait_timeout * 4000) + 1000)
        self.max_call_bytes = max_call_bytes
        self._rng = np.random.default_rng(seed) if kind == "shuffle" else None
        self._rng_lock = threading.Lock()
        # The free room the last aq_put reply of this process reported (a hint only).
        self.room = capacity
        # Set by release_producers (a coordinator's stop): this process's enqueues on
        # this queue object fail with QueueClosedError at their next step.
        self.released = False

    def check_released(self) -> None:
        """Raise QueueClosedError if this process's producers were released."""
        if self.released:
            raise aqueue.QueueClosedError(
                f"queue '{self.name}': this process's producers were released "
                "(a coordinator stopped); the shared queue itself stays open"
            )

    def rands(self, n: int) -> list[str]:
        """``n`` uniform floats in [0, 1) for a shuffle take (none for FIFO), drawn once
        per operation so retries do not change a seeded sequence."""
        if self._rng is None:
            return []
        with self._rng_lock:
            values = self._rng.random(n)
        return [repr(float(v)) for v in values]

    def batch_n(self, n: Any, what: str) -> int:
        """Checked ``n`` of a batch dequeue (the in-process rules and messages)."""
        owner = f"{self.owner}.{what}"
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            from ._spec import int_arg

            int_arg(n, "n", owner, 0)
        if self.spec.shapes is None:
            raise aqueue.ElementSpecError(
                f"{self.owner}.{what} requires the components to have declared shapes; "
                "pass shapes= when creating the queue"
            )
        return int(n)

    def unpack(self, comps: tuple[Any, ...]) -> Any:
        """Decoded components in user form (scalars as numpy scalars, as in-process)."""
        return self.spec.pack([a[()] if a.ndim == 0 else a for a in comps])


class Producers(Protocol):
    """The server object's producer bookkeeping (for the heartbeat)."""

    def add_producer(self, handle: Handle, pid: str) -> None: ...

    def remove_producer(self, handle: Handle, pid: str) -> None: ...


class TakeOp:
    """One dequeue, dequeue_many or dequeue_up_to (see the module docstring)."""

    __slots__ = (
        "count",
        "h",
        "lease",
        "member",
        "mode",
        "n",
        "payloads",
        "progressive",
        "rands",
        "stage",
    )

    def __init__(self, h: Handle, mode: str, n: int) -> None:
        self.h = h
        self.mode = mode
        self.n = n
        self.progressive = mode != "one" and n > h.capacity - h.mad
        self.rands = h.rands(n)
        self.payloads: list[bytes] = []
        self.stage = "take"
        self.lease = ""
        self.member = ""
        self.count = 0
        self.renew()

    def renew(self) -> None:
        """A fresh lease id (at the start, and after a lease expired)."""
        self.lease = uuid.uuid4().hex
        self.member = f"{1 if self.progressive else self.n}:{self.lease}"
        self.payloads = []

    @property
    def wake_key(self) -> str:
        return f"{self.h.prefix}ev:data:{self.lease}"

    def take_args(self) -> list[Any]:
        h = self.h
        self.stage = "take"
        prog = "1" if self.progressive else "0"
        return [
            h.gen,
            self.lease,
            self.lease,
            self.mode,
            self.n,
            h.lease_ms,
            h.reg_ms,
            prog,
            *self.rands,
        ]

    def payload_keys(self, count: int) -> list[str]:
        """The keys of the first ``count`` elements of this op's lease."""
        base = f"{self.h.prefix}e:{self.lease}."
        return [f"{base}{j}" for j in range(1, count + 1)]

    def fetch_keys(self) -> list[str]:
        """Keys to read right behind each take call: all ``n`` lease keys (missing
        ones read as nil, cheaply), or none for a progressive op, which reads its
        payloads once its lease is complete (``payload_keys(count)``)."""
        return [] if self.progressive else self.payload_keys(self.n)

    def on_take(self, reply: list[Any]) -> Any:
        """The number of elements taken, WAIT, or None (lease voided: retry at once)."""
        status = _text(reply[0])
        if status == "ok":
            self.count = int(reply[1])
            self.stage = "got"
            return self.count
        if status == "wait":
            self.stage = "wait"
            return WAIT
        self.stage = "done"
        if status == "oor":
            raise aqueue.OutOfRangeError(
                queue_name=self.h.name, requested=self.n, size=int(reply[1])
            )
        if status == "gone":
            raise aqueue.OutOfRangeError(queue_name=self.h.name, requested=self.n, size=0)
        # "void": the lease expired between two calls of this op and its claims went
        # back to the queue; start over with a new lease.
        self.renew()
        self.stage = "take"
        return None

    def received(self, values: list[Any]) -> Any:
        """Decode the ``count`` payloads read from the lease keys (a missing one reads
        as empty, which decoding refuses); the user-facing result. May raise
        PayloadError: the stage stays "got", so leaving restores the lease."""
        self.payloads = [b"" if v is None else v for v in values[: self.count]]
        return self.result(self.payloads)

    def ack_args(self) -> list[Any]:
        self.stage = "ack"
        return [self.h.gen, self.lease]

    def on_ack(self, reply: Any) -> bool:
        """True when acknowledged; False when the lease expired first (the elements went
        back to the queue: the op starts over and must not use them)."""
        if int(reply) >= 0:
            self.stage = "done"
            return True
        self.stage = "done"
        if int(reply) == -2:
            raise aqueue.OutOfRangeError(queue_name=self.h.name, requested=self.n, size=0)
        self.renew()
        return False

    def leave_args(self) -> list[Any] | None:
        """Arguments of ``aq_leave`` for an early exit, or None (nothing to undo)."""
        if self.stage == "done":
            return None
        unknown = "1" if self.stage == "take" else "0"
        extra = self.payloads if self.stage == "ack" else []
        return [self.h.gen, self.lease, unknown, self.lease, self.member, "", *extra]

    def result(self, payloads: list[bytes]) -> Any:
        """The user-facing result of the payloads (may raise PayloadError)."""
        codec = self.h.codec
        if self.mode == "one":
            return self.h.unpack(codec.decode_one(payloads[0]))
        return self.h.spec.pack(list(codec.decode_batch(payloads)))


class PutOp:
    """One enqueue or enqueue_many (see the module docstring)."""

    __slots__ = (
        "atomic",
        "calls",
        "h",
        "hint",
        "member",
        "payloads",
        "pos",
        "registered",
        "sent",
        "waited",
        "wid",
    )

    def __init__(self, h: Handle, payloads: list[bytes], atomic: bool) -> None:
        self.h = h
        self.payloads = payloads
        self.atomic = atomic
        self.pos = 0
        self.sent = 0
        # The room this process last saw: a producer that just found the queue full
        # sends one payload first (it then waits for its share of the room), not all.
        self.hint = min(len(payloads), h.room)
        self.registered = False
        self.waited = False
        self.wid = uuid.uuid4().hex
        self.member = f"{len(payloads) if atomic else 1}:{self.wid}"
        self.calls = 0

    @property
    def wake_key(self) -> str:
        return f"{self.h.prefix}ev:space:{self.wid}"

    def put_args(self) -> tuple[list[Any], list[tuple[str, bytes]]]:
        """The arguments of the next ``aq_put``, and the payloads to stage with it
        (key, payload), under refs unique to this call."""
        remaining = len(self.payloads) - self.pos
        if self.atomic:
            k = remaining if self.hint >= remaining else 0  # else only register (probe)
        else:
            k = max(1, min(remaining, self.hint))
            size = len(self.payloads[self.pos]) or 1
            k = max(1, min(k, self.h.max_call_bytes // size))
        self.sent = k
        self.registered = True  # from now on the server may hold a registration
        h = self.h
        self.calls += 1
        args: list[Any] = [h.gen, self.wid, "1" if self.atomic else "0", remaining, h.reg_ms]
        stage = []
        e = f"{h.prefix}e:{self.wid}.{self.calls}."
        for i, p in enumerate(self.payloads[self.pos : self.pos + k]):
            if len(p) < INLINE_MAX:
                args.append(p)
            else:
                stage.append((f"{e}{i}", p))
                args.append(f"{self.wid}.{self.calls}.{i}")
        return args, stage

    def on_put(self, reply: list[Any]) -> Any:
        """DONE, MORE (send the next chunk now) or WAIT."""
        status = _text(reply[0])
        if status != "ok":
            self.registered = False
            count = len(self.payloads)
            if status == "closed" and int(reply[1]) and (self.pos or self.waited):
                raise aqueue.QueueClosedError(
                    f"queue '{self.h.name}' was closed with cancel_pending_enqueues=True: "
                    f"pending enqueue cancelled after {self.pos} of {count} elements were "
                    "admitted"
                )
            why = "is closed" if status == "closed" else "was deleted"
            raise aqueue.QueueClosedError(f"queue '{self.h.name}' {why}")
        admitted = int(reply[1])
        self.pos += admitted
        self.hint = self.h.room = int(reply[2])
        if self.pos == len(self.payloads):
            self.registered = False
            return DONE
        if admitted < self.sent or self.sent == 0:
            self.waited = True
            return WAIT
        return MORE

    def on_wake(self, token: bytes | None) -> None:
        """Take the free room a wake-up reports (a timeout probes with one element)."""
        self.hint = int(token) if token is not None else (0 if self.atomic else 1)

    def leave_args(self) -> list[Any] | None:
        if not self.registered:
            return None
        return [self.h.gen, "", "0", self.wid, "", self.member]
