"""The hand-off of one burst, seen from the main process: what was sent, reading what
came back (``_worker.py`` has the protocol), and the errors of what went wrong (a
function's exception, an item that does not pickle, a function a worker could not
load, a worker's end).

A worker answers a burst with a pickle stream whose numpy arrays are *persistent ids*:
``("r", k)``, row ``row0 + j`` of column ``k`` of the burst's batch buffer (a fused
stage), or ``("a", block, offset, dtype, shape)``, bytes the worker wrote into one of
the burst's scratch blocks. ``read_reply`` turns each into a numpy view: of the column,
or of the block's bytes, which the arena then *adopts* (frees once every view of it is
gone, ``_shm.Arena.adopt``). A block no item views is freed at once.

Invariants: every block listed in a ``Sent`` is the worker's to write until its answer
is read; after ``read_reply`` (returning or raising) each is adopted or freed and the
list is empty. A failure in an answer becomes the function's own exception, with the
worker's traceback in a note (``Reply.error``), beside the results before it.
"""

from __future__ import annotations

import io
import math
import pickle
import signal
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._errors import ElementSpecError, WorkerProcessError, add_note
from ._shm import Arena, Block

__all__ = [
    "Reply",
    "Sent",
    "describe_exit",
    "not_loaded",
    "read_reply",
    "remote_failure",
    "unpicklable",
]


class Sent:
    """A burst handed to a worker and not received yet."""

    __slots__ = ("blocks", "cols", "cpu", "error", "n", "row0")

    def __init__(self, n: int, row0: int, cols: list[np.ndarray[Any, Any] | None] | None) -> None:
        self.n = n  # items
        self.blocks: list[Block] = []  # scratch blocks (one sent with it, then one per M)
        self.row0 = row0  # (fused) its first row in its batch buffer
        self.cols = cols  # (fused) that buffer's columns
        self.cpu = 0.0  # seconds of the driver's CPU its sending took (measurements)
        # Why it could not be sent (an item that does not pickle): its answer is this
        # failure, in its place among the bursts sent before and after it.
        self.error: BaseException | None = None


@dataclass
class Reply:
    """What one burst returned."""

    results: list[Any]
    busy_s: float  # seconds the worker spent in fn
    cpu_s: float  # CPU seconds the worker process used while in fn
    write_s: float  # seconds the worker spent writing and pickling the results
    layout: list[tuple[np.dtype[Any], tuple[int, ...]]] | None  # arrays of the first item
    scratch_bytes: int  # bytes of scratch space the results took
    foreign: int  # items with an array that missed its batch column
    error: BaseException | None = None  # fn raised on the item after the results


class _Reader(pickle.Unpickler):
    """Unpickles a burst's results, turning persistent ids into shared-memory views."""

    def __init__(
        self,
        file: io.BytesIO,
        arena: Arena,
        blocks: list[Block],
        cols: list[np.ndarray[Any, Any] | None] | None,
    ) -> None:
        super().__init__(file)
        self.arena = arena
        self.blocks = blocks
        self.bases: list[np.ndarray[Any, Any] | None] = [None] * len(blocks)
        self.cols = cols
        self.row = 0
        self.hits = 0
        self.scratch = 0

    def persistent_load(self, pid: Any) -> Any:
        if pid[0] == "r":
            self.hits += 1
            assert self.cols is not None
            col = self.cols[pid[1]]
            assert col is not None
            return col[self.row]
        _, bi, off, dtype, shape = pid
        base = self.bases[bi]
        if base is None:
            base = self.bases[bi] = self.arena.adopt(self.blocks[bi])
        nbytes = math.prod(shape) * dtype.itemsize
        self.scratch += nbytes
        return base[off : off + nbytes].view(dtype).reshape(shape)


def read_reply(data: bytes, sent: Sent, arena: Arena, pid: int | None) -> Reply:
    """The results of a worker's (``pid``'s) ``R`` answer to ``sent``, each numpy array
    a view of the arena, and the failure that ended the burst early, if any; every
    block of ``sent`` is then adopted (an item views it) or freed, and ``sent.blocks``
    is empty, also if this raises."""
    f = io.BytesIO(data)
    f.seek(1)
    blocks, row0, cols = sent.blocks, sent.row0, sent.cols
    reader = _Reader(f, arena, blocks, cols)
    try:
        n, busy, cpu_s, write_s, layout, failure = pickle.load(f)
        wanted = 0 if cols is None else sum(c is not None for c in cols)
        results = []
        foreign = 0
        for j in range(n):
            reader.row = row0 + j
            reader.hits = 0
            results.append(reader.load())
            foreign += reader.hits != wanted
    finally:
        for block, base in zip(blocks, reader.bases):
            if base is None:  # nothing views it: reuse it now
                arena.free(block)
        blocks.clear()
    error = None if failure is None else remote_failure(failure, pid)
    return Reply(results, busy, cpu_s, write_s, layout, reader.scratch, foreign, error)


def remote_failure(failure: tuple[Any, ...], pid: int | None) -> BaseException:
    """The exception of a failure in a worker's answer (the function's own, unpickled,
    or a RuntimeError with its repr when it does not pickle), with the worker's
    traceback in a note."""
    index, raw, text, trace = failure
    item = f"item {index} of the burst"
    exc: BaseException | None = None
    if raw is not None:
        try:
            exc = pickle.loads(raw)
        except Exception:
            exc = None
    if not isinstance(exc, Exception):
        exc = RuntimeError(f"{text} (the exception could not be pickled back from the worker)")
    add_note(exc, f"traceback in worker process {pid} ({item}):\n{trace.rstrip()}")
    return exc


def describe_exit(code: int | None, answered: bool) -> str:
    """How a worker process ended, in words (``code`` as ``Process.exitcode`` gives it;
    ``answered``: it had answered a burst), saying only what the code tells: a worker
    that ends with an exit code may have written nothing at all (``os._exit``)."""
    if code is None:
        return "closed its socket but has not exited"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the system may have run out of memory)" if -code == signal.SIGKILL else ""
        return f"was killed by {name} (signal {-code}){hint}"
    if answered:
        how = "sys.exit or os._exit in the function, or in code it calls"
        if code == 1:
            how += (
                ", or an exception that is not an Exception (such as KeyboardInterrupt) "
                "escaping it, whose traceback Python then prints on the worker's stderr"
            )
        return f"exited with code {code} ({how})"
    return (
        f"exited with code {code} before its first answer: while it started, or in the "
        "function on its first burst (sys.exit, os._exit). Starting, a worker imports the "
        "function's module and re-runs the main script's top level (spawn does), which "
        'must be guarded by `if __name__ == "__main__":` when it starts a pipeline; an '
        "exception there is printed, with its traceback, on the worker's stderr"
    )


def unpicklable(stage: str, items: list[Any], exc: Exception) -> ElementSpecError:
    """The error for a burst of pipeline stage ``stage`` that does not pickle (``exc``),
    naming its first item that does not (its cause: that item's own error)."""
    culprit, why = None, exc
    for item in items:
        try:
            pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:
            culprit, why = item, e
            break
    text = "an item" if culprit is None else repr(culprit)
    what = text if len(text) <= 80 else text[:77] + "..."
    error = ElementSpecError(
        f"pipeline stage {stage}: {what} ({type(culprit).__name__}) cannot be sent to a "
        f"worker process: it does not pickle ({why}); executor='process' needs items "
        "that pickle"
    )
    error.__cause__ = why
    return error


def not_loaded(stage: str, pid: int | None, data: bytes) -> WorkerProcessError:
    """The error of a worker's ``L`` answer: it could not load the function."""
    text, trace = pickle.loads(data[1:])
    exc = WorkerProcessError(
        f"pipeline stage {stage}: worker process {pid} could not load the function: "
        f"{text}. executor='process' needs a function that pickles by reference: defined "
        "at module level in an importable module, or in the main script under "
        "`if __name__ == '__main__':`",
        stage=stage,
        pid=pid,
    )
    add_note(exc, f"traceback in worker process {pid}:\n{trace.rstrip()}")
    return exc
