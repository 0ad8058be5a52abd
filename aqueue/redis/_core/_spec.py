"""The in-process element spec, reused as is, plus the argument checks of this backend.

``ElementSpec``, ``normalize_dtypes``, ``normalize_shapes`` and ``normalize_names`` are
the exact conversion and validation rules of the in-process queues, so elements,
batches, batch sizes (``ElementSpec.batch_count``) and their errors are identical on
both backends. (The other private names of the in-process queues this backend uses:
``format_shape`` in ``_shared``, the event-loop check in ``_transport``, the
blocked-call registry in the queues' ``_blocking``.)

Invariants of the specs this backend accepts (checked by ``make_spec``):
- every dtype is on the AQ1 wire allow-list (booleans, integers, floats, complex,
  fixed-size byte and unicode strings); object, structured (void), datetime and
  timedelta dtypes are refused with ElementSpecError at queue creation;
- shapes are None (per-element shapes travel in each payload) or fully defined.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

import aqueue
from aqueue._errors import int_arg
from aqueue._errors import name_arg as common_name_arg
from aqueue._queues._declare import normalize_dtypes, normalize_names, normalize_shapes
from aqueue._queues._spec import ElementSpec

__all__ = ["ElementSpec", "int_arg", "make_spec", "name_arg", "positive_arg", "wire_kind_ok"]

_WIRE_KINDS = "biufcSU"  # dtype kinds AQ1 carries (see _codec)
_MAX_NAME = 200


def wire_kind_ok(dt: np.dtype[Any]) -> bool:
    """Whether AQ1 can carry dtype ``dt`` (a plain, fixed-size, non-object dtype)."""
    return dt.kind in _WIRE_KINDS and dt.fields is None and dt.subdtype is None and dt.itemsize > 0


def positive_arg(value: Any, what: str, owner: str) -> float:
    """``value`` as a finite float > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise aqueue.ElementSpecError(f"{owner}: {what} must be a number, got {value!r}")
    out = float(value)
    if not (0.0 < out < float("inf")):
        raise aqueue.ElementSpecError(f"{owner}: {what} must be > 0 and finite, got {value!r}")
    return out


def name_arg(name: Any, owner: str, what: str) -> str:
    """The name of a queue or table on the server (``what``: "queue name" or "table
    name"): aqueue's name check (a str), and this backend's rules: required, 1 to
    ``_MAX_NAME`` characters, without ``{``/``}`` (they delimit the hash tag that keeps
    all its keys in one slot)."""
    rule = f"{owner}: {what} must be 1..{_MAX_NAME} characters without '{{' or '}}', got"
    if name is None or name == "":
        raise aqueue.ElementSpecError(f"{rule} {name!r}")
    text = common_name_arg(name, "", f"{owner}: {what}")
    if len(text) > _MAX_NAME or "{" in text or "}" in text:
        raise aqueue.ElementSpecError(f"{rule} {text!r}")
    return text


def make_spec(owner: str, dtypes: Any, shapes: Any, names: Any) -> ElementSpec:
    """The ElementSpec of a Redis queue, refusing dtypes the wire cannot carry."""
    dts = normalize_dtypes(dtypes, owner=owner)
    if not dts:
        raise aqueue.ElementSpecError(f"{owner}: dtypes must name at least one component")
    for i, dt in enumerate(dts):
        if not wire_kind_ok(dt):
            raise aqueue.ElementSpecError(
                f"{owner}: dtypes[{i}] = {dt} cannot be stored in Redis: AQ1 carries "
                "booleans, integers, floats, complex and fixed-size bytes/str only "
                "(object, structured and datetime dtypes are refused; never pickled)"
            )
    shp = normalize_shapes(shapes, len(dts), owner=owner, allow_unknown_dims=False)
    return ElementSpec(dts, shp, normalize_names(names, len(dts), owner), owner=owner)
