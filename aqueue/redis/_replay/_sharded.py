"""A replay table's operations over its shards, sans I/O: ``TableOps`` gives the table
object and its thread view one op per operation; with one shard it is today's op
(``_ops``), unchanged; with ``K > 1`` shards (each a whole table of the Lua under its
own tag, ``_core/_shards.py``) it composes the shards' calls in ``Parallel`` rounds:

- keys name their shard: the key of an item is ``local * K + s`` (``local`` its key in
  shard ``s``), so ``update_priorities`` and ``delete`` route each key to its shard, one
  round, the answers put back in the caller's order;
- an insert goes whole to one shard: a round of probes (``rt_insert`` without payloads)
  asks every shard whether its limiter admits the batch now; the first that does, in an
  order rotating per call from a random start, gets it (``InsertOp``'s call; the other
  probes' registrations are withdrawn). When none admits, the op stays registered on
  every shard, waits for the first wake-up of any (``WaitAny``; a thread view waits on
  the first shard's, so another shard's room ends its wait within ``wait_timeout``)
  and probes again; so does an insert that finds its chosen shard taken meanwhile (it
  never waits on one shard alone, which could wait for samples that wait for inserts
  in another);
- a sample of n (Uniform or Prioritized) is exact across shards: round 1 ``rt_probe``
  reads each shard's total weight W_s (its size for Uniform, its sum of priority^alpha
  for Prioritized); the client draws k ~ Multinomial(n, W_s / sum W) with the table's
  seeded generator (when every shard is empty, the op registers on every shard as a
  sample of one, waits for any wake-up as an insert does, withdraws, and reads the
  totals again); round 2 ``rt_hold`` draws k_s in each shard with today's code but
  counts nothing: the draws are *held*, reserved against the shard's limiter; round 3
  ``rt_commit`` counts them (times sampled, the limiter's samples) on every shard. A
  draw's probability is (W_s / sum W) * p(i | s), its weights are over the whole table
  (N = the sum of round 1's sizes), and the draws come in a random order (the
  generator's permutation), each position distributed as one draw from the table;
- a shard whose limiter does not admit its k_s (``wait``) makes the whole sample wait:
  the holds of the others are released (nothing is held during a wait, so two
  samples can never hold what the other waits for), the op waits on that shard, and
  round 2 is sent again with the same allocation (never redrawn: that would favour
  the shards that admit);
- statistics are the shards' sums (``closed`` is the root's); closing closes every
  shard; a root found closed (its last producer ended) closes the others.

Cancellation: every round 1 of either op begins with a ``Checkpoint``, where a cancel
scope's cancellation arrives even when the op starts over without waiting (every call is
shielded). A sample is counted only by round 3, whose calls are sent together and
each run to its end (``Parallel``); an op that ends before it (a cancellation, a
timeout, an error) releases every hold it may have (``rt_release``: idempotent, so it
is sent to every shard it drew on), and a killed client's holds expire after
``lease_time`` on the server. So a cancelled sample sampled nothing on any shard, and
a seeded client's generator is given back. An insert changes a shard in one call
(today's op), and its probes only register waiters, which leaving withdraws.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import numpy as np
import numpy.typing as npt

import aqueue
from aqueue._replay._results import ReplaySample

from .._core import _shared
from .._core._shared import text
from .._core._transport import Call, Checkpoint, Op, Parallel, WaitAny
from . import _ops as ops
from ._handle import TableHandle
from ._open import shard_limiter
from ._ops import InsertOp, SampleOp
from ._sharded_sample import ShardedSample, raise_first

__all__ = ["TableOps"]

Keys = npt.NDArray[np.int64]
Found = npt.NDArray[np.bool_]


class TableOps:
    """The operations of one table object over its shards (see the module docstring)."""

    def __init__(self, handles: list[TableHandle]) -> None:
        self.handles = handles
        self.h = handles[0]
        self.k = len(handles)
        self._lock = threading.Lock()
        self._turn = int(uuid.uuid4().int % self.k)

    # -- the checks of a sharded table's calls (besides the in-process ones) -------------

    def sample_count(self, n: Any) -> int:
        """``n`` of ``sample(n)``, checked: also against one shard's limiter, since one
        shard may be asked for every draw.

        Raises:
            ElementSpecError: ``n`` could never be served at once.
        """
        count = self.h.args.sample_count(n)
        if self.k > 1:
            lim = self._limiter()
            self._per_shard_check(lambda: lim.check_sample_count(count, self.h.settings.owner))
        return count

    def batch_count(self, k: int) -> None:
        """Refuse an insert of ``k`` items (all in one shard) that no shard's limiter
        could ever admit at once.

        Raises:
            ElementSpecError: It could never be admitted.
        """
        if self.k > 1:
            lim = self._limiter()
            self._per_shard_check(lambda: lim.check_insert_count(k, self.h.settings.owner))

    def _limiter(self) -> Any:
        return shard_limiter(self.h.settings.rate_limiter, self.k, self.k - 1)

    def _per_shard_check(self, check: Any) -> None:
        try:
            check()
        except aqueue.ElementSpecError as exc:
            raise aqueue.ElementSpecError(
                f"{exc} (the table has {self.k} shards, each with the rate limiter "
                f"{self._limiter()!r}, the table's divided among them; a batch goes to one "
                "shard, and one shard may be asked for every draw of a sample)"
            ) from None

    # -- keys ---------------------------------------------------------------------------

    def _routed(self, keys: Keys) -> list[npt.NDArray[np.intp]]:
        """Per shard, the positions of ``keys`` that name it."""
        shard = np.mod(keys, self.k)
        return [np.flatnonzero(shard == s) for s in range(self.k)]

    def _per_shard(self, fn: str, keys: Keys, extra: list[str] | None) -> Op[Found]:
        found = np.zeros(len(keys), dtype=bool)
        where = self._routed(keys)
        calls, used = [], []
        for s, at in enumerate(where):
            if len(at) == 0:
                continue
            h = self.handles[s]
            local = (keys[at] // self.k).tolist()
            args: list[Any] = [h.gen, len(at), *local] if extra is not None else [h.gen, *local]
            if extra is not None:
                args += [extra[i] for i in at.tolist()]
            calls.append(Call(fn, h.key, args, keep=True))
            used.append(s)
        replies = yield Parallel(calls)
        raise_first(replies)
        for s, reply in zip(used, replies):
            found[where[s]] = ops.found_of(self.handles[s], reply)
        return found

    def update(self, keys: Keys, priorities: npt.NDArray[np.float64]) -> Op[Found]:
        """``update_priorities``: which keys the table held."""
        if self.k == 1:
            return ops.update(self.h, keys, priorities)
        return self._per_shard("rt_update", keys, [repr(float(p)) for p in priorities])

    def delete(self, keys: Keys) -> Op[Found]:
        """``delete``: which keys the table held."""
        if self.k == 1:
            return ops.delete(self.h, keys)
        return self._per_shard("rt_remove_keys", keys, None)

    # -- state ----------------------------------------------------------------------------

    def stats(self) -> Op[list[int]]:
        """The counters of ``rt_stats``, summed over the shards (closed: the root's; the
        waits: the largest shard's)."""
        if self.k == 1:
            return (yield from _shared.stats(self.h))
        replies = yield Parallel([Call("rt_stats", h.key, [h.gen], ro=True) for h in self.handles])
        raise_first(replies)
        if not all(replies):
            raise self.h.gone()
        rows = [[int(x) for x in r] for r in replies]
        total = [sum(col) for col in zip(*rows)]
        total[9] = rows[0][9]
        # The waits (seconds, waiters): the most any shard has, since a sharded op that
        # waits is registered on every shard (a summed waiter would count K times).
        for col in (5, 6, 7, 8):
            total[col] = max(row[col] for row in rows)
        return total

    def close(self) -> Op[None]:
        """Close every shard (the root last: a closed root means a closed table)."""
        if self.k > 1:
            yield Parallel([Call("rt_close", h.key, [h.gen]) for h in self.handles[1:]])
        yield from _shared.close(self.h)

    def producer_done(self, pid: str, clean: bool) -> Op[None]:
        """A producer ended on the root; if that closed it, every shard closes."""
        yield from _shared.producer_done(self.h, pid, clean)
        if self.k > 1 and (yield from _shared.stats(self.h))[9]:
            yield from self.close()

    # -- inserts --------------------------------------------------------------------------

    def insert(
        self, comps: Any, k: int, prios: Any, *, progressive: bool = False, sink: bool = False
    ) -> Op[Keys]:
        """An insert of ``k`` items (``InsertOp``'s arguments): their keys."""
        if self.k == 1:
            return InsertOp(self.h, comps, k, prios, progressive=progressive, sink=sink).run()
        return self._insert(comps, k, prios, progressive, sink)

    def _insert(self, comps: Any, k: int, prios: Any, progressive: bool, sink: bool) -> Op[Keys]:
        with self._lock:
            start = self._turn
            self._turn = (start + 1) % self.k
        order = [(start + i) % self.k for i in range(self.k)]
        op = InsertOp(self.h, comps, k, prios, progressive=progressive, sink=sink)
        wid, member = op.wid, op.member  # (one registration per shard, one place in line)
        need = 1 if progressive else k
        mode = "pprobe" if progressive else "probe"
        leave = [
            Call("rt_leave", h.key, [h.gen, "i", member, wid], keep=True) for h in self.handles
        ]
        keys: list[Keys] = []
        waited = False
        try:
            while True:
                yield Checkpoint()  # (a race can start a round over without a wait)
                if sink:
                    self.h.check_released()
                calls = []
                for s in order:
                    h = self.handles[s]
                    args = [h.gen, wid, need, h.reg_ms, mode, 0, 0]
                    calls.append(Call("rt_insert", h.key, args, keep=True))
                replies = yield Parallel(calls)
                raise_first(replies)
                status = [text(r[0]) for r in replies]
                if "gone" in status:
                    raise self.h.gone()
                if "closed" in status:
                    yield from self.close()
                    raise aqueue.QueueClosedError(f"replay table '{self.h.name}' is closed")
                if "go" not in status:
                    waited = True
                    wakes = [f"{self.handles[s].prefix}wk:{wid}" for s in order]
                    yield WaitAny(wakes, self.h.wait_timeout)
                    continue
                chosen = order[status.index("go")]
                yield Parallel(  # (the chosen shard's registration goes with its insert)
                    [
                        leave[s]
                        for s, st in zip(order, status)
                        if s != chosen and (waited or st == "wait")
                    ]
                )
                # The insert itself; should another process have taken the room meanwhile
                # it is registered there ("wait") and the next round asks every shard
                # again (waiting in one shard only could wait for samples that wait for
                # inserts elsewhere).
                op.h = self.handles[chosen]
                reply = yield op.call(False)
                got = text(reply[0])
                if got == "ok":
                    op.draw = None  # (items went in: the numbers are used)
                    base, m = int(reply[1]), int(reply[2])
                    keys.append(np.arange(base, base + m, dtype=np.int64) * self.k + chosen)
                    op.done += m
                    if op.done == k:
                        return keys[0] if len(keys) == 1 else np.concatenate(keys)
                waited = True
        except GeneratorExit:  # closed unfinished: no request may be yielded any more
            raise
        except BaseException:
            self.h.undraw(op.draw)
            try:
                yield Parallel(leave)
            except GeneratorExit:
                raise
            except BaseException:
                pass
            raise

    # -- samples --------------------------------------------------------------------------

    def sample(self, n: int) -> Op[ReplaySample[Any]]:
        """A sample of ``n``: exact across shards (see the module docstring)."""
        if self.k == 1:
            return SampleOp(self.h, n).run()
        return ShardedSample(self, n).run()
