"""The least-privilege ACL of an aqueue client (``ACL_SETUSER``), derived from the Lua
library: Redis checks every command a function runs against the calling user's ACL,
so besides what the client sends itself (``CLIENT_COMMANDS``: FCALL/FCALL_RO, BLPOP
for the waits, MULTI/MSET/EXEC to stage payloads with an enqueue, MGET to read them
behind a take) the user needs exactly the data commands the functions use, on
``aq:*`` keys only.

Invariant: ``FUNCTION_COMMANDS`` lists every command the library (all its parts,
``_library.PARTS``) calls (a test checks it against the source), so the ACL line in
the docs is always sufficient.
"""

from __future__ import annotations

__all__ = ["ACL_SETUSER", "CLIENT_COMMANDS", "FUNCTION_COMMANDS"]

CLIENT_COMMANDS = ["fcall", "fcall_ro", "blpop", "ping", "multi", "exec", "mset", "mget"]

FUNCTION_COMMANDS = [
    *("copy", "del", "exists", "get", "getrange", "hdel", "hget", "hincrby", "hkeys"),
    *("hlen", "hmget", "hset", "hvals", "llen", "lpush", "lrange", "ltrim", "pexpire"),
    *("rename", "rpush", "set", "setrange", "time", "zadd", "zcard", "zcount", "zrange"),
    *("zrem", "zremrangebyscore", "zscore"),
]

ACL_SETUSER = (
    "ACL SETUSER aqueue-actor on >PASSWORD resetkeys ~aq:* resetchannels -@all "
    + " ".join(f"+{c}" for c in [*CLIENT_COMMANDS, *FUNCTION_COMMANDS])
)
