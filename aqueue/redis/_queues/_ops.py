"""The queue operations, sans I/O: what each sends to the server and what each reply
means, written once for the async queue and the thread view.

Every operation is a generator (an ``Op``, see ``_transport``): it yields a request
(``Call``, ``Read``, ``Wait``), receives the reply, decides what to send next, and
returns its result. A driver (``run`` for tasks, ``run_blocking`` for threads)
performs the requests; when one fails (an error, a cancellation, a thread's timeout),
the driver throws the exception in at that yield, and an op holding something first
yields the ``aq_leave`` call that gives it back (``undoing``), then re-raises.

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

The take modes are the in-process ones: "one" (an element), "many" (exactly n),
"upto" (n, or what is left once the queue is final), "some" (a burst: 1..n, as soon as
one can be taken; it registers as a waiter that needs one element).

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

The one-call operations (statistics, close, producers) are the core's
(``_core/_shared.py``), written once for queues and tables.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

import aqueue

from .._core import _shared
from .._core._handle import gone_text
from .._core._shared import text, undoing
from .._core._transport import Call, Op, Read, Wait
from ._handle import QueueHandle

__all__ = ["PutOp", "TakeOp"]


class _Sentinel:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


WAIT: Final = _Sentinel("WAIT")  # the op must wait for a wake-up
MORE: Final = _Sentinel("MORE")  # the op continues at once (next chunk)
DONE: Final = _Sentinel("DONE")


class TakeOp:
    """One dequeue, dequeue_many, dequeue_up_to or dequeue_burst (see the module
    docstring)."""

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

    def __init__(self, h: QueueHandle, mode: str, n: int, progressive: bool | None = None) -> None:
        self.h = h
        self.mode = mode
        self.n = n
        if progressive is None:  # (a sharded take may register for more than fits)
            progressive = mode in ("many", "upto") and n > h.capacity - h.min_after_dequeue
        self.progressive = progressive
        self.rands = h.rands(n)
        self.payloads: list[bytes] = []
        self.stage = "take"
        self.lease = ""
        self.member = ""
        self.count = 0
        self.renew()

    def run(self) -> Op[Any]:
        """The operation: its result is the element or the batch, in user form."""
        return undoing(self._steps(), self.leave_call)

    def _steps(self) -> Op[Any]:
        while True:
            call = self.take_call()
            reply = yield call
            reply, values = reply if call.fetch else (reply, None)
            got = self.on_take(reply)
            if got is WAIT:
                yield Wait(f"{self.h.prefix}ev:data:{self.lease}", self.h.wait_timeout)
            elif got is not None:
                if values is None or len(values) < got:  # not all fetched: read them now
                    values = yield Read(self.payload_keys(got))
                result = self.received(values)
                if self.on_ack((yield self.ack_call())):
                    return result

    def renew(self) -> None:
        """A fresh lease id (at the start, and after a lease expired)."""
        self.lease = uuid.uuid4().hex
        need = 1 if self.progressive or self.mode == "some" else self.n  # to be woken
        self.member = f"{need}:{self.lease}"
        self.payloads = []

    def take_call(self) -> Call:
        """The next ``aq_take``, with the MGET of the payload keys behind it: the lease
        keys of all ``n`` (missing ones read as nil, cheaply), at most ``capacity`` of
        them (a burst rarely gets more; the rest are read after), or none for a
        progressive op, which reads its payloads once its lease is complete."""
        h = self.h
        self.stage = "take"
        prog = "1" if self.progressive else "0"
        args = [h.gen, self.lease, self.lease, self.mode, self.n, h.lease_ms, h.reg_ms, prog]
        fetch = [] if self.progressive else self.payload_keys(min(self.n, h.capacity))
        return Call("aq_take", h.key, [*args, *self.rands], fetch=fetch)

    def payload_keys(self, count: int) -> list[str]:
        """The keys of the first ``count`` elements of this op's lease."""
        base = f"{self.h.prefix}e:{self.lease}."
        return [f"{base}{j}" for j in range(1, count + 1)]

    def on_take(self, reply: list[Any]) -> Any:
        """The number of elements taken, WAIT, or None (lease voided: retry at once)."""
        status = text(reply[0])
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
            raise aqueue.OutOfRangeError(
                f"{gone_text('queue', self.h.name)}: it cannot serve a dequeue of {self.n}",
                queue_name=self.h.name,
                requested=self.n,
                size=0,
            )
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
        codec = self.h.codec
        if self.mode == "one":
            return self.h.unpack(codec.decode_one(self.payloads[0]))
        return self.h.spec.pack(list(codec.decode_batch(self.payloads)))

    def ack_call(self) -> Call:
        self.stage = "ack"
        return Call("aq_ack", self.h.key, [self.h.gen, self.lease])

    def on_ack(self, reply: Any) -> bool:
        """True when acknowledged; False when the lease expired first (the elements went
        back to the queue: the op starts over and must not use them)."""
        self.stage = "done"
        if int(reply) >= 0:
            return True
        if int(reply) == -2:
            raise aqueue.OutOfRangeError(queue_name=self.h.name, requested=self.n, size=0)
        self.renew()
        return False

    def leave_call(self) -> Call | None:
        """The ``aq_leave`` of an early exit, or None (nothing to undo)."""
        if self.stage == "done":
            return None
        unknown = "1" if self.stage == "take" else "0"
        extra = self.payloads if self.stage == "ack" else []
        args = [self.h.gen, self.lease, unknown, self.lease, self.member, "", *extra]
        return Call("aq_leave", self.h.key, args)


class PutOp:
    """One enqueue or enqueue_many (see the module docstring)."""

    __slots__ = (
        "atomic",
        "calls",
        "h",
        "hint",
        "hold",
        "member",
        "payloads",
        "pos",
        "registered",
        "sent",
        "waited",
        "wid",
    )

    def __init__(self, h: QueueHandle, payloads: list[bytes], atomic: bool) -> None:
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
        # Atomic, and not admitted: pending without waiting for room (``aq_put``'s
        # hold; a sharded enqueue waiting in its process's line).
        self.hold = False

    def run(self) -> Op[None]:
        """The operation: it returns once every payload was admitted."""
        return undoing(self._steps(), self.leave_call)

    def _steps(self) -> Op[None]:
        h = self.h
        while True:
            h.check_released()
            status = self.on_put((yield self.put_call()))
            if status is DONE:
                return
            if status is WAIT:
                self.on_wake((yield Wait(f"{h.prefix}ev:space:{self.wid}", h.wait_timeout)))

    def put_call(self) -> Call:
        """The next ``aq_put``, with the payloads to stage with it (key, payload),
        under refs unique to this call."""
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
        mode = "2" if self.hold else "1" if self.atomic else "0"  # (hold, atomic, progressive)
        args: list[Any] = [h.gen, self.wid, mode, remaining, h.reg_ms]
        stage = []
        e = f"{h.prefix}e:{self.wid}.{self.calls}."
        for i, p in enumerate(self.payloads[self.pos : self.pos + k]):
            if len(p) < _shared.INLINE_MAX:
                args.append(p)
            else:
                stage.append((f"{e}{i}", p))
                args.append(f"{self.wid}.{self.calls}.{i}")
        return Call("aq_put", h.key, args, stage=stage)

    def on_put(self, reply: list[Any]) -> Any:
        """DONE, MORE (send the next chunk now) or WAIT."""
        status = text(reply[0])
        if status != "ok":
            self.registered = False
            count = len(self.payloads)
            if status == "closed" and int(reply[1]) and (self.pos or self.waited):
                raise aqueue.QueueClosedError(
                    f"queue '{self.h.name}' was closed with cancel_pending_enqueues=True: "
                    f"pending enqueue cancelled after {self.pos} of {count} elements were "
                    "admitted"
                )
            if status == "closed":
                raise aqueue.QueueClosedError(f"queue '{self.h.name}' is closed")
            raise self.h.gone()
        admitted = int(reply[1])
        self.pos += admitted
        self.hint = self.h.room = int(reply[2])
        self.h.filled = self.h.capacity - self.h.room
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

    def leave_call(self) -> Call | None:
        """The ``aq_leave`` of an early exit (deregister), or None."""
        if not self.registered:
            return None
        return Call("aq_leave", self.h.key, [self.h.gen, "", "0", self.wid, "", self.member])
