"""``Worker``: one worker process of a process map and its socket, seen from the main
process: its start (spawn), one call (a burst sent, its results received from shared
memory), its death, its end. ``WorkerPool`` (``_workers.py``) owns the workers of a
run's stage and holds the rules they follow; its module docstring describes a call,
the end, a retirement and the invariants.

A worker's ``state``, changed on the event loop's thread only: ``"live"`` (starting
or started), ``"retiring"`` (its driver is parked and a tuner's cut held: its process
is being ended) and ``"retired"`` (ended and reaped; ``start`` gives it a new process
when the tuner wants it again). ``started`` is set while its driver may use it.
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.process
import os
import pickle
import runpy
import socket
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any, Literal, Protocol

import numpy as np

from ..._errors import QueueClosedError, WorkerProcessError
from . import _worker
from ._handoff import Reply, Sent, describe_exit, not_loaded, read_reply, unpicklable
from ._shm import Arena, Block

__all__ = ["Pool", "Worker"]

_EXIT_WAIT_S = 1.0  # seconds to wait for the exit status of a worker whose socket closed
_ALIGN = 64  # (as the worker aligns arrays in scratch blocks)
_dumps = functools.partial(pickle.dumps, protocol=pickle.HIGHEST_PROTOCOL)


class Pool(Protocol):
    """What a worker reads from its pool (``WorkerPool``)."""

    fn_bytes: bytes
    label: str
    arena: Arena
    stopping: bool
    t0: float
    workers: list[Worker]


class Worker:
    """One worker process and its socket, seen from the main process."""

    def __init__(self, pool: Pool, index: int) -> None:
        self.pool = pool
        self.index = index
        self.proc: multiprocessing.process.BaseProcess | None = None  # (None once reaped)
        self.pid: int | None = None
        self.exitcode: int | None = None  # once reaped
        self.conn: Connection | None = None
        self.sock: socket.socket | None = None  # a second handle on the socket, for fds
        self.known: set[int] = set()  # chunks sent to the worker
        self.started = threading.Event()  # set once started, or once starting failed
        self.lock = threading.Lock()  # held by the driver during a call
        self.death: WorkerProcessError | None = None
        self.ready_s = 0.0  # seconds from the pool's start to this worker's first answer
        self.answered = False  # its process (the first, or a new one) answered a burst
        self.state = "live"  # "live", "retiring" or "retired" (see the module docstring)
        self.wanted = False  # the tuner wants it back while it retires: start it again
        self._status_lock = threading.Lock()

    def start(self) -> None:
        """Spawn the process (on the pool's helper thread): the first, or a new one
        after a retirement (which starts afresh: no chunk sent, no answer yet)."""
        self.known = set()
        self.answered = False
        self.death = None
        self.exitcode = None
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        args: tuple[Any, ...] = (child, self.pool.fn_bytes)
        target: Callable[..., Any] = _worker.main
        path = _worker.__file__
        if path is not None and os.path.isfile(path):
            # Run the worker's module as a file: importing it as a module would import
            # the aqueue package first, which the worker does not need.
            target, args = runpy.run_path, (path, {"_AQUEUE_WORKER": args}, _worker.RUN_NAME)
        proc = ctx.Process(
            target=target,
            args=args,
            name=f"aqueue {self.pool.label} worker {self.index}",
            daemon=True,  # ended with the main process, if everything else failed
        )
        try:
            proc.start()
        finally:
            child.close()
        self.proc, self.conn, self.pid = proc, parent, proc.pid
        self.sock = socket.socket(fileno=os.dup(parent.fileno()))

    # -- one call --------------------------------------------------------------------------

    def send(
        self,
        items: list[Any],
        *,
        scratch: int,
        row0: int = 0,
        cols: list[np.ndarray[Any, Any] | None] | None = None,
        spec: tuple[Any, ...] | None = None,
        want_layout: bool = False,
        check: Callable[[], None],
    ) -> Sent:
        """Hand a burst to the worker (it queues behind those sent before); ``receive``
        gets its results, in the order sent. A burst whose items do not pickle is not
        sent: its answer is an ElementSpecError naming the first such item.

        Raises:
            WorkerProcessError: The worker died.
            QueueClosedError: The run is stopping (a clean end).
        """
        sent = Sent(len(items), row0, cols)
        pool = self.pool
        while True:
            if not self.started.is_set():  # (starting, or retired and starting again)
                while not self.started.wait(0.1):
                    check()
            with self._call(sent), self.lock:
                if not self.started.is_set():
                    continue  # (retired meanwhile: wait for its new process)
                conn = self.conn
                if pool.stopping or conn is None:
                    raise QueueClosedError("the pipeline is stopping")
                first = None
                if scratch > 0:
                    block = pool.arena.alloc(scratch)
                    sent.blocks.append(block)
                    first = self._share(block)
                if spec is not None:
                    self._send_chunks({c[0] for c in spec if c is not None})
                try:
                    message = _dumps(("b", items, row0, spec, first, want_layout))
                except Exception as exc:
                    sent.error = unpicklable(pool.label, items, exc)
                    self._drop(sent)
                    return sent
                conn.send_bytes(message)
                return sent

    def receive(self, sent: Sent) -> Reply:
        """The results of ``sent``, the oldest burst sent and not received (with, in
        ``Reply.error``, what ``fn`` raised on the item after them, the worker's
        traceback in a note).

        Raises:
            WorkerProcessError: The worker died, or could not load ``fn``.
            QueueClosedError: The run is stopping (a clean end).
        """
        if sent.error is not None:  # (never sent)
            return Reply([], 0.0, 0.0, 0.0, None, 0, 0, sent.error)
        pool = self.pool
        try:
            with self._call(sent), self.lock:
                conn = self.conn
                if pool.stopping or conn is None:
                    raise QueueClosedError("the pipeline is stopping")
                while True:
                    data = conn.recv_bytes()
                    tag = data[:1]
                    if tag == b"R":
                        if not self.answered:
                            self.answered = True
                            if not self.ready_s:  # (the run's start-up: the first only)
                                self.ready_s = time.perf_counter() - pool.t0
                        return read_reply(data, sent, pool.arena, self.pid)  # (adopts or frees)
                    if tag == b"M":
                        need = pickle.loads(data[1:])
                        block = pool.arena.alloc(max(need, 2 * sent.n * _ALIGN))
                        sent.blocks.append(block)
                        conn.send_bytes(_dumps(("s", *self._share(block))))
                    else:  # b"L"
                        raise not_loaded(pool.label, self.pid, data)
        finally:
            if pool.stopping:
                self.release()  # (the pool's end may have found this call running)

    def _call(self, sent: Sent) -> _Call:
        """A send or receive of ``sent``: on any failure, its blocks are freed and what
        leaves is ``_translated`` (chained to the original, unless a clean end)."""
        return _Call(self, sent)

    def _drop(self, sent: Sent) -> None:
        for block in sent.blocks:
            self.pool.arena.free(block)
        sent.blocks.clear()

    def _translated(self, exc: BaseException) -> BaseException:
        """What a failed send or receive raises: a stopping run ends cleanly (whatever
        went wrong, it ends anyway), a closed socket is the worker's death."""
        if not isinstance(exc, Exception) or isinstance(exc, QueueClosedError):
            return exc
        if self.pool.stopping:
            return QueueClosedError("the pipeline is stopping")
        if isinstance(exc, (EOFError, OSError)):
            return self.gone()
        return exc

    def _share(self, block: Block) -> tuple[int, int, int]:
        self._send_chunks({block.chunk})
        return (block.chunk, block.offset, block.size)

    def _send_chunks(self, wanted: set[int]) -> None:
        for index in sorted(wanted - self.known):
            chunk = self.pool.arena.chunks[index]
            assert self.conn is not None
            assert self.sock is not None
            self.conn.send_bytes(_dumps(("c", index, chunk.size)))
            socket.send_fds(self.sock, [b"c"], [chunk.fd])
            self.known.add(index)

    # -- its end -----------------------------------------------------------------------------

    def exit_status(self, timeout: float) -> int | None:
        """The exit code (negative: the signal), waiting up to ``timeout`` s; None while
        it runs. One caller at a time (two waits on one pid would race)."""
        with self._status_lock:
            proc = self.proc
            if proc is None:
                return self.exitcode
            proc.join(timeout)
            return proc.exitcode

    def reap(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the process to exit, then release what the
        ``Process`` object holds (its sentinel and start-up pipe: descriptors that
        would otherwise stay open until the garbage collector found the object)."""
        with self._status_lock:
            proc = self.proc
            if proc is None:
                return
            proc.join(timeout)
            self.exitcode = proc.exitcode
            if self.exitcode is not None:
                proc.close()
                self.proc = None

    def gone(self) -> WorkerProcessError:
        """The error for this worker's unexpected end (the same object every time)."""
        if self.death is None:
            code = self.exit_status(_EXIT_WAIT_S)
            self.death = WorkerProcessError(
                f"pipeline stage {self.pool.label}: worker process {self.pid} "
                f"{describe_exit(code, self.answered)}",
                stage=self.pool.label,
                pid=self.pid,
                exitcode=code,
            )
        return self.death

    def claim(self) -> bool:
        """Begin a retirement (event loop's thread): True, and ``state`` is
        ``"retiring"`` and ``started`` clear (so its driver waits for a new process
        before its next send), if the worker is live and started and no call uses it
        now; else False and nothing changed."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            if self.state != "live" or self.proc is None or not self.started.is_set():
                return False
            self.state = "retiring"
            self.started.clear()
            return True
        finally:
            self.lock.release()

    def end(self, grace: float) -> None:
        """End a retiring worker (a helper thread; its socket already shut down): wait
        up to ``grace`` s for it to exit, kill it if it has not, reap it."""
        if self.exit_status(grace) is None:
            proc = self.proc
            if proc is not None:
                proc.kill()
        self.reap(5.0)

    def shutdown(self) -> None:
        """Shut the socket down: the worker and the driver both read end-of-file."""
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def release(self) -> None:
        """Close the socket once no call uses it (else the objects' own ``__del__`` do)."""
        if not self.lock.acquire(blocking=False):
            return
        try:
            for handle in (self.sock, self.conn):
                if handle is not None:
                    handle.close()
            self.sock = self.conn = None
        finally:
            self.lock.release()


class _Call:
    """``Worker._call``: a context manager of its own rather than a generator's (it
    runs twice per burst: a plain object costs about half a microsecond less)."""

    __slots__ = ("sent", "worker")

    def __init__(self, worker: Worker, sent: Sent) -> None:
        self.worker = worker
        self.sent = sent

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if exc is None:
            return False
        worker = self.worker
        worker._drop(self.sent)
        other = worker._translated(exc)
        if other is exc:
            return False  # (the original goes on)
        raise other from (None if isinstance(other, QueueClosedError) else exc)
