"""Loading aqueue's Lua function library into a Redis server: one library, one
``FUNCTION LOAD``, made of one part per folder (``PARTS``): the core's
(``_core/_functions.lua``: the helpers every part uses, the version function), then
each product's (``_queues/_functions.lua``, ``_replay/_functions.lua``,
``_replay/trajectory/_functions.lua``), which call the core's helpers. A new product
adds its part to ``PARTS``.

Invariants:
- the library is named ``aqueue`` and its ``aq_version`` function returns
  ``LIBRARY_VERSION``: the format number and a hash of the Lua source (all its parts),
  so any change to the source is a new version;
- a client that may load (``load_functions=True``) replaces a missing or different
  library with ``FUNCTION LOAD REPLACE``; one that may not (an ACL user without
  ``FUNCTION``) raises ServerError telling the admin what to load. Clients of different
  versions must therefore not share a server.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

__all__ = ["LIBRARY_SOURCE", "LIBRARY_VERSION", "PARTS", "library_problem"]

PARTS = (
    "_core/_functions.lua",
    "_queues/_functions.lua",
    "_replay/_functions.lua",
    "_replay/trajectory/_functions.lua",
)
"""The library's parts in load order, as paths inside ``aqueue/redis``."""
_REDIS = resources.files(__package__.rpartition(".")[0])
_RAW = "\n".join(_REDIS.joinpath(part).read_text(encoding="utf-8") for part in PARTS)
LIBRARY_VERSION = "2:" + hashlib.sha1(_RAW.encode()).hexdigest()[:12]
LIBRARY_SOURCE = _RAW.replace("@VERSION@", LIBRARY_VERSION)


def library_problem(reply: Any) -> str | None:
    """What is wrong with the server's library, given its ``aq_version`` reply or
    error (None: the right version is loaded)."""
    if isinstance(reply, bytes):
        reply = reply.decode("utf-8", "replace")
    if reply == LIBRARY_VERSION:
        return None
    if isinstance(reply, Exception):
        text = str(reply)
        if "not found" in text.lower():
            return "aqueue's Lua library is not loaded on the server"
        return f"checking aqueue's Lua library failed: {text}"
    return (
        f"the server has aqueue's Lua library version {reply!r}, "
        f"this client needs {LIBRARY_VERSION!r}"
    )
