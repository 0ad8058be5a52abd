"""TableHandle: what every operation of one replay table object needs: the core's
Handle (identity, keys, codec, timings) plus the table's settings and their checks,
this client's random numbers, and two process-local things: a hint
(``insert_waited``: the last insert of this process had to wait) and the producer ids
this object registered and has not ended.

Invariant (besides the core Handle's): the settings are the ones stored on the server
(``_open`` checked them). A shard of a sharded table has a handle of its own, with the
table's name and settings and its own tag (``prefix``, ``key``) and ``gen``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from aqueue._replay._checks import TableArgs, TableSettings
from aqueue._replay._selectors import Prioritized, Uniform

from .._core._handle import Handle, Product, key_prefix

__all__ = ["TABLES", "TableHandle"]

T = TypeVar("T")

TABLES = Product(functions="rt_", noun="replay table", short="table", format="1")
"""The replay tables on the server: their functions (``rt_*``) and their key layout's
version."""


class TableHandle(Handle):
    """What every operation of one table object needs (see the module docstring)."""

    def __init__(
        self,
        *,
        name: str,
        gen: str,
        settings: TableSettings,
        wait_timeout: float,
        lease_time: float,
        tag: str | None = None,
    ) -> None:
        super().__init__(
            product=TABLES,
            name=name,
            gen=gen,
            spec=settings.spec,
            lease_time=lease_time,
            wait_timeout=wait_timeout,
        )
        if tag is not None:  # a shard's keys: under its own tag (``_core/_shards.py``)
            self.prefix = key_prefix(tag)
            self.key = self.prefix + "meta"
        self.settings = settings
        self.args = TableArgs(settings)
        self.sample_rands = isinstance(settings.sampler, (Uniform, Prioritized))
        self.evict_rands = isinstance(settings.remover, (Uniform, Prioritized))
        self.insert_waited = False
        self.producers: set[str] = set()
        self._rng = np.random.default_rng(settings.seed)
        self._rng_lock = threading.Lock()

    def rands(self, n: int) -> tuple[list[str], tuple[Any, Any]]:
        """``n`` uniform floats in [0, 1) as call arguments, and the token that gives
        them back (``undraw``)."""
        with self._rng_lock:
            before = self._rng.bit_generator.state
            values = self._rng.random(n)
            after = self._rng.bit_generator.state
        return [repr(float(v)) for v in values], (before, after)

    def drawn(self, fn: Callable[[np.random.Generator], T]) -> tuple[T, tuple[Any, Any]]:
        """``fn(generator)`` under the generator's lock, and the token that gives back
        what it drew (``undraw``)."""
        with self._rng_lock:
            before = self._rng.bit_generator.state
            out = fn(self._rng)
            after = self._rng.bit_generator.state
        return out, (before, after)

    def undraw(self, token: tuple[Any, Any] | None) -> None:
        """Give back the numbers of ``token`` if nothing was drawn since (the op that
        drew them changed nothing)."""
        if token is None:
            return
        with self._rng_lock:
            if self._rng.bit_generator.state == token[1]:
                self._rng.bit_generator.state = token[0]
