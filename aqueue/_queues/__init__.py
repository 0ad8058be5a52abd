"""The queues layer: elements, storage, the engine, waiting and the queue classes.

=======================  ========================================================================
file                     what it holds
=======================  ========================================================================
``_declare.py``          what a constructor declares (dtypes, shapes, names), checked
``_spec.py``             ElementSpec: what an element is and how user data becomes one
                         (validation, conversion, packing); PrioritySpec
``_storage.py``          the Storage and FillableStorage interfaces; RingStorage (FIFO ring)
``_pool.py``             PoolStorage and ListPoolStorage (random order)
``_tuples.py``           DequeStorage and HeapStorage (per-element tuples); ``pad_stack``,
                         the one padding implementation
``_files.py``            the state-file container (versioned JSON header + raw arrays,
                         atomic save) of queue snapshots and pipeline states
``_snapshot_file.py``    a snapshot's file form (layouts per component, checks on load)
``_snapshot.py``         QueueSnapshot: a queue's spec, elements, closed flag and random
                         state at one moment (``snapshot``/``from_snapshot``)
``_requests.py``         PutRequest and GetRequest: what a waiting operation leaves behind
``_waiters.py``          Waiters: the parked requests of one direction, oldest first,
                         and how long they waited
``_rules.py``            Rules: capacity, floor, closed; the take rule, the put rule,
                         and who can progress
``_claims.py``           Claims: the elements waiting dequeues hold, and where enqueued
                         elements go (a filling head's batch first)
``_engine.py``           Engine: one queue's state (the parts above, held) and its
                         synchronous steps (``put``, ``get``, ``retry``, ``leave``,
                         ``close``), its contents and counters; the invariants, stated
                         once and checked by ``check_invariants``
``_backend.py``          the event-loop primitives: checkpoint and wakers, asyncio and trio
``_waiting.py``          how a parked request waits (tasks and threads); the ``Steps`` an
                         engine offers for it
``_accounting.py``       Producers: who still produces into a queue (the last clean end
                         closes it)
``_queue.py``            QueueBase: the public operations (check, step, wait), producer
                         accounting, snapshots and the kinds' registry
``_views.py``            BlockingQueue (the thread view) and the async iterators
``_blocked.py``          which threads are inside a blocking call of a thread view now
                         (both backends; read by aqueue.testing's leak check)
``_fifo.py``             FIFOQueue, PaddingFIFOQueue, StageQueue (between pipeline stages)
``_reorder.py``          RandomShuffleQueue, PriorityQueue
``_protocol.py``         the queue interfaces the upper layers rely on (AsyncQueue,
                         BlockingView), implemented by these queues and by aqueue.redis;
                         QueueStatistics
=======================  ========================================================================

Dependencies point down the table's reverse order: storages know only specs; the
engine knows storages, rules, claims, waiters and requests; waiting knows only the
``Steps`` protocol; the queue classes know all of them. Nothing here imports the
running or input layers.

One ``dequeue_many``, from the public method to the storage: ``QueueBase.dequeue_many``
(``_queue.py``: check ``n``, checkpoint or park first) → ``Engine.get`` (``_engine.py``:
the take rule, ``Rules.take_count``, under the lock) → ``RingStorage.take_batch``
(``_storage.py``); when it must wait, ``wait_task`` (``_waiting.py``) → ``Engine.retry``.

The kinds differ only in their element spec and storage:

===================  ===============================  =============================
kind                 declared, fully defined shapes   otherwise
===================  ===============================  =============================
FIFOQueue            RingStorage (fills batches)      DequeStorage
PaddingFIFOQueue     RingStorage (fills batches)      DequeStorage, padded batches
RandomShuffleQueue   PoolStorage                      ListPoolStorage
PriorityQueue        HeapStorage                      HeapStorage
StageQueue           RingStorage of Python objects    (always)
===================  ===============================  =============================
"""
