"""One sample of a replay table over its shards, sans I/O (``ShardedSample``): the
rounds ``_sharded``'s module docstring describes (probe, hold, commit; an empty table's
registration on every shard), and how a sample that ends early gives back its holds.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

import aqueue
from aqueue._replay._results import ReplaySample

from .._core._shared import text
from .._core._transport import Call, Checkpoint, Op, Parallel, Wait, WaitAny
from ._ops import sample_from

if TYPE_CHECKING:
    from ._sharded import TableOps

__all__ = ["ShardedSample", "raise_first"]


def raise_first(replies: list[Any]) -> None:
    """Raise the first exception a ``Parallel`` round reported."""
    for r in replies:
        if isinstance(r, BaseException):
            raise r


class ShardedSample:
    """One sample over several shards: probe, hold, commit (the module docstring)."""

    def __init__(self, t: TableOps, n: int) -> None:
        self.t = t
        self.n = n
        self.wid = uuid.uuid4().hex
        self.draw: tuple[Any, Any] | None = None
        self.counts: list[int] = [0] * t.k

    def run(self) -> Op[ReplaySample[Any]]:
        try:
            return (yield from self._steps())
        except GeneratorExit:
            raise
        except BaseException:
            self.t.h.undraw(self.draw)
            try:
                yield Parallel(self._releases(s for s in range(self.t.k) if self.counts[s]))
            except GeneratorExit:
                raise
            except BaseException:
                pass  # (the holds' leases end on the server)
            raise

    def _releases(self, shards: Any) -> list[Call]:
        t = self.t
        out = []
        for s in shards:
            h = t.handles[s]
            member = f"{self.counts[s]}:{self.wid}"
            out.append(Call("rt_release", h.key, [h.gen, self.wid, member], keep=True))
        return out

    def _await_items(self) -> Op[None]:
        """Every shard was empty: register on every shard as a sample of one (an
        ``rt_hold`` of one draw, which waits there while the shard is empty), wait for
        the first wake-up (``wait_timeout`` at most), then withdraw everywhere (a draw
        that an insert let one hold meanwhile is released with it)."""
        hs = self.t.handles
        member = f"1:{self.wid}"
        calls = []
        for h in hs:
            out = [f"{h.prefix}o:{self.wid}.1"]
            args = [h.gen, self.wid, 1, h.reg_ms, h.lease_ms, "0.5"]
            calls.append(Call("rt_hold", h.key, args, fetch=out, drop=out))
        leave = [Call("rt_release", h.key, [h.gen, self.wid, member], keep=True) for h in hs]
        try:
            replies = yield Parallel(calls)
            raise_first(replies)
            status = [text(r[0][0]) for r in replies]
            if "gone" in status:
                raise self.t.h.gone()
            if "ok" not in status:  # (an insert came meanwhile: no wait)
                wakes = [f"{h.prefix}wk:{self.wid}" for h in hs]
                yield WaitAny(wakes, self.t.h.wait_timeout)
        except GeneratorExit:
            raise
        except BaseException:
            try:
                yield Parallel(leave)
            except GeneratorExit:
                raise
            except BaseException:
                pass  # (the registrations expire on the server)
            raise
        yield Parallel(leave)

    def _oor(self, size: int) -> aqueue.OutOfRangeError:
        name = self.t.h.name
        why = (
            f"replay table '{name}' is closed and cannot serve sample({self.n}) (size "
            f"{size}; the rate limiter or the items held do not allow it, and nothing can "
            "be inserted any more)"
        )
        return aqueue.OutOfRangeError(why, queue_name=name, requested=self.n, size=size)

    def _steps(self) -> Op[ReplaySample[Any]]:
        t, n = self.t, self.n
        hs = t.handles
        while True:  # round 1: every shard's size and total weight
            yield Checkpoint()
            replies = yield Parallel([Call("rt_probe", h.key, [h.gen], keep=True) for h in hs])
            raise_first(replies)
            if any(text(r[0]) == "gone" for r in replies):
                raise t.h.gone()
            sizes = [int(r[1]) for r in replies]
            weights = np.array([float(text(r[2])) for r in replies])
            closed = [bool(int(r[3])) for r in replies]
            if closed[0] and not all(closed):
                yield from t.close()
                closed = [True] * t.k
            if weights.sum() <= 0:  # (all priorities 0: each shard draws uniformly)
                weights = np.array(sizes, dtype=float)
            if weights.sum() > 0:
                break
            if all(closed):
                raise self._oor(0)
            yield from self._await_items()
        share = weights / weights.sum()

        def draw(rng: np.random.Generator) -> tuple[Any, list[Any], Any]:
            counts = rng.multinomial(n, share)
            return counts, [rng.random(c) for c in counts], rng.permutation(n)

        (counts, rands, perm), self.draw = t.h.drawn(draw)
        self.counts = [int(c) for c in counts]
        used = [s for s in range(t.k) if self.counts[s]]
        while True:  # round 2: hold k_s draws in each shard
            calls = []
            for s in used:
                h, c = hs[s], self.counts[s]
                out = [f"{h.prefix}o:{self.wid}.{j}" for j in range(1, c + 1)]
                args = [h.gen, self.wid, c, h.reg_ms, h.lease_ms, *map(repr, rands[s].tolist())]
                calls.append(Call("rt_hold", h.key, args, fetch=out, drop=out))
            replies = yield Parallel(calls)
            raise_first(replies)
            status = [text(r[0][0]) for r in replies]
            if "gone" in status:
                raise t.h.gone()
            if "oor" in status:
                raise self._oor(sum(sizes))
            if "wait" not in status:
                break
            yield Parallel(self._releases(s for s, st in zip(used, status) if st == "ok"))
            h = hs[used[status.index("wait")]]
            yield Wait(f"{h.prefix}wk:{self.wid}", h.wait_timeout)
        commits = [Call("rt_commit", hs[s].key, [hs[s].gen, self.wid], keep=True) for s in used]
        done = yield Parallel(commits)  # round 3: the sample happens
        self.draw = None
        raise_first(done)
        return self._sample(used, replies, share, sum(sizes), perm)

    def _sample(
        self,
        used: list[int],
        replies: list[Any],
        share: npt.NDArray[np.float64],
        size: int,
        perm: npt.NDArray[np.intp],
    ) -> ReplaySample[Any]:
        t = self.t
        payloads: list[bytes] = []
        draws = []
        for s, (reply, values) in zip(used, replies):
            small = reply[3]
            payloads += [
                v if v is not None else (x if x is not None else b"") for v, x in zip(values, small)
            ]
            d = np.frombuffer(reply[2], dtype="<f8").reshape(self.counts[s], 4).copy()
            d[:, 0] = d[:, 0] * t.k + s
            d[:, 2] *= share[s]
            draws.append(d)
        every = np.concatenate(draws)[perm]
        data = t.h.spec.pack(list(t.h.codec.decode_batch([payloads[i] for i in perm])))
        return sample_from(data, every, size)
