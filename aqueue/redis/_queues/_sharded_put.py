"""The enqueue over a queue's shards (``_shards``), sans I/O, composed of the one-shard
steps of ``_ops`` (each shard is a queue of today's engine):

``ShardedPutOp`` (enqueue, enqueue_many): a call's elements go to *one* shard, whole
and in order, whenever one shard has room for them all. Round 1 offers the whole batch
to the shards one by one (all or nothing), this call's home shard first (it rotates
per call) when its room hint fits, then by room hint; a shard whose hint is smaller
gets a probe without payloads, which reports its room. When none took it whole, round
2 sends it to the shard with the most room, which admits the longest prefix that fits,
and the rest starts again at round 1: so a batch for which no shard has room whole is
split into consecutive runs, each in order in one shard, and an enqueue waits only when
no shard has room for one element (the capacity is the total, as on one server): then
it waits registered on every shard at once (``WaitAny``) and looks again. The admitted
part is always a prefix of the batch (``pos``). Between rounds the op keeps one
registration (the ``anchor``; each round 1 makes a new one, so it never outlives its
lifetime however long the op waits): a plain close lets it finish there, as a pending
enqueue finishes on one server.

One line per process (``_line``): a process whose several tasks enqueue into the same
full queue would have each of them register on every shard, wake together when one
shard frees room and race for it, most finding it gone (on one server the server keeps
them in line). So an enqueue first takes its process's turn (``Gate``); when another
holds it, the enqueue makes one try, all or nothing, on the shard its hints favour, and
when that was not admitted it stays there on hold (pending, so a plain close lets it
finish, but not waiting for room: the turn's holder waits for room for the line) and
waits for the turn, renewing the hold each ``wait_timeout``. With the turn, the rounds
above go on (the hold is the anchor until round 1 makes the next). The driver
gives the turn back when the op ends; an op that finishes after a close gives it back
first.

Cancellation-safety: each round begins with a ``Checkpoint``, where a cancel scope's
cancellation arrives even when the rounds make calls only (every call is shielded):
nothing is in flight there. Every registration is in ``live`` until it is resolved; when
the op leaves early (cancellation of either kind, an error) it yields the ``aq_leave``
of each, in turn, shielded as every call is. What was admitted stays admitted (a
prefix of the batch), as a cancelled enqueue on one server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aqueue

from .._core._transport import Checkpoint, Gate, Op, Ungate, WaitAny
from ._handle import QueueHandle
from ._ops import DONE, MORE, WAIT, PutOp
from ._shards import drop, guarded

__all__ = ["ShardedPutOp"]


class ShardedPutOp:
    """One enqueue or enqueue_many over the shards ``hs`` (see the module docstring)."""

    def __init__(self, hs: Sequence[QueueHandle], payloads: list[bytes], start: int) -> None:
        self.hs = hs
        self.payloads = payloads
        self.start = start % len(hs)
        self.live: list[Any] = []
        self.pos = 0  # how many of ``payloads`` are admitted (a prefix)
        self.anchor: PutOp | None = None  # the registration kept between rounds
        # A batch larger than one call may carry is never sent whole: probes only.
        self.whole = sum(len(p) for p in payloads) <= hs[0].max_call_bytes

    def run(self) -> Op[None]:
        """The operation: it returns once every payload was admitted."""
        return guarded(self._steps(), self.live)

    def _order(self, count: int) -> list[int]:
        """The shards to try for ``count`` elements: the home shard first if its room
        hint fits them, then by room hint, largest first."""
        k = len(self.hs)
        rest = sorted(range(k), key=lambda s: (-self.hs[s].room, (s - self.start) % k))
        if self.hs[self.start].room >= count:
            rest.remove(self.start)
            return [self.start, *rest]
        return rest

    def _steps(self) -> Op[None]:
        root = self.hs[0]
        if not (yield Gate(root.line, 0)):  # another enqueue of this process has the turn
            status = yield from self._queue_up()
            if status is DONE:
                return
            if status is None:  # closed: the rest follows in the anchor's shard
                return (yield from self._finish())
        while True:
            yield Checkpoint()  # (a round may end without a wait: a cancel scope ends it)
            rest = self.payloads[self.pos :]
            # Round 1: the whole rest into one shard (a shard whose room hint is
            # smaller gets a probe without payloads, which reports its room).
            regs: list[PutOp] = []
            fresh = False  # this round's first registration became the anchor
            for s in self._order(len(rest)):
                root.check_released()
                sub = self._sub(self.hs[s], atomic=True)
                if not self.whole:
                    sub.hint = 0
                status = yield from self._put(sub)
                if status is WAIT and sub.sent == 0 and self.whole and sub.hint >= len(rest):
                    # The probe found room for it all (the hint was stale): send it
                    # there now, under the probe's registration.
                    root.check_released()
                    status = yield from self._put(sub)
                if status is DONE:
                    yield from drop(self.live, regs)
                    return
                if status is None:  # closed: the rest follows in the anchor's shard
                    yield from drop(self.live, regs)
                    return (yield from self._finish())
                if not fresh:  # pending from its first registration on, renewed each round
                    yield from self._anchor(sub)
                    fresh = True
                else:
                    regs.append(sub)
            yield from drop(self.live, regs)
            # (The anchor is now this round's first registration, registered for room.)
            assert self.anchor is not None
            # Round 2: no shard had room for it all: the shard with the most room
            # admits the longest prefix that fits, and the rest starts again at
            # round 1. (Waiting for room for the whole batch instead could wait
            # forever beside a consumer that waits for it: the total has room.)
            best = max(self.hs, key=lambda h: h.room)
            if best.room > 0:
                root.check_released()
                sub = self._sub(best, atomic=False)
                status = yield from self._put(sub)
                while status is MORE:
                    root.check_released()
                    status = yield from self._put(sub)
                if status is None:
                    return (yield from self._finish())
                if status is DONE:
                    return
                if sub.pos > 0:
                    yield from self._anchor(sub)
                else:
                    yield from drop(self.live, [sub])  # (the room went meanwhile)
                continue
            # No room anywhere: wait on every shard (the anchor's shard through the
            # anchor), then look again.
            regs = []
            for h in self.hs:
                if h is self.anchor.h:
                    continue
                sub = self._sub(h, atomic=False)
                sub.hint = 0  # a probe: registered for one element
                status = yield from self._put(sub)
                if status is None:
                    yield from drop(self.live, regs)
                    return (yield from self._finish())
                if status is DONE:
                    yield from drop(self.live, regs)
                    return
                regs.append(sub)
                if sub.pos > 0:
                    break
            if regs and regs[-1].pos > 0:
                keep = regs.pop()
                yield from drop(self.live, regs)
                yield from self._anchor(keep)
                continue
            waits = [self.anchor, *regs]
            keys = [f"{sub.h.prefix}ev:space:{sub.wid}" for sub in waits]
            woke = yield WaitAny(keys, root.wait_timeout)
            if woke is not None:
                waits[woke[0]].h.room = int(woke[1])
            yield from drop(self.live, regs)

    def _queue_up(self) -> Op[Any]:
        """Wait for this process's turn (``Gate``): one try, all or nothing, on the
        shard the hints favour, and when it was not admitted, a hold there (pending,
        not waiting for room: the turn's holder waits for room for the whole line),
        renewed each ``wait_timeout``. The hold is the anchor until the rounds
        register the op for room. DONE, None (closed: the anchor finishes) or WAIT
        (the rounds go on, with the turn)."""
        root = self.hs[0]
        sub = self._sub(self.hs[self._order(len(self.payloads))[0]], atomic=True)
        sub.hold = True
        while True:
            if not self.whole:
                sub.hint = 0
            root.check_released()
            status = yield from self._put(sub)
            if status is DONE or status is None:
                return status
            self.anchor = sub  # pending from its first hold on
            if (yield Gate(root.line, root.wait_timeout)):
                return status

    def _sub(self, h: QueueHandle, atomic: bool) -> PutOp:
        """A one-shard put of what is not admitted yet, in ``live``."""
        sub = PutOp(h, self.payloads, atomic=atomic)
        left = len(self.payloads) - self.pos
        sub.pos = self.pos
        sub.hint = min(left, h.room)
        sub.member = f"{left if atomic else 1}:{sub.wid}"  # (as aq_put registers it)
        self.live.append(sub)
        return sub

    def _put(self, sub: PutOp) -> Op[Any]:
        """One ``aq_put`` of ``sub``: its status (DONE, MORE, WAIT), with ``pos``
        moved by what it admitted; None when the queue is closed and this op has an
        anchor (a plain close lets a pending enqueue finish, as on one server)."""
        before = sub.pos
        try:
            status = sub.on_put((yield sub.put_call()))
        except aqueue.QueueClosedError:
            self.live.remove(sub)
            if self.anchor is None:
                raise
            return None
        self.pos += sub.pos - before
        if status is DONE:
            self.live.remove(sub)
            if self.anchor is not None and self.anchor is not sub:
                yield from drop(self.live, [self.anchor])
            self.anchor = None
        return status

    def _anchor(self, sub: PutOp) -> Op[None]:
        """``sub`` (registered, pending) becomes the anchor: the one registration this
        op keeps between rounds, so a close finds it pending; the old one goes."""
        old, self.anchor = self.anchor, sub
        if old is not None and old is not sub:
            yield from drop(self.live, [old])

    def _finish(self) -> Op[None]:
        """The rest of the batch in the anchor's shard, where it is pending (as on
        one server: progressive, waiting for room there); the turn goes first."""
        yield Ungate(self.hs[0].line)
        sub = self.anchor
        assert sub is not None
        sub.pos = self.pos
        if sub.atomic:  # progressive there, as a pending enqueue on one server
            sub.atomic = sub.hold = False
            sub.member = f"1:{sub.wid}"
        status = WAIT
        while True:
            if status is WAIT:
                woke = yield WaitAny([f"{sub.h.prefix}ev:space:{sub.wid}"], sub.h.wait_timeout)
                sub.on_wake(None if woke is None else woke[1])
            self.hs[0].check_released()
            before = sub.pos
            status = sub.on_put((yield sub.put_call()))
            self.pos += sub.pos - before
            if status is DONE:
                self.live.remove(sub)
                self.anchor = None
                return
