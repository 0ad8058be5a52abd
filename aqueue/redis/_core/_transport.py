"""What an operation asks of the server, who performs it, and the two drivers.

An operation (``_ops``) is a generator: it yields requests and receives their replies,
and returns its result (``Op[T]``). It does no I/O of its own. Three requests:

- ``Call``: one server round trip: ``FCALL fn key *args``; with ``stage``, inside
  ``MULTI``/``EXEC`` after an ``MSET`` of those (key, payload) pairs; with ``fetch``,
  pipelined with an ``MGET`` of those keys, and then the reply is ``(fn's reply, the
  values)``; with ``drop``, a ``DEL`` of those keys after the ``MGET``; with
  ``atomic``, inside ``MULTI``/``EXEC`` even without ``stage`` (a replay table's
  sample: the function copies payloads to keys that the ``MGET`` reads and the ``DEL``
  removes, all in one transaction). A call always runs to its end once sent, even
  when the caller is cancelled, so its outcome is known (see ``_clients``). With
  ``keep``, a *native* asyncio cancellation that arrives while the call is in flight
  does not discard its reply: the call returns it, and the cancellation is delivered
  at the caller's next await (an op whose call completes it then returns its result;
  see ``RedisAsyncio``);
- ``Read``: ``MGET`` of some keys; the reply is their values (None where missing);
- ``Wait``: ``BLPOP`` on one key for at most ``seconds``; the reply is the popped
  token, or None on timeout. A wait may be cancelled at any time;
- ``Parallel``: several ``Call`` s at once (a sharded object's round over its shards):
  the async driver performs them concurrently, the thread driver one after another;
  the reply is a list, per call its reply or the exception it raised, so an op can
  undo exactly what went through. Every call of the round is performed to its end
  even if the caller is cancelled meanwhile; then the cancellation is thrown into the
  op at that yield (so it undoes), except a native asyncio cancellation of a round of
  ``keep`` calls that all succeeded: the round returns its replies and the
  cancellation comes at the caller's next await, as for one ``keep`` call.
- ``Checkpoint``: nothing to perform; a point where the op may be cancelled. Every
  call is shielded, so an op that loops on calls alone (a sharded op's rounds when a
  race makes it start over) would never see a cancel scope's cancellation; the async
  driver delivers a pending one here, thrown into the op at that yield, and the thread
  driver raises TimeoutError here once the call's deadline has passed. An op yields it
  where everything it holds is in its undo list;
- ``WaitAny``: ``Wait`` on several keys at once (the shards of a sharded queue, whose
  keys may live on different nodes), one ``BLPOP`` each; the reply is ``(index,
  token)`` of the first that pops, or None on timeout. The other waits are cancelled:
  a token they popped meanwhile is lost, which costs its waiter at most one
  ``seconds`` (as an abandoned wait does). The thread driver waits on the first key
  only: an op that yields it must look again after ``seconds`` (a sharded table's do;
  the thread views of sharded queues, whose ops wait for as long as a wake-up takes,
  are refused before they get here).
- ``Gate``, ``Ungate``: a process's own line at a shared object (``_line``): wait for
  the turn, give it back; the driver gives back what the op still holds when it ends.

A transport performs them: ``AsyncTransport`` for the event loop (``RedisAsyncio`` on
asyncio, ``RedisThreads`` elsewhere), ``SyncTransport`` for threads (``RedisSync``).
Two drivers run any op over one: ``run`` (async) and ``run_blocking`` (threads). They
are the same loop: send the last reply to the op, perform the request it yields; when
performing fails (an error, a cancellation, the thread view's deadline), throw the
exception into the op, which may yield one more request to undo what it holds (the
``aq_leave`` call) before re-raising it. The drivers also keep the time accounting
that belongs to the caller, not to the op: the queue's wait clock (``statistics()``),
the thread view's registry of blocked calls and its deadline (a thread view also
refuses to block an event loop's thread: ``refuse_event_loop``).

Invariants:
- an op's state changes only between its yields, never during a request;
- every request an op yields is performed exactly once, or its failure is thrown back
  into the op at that yield;
- a driver leaves the wait clock it entered, on every way out.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

import anyio
import anyio.lowlevel

from aqueue._waiting._backend import in_event_loop

from ._line import Gate, Ungate, enter, enter_blocking, leave

__all__ = [
    "AsyncTransport",
    "Call",
    "Checkpoint",
    "Deadline",
    "Gate",
    "Op",
    "Parallel",
    "Read",
    "Request",
    "Steps",
    "SyncTransport",
    "Ungate",
    "Wait",
    "WaitAny",
    "WaitClock",
    "Waits",
    "redeliver",
    "refuse_event_loop",
    "run",
    "run_blocking",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One function call (see the module docstring)."""

    fn: str
    key: str
    args: Sequence[Any]
    stage: Sequence[tuple[str, bytes]] = ()
    fetch: Sequence[str] = ()
    ro: bool = False
    drop: Sequence[str] = ()
    atomic: bool = False
    keep: bool = False


@dataclass(frozen=True)
class Read:
    """``MGET keys``."""

    keys: Sequence[str]


@dataclass(frozen=True)
class Wait:
    """``BLPOP key seconds``."""

    key: str
    seconds: float


@dataclass(frozen=True)
class Parallel:
    """Several calls at once; the reply lists each one's reply or exception."""

    calls: Sequence[Call]


@dataclass(frozen=True)
class WaitAny:
    """``BLPOP`` on each of ``keys`` (see the module docstring)."""

    keys: Sequence[str]
    seconds: float


@dataclass(frozen=True)
class Checkpoint:
    """A point where the op may be cancelled (see the module docstring)."""


Request: TypeAlias = Call | Read | Wait | Parallel | WaitAny | Checkpoint | Gate | Ungate
Op: TypeAlias = Generator[Request, Any, T]
"""An operation: yields requests, receives their replies, returns its result."""


class AsyncTransport(Protocol):
    """Performs requests for tasks (``RedisAsyncio``, ``RedisThreads``)."""

    async def call(self, call: Call) -> Any:
        """Perform ``call``; it runs to its end even if the caller is cancelled."""
        ...

    async def read(self, keys: Sequence[str]) -> list[Any]:
        """The values of ``keys`` (None where missing)."""
        ...

    async def wait(self, key: str, seconds: float) -> bytes | None:
        """A token popped from ``key`` within ``seconds``, or None; cancellable."""
        ...

    async def aclose(self) -> None:
        """Release the connections."""
        ...


class SyncTransport(Protocol):
    """Performs requests for threads (``RedisSync``)."""

    def call(self, call: Call) -> Any:
        """Perform ``call``."""
        ...

    def read(self, keys: Sequence[str]) -> list[Any]:
        """The values of ``keys`` (None where missing)."""
        ...

    def wait(self, key: str, seconds: float) -> bytes | None:
        """A token popped from ``key`` within ``seconds``, or None."""
        ...

    def close(self) -> None:
        """Release the connections."""
        ...


class Waits(Protocol):
    """What a driver tells when its op starts waiting and when the op ends."""

    def enter(self) -> None: ...

    def leave(self) -> None: ...


class WaitClock:
    """Seconds during which at least one of this process's ops of one kind waited
    (a queue's ``time_full_s`` / ``time_empty_s``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._since = 0.0
        self._total = 0.0

    def enter(self) -> None:
        with self._lock:
            if self._count == 0:
                self._since = time.monotonic()
            self._count += 1

    def leave(self) -> None:
        with self._lock:
            self._count -= 1
            if self._count == 0:
                self._total += time.monotonic() - self._since

    def seconds(self) -> float:
        with self._lock:
            return self._total + (time.monotonic() - self._since if self._count else 0.0)


class Deadline:
    """A thread view call's ``timeout``: how long its next wait may last."""

    def __init__(self, timeout: float, what: str) -> None:
        self._timeout = timeout
        self._at = time.monotonic() + timeout
        self._what = what

    def clip(self, seconds: float) -> float:
        """``seconds``, shortened to the time left; TimeoutError once none is left."""
        left = self._at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{self._what} timed out after {self._timeout} s")
        return min(seconds, left)


def refuse_event_loop(call: str, of: str, awaited: str) -> None:
    """Refuse a thread view's blocking ``call`` (on the object ``of``) on a thread that
    runs an event loop, where blocking would stall the loop and, on a full or empty
    object, deadlock it (RuntimeError naming ``awaited``, the call to await there)."""
    if in_event_loop():
        raise RuntimeError(
            f"{call} of {of} was called on an event-loop thread, where blocking would "
            f"stall the loop; use `await {awaited}` there"
        )


class Steps(Generic[T]):
    """What both drivers share: feeding an op its replies (or its failures) and taking
    its next request; the wait accounting and the deadline. The drivers only perform
    the requests."""

    __slots__ = ("_deadline", "_op", "_waiting", "_waits", "error", "held", "reply", "result")

    def __init__(self, op: Op[T], waits: Waits | None, deadline: Deadline | None = None) -> None:
        self._op = op
        self._waits = waits
        self._deadline = deadline
        self._waiting = False
        self.reply: Any = None
        self.error: BaseException | None = None  # performing the last request failed
        self.result: T
        self.held: list[Any] = []  # the locks of the turns the op holds (``Gate``)

    def next(self) -> Request | None:
        """The op's next request, or None when it returned (its ``result`` is set).
        Raises what the op raises."""
        try:
            if self.error is None:
                request = self._op.send(self.reply)
            else:
                request = self._op.throw(self.error)  # the op may undo, then re-raises
        except StopIteration as stop:
            self.result = stop.value
            return None
        self.reply = self.error = None
        waits = isinstance(request, (Wait, WaitAny))
        if waits and not self._waiting and self._waits is not None:
            self._waiting = True
            self._waits.enter()
        return request

    def seconds(self, wait: Wait | WaitAny) -> float:
        """How long ``wait`` may block: shortened to the deadline (TimeoutError past it)."""
        return wait.seconds if self._deadline is None else self._deadline.clip(wait.seconds)

    def end(self) -> None:
        """On every way out: give back the turns the op holds; leave the wait
        accounting if the op waited."""
        while self.held:
            self.held.pop().release()
        if self._waiting:
            self._waiting = False
            assert self._waits is not None
            self._waits.leave()


def redeliver(task: asyncio.Task[Any]) -> None:
    """Re-arm a native cancellation that a ``keep`` call held back, at the task's next
    await (this runs from the event loop once the task has suspended). Not if it was
    withdrawn meanwhile: an ``asyncio.timeout`` block that ended without another await
    has uncancelled the task (its call completed in time, as far as it is concerned)."""
    if task.done():
        return
    if sys.version_info >= (3, 11):
        if task.cancelling() == 0:
            return
        task.uncancel()  # the cancel() below counts it again: one request, not two
    task.cancel()


async def _parallel(transport: AsyncTransport, calls: Sequence[Call]) -> list[Any]:
    """``Parallel``: the calls at once, each to its end (see the module docstring)."""
    out: list[Any] = [None] * len(calls)

    async def one(i: int) -> None:
        try:
            out[i] = await transport.call(calls[i])
        except Exception as exc:  # (reported in its place: the op decides)
            out[i] = exc

    try:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for i in range(len(calls)):
                    tg.start_soon(one, i)
    except asyncio.CancelledError:  # native: every call has run to its end
        caller = asyncio.current_task()
        ok = all(c.keep for c in calls) and not any(isinstance(r, Exception) for r in out)
        if not ok or caller is None:
            raise
        asyncio.get_running_loop().call_soon(redeliver, caller)
    return out


async def run(op: Op[T], transport: AsyncTransport, waits: Waits | None = None) -> T:
    """Run ``op`` to its result over ``transport`` (see the module docstring)."""
    steps = Steps(op, waits)
    try:
        while (request := steps.next()) is not None:
            try:
                if isinstance(request, Call):
                    steps.reply = await transport.call(request)
                elif isinstance(request, Parallel):
                    steps.reply = await _parallel(transport, request.calls)
                elif isinstance(request, Wait):
                    steps.reply = await transport.wait(request.key, steps.seconds(request))
                elif isinstance(request, WaitAny):
                    steps.reply = await _wait_any(transport, request.keys, request.seconds)
                elif isinstance(request, Checkpoint):
                    await anyio.lowlevel.checkpoint_if_cancelled()
                    steps.reply = None
                elif isinstance(request, Gate):
                    steps.reply = await enter(request)
                    if steps.reply:
                        steps.held.append(request.line.alock)
                elif isinstance(request, Ungate):
                    leave(steps.held, request.line.alock)
                else:
                    steps.reply = await transport.read(request.keys)
            except BaseException as exc:  # thrown into the op at its yield
                steps.error = exc
        return steps.result
    finally:
        steps.end()


def run_blocking(
    op: Op[T],
    transport: SyncTransport,
    waits: Waits | None = None,
    deadline: Deadline | None = None,
) -> T:
    """``run`` for a thread: the same loop, blocking; no wait lasts past ``deadline``."""
    steps = Steps(op, waits, deadline)
    try:
        while (request := steps.next()) is not None:
            try:
                if isinstance(request, Call):
                    steps.reply = transport.call(request)
                elif isinstance(request, Parallel):
                    steps.reply = [_sync_call(transport, c) for c in request.calls]
                elif isinstance(request, Wait):
                    steps.reply = transport.wait(request.key, steps.seconds(request))
                elif isinstance(request, Checkpoint):
                    if deadline is not None:
                        deadline.clip(0.0)  # (TimeoutError once it has passed)
                    steps.reply = None
                elif isinstance(request, Gate):
                    steps.reply = enter_blocking(request)
                    if steps.reply:
                        steps.held.append(request.line.tlock)
                elif isinstance(request, Ungate):
                    leave(steps.held, request.line.tlock)
                elif isinstance(request, WaitAny):  # the first key's (see above)
                    token = transport.wait(request.keys[0], steps.seconds(request))
                    steps.reply = None if token is None else (0, token)
                else:
                    steps.reply = transport.read(request.keys)
            except BaseException as exc:  # thrown into the op at its yield
                steps.error = exc
        return steps.result
    finally:
        steps.end()


def _sync_call(transport: SyncTransport, call: Call) -> Any:
    """One call of a ``Parallel`` on a thread: its reply, or the exception it raised."""
    try:
        return transport.call(call)
    except Exception as exc:  # (reported in its place: the op decides)
        return exc


async def _wait_any(
    transport: AsyncTransport, keys: Sequence[str], seconds: float
) -> tuple[int, bytes] | None:
    """``WaitAny``: one wait per key, concurrently; the first token (see above)."""
    if len(keys) == 1:
        token = await transport.wait(keys[0], seconds)
        return None if token is None else (0, token)
    first: list[tuple[int, bytes]] = []

    async def one(index: int, key: str, scope: anyio.CancelScope) -> None:
        token = await transport.wait(key, seconds)
        if token is not None and not first:
            first.append((index, token))
            scope.cancel()

    async with anyio.create_task_group() as tg:
        for i, key in enumerate(keys):
            tg.start_soon(one, i, key, tg.cancel_scope)
    return first[0] if first else None
