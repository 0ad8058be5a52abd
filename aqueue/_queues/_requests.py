"""A queue's waiting requests and what they hold: PutRequest, GetRequest and Claims.

An engine step (``Engine.put``/``Engine.get``, ``_engine.py``) creates a request only
when the operation cannot complete at once, parks it in its ``Waiters`` list with a
waker from the caller and returns it; the caller then waits (``wait_task``/
``wait_thread`` of the waiting kernel, ``aqueue/_waiting/_wait.py``, which also holds
the life of a request every engine shares: parked, notified, done). The engine changes
a request's fields under the queue's lock only.

A ``GetRequest`` may hold elements it has claimed but not yet returned; they have left
the storage (``size`` does not count them) and go back to it, in order, when the request
fails or leaves. Two kinds of parked batch dequeue hold elements (``Claims``):

- a *filling* one (a FIFO ring with no floor: ``fill`` is the ring) owns its output
  batch ``out``. When it reaches the head of the getters it claims what the ring holds
  (``claim_for_head``: the ring is then empty), and while it is the head, enqueues copy
  straight into ``out`` (``admit_one``/``admit_rows``): one copy per element instead of
  two;
- a *progressive* one (larger than ``capacity - min_after_dequeue``: it could never be
  served in one take) claims storage chunks as they become available
  (``claim_chunk``).

On completion ``finish`` turns what it holds plus a last take into its result; when it
fails or leaves, ``give_back`` restores its claims to the storage, at the front in
order (into the pool for a shuffle queue). Only the head getter ever holds claims. A
request that holds nothing (neither filling nor progressive) needs none of this: the
engine takes for it as for a first step.
"""

from __future__ import annotations

from typing import Any, Final

from .._waiting._wait import Request
from ._declare import Components
from ._storage import FillableStorage, Storage
from ._tuples import own

__all__ = [
    "MANY",
    "ONE",
    "SOME",
    "UP_TO",
    "Claims",
    "GetRequest",
    "PutRequest",
    "fill_rows",
    "pending_elements",
    "rows_of",
]

ONE: Final = 0  # one element (element form)
MANY: Final = 1  # exactly n elements (batch form)
UP_TO: Final = 2  # up to n elements once the queue is final (batch form)
SOME: Final = 3  # 1..n elements as soon as one can be taken (batch form)


class PutRequest(Request):
    """An enqueue of ``count`` elements (``mode`` ONE or MANY).

    ``pos`` elements have been admitted so far; an *atomic* request (a timed thread
    ``enqueue_many``) is admitted whole or not at all; while no dequeue waits, a
    parked one admits nothing until ``least`` elements fit (``Engine.whole_rest``).
    ``rejected`` is set by ``close(cancel_pending_enqueues=True)``: the request then
    fails at its next step, keeping what it had admitted.
    """

    __slots__ = ("atomic", "comps", "count", "least", "mode", "pos", "rejected")

    def __init__(self, mode: int, comps: Components, count: int, atomic: bool) -> None:
        super().__init__()
        self.mode = mode
        self.comps = comps
        self.count = count
        self.pos = 0
        self.atomic = atomic
        self.least = 0
        self.rejected = False


class GetRequest(Request):
    """A dequeue of ``n`` elements (``mode`` ONE, MANY, UP_TO or SOME).

    ``claimed`` elements are held so far: as storage chunks in ``claims`` (a
    *progressive* request, larger than ``capacity - min_after_dequeue``, which could
    never be served in one take), or as rows ``out[:claimed]`` of its own output batch
    (a *filling* request on a FIFO ring: enqueues copy straight into ``out``).
    ``eager``: it can progress as soon as one element can be taken (a progressive
    request, or a SOME request, which then returns what it could take).
    """

    __slots__ = ("claimed", "claims", "eager", "mode", "n", "out", "progressive")

    def __init__(self, mode: int, n: int, progressive: bool) -> None:
        super().__init__()
        self.mode = mode
        self.n = n
        self.progressive = progressive
        self.eager = progressive or mode == SOME
        self.claims: list[Any] = []
        self.claimed = 0
        self.out: Components | None = None


def rows_of(cols: Components) -> list[Components]:
    """Per-element tuples (private copies) of batch columns."""
    copies = [c.copy() for c in cols]
    return [tuple(c[j] for c in copies) for j in range(len(copies[0]))]


class Claims:
    """The elements waiting dequeues hold, over one storage (see the module docstring)."""

    __slots__ = ("fill", "storage")

    def __init__(self, storage: Storage, fill: FillableStorage | None) -> None:
        self.storage = storage
        self.fill = fill  # the storage, when waiting batches fill their output

    def start(self, g: GetRequest) -> None:
        """A batch dequeue is parked: a filling one gets its output batch."""
        if self.fill is not None and g.mode in (MANY, UP_TO) and not g.progressive:
            g.out = self.fill.empty_batch(g.n)

    def claim_for_head(self, g: GetRequest) -> None:
        """Filling getter ``g`` reached the head: it claims what the ring holds, so the
        ring is empty while it waits and enqueues copy straight into its batch."""
        if g.out is not None:
            k = min(self.storage.size, g.n - g.claimed)
            if k > 0:
                assert self.fill is not None
                self.fill.take_into(g.out, g.claimed, k)
                g.claimed += k

    def claim_chunk(self, g: GetRequest, k: int) -> None:
        """Progressive getter ``g`` claims the next ``k`` elements."""
        g.claims.append(self.storage.take_chunk(k))
        g.claimed += k

    def admit_one(self, head: GetRequest | None, comps: Components) -> None:
        """Admit one element: into the head getter's batch if it is filling, else the
        storage."""
        if head is not None:
            out = head.out
            if out is not None and head.claimed < head.n:
                for o, c in zip(out, comps):
                    o[head.claimed, ...] = c
                head.claimed += 1
                return
        self.storage.put_one(comps)

    def admit_rows(self, head: GetRequest | None, comps: Components, start: int, stop: int) -> None:
        """Admit rows ``start:stop`` of a batch, the head getter's batch first (above)."""
        if head is not None and head.out is not None and head.claimed < head.n:
            k = min(stop - start, head.n - head.claimed)
            fill_rows(head, comps, start, start + k)
            start += k
        if start < stop:
            self.storage.put_rows(comps, start, stop)

    def finish(self, g: GetRequest, take: int) -> Any:
        """``g`` completes by taking ``take`` more: its result (components of an element
        or a batch). On an error it has put back what it held, and the error propagates."""
        out = g.out
        total = g.claimed + take
        if out is not None:
            if take:
                assert self.fill is not None
                self.fill.take_into(out, g.claimed, take)
            g.out = None
            g.claimed = 0
            return out if total == g.n else tuple(o[:total].copy() for o in out)
        st = self.storage
        if g.mode == ONE:
            return st.take_one()
        if not g.claimed:
            return st.take_batch(take)
        if take:
            g.claims.append(st.take_chunk(take))
        try:
            result = st.assemble(g.claims)
        except BaseException:  # it fails: its claims go back first
            self.give_back(g)
            raise
        g.claims = []
        g.claimed = 0
        return result

    def give_back(self, g: GetRequest) -> None:
        """``g`` fails or leaves: its claims go back to the storage, in order."""
        out = g.out
        if out is not None:
            if g.claimed:
                self.storage.restore([tuple(o[: g.claimed] for o in out)])
        elif g.claims:
            self.storage.restore(g.claims)
            g.claims = []
        g.claimed = 0

    def held(self, g: GetRequest) -> list[Components]:
        """Private copies of the elements ``g`` holds, in claim order."""
        elements: list[Components] = []
        if g.out is not None and g.claimed:
            elements = rows_of(tuple(o[: g.claimed] for o in g.out))
        for chunk in g.claims:
            elements.extend(self.storage.chunk_elements(chunk))
        return elements


def fill_rows(g: GetRequest, comps: Components, start: int, stop: int) -> None:
    """Copy rows ``start:stop`` of a batch into filling getter ``g``'s batch."""
    out = g.out
    assert out is not None
    a = g.claimed
    k = stop - start
    whole = k == len(comps[0])  # the whole batch: no slice of it needed
    for o, c in zip(out, comps):
        o[a : a + k] = c if whole else c[start:stop]
    g.claimed = a + k


def pending_elements(mode: int, comps: Components, pos: int, count: int) -> list[Components]:
    """Private copies of the elements a waiting enqueue has still to admit."""
    if mode == ONE:  # an element: as a batch of one, so in dump's form
        return [own(comps)] if pos == 0 else []
    return rows_of(tuple(c[pos:count] for c in comps))
