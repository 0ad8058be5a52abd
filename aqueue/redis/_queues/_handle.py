"""Handle: what every operation of one queue object needs (identity, spec, codec,
settings, this client's random numbers), and the few hints it keeps between them.

Invariants:
- the queue's identity on the server is ``name`` plus ``gen``, the generation written
  by the ``aq_open`` that created it: a function call with another ``gen`` finds the
  queue gone (it was deleted and maybe re-created), so it never acts on a stranger;
- every key of the queue starts with ``prefix`` (``aq:{name}:``), hash tag included;
- ``room`` and ``released`` are process-local hints, never the server's state.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

import aqueue

from .._core._codec import Codec
from .._core._spec import ElementSpec

__all__ = ["Handle"]


class Handle:
    """What every operation of one queue needs: identity, spec, codec, settings."""

    def __init__(
        self,
        *,
        name: str,
        kind: str,
        gen: str,
        capacity: int,
        min_after_dequeue: int,
        spec: ElementSpec,
        owner: str,
        seed: int | None,
        lease_time: float,
        wait_timeout: float,
        max_call_bytes: int,
    ) -> None:
        self.name = name
        self.kind = kind
        self.gen = gen
        self.capacity = capacity
        self.min_after_dequeue = min_after_dequeue
        self.spec = spec
        self.owner = owner
        self.seed = seed
        self.prefix = f"aq:{{{name}}}:"
        self.key = self.prefix + "meta"
        self.codec = Codec(spec, name)
        self.lease_ms = str(int(lease_time * 1000))
        self.wait_timeout = wait_timeout
        # A registration outlives a few missed retries, then expires (crashed waiter).
        self.reg_ms = str(int(wait_timeout * 4000) + 1000)
        self.max_call_bytes = max_call_bytes
        self._rng = np.random.default_rng(seed) if kind == "shuffle" else None
        self._rng_lock = threading.Lock()
        # The free room the last aq_put reply of this process reported (a hint only).
        self.room = capacity
        # Set by release_producers (a coordinator's stop): this process's enqueues on
        # this queue object fail with QueueClosedError at their next step.
        self.released = False

    def check_released(self) -> None:
        """Raise QueueClosedError if this process's producers were released."""
        if self.released:
            raise aqueue.QueueClosedError(
                f"queue '{self.name}': this process's producers were released "
                "(a coordinator stopped); the shared queue itself stays open"
            )

    def rands(self, n: int) -> list[str]:
        """``n`` uniform floats in [0, 1) for a shuffle take (none for FIFO), drawn once
        per operation so retries do not change a seeded sequence."""
        if self._rng is None:
            return []
        with self._rng_lock:
            values = self._rng.random(n)
        return [repr(float(v)) for v in values]

    def unpack(self, comps: tuple[Any, ...]) -> Any:
        """Decoded components in user form (scalars as numpy scalars, as in-process)."""
        return self.spec.pack([a[()] if a.ndim == 0 else a for a in comps])
