"""State files: one file holding a small versioned JSON header and raw numpy arrays.

Queue snapshots and pipeline states are saved in this container (no pickle anywhere):

- the file is an ``.npz`` archive written with ``allow_pickle=False``: one entry per
  array, plus the entry ``__aqueue__`` holding the UTF-8 JSON header as a uint8 array;
- the header is a JSON object with ``"format"`` (what the file holds, e.g.
  ``"aqueue.QueueSnapshot"``), ``"version"`` (an int) and whatever the writer adds;
- arrays are numeric, bool or fixed-size byte/str arrays (numpy's own format);
  anything else (Python objects) must be expressed in the header as JSON.

``write_state_file`` is atomic: it writes a temporary file in the target's folder,
flushes and syncs it, then renames it over the target, so a crash during a save never
leaves a half-written file under ``path``. ``read_state_file`` checks the container,
the format and the version before returning anything, and raises CheckpointError
naming the file and what is wrong (truncated, not an aqueue file, another format, a
newer version, an unreadable array).

``encode_objects``/``decode_objects`` turn object components (str, bytes, int, float,
bool, None) into JSON and back; any other object type is refused with a message naming
the component and the type.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import CheckpointError

__all__ = ["decode_objects", "encode_objects", "read_state_file", "write_state_file"]

_HEADER = "__aqueue__"


def write_state_file(
    path: str | os.PathLike[str], header: Mapping[str, Any], arrays: Mapping[str, Any]
) -> None:
    """Write ``header`` (JSON-able, with "format" and "version") and ``arrays`` to
    ``path`` atomically.

    Raises:
        CheckpointError: The header is not JSON-able or an array holds Python objects.
    """
    target = Path(path)
    try:
        text = json.dumps(header, allow_nan=True, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"cannot save {target}: the header is not JSON: {exc}") from exc
    entries: dict[str, npt.NDArray[Any]] = {}
    for key, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype.kind in "OV":
            raise CheckpointError(
                f"cannot save {target}: array {key!r} has dtype {arr.dtype}, which needs "
                "pickle; only numeric, bool and fixed-size string arrays are saved"
            )
        entries[key] = arr
    entries[_HEADER] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, allow_pickle=False, **entries)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_state_file(
    path: str | os.PathLike[str], fmt: str, version: int
) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """The header and arrays of a state file of format ``fmt``, version <= ``version``.

    Raises:
        CheckpointError: The file is missing, truncated or corrupt, not an aqueue state
            file, of another format, or of a newer version than this aqueue reads.
    """
    source = Path(path)
    try:
        with open(source, "rb") as f, np.load(f, allow_pickle=False) as data:
            if _HEADER not in data.files:
                raise CheckpointError(
                    f"{source} is not an aqueue state file (no {_HEADER} entry; entries: "
                    f"{sorted(data.files)[:5]})"
                )
            raw = data[_HEADER]
            arrays = {k: data[k] for k in data.files if k != _HEADER}
    except CheckpointError:
        raise
    except FileNotFoundError as exc:
        raise CheckpointError(f"{source}: no such file") from exc
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise CheckpointError(
            f"{source} is not a readable aqueue state file (truncated or corrupt: "
            f"{type(exc).__name__}: {exc})"
        ) from exc
    try:
        header = json.loads(bytes(raw.astype(np.uint8)).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{source}: its header is not valid JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise CheckpointError(f"{source}: its header is not a JSON object")
    got_fmt, got_version = header.get("format"), header.get("version")
    if got_fmt != fmt:
        raise CheckpointError(f"{source} holds {got_fmt!r}, expected {fmt!r}")
    if not isinstance(got_version, int) or got_version < 1:
        raise CheckpointError(f"{source}: bad format version {got_version!r}")
    if got_version > version:
        raise CheckpointError(
            f"{source} was written by a newer aqueue (format version {got_version}; this "
            f"aqueue reads up to {version}): upgrade aqueue to load it"
        )
    return header, arrays


def encode_objects(values: Sequence[Any], what: str) -> list[Any]:
    """JSON for the Python objects of an object component.

    Raises:
        CheckpointError: A value is not str, bytes, int, float, bool or None; the
            message names ``what`` (the component) and the type.
    """
    out: list[Any] = []
    for i, v in enumerate(values):
        if isinstance(v, np.generic):
            v = v.item()
        if v is None or isinstance(v, (str, bool, int, float)):
            out.append(v)
        elif isinstance(v, bytes):
            out.append({"b64": base64.b64encode(v).decode("ascii")})
        else:
            raise CheckpointError(
                f"cannot save {what}: element {i} is a {type(v).__name__}; object "
                "components are saved when they hold str, bytes, int, float, bool or None"
            )
    return out


def decode_objects(values: Sequence[Any], what: str) -> list[Any]:
    """The Python objects that ``encode_objects`` turned into JSON.

    Raises:
        CheckpointError: A value is not one ``encode_objects`` writes.
    """
    out: list[Any] = []
    for v in values:
        if isinstance(v, dict) and set(v) == {"b64"} and isinstance(v["b64"], str):
            try:
                out.append(base64.b64decode(v["b64"], validate=True))
            except ValueError as exc:
                raise CheckpointError(f"{what}: a bytes value is not valid base64") from exc
        elif v is None or isinstance(v, (str, bool, int, float)):
            out.append(v)
        else:
            raise CheckpointError(f"{what}: unexpected value of type {type(v).__name__}")
    return out
