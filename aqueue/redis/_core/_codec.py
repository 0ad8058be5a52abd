"""AQ1: the wire format of one queue element (a tuple of numpy arrays), never pickle.

Layout of one payload (all integers little-endian)::

    offset 0   b"AQ"                      magic
    offset 2   0x01                       format version
    offset 3   u32 H                      length of the msgpack header
    offset 7   H bytes of msgpack         [[dtype.str, [dim, ...]], ...] one per component
    then       zero padding to a multiple of 8
    then       per component: its C-order little-endian bytes, zero-padded to a multiple
               of 8 (so every component starts 8-aligned)

Invariants:
- the header describes exactly the bytes that follow: the payload length is the
  aligned header end plus the aligned sizes of all components, nothing more;
- only allow-listed dtypes appear (``b1``, ``i1..i8``, ``u1..u8``, ``f2/f4/f8``,
  ``c8/c16``, ``S<n>``, ``U<n>``), always little-endian or byte-order-free;
- decoding never executes anything: msgpack yields plain lists, strings and ints, the
  arrays come from ``np.frombuffer`` over checked slices. Anything else raises
  PayloadError naming the queue, the element's index and what was wrong, before any
  element of the call is returned.

For a queue with declared shapes the header bytes of every element are the same, so
they are computed once (``Codec.prefix``) and a batch decodes with one bytes comparison
per element and one copy per component.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from typing import Any

import msgpack
import numpy as np

from ._errors import PayloadError
from ._spec import ElementSpec, wire_kind_ok

__all__ = ["Codec"]

MAGIC = b"AQ\x01"
_U32 = struct.Struct("<I")
_MAX_HEADER = 1 << 16
_MAX_COMPONENTS = 64
_MAX_NDIM = 32
_DTYPE_RE = re.compile(r"^[<|](b1|[iu][1248]|f[248]|c(8|16)|[SU][1-9][0-9]{0,8})$")
_PADS = [b"\0" * i for i in range(8)]


def _align(n: int) -> int:
    return (n + 7) & ~7


def _wire_dtype(dt: np.dtype[Any]) -> np.dtype[Any]:
    """``dt`` in little-endian byte order (the only order on the wire)."""
    return dt.newbyteorder("<") if dt.byteorder == ">" or dt.byteorder == "=" else dt


def _header(dtypes: Sequence[np.dtype[Any]], shapes: Sequence[tuple[int, ...]]) -> bytes:
    body: bytes = msgpack.packb([[dt.str, list(s)] for dt, s in zip(dtypes, shapes)])
    start = len(MAGIC) + 4 + len(body)
    return MAGIC + _U32.pack(len(body)) + body + _PADS[_align(start) - start]


class Codec:
    """Encodes and decodes the elements of one queue (its ElementSpec)."""

    def __init__(self, spec: ElementSpec, queue: str) -> None:
        self._spec = spec
        self._queue = queue
        self._wire = tuple(_wire_dtype(dt) for dt in spec.dtypes)
        self._swap = any(w != dt for w, dt in zip(self._wire, spec.dtypes))
        self.prefix: bytes | None = None
        self._sizes: tuple[int, ...] = ()
        self._length = 0
        if spec.shapes is not None:
            shapes = [tuple(int(d) for d in s if d is not None) for s in spec.shapes]
            self.prefix = _header(self._wire, shapes)
            self._sizes = tuple(
                int(np.prod(s, dtype=np.int64)) * dt.itemsize for s, dt in zip(shapes, self._wire)
            )
            self._length = len(self.prefix) + sum(_align(n) for n in self._sizes)

    # -- encode --------------------------------------------------------------------------

    def encode_batch(self, comps: Sequence[Any], count: int) -> list[bytes]:
        """Payloads of the ``count`` elements of a converted batch (component arrays)."""
        views = []
        for a, w in zip(comps, self._wire):
            arr = np.ascontiguousarray(np.asarray(a), dtype=w)
            views.append(arr.reshape(count, -1).view(np.uint8) if count else arr)
        if self.prefix is not None:
            parts: list[Any] = []
            pads = [_PADS[_align(n) - n] for n in self._sizes]
            out = []
            for i in range(count):
                parts = [self.prefix]
                for v, pad in zip(views, pads):
                    parts.append(v[i])
                    if pad:
                        parts.append(pad)
                out.append(b"".join(parts))
            return out
        return [self.encode_one([np.asarray(a)[i] for a in comps]) for i in range(count)]

    def encode_one(self, comps: Sequence[Any]) -> bytes:
        """The payload of one converted element (its component arrays)."""
        arrs = [np.ascontiguousarray(np.asarray(a), dtype=w) for a, w in zip(comps, self._wire)]
        if self.prefix is not None:
            parts = [self.prefix]
        else:
            parts = [_header(self._wire, [a.shape for a in arrs])]
        for a in arrs:
            parts.append(a.tobytes())
            parts.append(_PADS[_align(a.nbytes) - a.nbytes])
        return b"".join(parts)

    # -- decode --------------------------------------------------------------------------

    def decode_batch(self, payloads: Sequence[bytes]) -> tuple[np.ndarray[Any, Any], ...]:
        """The components (with a leading batch dimension) of a batch of payloads.

        Needs declared shapes. Raises PayloadError, naming the first bad element.
        """
        prefix, length = self.prefix, self._length
        shapes = self._spec.shapes
        assert prefix is not None
        assert shapes is not None
        p0 = len(prefix)
        n = len(payloads)
        for p in payloads:
            if len(p) != length or not p.startswith(prefix):
                # Another encoder (or a bad payload): parse each one fully.
                parsed = [self._parse(q, i) for i, q in enumerate(payloads)]
                return tuple(
                    self._finish(np.stack([e[c] for e in parsed]), dt, 0)
                    for c, dt in enumerate(self._spec.dtypes)
                )
        out = []
        off = p0
        for dt, w, size, shape in zip(self._spec.dtypes, self._wire, self._sizes, shapes):
            buf = bytearray().join([memoryview(p)[off : off + size] for p in payloads])
            arr = np.frombuffer(buf, dtype=w).reshape((n, *shape))
            out.append(self._finish(arr, dt, 0))
            off += _align(size)
        return tuple(out)

    def decode_one(self, payload: bytes) -> tuple[np.ndarray[Any, Any], ...]:
        """The components of one payload (any declared or per-element shape)."""
        parsed = self._parse(payload, 0)
        return tuple(self._finish(np.array(a), dt, 0) for a, dt in zip(parsed, self._spec.dtypes))

    def _finish(self, arr: np.ndarray[Any, Any], dt: np.dtype[Any], i: int) -> np.ndarray[Any, Any]:
        if dt.kind == "b" and arr.size and int(arr.view(np.uint8).max()) > 1:
            raise self._error(i, "a boolean component holds bytes other than 0 and 1")
        return arr.astype(dt) if self._swap and arr.dtype != dt else arr

    def _error(self, i: int, what: str) -> PayloadError:
        return PayloadError(
            f"queue '{self._queue}': element {i} read from the server is not a valid AQ1 "
            f"payload for this queue: {what}"
        )

    def _parse(self, p: bytes, i: int) -> list[np.ndarray[Any, Any]]:
        """Validate payload ``p`` fully and return read-only component views."""
        if not isinstance(p, (bytes, bytearray)):
            raise self._error(i, f"expected bytes, got {type(p).__name__}")
        if not p:
            raise self._error(i, "it is empty (the server had no payload under its key)")
        if len(p) < 7 or p[:2] != b"AQ":
            raise self._error(i, f"missing the b'AQ' magic (starts with {bytes(p[:8])!r})")
        if p[2] != 1:
            raise self._error(i, f"format version {p[2]} (this client reads version 1)")
        (hlen,) = _U32.unpack_from(p, 3)
        if hlen > _MAX_HEADER or 7 + hlen > len(p):
            raise self._error(i, f"header length {hlen} exceeds the payload ({len(p)} bytes)")
        try:
            header = msgpack.unpackb(bytes(p[7 : 7 + hlen]), raw=False, strict_map_key=True)
        except Exception as exc:  # msgpack raises several unrelated types
            raise self._error(i, f"its msgpack header does not decode ({exc})") from None
        comps = self._check_header(header, i)
        if len(comps) != len(self._wire):
            raise self._error(i, f"it has {len(comps)} components, the queue has {len(self._wire)}")
        off = _align(7 + hlen)
        out = []
        shapes = self._spec.shapes
        for c, ((dstr, shape), w) in enumerate(zip(comps, self._wire)):
            if dstr != w.str:
                raise self._error(i, f"component {c} has dtype {dstr}, the queue has {w.str}")
            if shapes is not None and tuple(shape) != shapes[c]:
                raise self._error(
                    i, f"component {c} has shape {tuple(shape)}, the queue has {shapes[c]}"
                )
            count = 1
            for d in shape:
                count *= d
            size = count * w.itemsize
            if off + size > len(p):
                raise self._error(i, f"component {c} needs {size} bytes, the payload is too short")
            out.append(np.frombuffer(p, dtype=w, count=count, offset=off).reshape(shape))
            off += _align(size)
        if off != len(p):
            raise self._error(i, f"length {len(p)} bytes, the header describes {off}")
        return out

    def _check_header(self, header: Any, i: int) -> list[tuple[str, list[int]]]:
        if not isinstance(header, list) or not 0 < len(header) <= _MAX_COMPONENTS:
            raise self._error(i, "its header is not a list of components")
        comps = []
        for c, item in enumerate(header):
            ok = (
                isinstance(item, list)
                and len(item) == 2
                and isinstance(item[0], str)
                and isinstance(item[1], list)
                and len(item[1]) <= _MAX_NDIM
                and all(type(d) is int and 0 <= d < 1 << 40 for d in item[1])
            )
            if not ok:
                raise self._error(i, f"header entry {c} is not [dtype, [dims]]: {item!r:.80}")
            if not _DTYPE_RE.match(item[0]) or not wire_kind_ok(np.dtype(item[0])):
                raise self._error(i, f"component {c} has dtype {item[0]!r:.40}, not allowed")
            comps.append((item[0], item[1]))
        return comps
