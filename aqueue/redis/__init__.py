"""aqueue.redis: FIFO and RandomShuffle queues shared by processes on many hosts.

PLACEHOLDER DOCSTRING (completed below once the semantics are pinned down by tests).
"""

from __future__ import annotations

try:
    import msgpack as _msgpack  # noqa: F401
    import redis as _redis  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"aqueue.redis needs the redis and msgpack packages: pip install 'aqueue[redis]' ({_exc})"
    ) from _exc

from ._blocking import BlockingRedisQueue as BlockingRedisQueue
from ._errors import PayloadError as PayloadError
from ._errors import ServerConnectionError as ServerConnectionError
from ._errors import ServerError as ServerError
from ._library import LIBRARY_VERSION as LIBRARY_VERSION
from ._queue import RedisFIFOQueue as RedisFIFOQueue
from ._queue import RedisQueue as RedisQueue
from ._queue import RedisRandomShuffleQueue as RedisRandomShuffleQueue
from ._server import RedisServer as RedisServer
from ._server import connect as connect

__all__ = [
    "LIBRARY_VERSION",
    "BlockingRedisQueue",
    "PayloadError",
    "RedisFIFOQueue",
    "RedisQueue",
    "RedisRandomShuffleQueue",
    "RedisServer",
    "ServerConnectionError",
    "ServerError",
    "connect",
]
