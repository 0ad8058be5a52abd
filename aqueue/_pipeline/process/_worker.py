"""What runs inside a worker process of a process map (``map(fn, executor="process")``).

The main process (``_workers.py``) starts each worker with ``multiprocessing``'s *spawn*
start method and talks to it over one socket (a duplex ``multiprocessing`` Pipe). This
module is the worker's side; it imports only the standard library and numpy, and a
worker runs it as a file (``runpy.run_path``, under ``RUN_NAME``), so that a worker
never imports the aqueue package (a few hundred milliseconds of start-up) unless the
function's own module does.

Messages, main process -> worker (pickled tuples, ``Connection.send``):

- ``("c", index, size)``, followed on the same socket by the chunk's descriptor
  (``socket.send_fds``): map chunk ``index`` of the stage's arena (``_shm.py``);
- ``("b", items, row0, cols, scratch, want_layout)``: a burst. Apply ``fn`` to each
  item in order and write every numpy array of the results into shared memory: an
  array that matches column ``k`` of ``cols`` (a fused batch: ``(chunk, offset, dtype,
  row_shape, rows)``, or None for a column the batch does not have) goes into row
  ``row0 + j`` of that column when it is the ``k``-th array of item ``j``; any other
  array into the *scratch* block ``(chunk, offset, size)`` (or None), one after the
  other, 64-byte aligned; ``want_layout`` asks for the (dtype, shape) of each array of
  the first item;
- ``("s", chunk, offset, size)``: another scratch block, the answer to ``M``.

Messages, worker -> main process (``Connection.send_bytes``; the first byte says which):

- ``R`` + a pickle stream: the header ``(n, busy_s, cpu_s, write_s, layout, failure)``
  (``cpu_s``: the worker process's CPU seconds while in ``fn``, its own threads'
  included), then
  the ``n`` results, each pickled with *persistent ids* for its arrays (``("r", k)``:
  row of column ``k``; ``("a", block, offset, dtype, shape)``: in the burst's
  ``block``-th scratch block, 0 the one sent with the burst, then one per ``s`` in
  order). Array bytes never go through pickle; object arrays and other values do.
  ``failure`` is None, or ``(index, exception bytes or None, repr, traceback text)``:
  ``fn`` raised on item ``index`` (or its result could not be pickled); the burst ends
  there, and the ``n = index`` results before it are the answer's;
- ``M`` + pickle(nbytes): the scratch blocks are full, ask for a block of at least
  ``nbytes`` (the main process answers with ``s``, maybe after ``c``);
- ``L`` + pickle((repr, traceback text)): the function could not be loaded; the worker
  exits.

Invariants: a worker serves one burst at a time, in the order received (the main
process may send the next one before the answer: a burst read while waiting for an
``s`` waits in ``pending``), and answers each with exactly one ``R`` (after any number
of ``M``/``s`` exchanges); it never writes outside the blocks and rows given for the
burst at hand. It ignores SIGINT
(Ctrl-C reaches the main process, which stops the workers), and exits at once when the
main process is gone (a thread waits on the parent's sentinel) or its socket closes.
"""

from __future__ import annotations

import collections
import io
import mmap
import os
import pickle
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

__all__ = ["RUN_NAME", "main"]

RUN_NAME = "__aqueue_worker__"  # the name this file runs under in a worker (see the end)

_ALIGN = 64
_perf = time.perf_counter


def main(conn: Connection, fn_bytes: bytes) -> None:
    """The worker's entry point (a ``multiprocessing.Process`` target)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent()
    try:
        fn = pickle.loads(fn_bytes)
    except BaseException as exc:
        _send(conn, b"L", (repr(exc), traceback.format_exc()))
        return
    _Server(conn, fn).serve()
    # The main process is done with this worker: leave without the interpreter's
    # teardown (module cleanup takes tens of milliseconds and holds nothing of value).
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(0)


def _exit_with_parent() -> None:
    """Exit at once when the main process is gone (even while ``fn`` runs)."""
    import multiprocessing
    import multiprocessing.connection

    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:  # pragma: no cover - always set by spawn
        return
    sentinel = parent.sentinel

    def watch() -> None:
        multiprocessing.connection.wait([sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="aqueue parent watch", daemon=True).start()


def _send(conn: Connection, tag: bytes, value: Any) -> None:
    conn.send_bytes(tag + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


class _Server:
    """The worker's loop: receive, apply ``fn``, write, answer."""

    def __init__(self, conn: Connection, fn: Callable[[Any], Any]) -> None:
        self.conn = conn
        self.fn = fn
        self.chunks: dict[int, tuple[mmap.mmap, np.ndarray[Any, Any]]] = {}
        self.sock = socket.socket(fileno=os.dup(conn.fileno()))  # for the descriptors
        self.pending: collections.deque[Any] = collections.deque()  # bursts read early

    def serve(self) -> None:
        """Serve bursts until the socket closes (the main process is done with us)."""
        try:
            while True:
                msg = self.pending.popleft() if self.pending else self.conn.recv()
                if msg[0] == "c":
                    self.map_chunk(msg[1], msg[2])
                elif msg[0] == "b":
                    self.burst(*msg[1:])
        except (EOFError, OSError):  # closed or shut down, also while answering
            return

    def map_chunk(self, index: int, size: int) -> None:
        _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        mm = mmap.mmap(fds[0], size)
        os.close(fds[0])
        self.chunks[index] = (mm, np.frombuffer(mm, dtype=np.uint8))

    def region(self, chunk: int, offset: int, nbytes: int) -> np.ndarray[Any, Any]:
        return self.chunks[chunk][1][offset : offset + nbytes]

    def burst(
        self,
        items: list[Any],
        row0: int,
        cols: tuple[Any, ...] | None,
        scratch: tuple[int, int, int] | None,
        want_layout: bool,
    ) -> None:
        fn = self.fn
        results = []
        failure = None
        t0, c0 = _perf(), time.process_time()
        for i, x in enumerate(items):
            try:
                results.append(fn(x))
            except Exception as exc:
                failure = self.failure(i, exc)
                break
        t1, cpu = _perf(), time.process_time() - c0
        columns = None
        if cols is not None:
            columns = [
                None
                if c is None
                else self.region(c[0], c[1], c[4] * int(np.prod(c[3])) * np.dtype(c[2]).itemsize)
                .view(c[2])
                .reshape((c[4], *c[3]))
                for c in cols
            ]
        body = io.BytesIO()
        writer = _Writer(body, self, columns, scratch)
        layout = None
        for j, r in enumerate(results):
            writer.row = row0 + j
            writer.leaf = 0
            writer.layout = [] if want_layout and j == 0 else None
            end = body.tell()
            try:
                writer.dump(r)  # one memo for the whole burst: shared objects stay shared
            except Exception as exc:
                body.seek(end)  # (the results before it stand: nothing later refers to it)
                body.truncate()
                del results[j:]
                failure = self.failure(j, exc, result=True)
                break
            if j == 0:
                layout = writer.layout
        header = (len(results), t1 - t0, cpu, _perf() - t1, layout, failure)
        head = pickle.dumps(header, protocol=pickle.HIGHEST_PROTOCOL)
        self.conn.send_bytes(b"R" + head + body.getvalue())

    def more(self, nbytes: int) -> tuple[int, int, int]:
        """Ask the main process for another scratch block of ``nbytes`` at least."""
        _send(self.conn, b"M", nbytes)
        while True:
            msg = self.conn.recv()
            if msg[0] == "c":
                self.map_chunk(msg[1], msg[2])
            elif msg[0] == "s":
                return (msg[1], msg[2], msg[3])
            else:  # the next burst, sent before the answer: serve it after this one
                self.pending.append(msg)

    @staticmethod
    def failure(index: int, exc: BaseException, result: bool = False) -> tuple[Any, ...]:
        """What an ``R`` header says of a failure: ``(index, exception bytes or None,
        repr, traceback text)``."""
        text = traceback.format_exc()
        if result:
            text += "(raised while passing the result back: a result must pickle)\n"
        try:
            raw: bytes | None = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            raw = None
        return (index, raw, repr(exc), text)


class _Writer(pickle.Pickler):
    """Pickles results, writing their numpy arrays into shared memory instead."""

    def __init__(
        self,
        file: io.BytesIO,
        server: _Server,
        columns: list[np.ndarray[Any, Any] | None] | None,
        scratch: tuple[int, int, int] | None,
    ) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.server = server
        self.columns = columns
        self.blocks: list[list[int]] = [] if scratch is None else [[*scratch, 0]]
        self.row = 0
        self.leaf = 0
        self.layout: list[tuple[np.dtype[Any], tuple[int, ...]]] | None = None

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is not np.ndarray or obj.dtype.hasobject:
            return None
        k = self.leaf
        self.leaf = k + 1
        if self.layout is not None:
            self.layout.append((obj.dtype, obj.shape))
        columns = self.columns
        if columns is not None and k < len(columns):
            col = columns[k]
            if col is not None and obj.dtype == col.dtype and obj.shape == col.shape[1:]:
                col[self.row] = obj
                return ("r", k)
        nbytes = obj.nbytes
        bi, off = self.reserve(nbytes)
        chunk, base = self.blocks[bi][0], self.blocks[bi][1]
        dst = self.server.region(chunk, base + off, nbytes).view(obj.dtype).reshape(obj.shape)
        np.copyto(dst, obj)
        return ("a", bi, off, obj.dtype, obj.shape)

    def reserve(self, nbytes: int) -> tuple[int, int]:
        """Room for ``nbytes`` in the last scratch block (asking for another if needed):
        (block index, offset in the block)."""
        if self.blocks:
            block = self.blocks[-1]
            off = -(-block[3] // _ALIGN) * _ALIGN
            if off + nbytes <= block[2]:
                block[3] = off + nbytes
                return len(self.blocks) - 1, off
        chunk, offset, size = self.server.more(nbytes)
        self.blocks.append([chunk, offset, size, nbytes])
        return len(self.blocks) - 1, 0


if __name__ == RUN_NAME:  # a worker runs this file (``runpy.run_path``, from _workers.py)
    main(*globals()["_AQUEUE_WORKER"])
