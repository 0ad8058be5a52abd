"""What a queue's constructor declares: dtypes, shapes and names, checked and normalised.

Every queue kind (and the shared queues of ``aqueue.redis``) turns its ``dtypes``,
``shapes`` and ``names`` arguments into an ``ElementSpec`` here, with the same rules
and the same messages:

- ``dtypes``: one dtype or a sequence, each something ``numpy.dtype()`` accepts;
- ``shapes``: None (undeclared), one shape, or one per component. As in TensorFlow, a
  tuple whose entries are all ints or None is *one* shape: ``()`` is one scalar
  component and ``(32, 32)`` one 32x32 component. ``None`` dimensions only where the
  kind allows them (PaddingFIFOQueue);
- ``names``: None, or one distinct str per component (elements are then dicts).

A bad argument raises ElementSpecError naming the queue (``owner``), the argument,
what was expected and what was given. ``identity`` checks a new queue's name and
capacity; ``T``/``NumericDType`` are how the kinds type what comes out.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError, int_arg, name_arg

__all__ = [
    "Array",
    "Components",
    "NumericDType",
    "T",
    "U",
    "identity",
    "FixedShape",
    "Shape",
    "format_shape",
    "normalize_dtypes",
    "normalize_names",
    "normalize_shapes",
]

Shape = tuple[int | None, ...]  # a declared shape; None dimensions only in PaddingFIFOQueue
FixedShape = tuple[int, ...]  # a fully defined shape
Components = tuple[Any, ...]  # one numpy array (or scalar) per component

if TYPE_CHECKING:  # a queue whose element type is neither inferred nor given holds Any
    from typing_extensions import TypeVar as _DefaultTypeVar

    T = _DefaultTypeVar("T", default=Any)
else:
    T = TypeVar("T")
U = TypeVar("U")
Array = npt.NDArray[Any]
NumericDType = type[np.generic] | np.dtype[Any] | str
"""A dtype whose elements come back as numpy values (``object`` is not one of them);
the kinds' constructors infer their element type from it."""


def normalize_dtypes(dtypes: Any, *, owner: str) -> tuple[np.dtype[Any], ...]:
    """Turn one dtype or a sequence of dtypes into a tuple of ``np.dtype``."""
    items = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes]
    out = []
    for i, d in enumerate(items):
        try:
            out.append(np.dtype(d))
        except TypeError as exc:
            raise ElementSpecError(
                f"{owner}: dtypes[{i}] must be something numpy.dtype() accepts, got {d!r}"
            ) from exc
    return tuple(out)


def _is_one_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        d is None or isinstance(d, numbers.Integral) for d in value
    )


def normalize_shapes(
    shapes: Any, count: int, *, owner: str, allow_unknown_dims: bool
) -> tuple[Shape, ...] | None:
    """Turn ``shapes`` (None, one shape, or a sequence of shapes) into a tuple of shapes.

    As in TensorFlow, a tuple whose entries are all ints or None is *one* shape:
    ``()`` is one scalar component and ``(32, 32)`` one 32x32 component.
    """
    if shapes is None:
        return None
    if _is_one_shape(shapes) and not (count == 0 and len(shapes) == 0):
        items: list[Any] = [shapes]
    elif isinstance(shapes, (list, tuple)):
        items = list(shapes)
    else:
        raise ElementSpecError(
            f"{owner}: shapes must be None, one shape or a sequence of shapes, got {shapes!r}"
        )
    if len(items) != count:
        raise ElementSpecError(
            f"{owner}: shapes has {len(items)} entries but dtypes has {count} components"
        )
    out: list[Shape] = []
    for i, shape in enumerate(items):
        if not _is_one_shape(shape):
            raise ElementSpecError(
                f"{owner}: shapes[{i}] must be a tuple of ints or None, got {shape!r}"
            )
        dims: list[int | None] = []
        for d in shape:
            if d is None:
                if not allow_unknown_dims:
                    raise ElementSpecError(
                        f"{owner}: shapes[{i}] = {tuple(shape)!r} is not fully defined; "
                        "use PaddingFIFOQueue for None dimensions"
                    )
                dims.append(None)
            elif int(d) < 0:
                raise ElementSpecError(f"{owner}: shapes[{i}] has a negative dimension {d}")
            else:
                dims.append(int(d))
        out.append(tuple(dims))
    return tuple(out)


def format_shape(shape: Sequence[int | None]) -> str:
    return (
        "("
        + ", ".join("?" if d is None else str(d) for d in shape)
        + ("," if len(shape) == 1 else "")
        + ")"
    )


def normalize_names(names: Any, count: int, owner: str) -> tuple[str, ...] | None:
    """None, or one distinct str per component."""
    if names is None:
        return None
    items = [names] if isinstance(names, str) else list(names)
    if len(items) != count:
        raise ElementSpecError(
            f"{owner}: names has {len(items)} entries but dtypes has {count} components"
        )
    if not all(isinstance(n, str) for n in items) or len(set(items)) != len(items):
        raise ElementSpecError(f"{owner}: names must be distinct strings, got {items!r}")
    return tuple(items)


def identity(queue: Any, name: Any, capacity: Any) -> tuple[str, str, int]:
    """The queue's name, its description for messages, and its checked capacity."""
    qname = name_arg(name, type(queue).default_name, f"{type(queue).__name__}: name")
    owner = f"{type(queue).__name__} '{qname}'"
    return qname, owner, int_arg(capacity, "capacity", owner, 1)
