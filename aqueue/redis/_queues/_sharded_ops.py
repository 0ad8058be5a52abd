"""The dequeue over a queue's shards (``_shards``), sans I/O, composed of the
one-shard steps of ``_ops`` (each shard is a queue of today's engine):

``ShardedTakeOp`` (dequeue, dequeue_many, dequeue_up_to, dequeue_burst): on a FIFO queue
it first tries one take from one shard this process last saw holding the whole take
(each handle's ``filled`` hint: the last probe's size or put's reply, less what this
process's takes took since), the first such from the op's start, so the shards take
turns (the fullest would leave a shard that stays a little less full behind, its
elements never taken while the others flow): one call and its ack, as on one server. A
take that comes back short (the hint was stale: another consumer was faster) is given
back, as a short take of a round is, and the op goes on with the rounds; it tries the
hint once per op, so a stale hint costs one call. Each round reads every shard's size
(``aq_stats``; a shuffle shard can give its size less its part of ``min_after_dequeue``
while open), allocates what it takes to the shards with data (FIFO: largest first;
shuffle: each element's shard drawn in proportion to what the shards can give, so a take
mixes across shards), and takes exactly that many from each (``aq_take`` "many", one
lease per shard). When a take comes back short (another consumer was faster), what the
round took goes back (``aq_leave``) and the round starts over. When the shards hold too
few, the op registers on every shard for one element more than it saw there, waits on
all (``WaitAny``), deregisters and starts over; a shard that answers "final" (closed and
drained of pending enqueues) is counted, and once every shard is final the mode's end
rule applies (OutOfRange, or what is left for ``dequeue_up_to``). A take larger than the
whole capacity keeps its leases between rounds (as a progressive take does on one
server). Once the op holds all it needs it acknowledges shard by shard.

Cancellation-safety: each round begins with a ``Checkpoint``, where a
cancel scope's cancellation arrives even when the rounds make calls only (every call is
shielded): nothing is in flight there. Every sub-step that may hold something (a lease,
a registration, acknowledged payloads) is in ``live`` until it is resolved. When the op
leaves early (cancellation of either kind, an error) it yields the ``aq_leave`` of each,
in turn, shielded as every call is: leases go back (at the head of their shard, in
order), registrations go, and payloads whose ack already ran go back from the op's own
copy, so nothing is lost or duplicated. One shard's ack and another's undo never race:
the op yields one request at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aqueue

from .._core._handle import gone_text
from .._core._shared import text
from .._core._transport import Checkpoint, Op, Read, WaitAny
from ._handle import QueueHandle
from ._ops import TakeOp
from ._shards import drop, guarded, read_rows, release

__all__ = ["ShardedTakeOp"]


class ShardedTakeOp:
    """One dequeue of any mode over the shards ``hs`` (see the module docstring)."""

    def __init__(self, hs: Sequence[QueueHandle], mode: str, n: int, start: int) -> None:
        self.hs = hs
        self.mode = mode
        self.n = n
        self.start = start % len(hs)
        self.progressive = n > sum(h.capacity for h in hs)
        self.live: list[Any] = []
        self.held: list[tuple[TakeOp, list[bytes]]] = []

    def run(self) -> Op[Any]:
        """The operation: its result is the element or the batch, in user form."""
        return guarded(self._steps(), self.live)

    def _steps(self) -> Op[Any]:
        hs, n = self.hs, self.n
        hinted = self._hinted()  # one take where the hint says the whole take is
        if hinted is not None and (yield from self._take(hinted)) and (yield from self._ack()):
            return self._result()
        final = False  # every shard answered "final" in the last registration round
        while True:
            yield Checkpoint()  # (a round may end without a wait: a cancel scope ends it)
            rows = yield from self._probe()
            # What each shard can give: its size less its part of min_after_dequeue
            # while open (a shuffle queue's; 0 for FIFO).
            sizes = [
                max(0, row[0] - (0 if row[1] else h.min_after_dequeue)) for h, row in zip(hs, rows)
            ]
            total = sum(sizes)
            have = sum(len(p) for _, p in self.held)
            need = n - have
            if self.mode == "some" or (final and self.mode == "upto") or self.progressive:
                want = min(need, total)
            else:
                want = need if total >= need else 0
            if final and (have + want == 0 or (self.mode in ("one", "many") and want < need)):
                raise aqueue.OutOfRangeError(  # (the leases held go back on the way out)
                    queue_name=hs[0].name, requested=n, size=total + have
                )
            if want == 0:
                full = [
                    min(size, need) if row[0] >= h.capacity and (row[6] or row[10]) else 0
                    for h, row, size in zip(hs, rows, sizes)
                ]
                if not final and any(full):
                    # Full shards hold elements their producers wait to follow (a
                    # batch continues in its shard): hold these, so the rest comes
                    # (what the shard can give: a shuffle shard keeps its part of
                    # min_after_dequeue, and a take of more would wait, and loop).
                    yield from self._take(full)
                    continue
                final = yield from self._wait(sizes)
                continue
            final = False
            if (yield from self._take(self._allocate(sizes, want))):
                done = have + want == n or self.mode == "some" or self.mode == "upto"
                if done and (yield from self._ack()):
                    return self._result()

    def _hinted(self) -> list[int] | None:
        """The allocation of the hinted take (all from one shard: the first from this
        op's start that this process saw holding the whole take, so the shards take
        turns and none is left behind, else for ``dequeue_up_to`` the fullest), or
        None: a shuffle queue (its takes mix across shards in proportion to their
        sizes, which only a probe reads), a take larger than the capacity, or no shard
        hinted to hold it."""
        hs, k = self.hs, len(self.hs)
        if hs[0].shuffled or self.progressive:
            return None
        turns = [(self.start + i) % k for i in range(k)]
        whole = [s for s in turns if hs[s].filled >= self.n]
        if whole:
            s, want = whole[0], self.n
        elif self.mode in ("one", "many"):
            return None
        else:
            s = max(turns, key=lambda s: hs[s].filled)
            want = hs[s].filled
        if want <= 0:
            return None
        return [want if i == s else 0 for i in range(k)]

    def _probe(self) -> Op[list[list[int]]]:
        """Every shard's counters (``aq_stats``: size first, the waiting enqueues at
        6); a shard still open once shard 0 closed is closed. Each shard's ``filled``
        hint is its size."""
        try:
            rows = yield from read_rows(list(self.hs), end=True)
            for h, row in zip(self.hs, rows):
                h.filled = row[0]
            return rows
        except aqueue.QueueClosedError:  # gone: as a one-shard take says it
            name = self.hs[0].name
            raise aqueue.OutOfRangeError(
                f"{gone_text('queue', name)}: it cannot serve a dequeue of {self.n}",
                queue_name=name,
                requested=self.n,
                size=0,
            ) from None

    def _allocate(self, sizes: list[int], want: int) -> list[int]:
        """How many to take from each shard: for FIFO from the largest first (ties:
        from this op's start), what it holds; for a shuffle queue each element's shard
        drawn in proportion to what the shards hold (without replacement), so the
        take mixes across shards."""
        k = len(sizes)
        rands = self.hs[0].rands(want)
        if rands:
            left, alloc = list(sizes), [0] * k
            for u in rands:
                pick = float(u) * sum(left)
                s = 0
                while s < k - 1 and pick >= left[s]:
                    pick -= left[s]
                    s += 1
                alloc[s] += 1
                left[s] -= 1
            return alloc
        order = sorted(range(k), key=lambda s: (-sizes[s], (s - self.start) % k))
        alloc = [0] * k
        for s in order:
            alloc[s] = min(sizes[s], want)
            want -= alloc[s]
        return alloc

    def _take(self, alloc: list[int]) -> Op[bool]:
        """Take ``alloc[s]`` from each shard s; False (and this round's takes given
        back, and every lease held unless progressive) when one came back short."""
        got: list[tuple[TakeOp, list[bytes]]] = []
        this_round: list[TakeOp] = []
        short = False
        for h, k in zip(self.hs, alloc):
            if k == 0 or short:
                continue
            sub = TakeOp(h, "many", k, progressive=False)
            self.live.append(sub)
            this_round.append(sub)
            reply, values = yield sub.take_call()
            status = text(reply[0])
            if status == "oor":
                sub.stage = "done"  # final there, and fewer than k: nothing held
            elif status != "wait":
                sub.on_take(reply)  # "ok" (or raises: the queue is gone)
            if status != "ok":
                short = True
                continue
            if len(values) < k:  # given-back elements can fill a shard past its capacity
                values = yield Read(sub.payload_keys(k))
            got.append((sub, [b"" if v is None else v for v in values[:k]]))
        if short:
            for sub in this_round:
                sub.h.filled = 0  # (stale: the next probe reads it)
            yield from drop(self.live, this_round)
            return False
        for sub, payloads in got:
            sub.h.filled = max(0, sub.h.filled - len(payloads))
        self.held.extend(got)
        return True

    def _wait(self, sizes: list[int]) -> Op[bool]:
        """Register on every shard for one element more than it held, wait for the
        first wake-up, deregister; True when every shard answered "final" instead.
        (A shard at its capacity can hold no more: it wakes the op when it ends.)"""
        regs: list[TakeOp] = []
        finals = 0
        raced = False
        for h, size in zip(self.hs, sizes):
            sub = TakeOp(h, "many", size + 1, progressive=False)
            self.live.append(sub)
            reply, _ = yield sub.take_call()
            status = text(reply[0])
            if status == "wait":
                sub.stage = "wait"
                regs.append(sub)
            elif status == "oor":
                sub.stage = "done"
                finals += 1
            else:
                sub.on_take(reply)  # "ok": more came meanwhile (or raises: gone)
                regs.append(sub)  # (its lease goes back below)
                raced = True
        if regs and not raced:
            keys = [f"{sub.h.prefix}ev:data:{sub.lease}" for sub in regs]
            yield WaitAny(keys, self.hs[0].wait_timeout)
        self.live[:] = [s for s in self.live if s.stage != "done"]
        yield from drop(self.live, regs)
        return finals == len(self.hs)

    def _ack(self) -> Op[bool]:
        """Acknowledge every held lease; False when one had expired (its elements went
        back): then the others go back too, and the op starts over."""
        for sub, payloads in self.held:
            sub.payloads = payloads
            if not sub.on_ack((yield sub.ack_call())):
                self.live.remove(sub)  # (its elements are back already)
                self.held.clear()
                yield from release(self.live)
                return False
            sub.stage = "ack"  # acknowledged: an early exit puts these payloads back
        self.live.clear()
        return True

    def _result(self) -> Any:
        """The held elements in user form (shard by shard, each in its order)."""
        payloads = [p for _, ps in self.held for p in ps]
        self.held.clear()
        h = self.hs[0]
        if self.mode == "one":
            return h.unpack(h.codec.decode_one(payloads[0]))
        return h.spec.pack(list(h.codec.decode_batch(payloads)))
