"""The queues of ``aqueue.redis`` (FIFO and RandomShuffle), over the core (``_core``):
only what queues have; what they share with tables is the core's.

=====================  =================================================================
file                   what it holds
=====================  =================================================================
``_functions.lua``     the queues' part of the function library: every state change of
                       a queue, the take rule and the put rule
``_handle.py``         QUEUES (the product) and QueueHandle: the core Handle plus the
                       queue's settings, random numbers and room hint
``_open.py``           opening (settings checked, stored or compared) and deleting
``_ops.py``            the queue's own operations, sans I/O: TakeOp, PutOp (with their
                       undo, the ``aq_leave`` call)
``_shards.py``         a queue over shards, sans I/O: its stored layout (shard 0 is the
                       one-shard queue), closing and counting every shard, and the
                       undo of a sharded op's one-shard steps
``_sharded_put.py``    ShardedPutOp: the enqueue over shards, composed of the one-shard
                       steps, with its undo and its process's line
``_sharded_ops.py``    ShardedTakeOp: the dequeue over shards, composed of the
                       one-shard steps, with its undo
``_queue.py``          RedisQueue: each public operation checks its arguments,
                       checkpoints and runs its op with ``run``
``_blocking.py``       BlockingRedisQueue (``q.blocking()``): the same ops with
                       ``run_blocking``, a timeout and the event-loop check
=====================  =================================================================
"""
