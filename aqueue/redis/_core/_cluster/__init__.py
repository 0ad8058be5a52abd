"""aqueue.redis over a Redis Cluster: the client side.

Queues and tables keep every key of one shard under one hash tag (``aq:{tag}:...``),
so each server function stays atomic in one slot; this package gets each request to
the primary serving its slot and keeps it going, or failing cleanly, while a node
fails and its replica takes over. The same ``Call``/``Read``/``Wait`` requests and
drivers as on one server (``aqueue.redis._core._transport``) run over it.

Its files, bottom up (each module's docstring states its invariants):

=====================  =================================================================
file                   what it holds
=====================  =================================================================
``_routing.py``        the slot of aqueue's keys; redis-py's async and sync cluster
                       clients taught to find an FCALL's slot locally (no COMMAND
                       GETKEYS round trips), to refresh the slot map without closing
                       other tasks' connections, and to reconnect a connection its
                       server closed; their options (no retries inside redis-py)
``_faults.py``         which errors prove a request did not run; ``Outages`` and
                       ``Recovery``: how long a request waits for a failover; ``Attempts``:
                       the rule both transports follow after a failed try
``_loading.py``        aqueue's function library on every primary (checked at the start,
                       loaded again where a call meets "Function not found")
``_transport.py``      ``ClusterAsyncio`` and ``ClusterSync``: the transports (requests
                       to the slot's primary, non-transactional pipelines, the retry
                       loop over ``Recovery``, the library reload)
=====================  =================================================================
"""

from ._faults import DEFAULT_FAILOVER_TIMEOUT
from ._transport import ClusterAsyncio, ClusterSync

__all__ = ["DEFAULT_FAILOVER_TIMEOUT", "ClusterAsyncio", "ClusterSync"]
