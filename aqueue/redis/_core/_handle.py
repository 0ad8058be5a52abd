"""Handle: what every operation of one shared object (a queue, a replay table) needs,
whatever its product: its identity on the server, its keys, its codec, the timings of
its registrations, and the process-local ``released`` flag. Each product's handle
(``_queues/_handle.py``, ``_replay/_handle.py``) adds its settings and random numbers.

Invariants:
- an object's identity on the server is ``name`` plus ``gen``, the generation written
  by the call that created it: a function call with another ``gen`` finds the object
  gone (deleted, evicted, or lost with the server's data, and maybe re-created), so it
  never acts on a stranger;
- every key of the object starts with ``prefix`` (``key_prefix(name)``: ``aq:{name}:``),
  so all of them share one hash tag, and every function of the library works within
  one slot of a Redis Cluster. A sharded object would be N such key sets, each under a
  tag of its own, each with a handle of its own;
- ``released`` and the products' hints are process-local, never the server's state.
"""

from __future__ import annotations

from dataclasses import dataclass

import aqueue

from ._codec import Codec
from ._spec import ElementSpec

__all__ = ["Handle", "Product", "gone_text", "key_prefix"]


@dataclass(frozen=True)
class Product:
    """What one product is called on the server and in messages."""

    functions: str
    """The prefix of its functions in the library (``aq_`` for queues, ``rt_`` for
    replay tables): ``<prefix>stats``, ``<prefix>close``, ``<prefix>producer``,
    ``<prefix>open`` and its own."""
    noun: str
    """What messages call one object: ``queue``, ``replay table``."""
    short: str
    """The short word for it: ``queue``, ``table``."""
    format: str
    """The version of its key layout: stored when an object is created, compared when
    it is opened again."""


def key_prefix(name: str) -> str:
    """The prefix of every key of the object ``name``: its hash tag is the name."""
    return f"aq:{{{name}}}:"


def gone_text(noun: str, name: str) -> str:
    """Why calls find an object missing on the server (its meta hash, or its generation,
    is not there any more)."""
    return (
        f"{noun} '{name}' is gone from the server (deleted, evicted under a "
        "maxmemory-policy other than noeviction, or lost in a restart without persistence)"
    )


class Handle:
    """What every operation of one shared object needs (see the module docstring)."""

    def __init__(
        self,
        *,
        product: Product,
        name: str,
        gen: str,
        spec: ElementSpec,
        lease_time: float,
        wait_timeout: float,
    ) -> None:
        self.product = product
        self.name = name
        self.gen = gen
        self.spec = spec
        self.prefix = key_prefix(name)
        self.key = self.prefix + "meta"
        self.codec = Codec(spec, name)
        self.lease_ms = str(int(lease_time * 1000))
        self.wait_timeout = wait_timeout
        # A registration outlives a few missed retries, then expires (a crashed waiter).
        self.reg_ms = str(int(wait_timeout * 4000) + 1000)
        # Set by release_producers (a coordinator's stop): this process's sink calls on
        # this object fail with QueueClosedError at their next step.
        self.released = False

    def gone(self) -> aqueue.QueueClosedError:
        """The error of a call that finds this object gone from the server."""
        return aqueue.QueueClosedError(gone_text(self.product.noun, self.name))

    def check_released(self) -> None:
        """Raise QueueClosedError if this process's producers were released."""
        if self.released:
            p = self.product
            raise aqueue.QueueClosedError(
                f"{p.noun} '{self.name}': this process's producers were released (a "
                f"coordinator stopped); the shared {p.short} itself stays open"
            )
