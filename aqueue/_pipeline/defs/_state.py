"""PipelineState: a checkpoint of a running pipeline, and its file.

A state holds what a pipeline needs to go on exactly where it was cut (see
``run/_checkpoint.py``):

- ``stages``: what each stage is (kind, label, sizes, seeds; not concurrency), checked
  against the pipeline it is restored into;
- ``source``: where the source is (epoch, index; a user source's own ``state()``);
- ``queues``: the items held by each stage's output queue, in order;
- ``shuffles``: each shuffle stage's buffer and random state;
- ``inexact``: the stages whose order depends on timing (an unordered map with several
  workers, an unseeded shuffle), for which a resume delivers every item once but not
  the same batches; empty when the resume is exact.
- ``settings``: the settings in force of the stages the tuner held
  (``concurrency="auto"``), by stage number, e.g. ``{1: {"concurrency": 32}}``; a
  resume starts those stages there instead of at their start value.

Items are whatever the stages produce. ``save`` writes them without pickle, in the
state-file container (``aqueue/_queues/_files.py``): the JSON header holds the
structure, each item encoded as JSON — None, bool, int, float, str; bytes
(``{"b": base64}``); a numpy scalar (``{"s": [dtype, value]}``); a tuple
(``{"t": [...]}``), a list, a dict with str keys (``{"d": {...}}``); a numpy array
(``{"a": [group, row]}``). Arrays are grouped by dtype and shape and each group is
stored as one stacked array, so a buffer of 10,000 ``float32[32, 32]`` items is one
40 MB array in the file, and the file is about the size of the raw bytes. Any other
item type (and object arrays) makes ``save`` raise CheckpointError naming the stage
and the type. ``load`` checks the container, the format, the version and every
reference into the arrays.

Versions: 2 adds ``settings``; a version 1 file (written before it) loads with none,
and its resume starts the tuned stages at their start value as before.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..._errors import CheckpointError
from ..._queues._files import read_state_file, write_state_file

__all__ = ["PipelineState"]

_FORMAT = "aqueue.PipelineState"
_VERSION = 2  # 2: "settings" (the tuned stages' settings in force)


@dataclass(frozen=True, repr=False)
class PipelineState:
    """A checkpoint of a running pipeline (``await items.checkpoint()``).

    Open the same pipeline with it (``pipe.open(state=state)``) to go on after the cut;
    ``save``/``load`` keep it in a file (no pickle). Its fields are documented for
    inspection; build states only through ``checkpoint()`` and ``load()``.
    """

    stages: list[dict[str, Any]]
    """What each stage is (kind, label, epochs, sizes, seeds), source first."""
    source: dict[str, Any]
    """Where the source is: epoch, index in it, whether it ended, and a user source's
    own ``state()`` under ``"user"``."""
    queues: list[list[Any]]
    """The items each stage's output queue held, in the order they would be taken."""
    shuffles: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Each shuffle stage's buffer, random state and whether its input had ended, by
    stage number."""
    inexact: tuple[str, ...] = ()
    """The stages whose order depends on timing, each with what would fix it
    (``"map(load): 4 workers, ordered=False"``): with any, a resume delivers every item
    once, before or after the cut, but not the same batches. Empty: the resume is
    exact."""
    settings: dict[int, dict[str, int]] = field(default_factory=dict)
    """The settings in force of each stage the tuner held (``concurrency="auto"``),
    by stage number: ``{1: {"concurrency": 32}}``. A resume starts those stages there
    (within their ``Auto`` range) instead of at the start value; a stage the resumed
    pipeline gives a number keeps its number. Empty for a pipeline with no tuned stage,
    and for a state saved before aqueue recorded them."""

    @property
    def exact(self) -> bool:
        """Whether a resume delivers exactly the items, in the same order (so the same
        batches), that the checkpointed run would have delivered next."""
        return not self.inexact

    def __repr__(self) -> str:
        src = self.source
        where = (
            "ended" if src.get("ended") else f"at epoch {src.get('epoch')} item {src.get('index')}"
        )
        return (
            f"PipelineState({len(self.stages)} stages, source {where}, "
            f"{self.items_held} items held)"
        )

    @property
    def items_held(self) -> int:
        """Items held in queues and shuffle buffers (not yet delivered)."""
        return sum(len(q) for q in self.queues) + sum(
            len(s["buffer"]) for s in self.shuffles.values()
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the state to ``path`` (atomically: a crash never leaves half a file).

        Raises:
            CheckpointError: An item cannot be saved without pickle; the message names
                the stage and the item's type.
        """
        codec = _Encoder()
        queues = [
            [codec.encode(item, f"stage {i}'s queue") for item in items]
            for i, items in enumerate(self.queues)
        ]
        shuffles = {}
        for i, s in self.shuffles.items():
            buffer = [codec.encode(item, f"stage {i}'s shuffle buffer") for item in s["buffer"]]
            shuffles[str(i)] = {"buffer": buffer, "rng": s["rng"], "ended": s["ended"]}
        header = {
            "format": _FORMAT,
            "version": _VERSION,
            "stages": self.stages,
            "source": _jsonable(self.source, "the source's state"),
            "queues": queues,
            "shuffles": shuffles,
            "inexact": list(self.inexact),
            "settings": {str(i): dict(v) for i, v in self.settings.items()},
            "groups": codec.group_specs(),
        }
        write_state_file(path, header, codec.arrays())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PipelineState:
        """Read a state that ``save`` wrote.

        Raises:
            CheckpointError: The file is missing, truncated, corrupt, not a pipeline
                state, of a newer version, or its contents are inconsistent.
        """
        header, arrays = read_state_file(path, _FORMAT, _VERSION)
        try:
            decoder = _Decoder(header["groups"], arrays, str(path))
            queues = [[decoder.decode(x) for x in items] for items in header["queues"]]
            shuffles = {
                int(i): {
                    "buffer": [decoder.decode(x) for x in s["buffer"]],
                    "rng": s["rng"],
                    "ended": bool(s["ended"]),
                }
                for i, s in header["shuffles"].items()
            }
            return cls(
                stages=list(header["stages"]),
                source=dict(header["source"]),
                queues=queues,
                shuffles=shuffles,
                inexact=tuple(str(x) for x in header.get("inexact", ())),
                settings=_settings(header.get("settings", {})),  # (none before version 2)
            )
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise CheckpointError(
                f"{path}: an inconsistent pipeline state ({type(exc).__name__}: {exc})"
            ) from exc


def _settings(raw: Any) -> dict[int, dict[str, int]]:
    """A saved ``settings`` mapping, checked: stage numbers to settings of at least 1."""
    out: dict[int, dict[str, int]] = {}
    for i, values in dict(raw).items():
        if not (isinstance(values, dict) and values):
            raise ValueError(f"the settings of stage {i} are not a mapping: {values!r}")
        for name, n in values.items():
            if not isinstance(name, str) or type(n) is not int or n < 1:
                raise ValueError(f"stage {i}'s setting {name!r} is not an int >= 1: {n!r}")
        out[int(i)] = dict(values)
    return out


def _jsonable(value: Any, what: str) -> Any:
    """``value`` if it is plain JSON (dicts with str keys, lists, scalars), else raise."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, what) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _jsonable(v, what) for k, v in value.items()}
    raise CheckpointError(
        f"cannot save {what}: it holds a {type(value).__name__}; a source's state() must "
        "return JSON data (dicts, lists, str, int, float, bool, None)"
    )


class _Encoder:
    """Items as JSON, their arrays grouped by (dtype, shape) into stacked arrays."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, tuple[int, ...]], list[npt.NDArray[Any]]] = {}
        self._index: dict[tuple[str, tuple[int, ...]], int] = {}

    def encode(self, item: Any, where: str) -> Any:
        if item is None or isinstance(item, (str, bool, int, float)):
            return item
        if isinstance(item, bytes):
            return {"b": base64.b64encode(item).decode("ascii")}
        if isinstance(item, np.ndarray):
            if item.dtype.kind in "OV":
                raise CheckpointError(
                    f"cannot save {where}: an item is an array of dtype {item.dtype}, "
                    "which needs pickle"
                )
            key = (item.dtype.str, tuple(item.shape))
            rows = self._groups.get(key)
            if rows is None:
                rows = self._groups[key] = []
                self._index[key] = len(self._index)
            rows.append(item)
            return {"a": [self._index[key], len(rows) - 1]}
        if isinstance(item, np.generic) and item.dtype.kind not in "OV":
            return {"s": [item.dtype.str, item.item()]}
        if isinstance(item, tuple):
            return {"t": [self.encode(x, where) for x in item]}
        if isinstance(item, list):
            return [self.encode(x, where) for x in item]
        if isinstance(item, dict) and all(isinstance(k, str) for k in item):
            return {"d": {k: self.encode(v, where) for k, v in item.items()}}
        raise CheckpointError(
            f"cannot save {where}: an item is a {type(item).__name__}; items are saved "
            "when they are None, bool, int, float, str, bytes, numpy arrays and scalars, "
            "or tuples, lists and str-keyed dicts of those"
        )

    def group_specs(self) -> list[list[Any]]:
        return [[dtype, list(shape)] for dtype, shape in self._groups]

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        return {f"g{i}": np.stack(rows) for i, rows in enumerate(self._groups.values())}


class _Decoder:
    """The inverse of ``_Encoder``, checking every reference."""

    def __init__(
        self, groups: Sequence[Any], arrays: Mapping[str, npt.NDArray[Any]], where: str
    ) -> None:
        self._where = where
        self._groups: list[npt.NDArray[Any]] = []
        for i, (dtype, shape) in enumerate(groups):
            arr = arrays.get(f"g{i}")
            if arr is None or arr.dtype.str != dtype or list(arr.shape[1:]) != list(shape):
                raise CheckpointError(f"{where}: array group {i} is missing or does not match")
            self._groups.append(arr)

    def decode(self, value: Any) -> Any:
        if value is None or isinstance(value, (str, bool, int, float)):
            return value
        if isinstance(value, list):
            return [self.decode(x) for x in value]
        if isinstance(value, dict) and len(value) == 1:
            ((tag, body),) = value.items()
            if tag == "a":
                group, row = body
                return self._groups[group][row]  # (a view of the loaded group)
            if tag == "s":
                dtype, scalar = body
                return np.dtype(dtype).type(scalar)
            if tag == "b":
                return base64.b64decode(body, validate=True)
            if tag == "t":
                return tuple(self.decode(x) for x in body)
            if tag == "d":
                return {k: self.decode(v) for k, v in body.items()}
        raise CheckpointError(f"{self._where}: an item of unknown form {str(value)[:80]!r}")
