"""Rules: what a queue admits and what a dequeue may take, given the state.

The admission state (``capacity``, ``floor`` = ``min_after_dequeue``, ``closed``) and
the decisions every engine step asks for, as functions of the numbers the engine passes
in; nothing here changes a queue. The take rule (``take_count``) and the put rule
(``put_count``) are written once, here, for the first step of an operation and for a
parked request alike. (aqueue.redis's server-side functions keep their own copy, in
Lua; a test runs one table of cases through both.)

- Free room is ``capacity - size``; an enqueue admits while there is room.
- A dequeue may take while ``size - floor`` stays >= 0, with ``floor`` =
  ``min_after_dequeue`` while the queue is open and 0 once it is closed.
- The queue is *final* when it is closed and no enqueue is pending: nothing can arrive
  any more.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._requests import SOME, UP_TO, GetRequest, PutRequest

__all__ = ["Rules"]


class Rules:
    """A queue's admission state and the decisions that follow from it."""

    __slots__ = ("capacity", "closed", "floor", "one_copy_limit", "whole_rest")

    def __init__(self, capacity: int, floor: int) -> None:
        self.capacity = capacity
        self.floor = floor
        self.closed = False
        # Batch dequeues larger than this claim progressively: they could never be
        # served in one take.
        self.one_copy_limit = capacity - floor
        # A parked enqueue_many whose rest is at most this many rows waits until all of
        # the rest fits (one wake-up for it, not one per freed row), and a longer one
        # parked by a thread, while no dequeue waits, until at least this many fit (a
        # thread's wake-up costs a system call and a GIL hand-off; a task's, one loop
        # turn). 0: rows go in one by one as room frees, as TF does; queues between
        # pipeline stages set it.
        self.whole_rest = 0

    def available(self, size: int) -> int:
        """Elements a dequeue may take out of ``size`` stored (negative below the floor)."""
        return size - (0 if self.closed else self.floor)

    def take_count(
        self, mode: int, need: int, claimed: int, avail: int, final: bool, nowait: bool
    ) -> int:
        """The take rule: how many elements a dequeue takes now; -1 if it cannot.

        ``need`` more are wanted (``claimed`` held already), ``avail`` may be taken.
        All of ``need`` when they are there; what is there for a SOME dequeue (and
        ``dequeue_up_to_nowait``); once the queue is final, what is left for an UP_TO
        dequeue that gets anything at all.
        """
        if avail >= need or need == 0:
            return need
        if avail > 0 and (mode == SOME or (nowait and mode == UP_TO)):
            return avail
        if final and mode == UP_TO and claimed + max(avail, 0) > 0:
            return max(avail, 0)
        return -1

    def put_count(
        self, rest: int, size: int, atomic: bool, head: GetRequest | None, least: int = 0
    ) -> int:
        """The put rule: how many of ``rest`` elements an enqueue admits now (0: none).

        As many as there is room for; an atomic one (``_nowait``, a timed thread
        ``enqueue_many``) all or nothing: all when they fit, or when the waiting head
        dequeue ``head`` will then take enough to bring the size back within capacity
        (``makes_room``). None while fewer than ``least`` fit and no dequeue waits (a
        waiting thread's ``PutRequest.least``: see ``whole_rest``).
        """
        free = self.capacity - size
        if free >= rest:
            return rest
        if atomic:
            return rest if self.makes_room(rest, size, head) else 0
        if free < least and head is None:
            return 0  # (a stage queue's waiting thread: see whole_rest)
        return free if free > 0 else 0

    def makes_room(self, k: int, size: int, head: GetRequest | None) -> bool:
        """Whether an all-or-nothing batch of ``k`` may go in although it does not fit.

        It may when the waiting head dequeue will then take enough to bring the size
        back within capacity. Otherwise a timed thread enqueue_many (all-or-nothing) and
        a batch dequeue that waits for its ``n`` would each wait for the other until the
        timeout. If that dequeue leaves before taking (cancelled, timed out), the size
        stays above capacity for a while, as after restored claims.
        """
        if head is None:
            return False
        need = head.n - head.claimed
        # (rows a filling getter takes never reach the storage, so this holds for it too)
        return size + k - need <= self.capacity and self.available(size) + k >= need

    def may_pass(self, count: int, putters: Iterable[PutRequest], size: int) -> bool:
        """Whether a new enqueue of ``count`` may be admitted ahead of the queued ones.

        Only when the queue has room for it *and* for everything the queued enqueues
        still need, and none of them has started (so a pending enqueue_many's elements
        stay contiguous). The queued requests keep their room, so none of them waits
        longer; without this, producer threads that find the queue full form a convoy
        in which every element waits for a thread wake-up and a GIL hand-off.
        """
        reserved = 0
        for p in putters:
            if p.pos:
                return False
            reserved += p.count
        return self.capacity - size - reserved >= count

    def getter_ready(self, g: GetRequest, size: int, final: bool) -> bool:
        """Whether parked dequeue ``g`` can progress now (complete, claim, or fail)."""
        if final:
            return True
        avail = size - (0 if self.closed else self.floor)  # (available(), inlined)
        return avail >= g.n - g.claimed or (g.eager and avail > 0)

    def putter_ready(self, p: PutRequest, size: int, head: GetRequest | None) -> bool:
        """Whether parked enqueue ``p`` can progress now (admit, or fail)."""
        if p.rejected:
            return True
        return self.put_count(p.count - p.pos, size, p.atomic, head, p.least) > 0
