"""Episode: where one writer stands in its episode, and which windows it has pending.

Positions count the steps a writer appended since its episode began (0, 1, 2, ...).
The table's windows start at positions 0, ``stride``, ``2 * stride``, ... and cover
``length`` consecutive positions; a window whose last position is past the episode's
end never exists. State per writer:

- ``pos``: the steps appended in the current episode;
- ``start``: the start of the earliest window that is neither complete nor dropped (a
  multiple of ``stride``); every earlier window became an item or was dropped;
- ``pend``: the slots of positions ``start .. pos - 1`` (empty when ``start >= pos``),
  the steps this writer *pins*: each lies in a pending window.

Invariants:

- ``0 <= pos - start < length`` or ``start >= pos`` (and then ``pend`` is empty): the
  window at ``start`` completes the moment position ``start + length - 1`` is
  appended, and ``start`` moves on.
- A position ``p`` is *stored* (given a slot) iff a pending window contains it when it
  is appended: ``p >= start`` and ``p % stride < length``. With ``stride > length``
  the steps between windows are never stored; nor are the steps of a window already
  dropped (see below).
- ``start`` moves only forward: by ``stride`` past each window completed (its steps are
  then in the new item, so unpinning them frees nothing), past a window *dropped*
  because its first step was evicted (``drop_first``: the oldest held step of the whole
  table, if pinned, is always the first step of its writer's earliest pending window:
  the window's other steps are newer), and back to 0 with the next episode
  (``end_episode`` drops every pending window).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Episode"]

Array = npt.NDArray[Any]
_EMPTY = np.empty(0, dtype=np.int64)


class Episode:
    """One writer's episode and its pending windows (see the module docstring)."""

    __slots__ = ("length", "pend", "pos", "start", "stride", "wid")

    def __init__(self, wid: int, length: int, stride: int) -> None:
        self.wid = wid
        self.length = length
        self.stride = stride
        self.pos = 0
        self.start = 0
        self.pend = _EMPTY

    def stored(self, k: int) -> Array:
        """Which of the next ``k`` positions would be stored (a bool array)."""
        p = np.arange(self.pos, self.pos + k)
        mask: Array = p >= self.start
        if self.stride > self.length:
            mask &= p % self.stride < self.length
        return mask

    def completed(self, k: int) -> Array:
        """The starts of the windows the next ``k`` positions complete, in order."""
        length, stride = self.length, self.stride
        lo = max(self.start, self.pos - length + 1)
        first = -(-lo // stride) * stride  # (the first multiple of stride >= lo)
        return np.arange(first, self.pos + k - length + 1, stride, dtype=np.int64)

    def last_slot(self) -> int:
        """The slot of position ``pos - 1`` if it is pinned, else -1."""
        return int(self.pend[-1]) if len(self.pend) else -1

    def span(self, k: int, mask: Array, slots: Array) -> Array:
        """The slots of positions ``start .. pos + k - 1`` after storing the next ``k``
        (``slots`` for the positions of ``mask``; -1 where nothing is stored)."""
        out = np.full(max(0, self.pos + k - self.start), -1, dtype=np.int64)
        out[: len(self.pend)] = self.pend
        out[np.flatnonzero(mask) + (self.pos - self.start)] = slots
        return out

    def advance(self, k: int, span: Array, starts: Array) -> Array:
        """Account ``k`` positions appended (their slots in ``span``, from ``span``)
        whose windows starting at ``starts`` became items: the slots no longer pinned."""
        self.pos += k
        if not len(starts):
            self.pend = span
            return _EMPTY
        new_start = int(starts[-1]) + self.stride
        cut = min(len(span), new_start - self.start)
        unpinned = span[:cut]
        self.pend = span[cut:].copy()
        self.start = new_start
        kept: Array = unpinned[unpinned >= 0]
        return kept

    def drop_first(self) -> Array:
        """Drop the earliest pending window (its first step was evicted): the slots no
        longer pinned (at least that first step)."""
        cut = min(len(self.pend), self.stride)
        unpinned = self.pend[:cut]
        self.pend = self.pend[cut:]
        self.start += self.stride
        return unpinned

    def end(self) -> tuple[Array, int]:
        """End the episode: the slots no longer pinned, and how many pending windows
        had a step written (now dropped)."""
        unpinned, dropped = self.pend, self.windows_pending()
        self.pos = self.start = 0
        self.pend = _EMPTY
        return unpinned, dropped

    def windows_pending(self) -> int:
        """Pending windows with at least one step written (those starting in
        ``start .. pos - 1``)."""
        n = len(self.pend)
        return -(-n // self.stride) if n else 0
