"""Epochs: the one loop that reads a source ``num_epochs`` times.

``limit_epochs``, the TF input producers and the pipeline's sources all read their
source through an ``Epochs``:

- a *sequence* (``len`` and indexing: lists, tuples, ranges, arrays) is read by
  index; with ``shuffle`` each epoch is a fresh permutation drawn from the reader's
  own ``numpy.random.Generator`` (seeded by ``seed``), so a seed fixes the order of
  every epoch;
- any other re-iterable (sync or async) is iterated afresh at each epoch start.

Invariants: ``epoch`` counts finished epochs and ``index`` the items read in the
current one; reading stops after ``num_epochs`` epochs (None: never); an epoch that
yields nothing ends the reading (otherwise an empty source repeated forever would
spin); once ended, every further read reports the end again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Epochs", "in_memory"]


def in_memory(source: Any) -> bool:
    """A sequence read by index (list, tuple, range, numpy array): it can always say
    where it is, and be read again."""
    return isinstance(source, (Sequence, np.ndarray))


class Epochs:
    """Reads ``source`` ``num_epochs`` times (None: forever).

    Args:
        source: A sequence, a re-iterable, or (``is_async``) an async re-iterable.
        num_epochs: Number of passes, or None for no limit.
        shuffle: Permute each epoch of a sequence (refused for other sources).
        seed: Seed of the permutations.
        is_async: ``source`` is an async iterable (read with ``anext``).
    """

    __slots__ = (
        "_ended",
        "_is_async",
        "_it",
        "_len",
        "_num_epochs",
        "_order",
        "_rng",
        "_shuffle",
        "_source",
        "epoch",
        "index",
    )

    def __init__(
        self,
        source: Any,
        num_epochs: int | None,
        *,
        shuffle: bool = False,
        seed: int | None = None,
        is_async: bool = False,
    ) -> None:
        self._source = source
        self._num_epochs = num_epochs
        self._is_async = is_async
        indexable = not is_async and in_memory(source)
        self._len: int | None = len(source) if indexable else None
        if shuffle and self._len is None:
            raise ValueError("Epochs: only a sequence can be shuffled")
        self._shuffle = shuffle
        self._rng = np.random.default_rng(seed)
        self._order: npt.NDArray[np.intp] | None = None  # this epoch's permutation
        self._it: Iterator[Any] | AsyncIterator[Any] | None = None
        self._ended = num_epochs == 0
        self.epoch = 0
        self.index = 0

    @property
    def indexable(self) -> bool:
        """Whether the source is read by index (a sequence)."""
        return self._len is not None

    def _begin(self) -> None:
        """Start the epoch at ``self.epoch`` (nothing read from it yet)."""
        if self._len is not None:
            if self._shuffle:
                self._order = self._rng.permutation(self._len)
        elif self._is_async:
            self._it = aiter(self._source)
        else:
            self._it = iter(self._source)

    def _epoch_done(self) -> bool:
        """The current epoch has no more items: move on; False when reading is over."""
        if self.index == 0:  # an empty epoch ends the reading
            self._ended = True
            return False
        self.epoch += 1
        self.index = 0
        self._it = None
        self._order = None
        if self._num_epochs is not None and self.epoch >= self._num_epochs:
            self._ended = True
            return False
        return True

    def take(self, n: int, *, within_epoch: bool = False) -> list[Any]:
        """Up to ``n`` next items (fewer only at the end, or at the end of the current
        epoch with ``within_epoch``); an empty list once reading is over."""
        out: list[Any] = []
        while len(out) < n and not self._ended:
            if self.index == 0 and self._it is None and self._order is None:
                self._begin()
            if self._len is not None:
                stop = min(self._len, self.index + n - len(out))
                rows = range(self.index, stop)
                if self._order is not None:
                    out.extend(self._source[int(i)] for i in self._order[self.index : stop])
                else:
                    out.extend(self._source[i] for i in rows)
                self.index = stop
                at_end = stop == self._len
            else:
                it = self._it
                assert isinstance(it, Iterator)
                at_end = False
                while len(out) < n:
                    try:
                        out.append(next(it))
                    except StopIteration:
                        at_end = True
                        break
                    self.index += 1
            if at_end and (not self._epoch_done() or within_epoch):
                break
        return out

    def take_indices(self) -> npt.NDArray[np.intp] | None:
        """The index order of the whole next epoch of a sequence (a permutation, or
        ``arange``), or None once reading is over."""
        assert self._len is not None
        if self._ended:
            return None
        self._begin()
        order = self._order if self._order is not None else np.arange(self._len)
        self.index = self._len
        self._epoch_done()
        return order

    def state(self) -> dict[str, Any]:
        """Where the reading is: epoch, index in it, whether it ended, and for a
        shuffled sequence the random state and the current epoch's order (JSON-able)."""
        out: dict[str, Any] = {"epoch": self.epoch, "index": self.index, "ended": self._ended}
        if self._shuffle:
            out["rng"] = self._rng.bit_generator.state
            out["order"] = None if self._order is None else self._order.tolist()
        return out

    def restore(self, state: dict[str, Any], *, reposition: bool = False) -> None:
        """Continue where ``state()`` was taken. A sequence is read by index from there;
        any other source must already be at that place (``reposition``: it was restored
        by its own ``restore``), and the current epoch goes on with it."""
        self.epoch = int(state["epoch"])
        self.index = int(state["index"])
        self._ended = bool(state["ended"])
        if self._shuffle:
            self._rng.bit_generator.state = state["rng"]
            order = state.get("order")
            self._order = None if order is None else np.asarray(order, dtype=np.intp)
        if reposition and self.index > 0 and not self._ended:
            self._it = aiter(self._source) if self._is_async else iter(self._source)

    async def anext(self) -> Any:
        """The next item of an async source.

        Raises:
            StopAsyncIteration: Reading is over.
        """
        while not self._ended:
            if self._it is None:
                self._begin()
            it = self._it
            assert isinstance(it, AsyncIterator)
            try:
                item = await it.__anext__()
            except StopAsyncIteration:
                if not self._epoch_done():
                    break
                continue
            self.index += 1
            return item
        raise StopAsyncIteration
