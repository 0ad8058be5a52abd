"""The replay tables of ``aqueue.redis``, over the core (``_core``): only what tables
have; what they share with queues is the core's.

=======================  ===============================================================
file                     what it holds
=======================  ===============================================================
``_functions.lua``       the tables' part of the function library: items, sum trees, the
                         rate limiter, waiters and producers
``_handle.py``           TABLES (the product) and TableHandle: the core Handle plus the
                         table's settings, random numbers and producer ids
``_open.py``             opening (settings checked, stored or compared, what the Lua reads
                         derived; ``FANOUT``) and deleting
``_ops.py``              the table's own operations, sans I/O: InsertOp, SampleOp (with
                         their undo, the ``rt_leave`` call), update, delete, the record of
                         its statistics
``_sharded.py``          TableOps: the table's operations over its shards (one shard:
                         the ops above)
``_sharded_sample.py``   ShardedSample: the exact sharded sample (probe, hold, commit)
``_table.py``            RedisReplayTable: each operation checks its arguments (the
                         in-process checks), checkpoints and runs its op with ``run``
``_tables.py``           ReplayTables: ``server.replay_table`` and ``delete_table`` (a
                         base of RedisServer)
``_blocking.py``         BlockingRedisReplayTable (``table.blocking()``): the same ops
                         with ``run_blocking`` and a timeout; BlockingRedisSampling, its
                         sampling side, which the trajectory tables' view shares
``trajectory/``          the trajectory tables: replay tables whose items are windows of
                         steps stored once (their Lua part, opening, ops, the table and
                         its writers, their thread views); they build on the files above
=======================  ===============================================================
"""
