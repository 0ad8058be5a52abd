"""Functions the process-map tests run in worker processes.

They live in a module of their own, importable by name and light to import (the
standard library and numpy only), so that a spawned worker starts quickly.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import time
from typing import Any

import numpy as np

FRAME = (6, 5)  # the shape of ``frame``'s arrays


def frame(i: int) -> tuple[np.ndarray, int]:
    """An array that depends on ``i`` only, and ``i``."""
    return np.full(FRAME, i, dtype=np.float32) + np.arange(5, dtype=np.float32), i


def shapes(i: int) -> Any:
    """Results of many kinds: arrays of several dtypes, layouts and shapes, nested in
    tuples, dicts and lists, beside plain values."""
    base = np.arange(12, dtype=np.int64).reshape(3, 4) * i
    return {
        "i": i,
        "name": f"item-{i}",
        "f64": base.astype(np.float64),
        "fortran": np.asfortranarray(base),
        "strided": base[:, ::2],
        "scalar0d": np.array(i, dtype=np.int16),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "bools": base % 2 == 0,
        "text": np.array([f"t{i}", "u"]),
        "objects": np.array([i, "x", None], dtype=object),
        "record": np.array([(i, 1.5)], dtype=[("a", "i4"), ("b", "f8")]),
        "nested": [base[0], (base[1], {"deep": base[2].astype(np.uint8)})],
        "none": None,
    }


def jitter(i: int) -> int:
    """``i``, after a random pause of up to 2 ms (so workers finish out of order)."""
    time.sleep(random.random() * 0.002)
    return i


def pid(_: Any) -> int:
    """The worker's pid."""
    return os.getpid()


def pid_once(i: int) -> int:
    """``i``, printing the worker's pid once (for tests that watch the processes)."""
    if not getattr(pid_once, "said", False):
        pid_once.said = True  # type: ignore[attr-defined]
        # one write(2) for the whole line: two workers share the stdout descriptor, and
        # print() may write the text and its newline apart (lines then interleave)
        os.write(1, f"WORKER {os.getpid()}\n".encode())
    return i


def slow(i: int) -> int:
    """``i``, after 30 s (a worker busy when the pipeline is told to stop)."""
    pid_once(i)
    time.sleep(30)
    return i


def fail_at_7(i: int) -> int:
    """Raise ValueError on item 7."""
    if i == 7:
        raise ValueError(f"bad item {i}")
    return i


def die_at_7(i: int) -> int:
    """Kill the worker with SIGKILL on item 7."""
    if i == 7:
        os.kill(os.getpid(), signal.SIGKILL)
    return i


def exit_at_7(i: int) -> int:
    """End the worker with os._exit(3) on item 7."""
    if i == 7:
        os._exit(3)
    return i


def unpicklable_result(i: int) -> Any:
    """A result that does not pickle (a lock) on item 3."""
    import threading

    return threading.Lock() if i == 3 else i


def image(i: int) -> tuple[np.ndarray, int]:
    """A 150 KB uint8 image (224 x 224 x 3) that depends on ``i``, and ``i``."""
    return np.full((224, 224, 3), i % 251, dtype=np.uint8), i


def odd_dtype(i: int) -> np.ndarray:
    """float32 rows, except item 10, which is float64 (it cannot go in place)."""
    return np.full(4, i, dtype=np.float64 if i == 10 else np.float32)


def sized(i: int) -> np.ndarray:
    """Rows of different lengths (batches need dynamic_pad)."""
    return np.arange(1 + i % 3, dtype=np.int32)


def gil_bound(i: int) -> int:
    """Pure Python work that holds the GIL (about 0.2 ms here)."""
    total = 0
    for k in range(2_000):
        total += (k * i) % 7
    return total


def lagging(i: int) -> tuple[np.ndarray, int]:
    """``frame(i)``, item 280 after 0.3 s: its worker holds the next burst too, and the
    batches after those complete first (with 301 items in batches of 8, the last, short
    one among them)."""
    if i == 280:
        time.sleep(0.3)
    return frame(i)


def paced(i: int) -> tuple[int, int]:
    """``i`` and the worker's pid, after 4 ms of waiting (one worker keeps 250 items/s)."""
    time.sleep(0.004)
    return i, os.getpid()


def sleepy(x: tuple[int, float]) -> tuple[int, int]:
    """``x = (i, seconds)``: ``i`` and the worker's pid, after ``seconds`` of waiting
    (the source decides how slow each item is)."""
    i, seconds = x
    if seconds:
        time.sleep(seconds)
    return i, os.getpid()


_BLOB = bytes(4 << 20)  # what ``crunch`` hashes


def crunch(i: int) -> int:
    """CPU-bound work that releases the GIL, as decoding an image does: a few ms of
    hashing on whichever core is free."""
    hashlib.sha256(_BLOB).digest()
    return i


def nap(i: int) -> int:
    """A call that waits 4 ms and computes nothing."""
    time.sleep(0.004)
    return i
