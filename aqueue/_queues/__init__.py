"""The queues layer: elements, storage, the engine, the drivers and the queue classes.

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
``_bookkeeping.py``      EngineCore: the engine's state (slots) and the steps all its
                         operations share (admission, claims, readiness, wake-ups)
``_fast.py``             FastPaths: the engine's fast paths (``*_now``: a whole operation
                         under the lock, no request object)
``_contents.py``         EngineContents: the engine's elements read or loaded whole
                         (``dump``, ``load``) and its counters (``statistics``)
``_engine.py``           Engine: the synchronous steps of one queue, assembled from the
                         three above; the requests (``park``, ``try_put``/``try_get``,
                         ``abandon``) and ``close``
``_drivers.py``          how requests wait: TaskDriver (tasks), ThreadDriver (threads),
                         ``get_nowait``/``put_nowait`` (never)
``_backend.py``          the event-loop primitives: checkpoint and wakers, asyncio and trio
``_waiting.py``          how a parked request waits (tasks and threads); the ``Steps`` an
                         engine offers for it
``_lifecycle.py``        QueueLifecycle: snapshots (``snapshot``/``from_snapshot``, the
                         kinds' registry) and producer accounting, mixed into QueueBase
``_queue.py``            QueueBase: the public operations (convert, fast path, driver)
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
engine knows storages and requests; drivers know the engine; the queue classes know
all of them. Nothing here imports the running or input layers.

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
