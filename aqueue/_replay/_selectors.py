"""Selectors: which item a replay table samples (``sampler=``) or evicts (``remover=``).

Six small public configuration classes, frozen and validated, each usable in either
role (Reverb's ``reverb.selectors``):

===============  ===========================================  ======================
selector         picks                                        probability reported
===============  ===========================================  ======================
``Uniform()``    any item, each equally likely                ``1 / size``
``Prioritized``  item i with P(i) = p_i^e / sum_k p_k^e, where  ``p_i^e / sum``
``(e)``          0^e = 0; uniform when every p_i^e is 0
``Fifo()``       the oldest item (smallest key)                1.0
``Lifo()``       the newest item (largest key)                 1.0
``MinHeap()``    the lowest priority                           1.0
``MaxHeap()``    the highest priority                          1.0
===============  ===========================================  ======================

Heap ties go to the item whose priority was set longest ago (inserted, or last
updated by ``update_priorities``), as in Reverb: a tie order the snapshots keep.
The deterministic selectors report 1.0 because, given the table, they could have
picked nothing else (Reverb reports the same); importance weights are then all 1.

These classes hold configuration only. The state a table keeps for one (a sum tree,
a dense list, a heap) is built from it by the in-process engine (``_selection.py``)
or by another backend; ``selector_config``/``selector_from_config`` turn one into
plain JSON data and back, for snapshots and for backends that store their settings.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

from .._errors import ElementSpecError

__all__ = [
    "Fifo",
    "Lifo",
    "MaxHeap",
    "MinHeap",
    "Prioritized",
    "Selector",
    "Uniform",
    "selector_arg",
    "selector_config",
    "selector_from_config",
]


@dataclass(frozen=True)
class Uniform:
    """Sample (or evict) any item with the same probability, ``1 / size``."""

    deterministic: ClassVar[bool] = False

    def __repr__(self) -> str:
        return "Uniform()"


@dataclass(frozen=True)
class Prioritized:
    """Sample (or evict) item i with probability ``p_i**exponent / sum_k p_k**exponent``.

    ``0**exponent`` counts as 0 (an item of priority 0 is never picked) unless every
    item has priority 0: then every item is equally likely. ``exponent=0`` gives every
    item of positive priority the same chance; the prioritized-replay paper uses 0.6.

    Args:
        exponent: a finite number >= 0.
    """

    exponent: float
    deterministic: ClassVar[bool] = False

    def __post_init__(self) -> None:
        e = self.exponent
        if isinstance(e, bool) or not isinstance(e, numbers.Real):
            raise ElementSpecError(
                f"Prioritized: exponent must be a number, got {type(e).__name__}"
            )
        if not math.isfinite(float(e)) or float(e) < 0:
            raise ElementSpecError(f"Prioritized: exponent must be finite and >= 0, got {e}")
        object.__setattr__(self, "exponent", float(e))

    def __repr__(self) -> str:
        return f"Prioritized({self.exponent!r})"


@dataclass(frozen=True)
class Fifo:
    """Sample (or evict) the oldest item: the smallest key. Priorities are ignored."""

    deterministic: ClassVar[bool] = True

    def __repr__(self) -> str:
        return "Fifo()"


@dataclass(frozen=True)
class Lifo:
    """Sample (or evict) the newest item: the largest key. Priorities are ignored."""

    deterministic: ClassVar[bool] = True

    def __repr__(self) -> str:
        return "Lifo()"


@dataclass(frozen=True)
class MinHeap:
    """Sample (or evict) the item of lowest priority; ties go to the one whose
    priority was set longest ago."""

    deterministic: ClassVar[bool] = True

    def __repr__(self) -> str:
        return "MinHeap()"


@dataclass(frozen=True)
class MaxHeap:
    """Sample (or evict) the item of highest priority; ties go to the one whose
    priority was set longest ago."""

    deterministic: ClassVar[bool] = True

    def __repr__(self) -> str:
        return "MaxHeap()"


Selector = Uniform | Prioritized | Fifo | Lifo | MinHeap | MaxHeap
"""Any selector configuration."""

_KINDS: dict[str, type[Any]] = {
    cls.__name__: cls for cls in (Uniform, Prioritized, Fifo, Lifo, MinHeap, MaxHeap)
}


def selector_arg(value: Any, what: str, owner: str) -> Selector:
    """``value`` checked as a selector (``what`` is "sampler" or "remover").

    Raises:
        ElementSpecError: It is not one of the six selector configurations (a class
            instead of an instance gets its own hint).
    """
    if isinstance(value, (Uniform, Prioritized, Fifo, Lifo, MinHeap, MaxHeap)):
        return value
    if isinstance(value, type) and value.__name__ in _KINDS:
        hint = "(): pass an instance" if value is not Prioritized else "(exponent)"
        raise ElementSpecError(f"{owner}: {what} must be a selector, got the class; use {hint}")
    raise ElementSpecError(
        f"{owner}: {what} must be one of aqueue.Uniform(), Prioritized(exponent), Fifo(), "
        f"Lifo(), MinHeap(), MaxHeap(); got {value!r:.80}"
    )


def selector_config(selector: Selector) -> dict[str, Any]:
    """The selector as plain JSON data: ``{"kind": "Prioritized", "exponent": 0.6}``."""
    if isinstance(selector, Prioritized):
        return {"kind": "Prioritized", "exponent": selector.exponent}
    return {"kind": type(selector).__name__}


def selector_from_config(config: Any) -> Selector:
    """The selector ``selector_config`` described.

    Raises:
        ElementSpecError: ``config`` is not such a description.
    """
    kind = config.get("kind") if isinstance(config, dict) else None
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ElementSpecError(f"not a selector description: {config!r:.80}")
    extra = set(config) - {"kind", "exponent"} if cls is Prioritized else set(config) - {"kind"}
    if extra:
        raise ElementSpecError(f"selector {kind}: unexpected fields {sorted(extra)}")
    if cls is Prioritized:
        if "exponent" not in config:
            raise ElementSpecError("selector Prioritized: the exponent is missing")
        return Prioritized(config["exponent"])
    selector: Selector = cls()
    return selector
