"""The queues of ``aqueue.redis`` (FIFO and RandomShuffle), over the core (``_core``).

=====================  =================================================================
file                   what it holds
=====================  =================================================================
``_functions.lua``     the queues' part of the function library: every state change of
                       a queue, the take rule and the put rule
``_handle.py``         Handle: what every operation of one queue needs (name, spec,
                       codec, settings, random numbers)
``_ops.py``            the operations, sans I/O: TakeOp, PutOp (with their undo, the
                       ``aq_leave`` call) and the one-call ones (stats, close, producers)
``_queue.py``          RedisQueue: each public operation checks its arguments,
                       checkpoints and runs its op with ``run``
``_blocking.py``       BlockingRedisQueue (``q.blocking()``): the same ops with
                       ``run_blocking``, a timeout and the event-loop check
=====================  =================================================================
"""
