"""What a cluster call may retry, and for how long: the rule both cluster transports
follow while a node fails and its replica takes over (sans I/O: they only sleep).

A call may be sent again only when the error proves that it did not run:

- the server refused it before running it: CLUSTERDOWN (no quorum, or a slot's
  primary failed and no replica has taken over yet), TRYAGAIN, MOVED/ASK that redis-py
  gave up following, LOADING (a node still loading its data);
- the connection was never made: "Error 111 connecting to ...", "Timeout connecting
  to server" (redis-py's wording for a failed connect, before anything is sent;
  ``tests/redis/cluster`` pins it against a killed node);
- redis-py found no node for the slot (``SlotNotCoveredError``) or ran out of
  redirections (``ClusterError: TTL exhausted``);
- redis-py closed the connection under the request before writing it: its async
  cluster client closes a node's idle connections after an error on that node, and a
  task that took one of them meanwhile fails with ``AttributeError: 'NoneType' object
  has no attribute 'writelines'`` (seen in the failover benchmark; the command was
  not written, the transports report it as a lost connection).

Anything else may have run (a connection lost with the command sent, a read timing
out): the call fails at once with ServerConnectionError, and the op resolves the
outcome with its lease or waiter id, as on one server. A ``Wait`` (BLPOP) and a
``Read`` (MGET) are not state changes: they retry any connection error (a wake-up
token lost with a dropped BLPOP only delays a waiter by one wait).

How long: an *outage* of a slot starts with the first failure of any request to it
and lasts while failures keep coming (one at least every ``_GAP`` seconds, which the
retrying requests guarantee); ``Outages`` keeps them per slot for one transport, and
a successful request to the slot ends its outage. A request gives up
``failover_timeout`` seconds after its outage began, not after its own first failure:
so every waiter of a dead shard fails at about the same time, and the undo call an
op sends after giving up (``aq_leave``) fails at once instead of waiting as long
again.

Invariants:
- no request waits on a dead slot more than ``failover_timeout`` seconds after the
  slot's first failure (the default, 20 s, is Redis' default ``cluster-node-timeout``
  of 15 s plus 5 s for the election);
- delays grow from 20 ms to 250 ms: a promotion is noticed within a quarter second,
  and a dead node costs a few connection attempts a second, not a busy loop;
- an outage is forgotten once its slot answers, or once no failure was seen on it
  for ``_GAP`` seconds (an old outage never shortens a new one).
"""

from __future__ import annotations

import time
from typing import Final

import redis
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)

from .._errors import ServerConnectionError
from ._routing import slot_of

__all__ = [
    "DEFAULT_FAILOVER_TIMEOUT",
    "RELOAD",
    "Attempts",
    "Outages",
    "Recovery",
    "closed_under",
    "function_missing",
    "not_run",
]

DEFAULT_FAILOVER_TIMEOUT = 20.0
_FIRST_DELAY = 0.02
_MAX_DELAY = 0.25
_GAP = 4 * _MAX_DELAY
_RELOADS = 2  # library loads one request may ask for (a stale slot map may need two)
RELOAD: Final = "reload"


def closed_under(exc: BaseException) -> bool:
    """Whether ``exc`` is redis-py's asyncio connection found closed as the command was
    about to be written (see the module docstring)."""
    return isinstance(exc, AttributeError) and "no attribute 'writelines'" in str(exc)


def not_run(exc: BaseException) -> bool:
    """Whether redis-py error ``exc`` proves that its command did not run."""
    if closed_under(exc):
        return True
    if isinstance(exc, (ClusterDownError, TryAgainError, AskError, BusyLoadingError)):
        return True  # (AskError covers MovedError)
    if isinstance(exc, SlotNotCoveredError):
        return True
    if type(exc) is ClusterError and "TTL exhausted" in str(exc):
        return True
    if isinstance(exc, redis.AuthenticationError):
        return False  # refused credentials: waiting will not help
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        text = str(exc)
        return " connecting to " in text or text.startswith(
            ("Error connecting to", "Timeout connecting to")
        )
    return False


def function_missing(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the server saying aqueue's function is not loaded there (the
    call did not run)."""
    return isinstance(exc, redis.ResponseError) and "function not found" in str(exc).lower()


def _transient(exc: BaseException, idempotent: bool) -> bool:
    if not_run(exc):
        return True
    connection = isinstance(exc, (redis.ConnectionError, redis.TimeoutError))
    return idempotent and connection and not isinstance(exc, redis.AuthenticationError)


class Outages:
    """The ongoing outages of one transport's slots: slot -> [first failure, last
    failure] (monotonic seconds). Thread-safe (single dict operations)."""

    __slots__ = ("_slots",)

    def __init__(self) -> None:
        self._slots: dict[int, list[float]] = {}

    def __bool__(self) -> bool:
        return bool(self._slots)

    def began(self, slot: int, now: float) -> float:
        """Record a failure on ``slot`` at ``now``; when its outage began."""
        span = self._slots.get(slot)
        if span is None or now - span[1] > _GAP:
            span = self._slots[slot] = [now, now]
        span[1] = now
        return span[0]

    def end(self, slot: int) -> None:
        """``slot`` answered: its outage, if any, is over."""
        self._slots.pop(slot, None)


class Recovery:
    """The retry budget of one request to ``slot``: ``delay(cause)`` says how long to
    pause before sending it again (None: never again)."""

    __slots__ = ("_idempotent", "_next", "_outages", "_slot", "_timeout", "_what", "failures")

    def __init__(
        self,
        outages: Outages,
        slot: int,
        failover_timeout: float,
        what: str,
        *,
        idempotent: bool = False,
    ) -> None:
        self._outages = outages
        self._slot = slot
        self._timeout = failover_timeout
        self._what = what
        self._idempotent = idempotent
        self._next = _FIRST_DELAY
        self.failures = 0

    def delay(self, cause: BaseException | None) -> float | None:
        """Seconds to wait before sending the request again after it failed with the
        redis-py error ``cause``; None when it must not be sent again (it may have run,
        or the error is not a fault of the cluster): the caller raises its error.

        Raises:
            ServerConnectionError: the slot's outage began ``failover_timeout``
                seconds ago or more.
        """
        if cause is None or not _transient(cause, self._idempotent):
            return None
        now = time.monotonic()
        deadline = self._outages.began(self._slot, now) + self._timeout
        self.failures += 1
        if now >= deadline:
            raise ServerConnectionError(
                f"{self._what}: the Redis Cluster did not recover within "
                f"{self._timeout:g} s (failover_timeout; this request tried "
                f"{self.failures} times, the last failed with: {cause})"
            ) from cause
        out = min(self._next, deadline - now)
        self._next = min(self._next * 2, _MAX_DELAY)
        return out


class Attempts:
    """What a transport does after a try of one request failed, sans I/O: ``after``
    says load the library and try again (RELOAD), pause that many seconds and try
    again, or give up (None: the caller raises its error). Both transports run their
    requests through it, so they follow one rule."""

    __slots__ = ("_idempotent", "_key", "_load", "_outages", "_recovery", "_reloads", "_timeout")

    def __init__(
        self,
        outages: Outages,
        key: str,
        failover_timeout: float,
        *,
        load: bool,
        idempotent: bool = False,
    ) -> None:
        self._outages = outages
        self._key = key
        self._timeout = failover_timeout
        self._load = load
        self._idempotent = idempotent
        self._reloads = 0
        self._recovery: Recovery | None = None

    def after(self, exc: BaseException, what: str) -> float | str | None:
        """The next step after the try failed with ``exc`` (a redis-py error, or an
        aqueue error caused by one).

        Raises:
            ServerConnectionError: the request's slot did not recover in time.
        """
        raw = isinstance(exc, (redis.RedisError, RedisClusterException)) or closed_under(exc)
        cause = exc if raw else exc.__cause__
        if function_missing(cause) and self._load and self._reloads < _RELOADS:
            self._reloads += 1
            return RELOAD
        if self._recovery is None:
            slot = slot_of(self._key)
            self._recovery = Recovery(
                self._outages, slot, self._timeout, what, idempotent=self._idempotent
            )
        return self._recovery.delay(cause)
