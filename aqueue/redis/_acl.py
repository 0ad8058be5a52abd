"""The least-privilege ACL of an aqueue client (``ACL_SETUSER``), derived from the Lua
library: Redis checks every command a function runs against the calling user's ACL,
so besides FCALL/FCALL_RO and BLPOP (the waits) the user needs exactly the data
commands the functions use, on ``aq:*`` keys only.

Invariant: ``FUNCTION_COMMANDS`` lists every command ``_functions.lua`` calls (a test
checks it against the source), so the ACL line in the docs is always sufficient.
"""

from __future__ import annotations

__all__ = ["ACL_SETUSER", "FUNCTION_COMMANDS"]

FUNCTION_COMMANDS = [
    *("del", "exists", "get", "hdel", "hget", "hincrby", "hlen", "hmget", "hset"),
    *("llen", "lmove", "lpush", "lrange", "pexpire", "rpush", "set", "time"),
    *("zadd", "zcard", "zcount", "zrange", "zrem", "zremrangebyscore", "zscore"),
]

ACL_SETUSER = (
    "ACL SETUSER aqueue-actor on >PASSWORD resetkeys ~aq:* resetchannels -@all "
    "+fcall +fcall_ro +blpop +ping " + " ".join(f"+{c}" for c in FUNCTION_COMMANDS)
)
