"""The file form of a QueueSnapshot (``QueueSnapshot.save``/``load``).

File format, version 1, in the state-file container (``_files.py``: an ``.npz``
written without pickle, the JSON header in entry ``__aqueue__``, saved atomically):

- header: ``format`` ("aqueue.QueueSnapshot"), ``version``, the spec (``dtypes`` as
  numpy dtype strings such as "<i8", ``shapes`` with null for unknown dimensions),
  ``closed``, ``count`` (elements), ``rng_state``, and ``components``: one
  ``{"layout": ...}`` per component;
- "stacked" (a declared, fully defined shape, not object): array ``c<i>`` of shape
  ``(count, *shape)``, the elements' raw bytes and nothing else;
- "ragged" (None dimensions, or shapes not declared): array ``c<i>`` holds every
  element's values flattened, one after the other; ``c<i>_ndim`` (count,) and
  ``c<i>_dims`` (the ndims' sum,) their shapes, as int8 ranks and the narrowest
  unsigned dims that hold them (so 1-3 bytes of overhead per element, not 16);
- "objects" (dtype object): the flattened values as JSON in the layout's ``values``
  (``encode_objects``: str, bytes, int, float, bool, None, tuples and lists of these);
  ``c<i>_ndim``/``c<i>_dims`` as for ragged, with ndim -1 for a value held as is.

``load`` checks before returning anything: the container, format and version; every
header field and its type; the spec, as the kind's constructor would; that the arrays
are exactly those the layouts name, with the declared dtypes and shapes, per-element
shapes that fit the declared ones, and sizes that add up to what is stored; that
``rng_state`` is a state numpy's generator accepts. Otherwise CheckpointError, naming
the file and what is wrong.

Loading reads the whole file (one copy of the raw data); saving stacks each fixed-shape
component into one array first (one transient copy).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._errors import CheckpointError, ElementSpecError
from ._declare import Components, Shape, normalize_dtypes, normalize_names, normalize_shapes
from ._files import decode_objects, encode_objects

if TYPE_CHECKING:
    from ._snapshot import QueueSnapshot

__all__ = ["FORMAT", "KINDS", "VERSION", "decode", "encode"]

FORMAT = "aqueue.QueueSnapshot"
VERSION = 1
KINDS = ("FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "RandomShuffleQueue")
Array = npt.NDArray[Any]


# -- saving ---------------------------------------------------------------------------


def _label(snap: QueueSnapshot[Any], i: int) -> str:
    named = f" ('{snap.names[i]}')" if snap.names is not None else ""
    return f"component {i}{named} of queue '{snap.name}'"


def _shapes(column: list[Any], objects: bool) -> tuple[Array, Array]:
    """Per-element ranks (-1 for an object held as is) and the flattened dims."""
    ndim = np.empty(len(column), dtype=np.int8)  # (numpy allows 64 dimensions)
    dims: list[int] = []
    for j, v in enumerate(column):
        if objects and not isinstance(v, np.ndarray):
            ndim[j] = -1
        else:
            shape = np.shape(v)
            ndim[j] = len(shape)
            dims.extend(shape)
    top = max(dims, default=0)
    narrow = next(t for t in (np.uint8, np.uint16, np.uint32, np.uint64) if top <= np.iinfo(t).max)
    return ndim, np.asarray(dims, dtype=narrow)


def encode(snap: QueueSnapshot[Any], target: str) -> tuple[dict[str, Any], dict[str, Array]]:
    count = len(snap.elements)
    width = len(snap.dtypes)
    for j, comps in enumerate(snap.elements):
        if not isinstance(comps, tuple) or len(comps) != width:
            raise CheckpointError(
                f"cannot save {target}: element {j} must be a tuple of {width} components"
            )
    layouts: list[dict[str, Any]] = []
    arrays: dict[str, Array] = {}
    for i, dt in enumerate(snap.dtypes):
        label = _label(snap, i)
        if dt.kind == "V" or np.dtype(dt.str) != dt:
            raise CheckpointError(
                f"cannot save {label}: dtype {dt} has no file form (structured and "
                "sub-array dtypes are not saved)"
            )
        column = [comps[i] for comps in snap.elements]
        shape = snap.shapes[i] if snap.shapes is not None else None
        if dt.kind == "O":
            arrays[f"c{i}_ndim"], arrays[f"c{i}_dims"] = _shapes(column, True)
            if all(not isinstance(v, np.ndarray) for v in column):
                values = encode_objects(column, label)  # its message names the element
            else:
                values = []
                for j, v in enumerate(column):
                    items = list(v.ravel()) if isinstance(v, np.ndarray) else [v]
                    values.extend(encode_objects(items, f"{label}, element {j} (an array)"))
            layouts.append({"layout": "objects", "values": values})
        elif (fixed := _fixed(shape)) is not None:
            try:
                stacked = np.array(column, dtype=dt) if column else np.empty((0, *fixed), dt)
                if stacked.shape != (count, *fixed):
                    raise ValueError(f"got shape {stacked.shape}")
            except (ValueError, TypeError) as exc:
                raise CheckpointError(
                    f"cannot save {label}: its elements do not stack to shape "
                    f"{(count, *fixed)}: {exc}"
                ) from exc
            arrays[f"c{i}"] = stacked
            layouts.append({"layout": "stacked"})
        else:
            parts = [np.asarray(v, dtype=dt) for v in column]
            arrays[f"c{i}_ndim"], arrays[f"c{i}_dims"] = _shapes(parts, False)
            flat = [p.ravel() for p in parts]
            arrays[f"c{i}"] = np.concatenate(flat) if flat else np.empty(0, dtype=dt)
            layouts.append({"layout": "ragged"})
    header = {
        "format": FORMAT,
        "version": VERSION,
        "kind": snap.kind,
        "name": snap.name,
        "capacity": snap.capacity,
        "dtypes": [dt.str for dt in snap.dtypes],
        "shapes": None if snap.shapes is None else [list(s) for s in snap.shapes],
        "names": None if snap.names is None else list(snap.names),
        "min_after_dequeue": snap.min_after_dequeue,
        "seed": snap.seed,
        "closed": snap.closed,
        "count": count,
        "rng_state": snap.rng_state,
        "components": layouts,
    }
    return header, arrays


# -- loading --------------------------------------------------------------------------


def _get(header: dict[str, Any], key: str, types: tuple[type, ...], source: str) -> Any:
    value = header.get(key)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise CheckpointError(
            f"{source}: header field {key!r} must be {' or '.join(t.__name__ for t in types)}"
            f", got {value!r:.80}"
        )
    return value


def _spec(header: dict[str, Any], source: str) -> dict[str, Any]:
    """The header's spec fields, checked as the kind's constructor would check them."""
    kind = _get(header, "kind", (str,), source)
    if kind not in KINDS:
        raise CheckpointError(f"{source}: unknown queue kind {kind!r} (known: {list(KINDS)})")
    out: dict[str, Any] = {"kind": kind, "name": _get(header, "name", (str,), source)}
    for key in ("capacity", "min_after_dequeue", "count"):
        out[key] = _get(header, key, (int,), source)
    out["seed"] = _get(header, "seed", (int, type(None)), source)
    out["closed"] = _get(header, "closed", (bool,), source)
    dtype_strs = _get(header, "dtypes", (list,), source)
    raw_shapes = _get(header, "shapes", (list, type(None)), source)
    raw_names = _get(header, "names", (list, type(None)), source)
    owner = f"{source}: {kind} '{out['name']}'"
    try:
        if not dtype_strs or not all(isinstance(d, str) for d in dtype_strs):
            raise ElementSpecError(f"{owner}: dtypes must be a non-empty list of str")
        out["dtypes"] = normalize_dtypes(dtype_strs, owner=owner)
        out["shapes"] = (
            None
            if raw_shapes is None
            else normalize_shapes(
                [tuple(s) if isinstance(s, list) else s for s in raw_shapes],
                len(dtype_strs),
                owner=owner,
                allow_unknown_dims=kind == "PaddingFIFOQueue",
            )
        )
        out["names"] = normalize_names(raw_names, len(dtype_strs), owner)
    except ElementSpecError as exc:
        raise CheckpointError(f"{source}: bad spec in header: {exc}") from exc
    problems = []
    if out["capacity"] < 1 or out["count"] < 0 or out["min_after_dequeue"] < 0:
        problems.append("capacity must be >= 1, count and min_after_dequeue >= 0")
    if kind == "RandomShuffleQueue":
        if out["min_after_dequeue"] >= out["capacity"]:
            problems.append("min_after_dequeue must be < capacity")
        if out["seed"] is not None and out["seed"] < 0:
            problems.append("seed must be >= 0")
    elif out["min_after_dequeue"] or out["seed"] is not None:
        problems.append(f"a {kind} has min_after_dequeue 0 and seed null")
    if kind == "PaddingFIFOQueue" and out["shapes"] is None:
        problems.append("a PaddingFIFOQueue declares shapes")
    if kind == "PriorityQueue" and (
        out["dtypes"][0] != np.dtype(np.int64)
        or out["names"] is not None
        or (out["shapes"] is not None and out["shapes"][0] != ())
    ):
        problems.append("a PriorityQueue's component 0 is an int64 scalar, without names")
    if problems:
        raise CheckpointError(f"{source}: inconsistent header: {'; '.join(problems)}")
    return out


def _rng_state(header: dict[str, Any], kind: str, source: str) -> dict[str, Any] | None:
    state = header.get("rng_state")
    if kind != "RandomShuffleQueue":
        if state is not None:
            raise CheckpointError(f"{source}: a {kind} has no rng_state")
        return None
    if not isinstance(state, dict):
        raise CheckpointError(f"{source}: a RandomShuffleQueue needs its rng_state")
    try:
        np.random.default_rng().bit_generator.state = state
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{source}: rng_state is not a generator state: {exc}") from exc
    return state


def _fixed(shape: Shape | None) -> tuple[int, ...] | None:
    """``shape`` when it is declared and fully defined, else None."""
    if shape is None:
        return None
    dims = tuple(d for d in shape if d is not None)
    return dims if len(dims) == len(shape) else None


def _fits(shape: tuple[int, ...], declared: Shape | None) -> bool:
    if declared is None:
        return True
    return len(shape) == len(declared) and all(d is None or d == g for d, g in zip(declared, shape))


def decode(header: dict[str, Any], arrays: dict[str, Array], source: str) -> dict[str, Any]:
    spec = _spec(header, source)
    rng_state = _rng_state(header, spec["kind"], source)
    dtypes, shapes, count = spec["dtypes"], spec["shapes"], spec["count"]
    layouts = header.get("components")
    if not isinstance(layouts, list) or len(layouts) != len(dtypes):
        raise CheckpointError(f"{source}: header field 'components' must list {len(dtypes)}")
    expected: set[str] = set()
    columns: list[list[Any]] = []
    for i, (dt, layout) in enumerate(zip(dtypes, layouts)):
        declared = shapes[i] if shapes is not None else None
        fixed = _fixed(declared)
        what = f"{source}: component {i}"
        kind = layout.get("layout") if isinstance(layout, dict) else None
        want = "objects" if dt.kind == "O" else "ragged" if fixed is None else "stacked"
        if kind != want:
            raise CheckpointError(f"{what}: layout must be {want!r}, got {kind!r}")
        names = [f"c{i}"] if kind == "stacked" else [f"c{i}_ndim", f"c{i}_dims"]
        if kind == "ragged":
            names.append(f"c{i}")
        missing = [n for n in names if n not in arrays]
        if missing:
            raise CheckpointError(f"{what}: array {missing[0]!r} is missing")
        expected.update(names)
        if fixed is not None and kind == "stacked":
            col = arrays[f"c{i}"]
            if col.dtype != dt or col.shape != (count, *fixed):
                raise CheckpointError(
                    f"{what}: array 'c{i}' must be {dt} of shape {(count, *fixed)}, "
                    f"got {col.dtype} of shape {col.shape}"
                )
            col.flags.writeable = False
            columns.append([col[j] for j in range(count)])
            continue
        shapes_j = _element_shapes(arrays, i, count, kind == "objects", what)
        for j, shape in enumerate(shapes_j):
            if not _fits(() if shape is None else shape, declared):
                raise CheckpointError(f"{what}: element {j} has shape {shape}, declared {declared}")
        sizes = [1 if s is None else math.prod(s) for s in shapes_j]
        if kind == "ragged":
            data = arrays[f"c{i}"]
            if data.dtype != dt or data.ndim != 1 or data.shape[0] != sum(sizes):
                raise CheckpointError(
                    f"{what}: array 'c{i}' must be 1-d {dt} with {sum(sizes)} values, got "
                    f"{data.dtype} of shape {data.shape}"
                )
            data.flags.writeable = False
            values: Any = data
        else:
            raw = layout.get("values")
            if not isinstance(raw, list) or len(raw) != sum(sizes):
                got = len(raw) if isinstance(raw, list) else type(raw).__name__
                raise CheckpointError(f"{what}: 'values' must list {sum(sizes)}, got {got}")
            values = decode_objects(raw, what)
        columns.append(_split(values, shapes_j, sizes, kind == "objects"))
    extra = sorted(set(arrays) - expected)
    if extra:
        raise CheckpointError(f"{source}: unexpected arrays {extra[:5]}")
    elements: list[Components] = [tuple(col[j] for col in columns) for j in range(count)]
    del spec["count"]
    return {**spec, "elements": elements, "rng_state": rng_state}


def _element_shapes(
    arrays: dict[str, Array], i: int, count: int, objects: bool, what: str
) -> list[tuple[int, ...] | None]:
    """Each element's shape (None: an object held as is), from ``c<i>_ndim``/``_dims``."""
    ndim, dims = arrays[f"c{i}_ndim"], arrays[f"c{i}_dims"]
    low = -1 if objects else 0
    if ndim.dtype.kind != "i" or ndim.shape != (count,) or (count and int(ndim.min()) < low):
        raise CheckpointError(
            f"{what}: array 'c{i}_ndim' must be {count} signed int ranks >= {low}, got "
            f"{ndim.dtype} of shape {ndim.shape}"
        )
    total = int(ndim[ndim > 0].sum())
    if dims.dtype.kind not in "iu" or dims.shape != (total,) or (total and int(dims.min()) < 0):
        raise CheckpointError(
            f"{what}: array 'c{i}_dims' must be {total} int dimensions >= 0, got "
            f"{dims.dtype} of shape {dims.shape}"
        )
    out: list[tuple[int, ...] | None] = []
    pos = 0
    for r in ndim.tolist():
        if r < 0:
            out.append(None)
        else:
            out.append(tuple(dims[pos : pos + r].tolist()))
            pos += r
    return out


def _split(
    values: Any, shapes: list[tuple[int, ...] | None], sizes: list[int], objects: bool
) -> list[Any]:
    """Per-element values from the flattened ``values`` (views of a read-only array for
    ragged data; new object arrays for objects)."""
    out: list[Any] = []
    pos = 0
    for shape, size in zip(shapes, sizes):
        if shape is None:
            out.append(values[pos])
        elif not objects:
            part = values[pos : pos + size].reshape(shape)
            out.append(part[()] if part.ndim == 0 else part)
        else:
            arr = np.empty(size, dtype=object)
            for k in range(size):  # (a slice assignment would unpack tuples)
                arr[k] = values[pos + k]
            out.append(arr.reshape(shape))
        pos += size
    return out
