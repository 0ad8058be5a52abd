"""Exceptions that only the Redis backend raises (the shared ones live in ``aqueue``).

The tree, below aqueue's own ``QueueError``::

    QueueError
    ├── ServerError
    │   │   the server refused or failed a call: an ACL denial (NOPERM), aqueue's Lua
    │   │   library missing or of another version
    │   ├── ServerFullError
    │   │       the server reached ``maxmemory`` (under ``noeviction``) and refused a
    │   │       call that adds data: an enqueue or an insert (takes, samples, updates,
    │   │       closes, statistics and opening still work)
    │   └── ServerConnectionError(ServerError, ConnectionError)
    │       │   the connection was lost or could not be made (server down, timeout);
    │       │   every waiting call raises it within about one socket timeout
    │       │   ``connect()`` raises one of these three instead, naming the server:
    │       ├── ConnectFailedError        nothing answered at HOST:PORT (connection
    │       │                             refused, unknown host, timed out)
    │       ├── AuthenticationFailedError the server refused the credentials in the URL
    │       ├── PasswordRequiredError     the server requires a password; the URL has none
    │       └── ServerClosedError(ServerConnectionError, anyio.ClosedResourceError)
    │                                     a queue, table or view used after the
    │                                     ``async with connect(...)`` block it was opened
    │                                     in has ended (nothing reconnects)
    └── PayloadError(QueueError, ValueError)
            an element read from the server is not a valid AQ1 payload for this
            queue (foreign or corrupted data written by another client)

Queue semantics keep aqueue's own errors: QueueClosedError, OutOfRangeError and
ElementSpecError mean exactly what they mean for the in-process queues.
"""

from __future__ import annotations

import anyio

import aqueue

__all__ = [
    "AuthenticationFailedError",
    "ConnectFailedError",
    "PasswordRequiredError",
    "PayloadError",
    "ServerClosedError",
    "ServerConnectionError",
    "ServerError",
    "ServerFullError",
]


class ServerError(aqueue.QueueError):
    """The Redis server refused or failed a call made for a queue."""


class ServerFullError(ServerError):
    """The Redis server reached ``maxmemory`` (with ``maxmemory-policy noeviction``) and
    refused a call that adds data; calls that take, read or free memory still work."""


class ServerConnectionError(ServerError, ConnectionError):
    """The connection to the Redis server was lost, refused or timed out."""


class ConnectFailedError(ServerConnectionError):
    """``connect()`` could not reach the server: nothing listens at the URL's host and
    port (connection refused), the host is unknown, or the attempt timed out."""


class AuthenticationFailedError(ServerConnectionError):
    """``connect()`` reached the server, which refused the URL's user or password."""


class PasswordRequiredError(ServerConnectionError):
    """``connect()`` reached the server, which requires a password the URL does not give."""


class ServerClosedError(ServerConnectionError, anyio.ClosedResourceError):
    """A queue, table or thread view was used after the ``async with
    aqueue.redis.connect(...)`` block that opened it had ended: its connections are
    closed for good (open the object again inside a new block)."""


class PayloadError(aqueue.QueueError, ValueError):
    """A stored element is not a valid AQ1 payload for the queue that read it."""
