"""What every product of ``aqueue.redis`` uses: a server's connections, requests and
errors, the element format, the handle and the operations all products share, the
shared part of the function library. Nothing here imports a product (``_queues``,
``_replay``) or the server object: a product imports the core, never another product.

=====================  =================================================================
file                   what it holds
=====================  =================================================================
``_errors.py``         the errors only this backend raises, drawn as a tree
``_spec.py``           the in-process ElementSpec and argument checks, reused; the
                       dtypes AQ1 carries; the name check (aqueue's, plus no braces)
``_codec.py``          AQ1: elements to bytes and back (msgpack header + raw bytes)
``_transport.py``      what an operation asks (Call, Read, Wait, Parallel, ...); the
                       AsyncTransport and SyncTransport protocols; the two drivers ``run`` and
                       ``run_blocking``; the wait clock; the thread views' event-loop
                       check
``_line.py``           one line per process at a shared object: the Gate and Ungate
                       requests, and how the drivers perform them
``_clients.py``        the transports over redis-py: RedisAsyncio (asyncio), RedisThreads
                       (trio: the sync client in worker threads), RedisSync (threads);
                       errors mapped, the library loaded again where it went missing
``_handle.py``         Product (a product's functions, noun, layout version); Handle,
                       the base of every product's handle (identity, keys under one hash
                       tag, codec, timings); ``key_prefix``
``_shared.py``         the operations every product shares, sans I/O: ``undoing``,
                       statistics, close, producer registration and its heartbeat,
                       ``open_shared`` (stored settings and the reopen check) and
                       ``readable``; the Producers protocol; ``INLINE_MAX``
``_shards.py``         an object's layout over shards: the shards' hash tags (salts
                       spread over a cluster's primaries), totals split, the
                       ``shards=`` argument and the stored-count check
``_diagnose.py``       what connect() says about a URL that is none, a failed first
                       call, a memory policy that evicts
``_connection.py``     Connection: one block's transports, the checks on entering, the
                       producers' heartbeat, the end of the block
``_functions.lua``     the function library's first part: the helpers every product's
                       part calls, and the version function
``_library.py``        loading the library (its parts in order, versioned by a hash)
``_acl.py``            the least-privilege ACL line, derived from the library
``_cluster/``          the transports over a Redis Cluster (``connect(cluster=True)``):
                       each call routed to the primary of its hash tag's slot, the
                       library on every primary, failovers waited for or reported
=====================  =================================================================

A sharded object is N handles whose ``key_prefix`` carry a tag each (``_shards.py``).
"""
