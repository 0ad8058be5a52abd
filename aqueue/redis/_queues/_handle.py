"""QueueHandle: what every operation of one queue object needs: the core's Handle
(identity, keys, codec, timings) plus the queue's settings, this client's random
numbers and the room hint.

Invariants (besides the core Handle's):
- ``capacity``, ``min_after_dequeue`` and the spec are the ones stored on the server
  (``_open`` checked them);
- ``room`` and ``filled`` are process-local hints, never the server's state.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .._core._handle import Handle, Product
from .._core._line import Line
from .._core._spec import ElementSpec

__all__ = ["QUEUES", "QueueHandle"]

QUEUES = Product(functions="aq_", noun="queue", short="queue", format="2")
"""The queues on the server: their functions (``aq_*``) and their key layout's version."""


class QueueHandle(Handle):
    """What every operation of one queue needs (see the module docstring)."""

    def __init__(
        self,
        *,
        name: str,
        kind: str,
        gen: str,
        capacity: int,
        min_after_dequeue: int,
        spec: ElementSpec,
        seed: int | None,
        lease_time: float,
        wait_timeout: float,
        max_call_bytes: int,
    ) -> None:
        super().__init__(
            product=QUEUES,
            name=name,
            gen=gen,
            spec=spec,
            lease_time=lease_time,
            wait_timeout=wait_timeout,
        )
        self.kind = kind
        self.capacity = capacity
        self.min_after_dequeue = min_after_dequeue
        self.seed = seed
        self.max_call_bytes = max_call_bytes
        self._rng = np.random.default_rng(seed) if kind == "shuffle" else None
        self._rng_lock = threading.Lock()
        # The free room the last aq_put reply of this process reported (a hint only).
        self.room = capacity
        # Elements the queue held when this process last looked (a probe, or a put's
        # reply, less what its takes took since): where a sharded dequeue takes first.
        self.filled = 0
        # This process's line of enqueues waiting for room over shards (the root's).
        self.line = Line()

    @property
    def shuffled(self) -> bool:
        """Whether this is a shuffle queue (its takes draw random numbers)."""
        return self._rng is not None

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
