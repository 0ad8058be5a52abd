"""ReplaySnapshot: what one replay table holds at one moment, exactly enough to go on.

``table.snapshot()`` takes one under the table's lock (one acquisition, for as long as
a copy of the items takes; inserts and samples wait that long, no longer) and changes
nothing. It holds:

- the table's settings: ``name``, ``max_size``, ``dtypes``, ``shapes``, ``names``,
  ``sampler``, ``remover``, ``max_times_sampled``, ``rate_limiter``, ``seed``;
- ``closed``;
- the items, in key order: ``keys``, ``priorities``, ``times_sampled`` (one entry per
  item) and ``items`` (one array per component, of shape ``(count, *shape)``);
- ``next_key``; ``statistics`` (the counters, which are also the rate limiter's: a
  restored table continues them, and its limiter with them);
- ``rng_state``: the numpy generator's ``bit_generator.state`` (plain JSON data);
- ``layout``: how the in-process engine arranged them: each item's storage ``slots``
  and the stack of ``free`` slots (which slot the next insert takes), and each
  selector's own state under ``sampler.``/``remover.``: a Uniform selector's draw
  order (``order``: item indices), a heap's tie order (``seq``, one per item, and
  ``next_seq``). Arrays hold item *indices* (positions in key order), not slots, where
  they can. With all of it, a seeded table restored by ``ReplayTable.from_snapshot``
  draws exactly the samples, and evicts exactly the items, the original would have.

Its arrays are private read-only copies.

``save(path)`` writes one state file (``_queues._files``: an ``.npz`` with a JSON
header, written atomically, no pickle): the header holds the settings (selectors and
limiter as JSON descriptions), the scalars, the statistics, the generator state and the
integer entries of ``layout``; the arrays are ``keys``, ``priorities``,
``times_sampled``, ``c<i>`` per component and ``layout.<name>``. ``load(path)`` checks
the container, format and version, every header field, then everything
``check_snapshot`` checks: shapes and dtypes of the arrays; keys increasing, below
``next_key``; priorities finite and >= 0; times within ``max_times_sampled``; counters
that add up (``inserts - deletes == count``, ``inserts == next_key``); slots and free
slots that partition the table; selector states that fit their selectors; a generator
state numpy accepts. Anything else raises CheckpointError naming the file and the
problem.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from .._errors import CheckpointError, ElementSpecError
from .._queues._declare import FixedShape, normalize_dtypes, normalize_names, normalize_shapes
from .._queues._files import read_state_file, write_state_file
from ._limiter import RateLimiter, limiter_config, limiter_from_config
from ._results import ReplayStatistics
from ._selectors import MaxHeap, MinHeap, Selector, Uniform, selector_config, selector_from_config

__all__ = [
    "ReplaySnapshot",
    "check_snapshot",
    "checked_array",
    "decode_snapshot",
    "encode_snapshot",
    "header_field",
    "snapshot_error",
    "snapshot_state",
]

if TYPE_CHECKING:  # a snapshot whose element type is not known (a loaded one) holds Any
    from typing_extensions import TypeVar as _DefaultTypeVar

    T = _DefaultTypeVar("T", default=Any)
else:
    T = TypeVar("T")

FORMAT = "aqueue.ReplaySnapshot"
VERSION = 1
Array = npt.NDArray[Any]


@dataclass(frozen=True, eq=False, repr=False)
class ReplaySnapshot(Generic[T]):
    """A replay table at one moment (see ``aqueue._replay._snapshot``).

    Take one with ``table.snapshot()``; build a table that goes on exactly as that one
    would with ``aqueue.ReplayTable.from_snapshot(snap)``; keep it with
    ``snap.save(path)`` and ``aqueue.ReplaySnapshot.load(path)``. ``T`` is the table's
    element type (``Any`` once loaded from a file); ``len(snap)`` its item count.
    """

    name: str
    """The table's name."""
    max_size: int
    """The most items the table holds."""
    dtypes: tuple[np.dtype[Any], ...]
    """One numpy dtype per component."""
    shapes: tuple[FixedShape, ...]
    """One shape per component."""
    names: tuple[str, ...] | None
    """Component names, or None."""
    sampler: Selector
    """The sampler."""
    remover: Selector
    """The remover."""
    max_times_sampled: int
    """Draws after which an item leaves (0: never)."""
    rate_limiter: RateLimiter
    """The rate limiter."""
    seed: int | None
    """The seed the table was created with."""
    closed: bool
    """Whether the table was closed."""
    keys: npt.NDArray[np.int64]
    """The keys of the items held, increasing."""
    priorities: npt.NDArray[np.float64]
    """Each item's priority, in key order."""
    times_sampled: npt.NDArray[np.int64]
    """How many times each item was sampled, in key order."""
    items: tuple[Array, ...]
    """One array per component, of shape ``(count, *shape)``: the items in key order."""
    next_key: int
    """The key the next inserted item gets."""
    statistics: ReplayStatistics
    """The table's counters (the rate limiter's among them) when the snapshot was taken."""
    rng_state: dict[str, Any]
    """The random generator's ``bit_generator.state``."""
    layout: dict[str, Any]
    """The in-process engine's arrangement (slots, free slots, selector states; see the
    module docstring): arrays and ints."""

    def __post_init__(self) -> None:
        for arr in (self.keys, self.priorities, self.times_sampled, *self.items):
            arr.flags.writeable = False
        for value in self.layout.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    restored_by: ClassVar[str] = "aqueue.ReplayTable.from_snapshot"
    """What builds a table from a snapshot of this class (for messages)."""

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"<ReplaySnapshot of replay table '{self.name}': {len(self.keys)} items, "
            f"max_size {self.max_size}, {state}>"
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the snapshot to ``path`` atomically: a crash or an error leaves
        ``path`` as it was.

        Raises:
            CheckpointError: The snapshot cannot be written (the message names ``path``
                and says why).
        """
        header, arrays = encode_snapshot(self)
        write_state_file(path, header, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ReplaySnapshot[Any]:
        """Read a snapshot that ``save`` wrote, checked whole (see the module docstring).

        Raises:
            CheckpointError: The file is missing, truncated, corrupt, not a replay
                snapshot, of a newer version, or inconsistent; the message names the
                file and the problem.
        """
        source = str(path)
        header, arrays = read_state_file(path, FORMAT, VERSION)
        snap = decode_snapshot(header, arrays, source)
        check_snapshot(snap, source)
        return snap


# -- consistency ------------------------------------------------------------------------


def snapshot_error(where: str, problem: str) -> CheckpointError:
    """The error of a snapshot that fails a check: ``where``, then the problem."""
    return CheckpointError(f"{where}: {problem}")


def checked_array(value: Any, dtype: Any, shape: tuple[int, ...], what: str, where: str) -> Array:
    """``value``, refused unless an array of ``dtype`` and ``shape``."""
    if not isinstance(value, np.ndarray) or value.dtype != np.dtype(dtype) or value.shape != shape:
        got = (
            f"{value.dtype} of shape {value.shape}"
            if isinstance(value, np.ndarray)
            else type(value).__name__
        )
        raise snapshot_error(where, f"{what} must be {np.dtype(dtype)} of shape {shape}, got {got}")
    return value


def _selector_entries(selector: Selector) -> dict[str, str]:
    if isinstance(selector, Uniform):
        return {"order": "array"}
    if isinstance(selector, (MinHeap, MaxHeap)):
        return {"seq": "array", "next_seq": "int"}
    return {}


def _is_permutation(values: Array, count: int) -> bool:
    seen = np.zeros(count, dtype=bool)
    if len(values) != count or (count and (values.min() < 0 or values.max() >= count)):
        return False
    seen[values] = True
    return bool(seen.all())


def check_snapshot(snap: ReplaySnapshot[Any], where: str) -> None:
    """Check that ``snap`` describes a table that could exist (see the module docstring).

    Raises:
        CheckpointError: It does not; the message starts with ``where``.
    """
    count = len(snap.keys) if isinstance(snap.keys, np.ndarray) else -1
    for what, value, low in (
        ("max_size", snap.max_size, 1),
        ("next_key", snap.next_key, 0),
        ("max_times_sampled", snap.max_times_sampled, 0),
        ("seed", 0 if snap.seed is None else snap.seed, 0),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise snapshot_error(where, f"{what} must be an int >= {low}, got {value!r}")
    if not 0 <= count <= snap.max_size:
        raise snapshot_error(
            where, f"it holds {count} items, outside 0..max_size ({snap.max_size})"
        )
    keys = checked_array(snap.keys, np.int64, (count,), "keys", where)
    if count and (keys[0] < 0 or bool((np.diff(keys) <= 0).any()) or keys[-1] >= snap.next_key):
        raise snapshot_error(
            where, f"keys must increase, from >= 0 to below next_key ({snap.next_key})"
        )
    prios = checked_array(snap.priorities, np.float64, (count,), "priorities", where)
    if count and not bool((np.isfinite(prios) & (prios >= 0)).all()):
        raise snapshot_error(where, "priorities must be finite and >= 0")
    times = checked_array(snap.times_sampled, np.int64, (count,), "times_sampled", where)
    mts = snap.max_times_sampled
    if count and (times.min() < 0 or (mts and times.max() >= mts)):
        limit = f" and below max_times_sampled ({mts})" if mts else ""
        raise snapshot_error(where, f"times_sampled must be >= 0{limit}")
    if len(snap.items) != len(snap.dtypes) or len(snap.shapes) != len(snap.dtypes):
        raise snapshot_error(where, f"items must hold {len(snap.dtypes)} components")
    for i, (dt, shape) in enumerate(zip(snap.dtypes, snap.shapes)):
        checked_array(snap.items[i], dt, (count, *shape), f"items[{i}]", where)
    st = snap.statistics
    counters = (st.inserts, st.samples, st.deletes, st.evictions)
    if not all(isinstance(c, int) and c >= 0 for c in counters):
        raise snapshot_error(where, "the statistics' counters must be ints >= 0")
    if st.inserts - st.deletes != count or st.inserts != snap.next_key or st.evictions > st.deletes:
        raise snapshot_error(
            where,
            f"the counters do not add up: inserts {st.inserts} - deletes {st.deletes} must "
            f"equal the {count} items held, inserts must equal next_key ({snap.next_key}), "
            f"evictions ({st.evictions}) must not exceed deletes",
        )
    if count and int(times.sum()) > st.samples:
        raise snapshot_error(
            where, f"the items' times_sampled add up to more than samples ({st.samples})"
        )
    try:
        np.random.default_rng().bit_generator.state = snap.rng_state
    except (TypeError, ValueError, KeyError) as exc:
        raise snapshot_error(
            where, f"rng_state is not a generator state numpy accepts: {exc}"
        ) from exc
    _check_layout(snap, count, where)


def _check_layout(snap: ReplaySnapshot[Any], count: int, where: str) -> None:
    layout = snap.layout
    expected = {"slots": "array", "free": "array"}
    for role, selector in (("sampler", snap.sampler), ("remover", snap.remover)):
        expected.update({f"{role}.{k}": v for k, v in _selector_entries(selector).items()})
    if set(layout) != set(expected):
        raise snapshot_error(
            where, f"layout must hold exactly {sorted(expected)}, got {sorted(layout)}"
        )
    size = snap.max_size
    slots = checked_array(layout["slots"], np.int64, (count,), "layout slots", where)
    free = checked_array(layout["free"], np.int64, (size - count,), "layout free", where)
    if not _is_permutation(np.concatenate([slots, free]), size):
        raise snapshot_error(
            where, "layout slots and free slots must cover 0..max_size-1 once each"
        )
    for role in ("sampler", "remover"):
        if f"{role}.order" in layout:
            order = checked_array(
                layout[f"{role}.order"], np.int64, (count,), f"{role} order", where
            )
            if not _is_permutation(order, count):
                raise snapshot_error(where, f"the {role}'s order must list each item once")
        if f"{role}.seq" in layout:
            seq = checked_array(layout[f"{role}.seq"], np.int64, (count,), f"{role} seq", where)
            top = layout[f"{role}.next_seq"]
            if not isinstance(top, int) or isinstance(top, bool):
                raise snapshot_error(where, f"the {role}'s next_seq must be an int")
            if count and (seq.min() < 0 or seq.max() >= top or len(np.unique(seq)) != count):
                raise snapshot_error(
                    where, f"the {role}'s seq must be distinct, >= 0, below next_seq"
                )


def snapshot_state(snap: ReplaySnapshot[Any]) -> dict[str, Any]:
    """What ``TableCore.load`` takes, from a checked snapshot."""
    st = snap.statistics
    return {
        "keys": snap.keys,
        "priorities": snap.priorities,
        "times_sampled": snap.times_sampled,
        "items": snap.items,
        "next_key": snap.next_key,
        "counters": (st.inserts, st.samples, st.deletes, st.evictions),
        "rng_state": snap.rng_state,
        "layout": snap.layout,
    }


# -- the file form ------------------------------------------------------------------------


def encode_snapshot(snap: ReplaySnapshot[Any]) -> tuple[dict[str, Any], dict[str, Array]]:
    """The file form of ``snap``: its header and its arrays."""
    arrays: dict[str, Array] = {
        "keys": snap.keys,
        "priorities": snap.priorities,
        "times_sampled": snap.times_sampled,
    }
    for i, comp in enumerate(snap.items):
        arrays[f"c{i}"] = comp
    ints: dict[str, int] = {}
    for k, v in snap.layout.items():
        if isinstance(v, np.ndarray):
            arrays[f"layout.{k}"] = v
        else:
            ints[k] = int(v)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "name": snap.name,
        "max_size": snap.max_size,
        "dtypes": [dt.str for dt in snap.dtypes],
        "shapes": [list(s) for s in snap.shapes],
        "names": None if snap.names is None else list(snap.names),
        "sampler": selector_config(snap.sampler),
        "remover": selector_config(snap.remover),
        "max_times_sampled": snap.max_times_sampled,
        "rate_limiter": limiter_config(snap.rate_limiter),
        "seed": snap.seed,
        "closed": snap.closed,
        "next_key": snap.next_key,
        "statistics": dataclasses.asdict(snap.statistics),
        "rng_state": snap.rng_state,
        "layout_ints": ints,
    }
    return header, arrays


def header_field(header: dict[str, Any], key: str, types: tuple[type, ...], source: str) -> Any:
    """Header field ``key``, refused unless of one of ``types`` (a bool is no int)."""
    value = header.get(key)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise snapshot_error(
            source,
            f"header field {key!r} must be {' or '.join(t.__name__ for t in types)}, "
            f"got {value!r:.80}",
        )
    return value


def decode_snapshot(
    header: dict[str, Any], arrays: dict[str, Array], source: str
) -> ReplaySnapshot[Any]:
    """A snapshot from its file form (its header checked; ``check_snapshot`` next)."""
    name = header_field(header, "name", (str,), source)
    try:
        dtype_strs = header_field(header, "dtypes", (list,), source)
        if not dtype_strs or not all(isinstance(d, str) for d in dtype_strs):
            raise ElementSpecError("dtypes must be a non-empty list of str")
        owner = f"replay table '{name}'"
        dtypes = normalize_dtypes(dtype_strs, owner=owner)
        raw_shapes = header_field(header, "shapes", (list,), source)
        shapes = normalize_shapes(
            [tuple(s) if isinstance(s, list) else s for s in raw_shapes],
            len(dtypes),
            owner=owner,
            allow_unknown_dims=False,
        )
        assert shapes is not None
        names = normalize_names(
            header_field(header, "names", (list, type(None)), source), len(dtypes), owner
        )
        sampler = selector_from_config(header.get("sampler"))
        remover = selector_from_config(header.get("remover"))
        limiter = limiter_from_config(header.get("rate_limiter"))
    except ElementSpecError as exc:
        raise snapshot_error(source, f"bad settings in the header: {exc}") from exc
    stats_raw = header_field(header, "statistics", (dict,), source)
    fields = {f.name for f in dataclasses.fields(ReplayStatistics)}
    if set(stats_raw) != fields:
        raise snapshot_error(
            source, f"header field 'statistics' must hold exactly {sorted(fields)}"
        )
    for key, value in stats_raw.items():
        kind = (bool,) if key == "closed" else (int, float) if key.endswith("_s") else (int,)
        if not isinstance(value, kind) or (isinstance(value, bool) and key != "closed"):
            raise snapshot_error(source, f"statistics field {key!r} must be {kind[0].__name__}")
    statistics = ReplayStatistics(**stats_raw)
    ints = header_field(header, "layout_ints", (dict,), source)
    layout: dict[str, Any] = {
        k[len("layout.") :]: v for k, v in arrays.items() if k.startswith("layout.")
    }
    layout.update(ints)
    width = len(dtypes)
    expected = {"keys", "priorities", "times_sampled", *(f"c{i}" for i in range(width))}
    missing = sorted(expected - set(arrays))
    if missing:
        raise snapshot_error(source, f"array {missing[0]!r} is missing")
    extra = sorted(k for k in set(arrays) - expected if not k.startswith("layout."))
    if extra:
        raise snapshot_error(source, f"unexpected arrays {extra[:5]}")
    seed = header_field(header, "seed", (int, type(None)), source)
    return ReplaySnapshot(
        name=name,
        max_size=header_field(header, "max_size", (int,), source),
        dtypes=dtypes,
        shapes=tuple(tuple(int(d) for d in s if d is not None) for s in shapes),  # (all known)
        names=names,
        sampler=sampler,
        remover=remover,
        max_times_sampled=header_field(header, "max_times_sampled", (int,), source),
        rate_limiter=limiter,
        seed=seed,
        closed=header_field(header, "closed", (bool,), source),
        keys=arrays["keys"],
        priorities=arrays["priorities"],
        times_sampled=arrays["times_sampled"],
        items=tuple(arrays[f"c{i}"] for i in range(width)),
        next_key=header_field(header, "next_key", (int,), source),
        statistics=statistics,
        rng_state=header_field(header, "rng_state", (dict,), source),
        layout=layout,
    )
