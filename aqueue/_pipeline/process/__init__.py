"""The process executor: ``map(fn, executor="process")``.

``concurrency`` worker processes per stage (spawned, never forked), each driven by one
thread of the main process that hands it a burst at a time; numpy results come back
through shared memory, and where a batch stage follows, the workers write the batches
in place.

=================  ====================================================================
file               what it holds
=================  ====================================================================
``_driver.py``     a process map's step: one driver per worker (bursts kept in flight,
                   results handed on as they are or, with a batch writer, in batches),
                   the ledger of bursts in hand (what a checkpoint takes from them)
``_inplace.py``    batches written in place (``BatchWriter``), handed to the batch stage
                   as one record each (``BatchRecord``)
``_workers.py``    a process map's worker processes (``WorkerPool``): start (spawn),
                   workers added to a running map, workers retired after a tuner's
                   cut holds and started again by a raise, death, the end
``_proc.py``       one worker process seen from the main process (``Worker``): its
                   spawn, a burst's send and receive, its death and its socket's end
``_handoff.py``    a burst's hand-off seen from the main process: what was sent,
                   reading its results back from shared memory, the errors of what
                   went wrong
``_worker.py``     what runs inside a worker process (standard library and numpy)
``_shm.py``        shared memory: an arena of anonymous chunks cut into blocks
=================  ====================================================================
"""
