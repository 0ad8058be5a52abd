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
leaves a half-written file under ``path``; a save that fails (a missing or unwritable
folder, a full disk, a directory in the way) removes its temporary file and raises
CheckpointError naming ``path``, never the temporary name. ``read_state_file`` checks the container,
the format and the version before returning anything, and raises CheckpointError
naming the file and what is wrong (truncated, not an aqueue file, another format, a
newer version, an unreadable array); anything but a zip archive is refused before
numpy reads it (an ``.npy`` file, random bytes).

``encode_objects``/``decode_objects`` turn object components (str, bytes, int, float,
bool, None, and exact tuples and lists of these) into JSON and back; any other object
type is refused with a message naming the component and the type (a named tuple too:
it would come back as a plain tuple).
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
        CheckpointError: The header is not JSON-able, an array holds Python objects, or
            the file cannot be written (the message names ``path`` and the reason; no
            temporary file is left behind and ``path`` is as it was).
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
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _unwritable(target, exc) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, allow_pickle=False, **entries)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise _unwritable(target, exc) from exc
        raise


def _unwritable(target: Path, exc: OSError) -> CheckpointError:
    """The error of a save to ``target`` that the system refused (the temporary file's
    name, which ``exc`` may carry, is not the user's business)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if not target.parent.is_dir():
        reason = f"its folder {target.parent} does not exist"
    elif target.is_dir():
        reason = "it is a directory"
    return CheckpointError(f"cannot save {target}: {reason}")


def read_state_file(
    path: str | os.PathLike[str], fmt: str, version: int
) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    """The header and arrays of a state file of format ``fmt``, version <= ``version``.

    Raises:
        CheckpointError: The file is missing, truncated or corrupt, not an aqueue state
            file, of another format, or of a newer version than this aqueue reads.
    """
    _require_npz(path)
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


def _require_npz(path: str | os.PathLike[str]) -> None:
    """Refuse anything but a zip archive before numpy sees it: ``np.load`` would return
    a plain array for an ``.npy`` file and suggest unpickling for random bytes."""
    source = Path(path)
    try:
        with open(source, "rb") as f:
            magic = f.read(4)
    except FileNotFoundError as exc:
        raise CheckpointError(f"{source}: no such file") from exc
    except OSError as exc:
        raise CheckpointError(f"{source} cannot be read: {exc}") from exc
    if magic != b"PK\x03\x04":
        what = "it is empty" if not magic else f"it starts with {magic!r}"
        raise CheckpointError(f"{source} is not an aqueue state file (not an npz archive: {what})")


_SAVED_OBJECTS = (
    "object components are saved when they hold str, bytes, int, float, bool or None, "
    "or tuples and lists of these"
)


class _Unsavable(Exception):
    """An object ``_encode`` cannot express in JSON (``args[0]``: its type name)."""


def _encode(v: Any) -> Any:
    """JSON for one object (see encode_objects)."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, bytes):
        return {"b64": base64.b64encode(v).decode("ascii")}
    # Exact types only: a named tuple or a list subclass would come back as a plain one.
    if type(v) is tuple:
        return {"tuple": [_encode(x) for x in v]}
    if type(v) is list:
        return [_encode(x) for x in v]
    raise _Unsavable(type(v).__name__)


def encode_objects(values: Sequence[Any], what: str) -> list[Any]:
    """JSON for the Python objects of an object component: str, bytes, int, float,
    bool, None, and (exactly) tuples and lists of these, nested.

    Raises:
        CheckpointError: A value is (or holds) anything else; the message names
            ``what`` (the component), the element and the type.
    """
    out: list[Any] = []
    for i, v in enumerate(values):
        try:
            out.append(_encode(v))
        except _Unsavable as exc:
            outer = type(v).__name__
            inner = "" if type(v) not in (tuple, list) else f" holding a {exc.args[0]}"
            raise CheckpointError(
                f"cannot save {what}: element {i} is a {outer}{inner}; {_SAVED_OBJECTS}"
            ) from None
    return out


def _decode(v: Any, what: str) -> Any:
    if isinstance(v, dict):
        if set(v) == {"b64"} and isinstance(v["b64"], str):
            try:
                return base64.b64decode(v["b64"], validate=True)
            except ValueError as exc:
                raise CheckpointError(f"{what}: a bytes value is not valid base64") from exc
        if set(v) == {"tuple"} and isinstance(v["tuple"], list):
            return tuple(_decode(x, what) for x in v["tuple"])
        raise CheckpointError(f"{what}: unexpected object with keys {sorted(v)[:5]}")
    if isinstance(v, list):
        return [_decode(x, what) for x in v]
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    raise CheckpointError(f"{what}: unexpected value of type {type(v).__name__}")


def decode_objects(values: Sequence[Any], what: str) -> list[Any]:
    """The Python objects that ``encode_objects`` turned into JSON.

    Raises:
        CheckpointError: A value is not one ``encode_objects`` writes.
    """
    return [_decode(v, what) for v in values]
