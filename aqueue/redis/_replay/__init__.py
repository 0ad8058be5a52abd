"""The replay tables of ``aqueue.redis``, over the core (``_core``).

=====================  =================================================================
file                   what it holds
=====================  =================================================================
``_functions.lua``     the tables' part of the function library: items, sum trees, the
                       rate limiter, waiters and producers
``_ops.py``            TableHandle and a table's operations, sans I/O: InsertOp, SampleOp
                       (with their undo, the ``rt_leave`` call) and the one-call ones
``_table.py``          RedisReplayTable: each operation checks its arguments (the
                       in-process checks), checkpoints and runs its op with ``run``
``_blocking.py``       BlockingRedisReplayTable (``table.blocking()``): the same ops
                       with ``run_blocking`` and a timeout
=====================  =================================================================
"""
