"""The worker processes of a process map: starting them, one call per burst, their end.

A ``WorkerPool`` belongs to one run of one ``map(fn, executor="process")`` stage: its
``concurrency`` worker processes live from the run's start to its end (every epoch and
``repeat`` of that run), each driven by one thread of the main process (a *driver*: the
stage's step, ``_driver.py``), which hands it a burst and waits for the results.

Start. The pool's task (``run``, started when the pipeline opens) spawns the workers on
a helper thread, so the event loop never waits for an interpreter to come up. The start
method is *spawn*: a fresh interpreter that inherits nothing from the main process (no
threads, locks, event loop, sockets or open files beyond its own socket), on every
platform; never ``fork``, which would copy a running event loop and the locks other
threads hold. So ``fn`` must pickle by reference: a function (or a class instance,
or ``functools.partial``) defined at module level of an importable module, or of the
main script, which the worker imports again as ``__mp_main__`` (guard its top level
with ``if __name__ == "__main__":``), exactly as for ``multiprocessing``.

A call (``Worker.send`` and ``receive``, in ``_proc.py``, on the driver's thread):
send the burst, answer the worker's requests for more scratch space, read its results
(``_worker.py`` has the protocol), and build each item from shared memory: an array is
a view of an arena block (``_shm.py``), which the arena reuses once every view of it is
gone.

Growing. ``add_workers(n)`` (a tuned map, ``concurrency="auto"``) appends workers
numbered after the others and spawns them on a helper thread (one spawns at a time),
watched as the first ones; their drivers start at once and wait for them.

Retiring. A map cut by its tuner parks the drivers above its limit at their next burst
(``tune/_gate.py``), holding nothing: the burst in hand finished and was handed on.
``resize(limit, parked_for)`` then watches the workers from slot ``limit`` up: a worker
whose driver has stayed parked ``RETIRE_AFTER_S`` is *retired*: claimed (``state``
``"retiring"``, ``started`` clear, only while no call uses it), its socket shut down
(it reads end-of-file and exits), given ``GRACE_S`` before SIGKILL, reaped, its socket
closed; its process's mappings of the arena go with it. The grace period is the
hysteresis: a cut the tuner undoes at once (the consumer waited again, within about a
second) finds its workers still there and costs no spawn (0.26 s to a first answer
here, 0.38 s for two: one spawns at a time), while a cut that holds gives back the
processes and their memory (43 MB resident for an idle worker that imported numpy).
A later raise (``resize`` again) starts a new process for each retired worker below
the new limit (one still retiring gets it once reaped); its driver, admitted by the
gate, waits in its next send until it is there. A retiring worker's exit is not a death.
``live`` counts the worker processes that exist now.

The end. ``stop()`` (the run is finishing) shuts every worker's socket down: a worker
waiting for a burst reads end-of-file and exits; a driver waiting for a result reads
end-of-file and ends cleanly. The pool's task then waits ``GRACE_S`` for the workers
to exit (one busy in ``fn`` finishes its item first), kills the rest with SIGKILL and
reaps them all; ``closed`` is set after that. The same happens when the stage's input
has ended and every driver is done. A worker that dies while the run goes on (a signal,
``os._exit``, the OOM killer) is seen at once, by its driver (end-of-file) or by the
pool's task watching its sentinel, and fails the run with a ``WorkerProcessError``
naming the stage, the pid and the signal or exit code. If the main process dies, each
worker sees its parent's sentinel and exits (``_worker.py``); the arena's memory goes
with the last process that maps it.

Invariants:

- One driver per worker, and only it sends to or reads from that worker's socket while
  the run goes on (under ``Worker.lock``); ``stop`` only shuts sockets down, never
  closes one a driver may be using.
- A worker's chunks are sent to it before the first message that refers to them.
- Every block handed to a worker for a call is either adopted (an item views it) or
  freed when the call returns or fails.
- Each worker's death is described once (``Worker.death``): the driver and the watcher
  raise the same exception object, which the coordinator records once.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import pickle
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc

from ..._errors import WorkerProcessError
from ._proc import Worker
from ._shm import Arena

__all__ = ["GRACE_S", "RETIRE_AFTER_S", "Worker", "WorkerPool"]

GRACE_S = 0.5  # seconds a worker busy in fn gets to exit after a stop, before SIGKILL
RETIRE_AFTER_S = 2.0  # a worker parked by a cut this long is retired (see above)
_RETIRE_POLL_S = 0.1  # how often a cut's parked workers are looked at


class WorkerPool:
    """The worker processes of one run of one process-map stage.

    Args:
        fn: The function (validated to pickle when the stage was built).
        concurrency: Number of worker processes.
        label: The stage, e.g. ``"1 'map(load)'"``, for names and messages.
        arena: The stage's shared memory.
    """

    def __init__(self, fn: Any, concurrency: int, label: str, arena: Arena) -> None:
        self.fn_bytes = pickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)
        self.label = label
        self.arena = arena
        self.workers = [Worker(self, k) for k in range(concurrency)]
        self.stopping = False
        self.spawn_s = 0.0  # seconds the helper thread took to start every worker
        self.t0 = time.perf_counter()  # (reset when the pool's task starts)
        self.closed = anyio.Event()  # set once every worker has been reaped
        self._stop = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None  # the pool's task's, while it watches
        self._added: list[Worker] = []  # added before the pool's task watches
        self._spawning = threading.Lock()  # one helper thread spawns at a time
        self._death: list[WorkerProcessError] = []  # a worker's death, seen by its watcher
        self._cuts = 0  # numbers the tuner's changes: a retire watch ends at the next one
        # Each watcher's scope and end, by slot: a retirement ends the watcher before it
        # reaps (which closes the sentinel the watcher waits on).
        self._watches: dict[int, tuple[anyio.CancelScope, anyio.Event]] = {}
        self.retired = 0  # worker processes retired so far

    @property
    def pids(self) -> list[int]:
        """The pids of the worker processes that exist now (``live`` of them)."""
        return [w.pid for w in self.workers if w.pid is not None and w.proc is not None]

    @property
    def live(self) -> int:
        """Worker processes that exist now (started and not reaped)."""
        return sum(1 for w in self.workers if w.proc is not None)

    @property
    def ready_s(self) -> float:
        """Seconds from the pool's start until its last worker to answer first answered
        (0.0 while none has): start-up, as the run saw it."""
        return max(w.ready_s for w in self.workers)

    def stop(self) -> None:
        """The run is finishing (event-loop thread): see the module docstring."""
        self.stopping = True
        self._stop.set()
        for w in self.workers:
            w.shutdown()

    async def run(self, ended: Callable[[], Awaitable[None]]) -> None:
        """The pool's task: start the workers, watch them until ``stop()`` or until
        ``ended()`` returns (the stage's drivers are all done), then end them.

        Raises:
            WorkerProcessError: A worker died while the run went on.
        """
        death = self._death
        self.t0 = time.perf_counter()
        try:
            first = list(self.workers)
            await anyio.to_thread.run_sync(self._start, first)
            self.spawn_s = time.perf_counter() - self.t0
            async with anyio.create_task_group() as tg:

                async def until_ended() -> None:
                    await ended()
                    tg.cancel_scope.cancel()

                self._tg = tg
                for w in first:
                    tg.start_soon(self._watch, w, death, tg)
                added, self._added = self._added, []
                if added:
                    tg.start_soon(self._spawn, added, death)
                tg.start_soon(until_ended)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            with anyio.CancelScope(shield=True):
                await self._end()
        if death:
            raise death[0]

    def add_workers(self, n: int) -> list[Worker]:
        """Add ``n`` workers to a running pool (event loop's thread): they are spawned
        off the loop and watched as the first ones; their drivers may start at once
        (a driver waits for its worker to start). A pool that is stopping spawns
        nothing: the new workers' drivers end cleanly at their first send."""
        new = [Worker(self, len(self.workers) + k) for k in range(n)]
        self.workers.extend(new)
        if self.stopping:
            for w in new:
                w.started.set()
        elif self._tg is None:
            self._added.extend(new)  # (spawned once the first ones are)
        else:
            self._tg.start_soon(self._spawn, new, self._death)
        return new

    def resize(self, limit: int, parked_for: Callable[[int], float | None]) -> None:
        """A tuner set the map's limit to ``limit`` workers (event loop's thread): each
        retired worker below it gets a new process (one still retiring, once reaped),
        and each live one from ``limit`` up is retired once ``parked_for(slot)``
        (seconds its driver has been parked, None while it is not) reaches
        ``RETIRE_AFTER_S``; that watch ends at the tuner's next change."""
        self._cuts += 1
        for w in self.workers[:limit]:
            if w.state == "retiring":
                w.wanted = True
            elif w.state == "retired":
                self._restart(w)
        for w in self.workers[limit:]:
            w.wanted = False
        if self._tg is not None and not self.stopping and len(self.workers) > limit:
            self._tg.start_soon(self._retire_parked, limit, parked_for, self._cuts)

    def _restart(self, w: Worker) -> None:
        w.wanted = False
        if self._tg is None or self.stopping:
            return  # (its driver ends at its stop test)
        w.state = "live"
        self._tg.start_soon(self._spawn, [w], self._death)

    async def _retire_parked(
        self, keep: int, parked_for: Callable[[int], float | None], cut: int
    ) -> None:
        tg = self._tg
        while tg is not None and cut == self._cuts and not self.stopping:
            waiting = False
            for w in self.workers[keep:]:
                if w.state != "live":
                    continue
                parked = parked_for(w.index)
                if parked is not None and parked >= RETIRE_AFTER_S and w.claim():
                    tg.start_soon(self._retire, w)
                else:
                    waiting = True
            if not waiting:
                return
            await anyio.sleep(_RETIRE_POLL_S)

    async def _retire(self, w: Worker) -> None:
        """End a claimed worker (see the module docstring), and start it again if the
        tuner wanted it back meanwhile."""
        try:
            watch = self._watches.pop(w.index, None)
            if watch is not None:
                watch[0].cancel()
                await watch[1].wait()
            w.shutdown()
            await anyio.to_thread.run_sync(w.end, GRACE_S)
        finally:
            w.release()
            w.state = "retired"
            self.retired += 1
        if w.wanted:
            self._restart(w)

    async def _spawn(self, new: list[Worker], death: list[WorkerProcessError]) -> None:
        try:
            await anyio.to_thread.run_sync(self._start, new)
        finally:
            for w in new:
                w.started.set()  # (cancelled before the thread ran: its drivers go on)
        tg = self._tg
        if tg is not None:
            for w in new:
                tg.start_soon(self._watch, w, death, tg)

    async def _watch(
        self, w: Worker, death: list[WorkerProcessError], tg: anyio.abc.TaskGroup
    ) -> None:
        """Fail the run if ``w`` dies while the run goes on."""
        proc = w.proc
        if proc is None:
            return
        done = anyio.Event()
        with anyio.CancelScope() as scope:
            self._watches[w.index] = (scope, done)
            try:
                await anyio.wait_readable(proc.sentinel)
            finally:
                done.set()
        if scope.cancelled_caught:
            return  # (retiring: its retirement reaps it)
        if not self.stopping and w.state == "live" and w.proc is proc:  # (not retired)
            death.append(await anyio.to_thread.run_sync(w.gone))
            tg.cancel_scope.cancel()

    def _start(self, workers: list[Worker]) -> None:
        """Spawn ``workers`` (a helper thread)."""
        with self._spawning:
            try:
                for w in workers:
                    if self.stopping:
                        break
                    try:
                        w.start()
                    finally:
                        w.started.set()
                    if self.stopping:
                        w.shutdown()
            finally:
                for w in workers:
                    w.started.set()  # (drivers waiting for a worker never started go on)

    async def _end(self) -> None:
        """Shut every worker down, give them ``GRACE_S`` to exit, kill the rest, reap."""
        try:
            self.stopping = True
            for w in self.workers:
                w.shutdown()
                w.started.set()  # (a driver waiting for a retired one's return ends)
            deadline = time.monotonic() + GRACE_S
            sentinels = [w.proc.sentinel for w in self.workers if w.proc is not None]
            while time.monotonic() < deadline:
                if len(multiprocessing.connection.wait(sentinels, 0)) == len(sentinels):
                    break
                await anyio.sleep(0.005)
            for w in self.workers:
                proc = w.proc  # (only this task reaps it: it stays while this looks)
                if proc is None:
                    continue
                if not multiprocessing.connection.wait([proc.sentinel], 0):
                    proc.kill()
                await anyio.to_thread.run_sync(w.reap, 5.0)
            for w in self.workers:
                w.release()
            self.arena.close()
        finally:
            self.closed.set()
