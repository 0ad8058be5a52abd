"""The waiting kernel: how an operation that cannot complete waits, for every engine.

The bottom layer above ``aqueue/_errors.py``: the queues' ``Engine`` and the replay
tables' ``ReplayEngine`` both park their requests, wake them and wait for them here,
and nothing here knows either engine (an engine is anything with the ``Steps``
methods). Nothing here imports a layer above.

=======================  ========================================================================
file                     what it holds
=======================  ========================================================================
``_backend.py``          the event-loop primitives, asyncio and trio: ``checkpoint``, wakers
                         (``make_waker``), ``in_event_loop``, ``soon_threadsafe``
``_wait.py``             ``Request`` and ``WAIT``; ``Waiters`` (the parked requests of one
                         direction and their blocked-time clock); ``wake`` and
                         ``thread_step`` (a thread's step and its deferred wake-ups, written
                         once); ``wait_task``/``wait_thread``; the slow-first-wait watch
``_tracking.py``         the switch of the test-only bookkeeping ``aqueue.testing`` reads,
                         and the threads blocked in a thread view's call
=======================  ========================================================================

One waiting ``dequeue_many``: the engine's first step parks a request in a ``Waiters``
list with a waker from ``make_waker`` and returns it; ``wait_task`` sleeps on the
waker, then calls the engine's ``retry``, which completes it (``Waiters.leave``) or
re-arms it.
"""
