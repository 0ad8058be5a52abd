"""The queues layer: elements, storage, the engine and the queue classes.

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
``_requests.py``         PutRequest and GetRequest (what a waiting operation leaves
                         behind: kernel requests) and Claims (the elements waiting
                         dequeues hold, and where enqueued elements go: a filling head's
                         batch first)
``_engine.py``           Engine: one queue's state (storage and claims held, its
                         waiting lists), its rules (capacity, floor, closed; the take
                         and put rules, who can progress), its synchronous steps
                         (``put``, ``get``, ``retry``, ``leave``, ``close``), contents
                         and counters; the invariants, checked by ``check_invariants``
``_accounting.py``       Producers: who still produces into a queue (the last clean end
                         closes it)
``_queue.py``            QueueBase: the public operations (check, step, wait), producer
                         accounting, snapshots and the kinds' registry
``_views.py``            BlockingQueue (the thread view) and the async iterators
``_fifo.py``             FIFOQueue, PaddingFIFOQueue, StageQueue (between pipeline stages)
``_reorder.py``          RandomShuffleQueue, PriorityQueue
``_protocol.py``         the queue interfaces the upper layers rely on (AsyncQueue,
                         QueueView), implemented by these queues and by aqueue.redis;
                         QueueStatistics
=======================  ========================================================================

Dependencies point down the table's reverse order: storages know only specs; the
engine knows storages and requests; the queue classes know all of them. Below them
all is the waiting kernel (``aqueue/_waiting/``: requests' lists, wakers, the waits).
Nothing here imports the replay, running or input layers.

One ``dequeue_many``, from the public method to the storage: ``QueueBase.dequeue_many``
(``_queue.py``: check ``n``, checkpoint or park first) → ``Engine.get`` (``_engine.py``:
the take rule under the lock) → ``RingStorage.take_batch`` (``_storage.py``); when it
must wait, ``Engine.get`` parks a ``GetRequest`` and ``wait_task``
(``aqueue/_waiting/_wait.py``) sleeps, then calls ``Engine.retry``.

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
