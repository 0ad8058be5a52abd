"""What every product of ``aqueue.redis`` uses: a server's connections, requests and
errors, the element format, the shared part of the function library. Nothing here
imports a product (``_queues``, ``_replay``) or the server object.

=====================  =================================================================
file                   what it holds
=====================  =================================================================
``_errors.py``         the errors only this backend raises, drawn as a tree
``_spec.py``           the in-process ElementSpec and argument checks, reused; the
                       dtypes AQ1 carries; the name check
``_codec.py``          AQ1: elements to bytes and back (msgpack header + raw bytes)
``_transport.py``      what an operation asks (Call, Read, Wait); the AsyncTransport and
                       SyncTransport protocols; the two drivers ``run`` and
                       ``run_blocking``; the wait clock
``_clients.py``        the transports over redis-py: RedisAsyncio (asyncio), RedisThreads
                       (trio: the sync client in worker threads), RedisSync (threads)
``_functions.lua``     the function library's first part: the helpers every product's
                       part calls, and the version function
``_library.py``        loading the library (its parts, versioned by a hash of the source)
``_acl.py``            the least-privilege ACL line, derived from the library
=====================  =================================================================
"""
