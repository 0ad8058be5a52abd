"""Element specifications: what one queue element is, and how user data becomes one.

An element is a fixed number of *components*; component ``i`` has dtype ``dtypes[i]``
and, when shapes are declared, shape ``shapes[i]`` (``None`` entries mean "any size",
allowed only by PaddingFIFOQueue). The user-facing *form* of an element depends on
the spec alone:

- one unnamed component  -> the bare value,
- several unnamed        -> a tuple in component order,
- ``names`` given        -> a dict with exactly those keys.

A batch has the same form with a leading batch dimension on every component.

Conversion rules (checked before anything touches a queue, so a rejected element
changes nothing):

- numpy arrays and numpy scalars are accepted when numpy's ``'safe'`` casting
  converts them to the declared dtype (any dtype converts to ``object``);
- Python scalars and (nested) lists are converted to the declared dtype when they
  are of the same kind, or integers/booleans going into a wider numeric kind;
  out-of-range integers are rejected, never wrapped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ElementSpecError, int_arg
from ._declare import (
    Components,
    FixedShape,
    Shape,
    format_shape,
    normalize_dtypes,
    normalize_names,
    normalize_shapes,
)

__all__ = ["ElementSpec", "PrioritySpec", "declare_spec"]

# Python-value kinds that may go into a declared dtype kind (besides same-kind casts).
_PY_KIND_WIDENING = {"b": "biufc", "i": "iufc", "u": "iufc", "f": "fc", "c": "c"}


class ElementSpec:
    """Validates and converts elements and batches for one queue.

    Args:
        dtypes: one dtype per component.
        shapes: one shape per component, or None when shapes are not declared.
        names: component names, or None.
        owner: the queue's description for error messages, e.g. ``"FIFOQueue 'q'"``.
    """

    __slots__ = (
        "_dtype0",
        "_obj_scalar",
        "_one_fast",
        "_shape0",
        "_single",
        "dtypes",
        "names",
        "owner",
        "shapes",
    )

    def __init__(
        self,
        dtypes: tuple[np.dtype[Any], ...],
        shapes: tuple[Shape, ...] | None,
        names: tuple[str, ...] | None,
        *,
        owner: str,
    ) -> None:
        self.dtypes = dtypes
        self.shapes = shapes
        self.names = names
        self.owner = owner
        self._single = names is None and len(dtypes) == 1
        self._dtype0 = dtypes[0] if dtypes else None
        self._shape0 = shapes[0] if shapes else None
        # Fast path: one component, shape fully declared, not object.
        self._one_fast = (
            self._single
            and shapes is not None
            and None not in shapes[0]
            and dtypes[0] != np.dtype(object)
        )
        # Fast path: one object component of shape () holding any Python object as is.
        self._obj_scalar = (
            self._single and shapes is not None and shapes[0] == () and dtypes[0].kind == "O"
        )

    @property
    def fixed_shapes(self) -> tuple[FixedShape, ...] | None:
        """The declared shapes when every one is fully defined, else None."""
        if self.shapes is None:
            return None
        fixed: list[FixedShape] = []
        for shape in self.shapes:
            dims = [d for d in shape if d is not None]
            if len(dims) != len(shape):
                return None
            fixed.append(tuple(dims))
        return tuple(fixed)

    # -- forms -------------------------------------------------------------------------

    def _split(self, value: Any, what: str) -> tuple[Any, ...]:
        """Split a user element/batch into per-component values (no conversion)."""
        if self.names is not None:
            if not isinstance(value, Mapping):
                raise ElementSpecError(
                    f"{self.owner}: {what} must be a dict with keys {list(self.names)}, "
                    f"got {type(value).__name__}"
                )
            if set(value.keys()) != set(self.names):
                missing = [n for n in self.names if n not in value]
                extra = [k for k in value if k not in self.names]
                raise ElementSpecError(
                    f"{self.owner}: {what} keys must be exactly {list(self.names)}; "
                    f"missing {missing}, unexpected {extra}"
                )
            return tuple(value[n] for n in self.names)
        if isinstance(value, Mapping):
            raise ElementSpecError(
                f"{self.owner}: got a dict but the queue has no component names; "
                f"pass {'the bare value' if self._single else 'a tuple'}"
            )
        if self._single:
            return (value,)
        if not isinstance(value, (tuple, list)) or len(value) != len(self.dtypes):
            got = (
                f"a {type(value).__name__} of length {len(value)}"
                if isinstance(value, (tuple, list))
                else type(value).__name__
            )
            raise ElementSpecError(
                f"{self.owner}: {what} must be a tuple of {len(self.dtypes)} components, got {got}"
            )
        return tuple(value)

    def pack(self, comps: Sequence[Any]) -> Any:
        """Return ``comps`` in the user-facing form."""
        if self.names is not None:
            return dict(zip(self.names, comps))
        if self._single:
            return comps[0]
        return tuple(comps)

    def _label(self, i: int) -> str:
        if self.names is not None:
            return f"component {i} ('{self.names[i]}')"
        return f"component {i}"

    # -- conversion --------------------------------------------------------------------

    def _convert(self, i: int, value: Any, batch: bool = False) -> npt.NDArray[Any]:
        dt = self.dtypes[i]
        if isinstance(value, (np.ndarray, np.generic)):
            arr = np.asarray(value)
            if arr.dtype == dt:
                return arr
            if dt.kind == "O" or np.can_cast(arr.dtype, dt, "safe"):
                return arr.astype(dt)
            raise ElementSpecError(
                f"{self.owner}: {self._label(i)} expected dtype {dt} (numpy 'safe' cast), "
                f"got {arr.dtype}"
            )
        if dt.kind == "O":
            if self.shapes is not None and self.shapes[i] == ():
                # A scalar object component holds any Python object as it is, tuples
                # and lists included; a batch of them is a sequence with one per element.
                if not batch:
                    arr = np.empty((), dtype=object)
                    arr[()] = value
                    return arr
                if isinstance(value, (list, tuple)):
                    arr = np.empty(len(value), dtype=object)
                    for j, item in enumerate(value):
                        arr[j] = item
                    return arr
            try:
                arr = np.empty((), dtype=object)
                if isinstance(value, (list, tuple)):
                    return np.array(value, dtype=object)
                arr[()] = value
                return arr
            except ValueError as exc:
                raise ElementSpecError(
                    f"{self.owner}: {self._label(i)} could not be converted to an "
                    f"object array: {exc}"
                ) from exc
        try:
            probe = np.asarray(value)
        except (ValueError, TypeError) as exc:
            raise ElementSpecError(
                f"{self.owner}: {self._label(i)} could not be converted to {dt}: {exc}"
            ) from exc
        pk = probe.dtype.kind
        if probe.size == 0:  # empty lists carry no dtype of their own (TF converts them)
            return np.asarray(value, dtype=dt)
        if pk in "SU" or dt.kind in "SU":
            allowed = pk == dt.kind and bool(np.can_cast(probe.dtype, dt, "safe"))
        else:
            allowed = dt.kind in _PY_KIND_WIDENING.get(pk, "")
        if not allowed:
            raise ElementSpecError(
                f"{self.owner}: {self._label(i)} expected dtype {dt}, got Python data of dtype "
                f"{probe.dtype}"
            )
        try:
            return np.asarray(value, dtype=dt)
        except (OverflowError, ValueError, TypeError) as exc:
            raise ElementSpecError(
                f"{self.owner}: {self._label(i)} could not be converted to {dt}: {exc}"
            ) from exc

    def _check_shape(self, i: int, arr: npt.NDArray[Any], batch: int | None, value: Any) -> None:
        if self.shapes is None:
            if batch is not None and arr.ndim == 0:
                raise ElementSpecError(
                    f"{self.owner}: {self._label(i)} of a batch needs a leading batch dimension, "
                    "got a scalar"
                )
            return
        expected = self.shapes[i]
        shape = arr.shape
        if batch is not None:
            if arr.ndim == 0:
                raise ElementSpecError(
                    f"{self.owner}: {self._label(i)} of a batch needs a leading batch dimension, "
                    f"expected shape {format_shape((None, *expected))}, got a scalar"
                )
            shape = shape[1:]
        ok = len(shape) == len(expected) and all(
            e is None or e == g for e, g in zip(expected, shape)
        )
        if not ok:
            exp = (None, *expected) if batch is not None else expected
            hint = ""
            if self._single and isinstance(value, tuple) and len(value) == 1:
                hint = " (a single-component queue takes the bare value, not a 1-tuple)"
            raise ElementSpecError(
                f"{self.owner}: {self._label(i)} expected shape {format_shape(exp)}, "
                f"got {format_shape(arr.shape)}{hint}"
            )

    def element(self, value: Any) -> Components:
        """Validate and convert one element into a tuple of arrays."""
        if (
            type(value) is np.ndarray
            and self._one_fast
            and value.shape == self._shape0
            and value.dtype == self._dtype0
        ):
            return (value,)
        if (
            self._obj_scalar
            and not isinstance(value, (np.ndarray, np.generic))
            and not isinstance(value, Mapping)  # (refused below with the reason)
        ):
            held = np.empty((), dtype=object)  # what _convert makes of it, without the checks
            held[()] = value
            return (held,)
        parts = self._split(value, "element")
        out = []
        for i, part in enumerate(parts):
            arr = self._convert(i, part)
            self._check_shape(i, arr, None, value)
            out.append(arr)
        return tuple(out)

    def batch(self, value: Any) -> tuple[Components, int]:
        """Validate and convert a batch; return its components and its size."""
        if self._one_fast and type(value) is np.ndarray:
            shape = value.shape  # (a new tuple at every read)
            if value.dtype == self._dtype0 and shape and shape[1:] == self._shape0:
                return (value,), shape[0]
        parts = self._split(value, "batch")
        out = []
        sizes: list[int] = []
        for i, part in enumerate(parts):
            arr = self._convert(i, part, batch=True)
            self._check_shape(i, arr, 0, value)
            out.append(arr)
            sizes.append(arr.shape[0])
        if len(set(sizes)) > 1:
            detail = ", ".join(f"{self._label(i)} has {s}" for i, s in enumerate(sizes))
            raise ElementSpecError(
                f"{self.owner}: batch components disagree on batch size: {detail}"
            )
        return tuple(out), (sizes[0] if sizes else 0)

    def batch_count(self, n: Any, what: str) -> int:
        """``n`` checked as the size of batch operation ``what`` on this queue.

        Raises:
            ElementSpecError: ``n`` is not an int >= 0, or the queue has no declared
                shapes (a batch needs them).
        """
        if type(n) is not int or n < 0:  # the message is only built for bad input
            n = int_arg(n, "n", f"{self.owner}.{what}", 0)
        if self.shapes is None:
            raise ElementSpecError(
                f"{self.owner}.{what} requires the components to have declared shapes; "
                "pass shapes= when creating the queue (shapes=() for scalars, "
                "e.g. FIFOQueue(16, np.int64, shapes=()))"
            )
        return int(n)

    def empty_batch(self) -> Any:
        """An empty batch (leading dimension 0) in user form."""
        assert self.shapes is not None
        return self.pack(
            [
                np.empty((0, *(0 if d is None else d for d in s)), dtype=dt)
                for dt, s in zip(self.dtypes, self.shapes)
            ]
        )


class PrioritySpec(ElementSpec):
    """Element spec whose component 0 is the int64 scalar priority."""

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._single = False
        self._one_fast = False

    def _convert(self, i: int, value: Any, batch: bool = False) -> Any:
        if i == 0:
            arr = np.asarray(value)
            if arr.dtype.kind not in "iu" or not np.can_cast(arr.dtype, np.int64, "same_kind"):
                raise ElementSpecError(
                    f"{self.owner}: priority (component 0) must be int64-compatible, got dtype "
                    f"{arr.dtype}"
                )
            # uint64 -> int64 is a same-kind cast that would wrap large values silently.
            if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
                raise ElementSpecError(f"{self.owner}: priority {value!r} does not fit int64")
            try:
                return np.asarray(value, dtype=np.int64)
            except OverflowError as exc:
                raise ElementSpecError(
                    f"{self.owner}: priority {value!r} does not fit int64"
                ) from exc
        return super()._convert(i, value, batch)

    def _check_shape(self, i: int, arr: Any, batch: int | None, value: Any) -> None:
        if i == 0 and self.shapes is None:
            want = 1 if batch is not None else 0
            if arr.ndim != want:
                raise ElementSpecError(
                    f"{self.owner}: priority (component 0) must be a scalar per element, "
                    f"got shape {arr.shape}"
                )
            return
        super()._check_shape(i, arr, batch, value)

    def _label(self, i: int) -> str:
        return "priority (component 0)" if i == 0 else f"component {i}"


def declare_spec(
    owner: str,
    dtypes: Any,
    shapes: Any,
    names: Any,
    *,
    allow_unknown_dims: bool = False,
    require_shapes: bool = False,
) -> ElementSpec:
    """The spec a queue constructor declares (see the module docstring)."""
    dts = normalize_dtypes(dtypes, owner=owner)
    if not dts:
        raise ElementSpecError(f"{owner}: dtypes must name at least one component")
    if require_shapes and shapes is None:
        raise ElementSpecError(f"{owner}: shapes are required (use None for unknown dimensions)")
    shp = normalize_shapes(shapes, len(dts), owner=owner, allow_unknown_dims=allow_unknown_dims)
    return ElementSpec(dts, shp, normalize_names(names, len(dts), owner), owner=owner)
