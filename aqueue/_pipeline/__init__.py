"""The composable Pipeline: what a pipeline is (its spec), apart from what a running
pipeline does (its run).

The spec: a ``Pipeline`` is a chain of ``StageSpec`` records, checked when each builder
method is called; nothing runs until ``open()``/``run()``, which hand the specs to a
run. The run: one ``PipelineRun`` per ``open()`` builds a queue between each two
stages and the runners that move bursts of items through them, under a coordinator.

===================  ==================================================================
file                 what it holds
===================  ==================================================================
*spec*
``_pipeline.py``     Pipeline: the builder's public methods (sources, stages, ``open``,
                     ``run``, ``statistics``, ``describe``)
``_stage_spec.py``   StageSpec, one stage of a chain: the checks of each builder
                     method's arguments, and default queue capacities
*run*
``_run.py``          one run of a pipeline: PipelineRun (its queues, runners and stage
                     steps), OpenPipeline and PipelineItems
``_control.py``      Control: how a run tells its workers to stop or to pause (and
                     Stage, one stage's share of it)
``_sources.py``      the source stage's producers
``_stages.py``       what the other stages do per burst (filter, shuffle, batch,
                     prefetch, ``to_queue``), and how bursts are sized
``_maps.py``         map stages: thread and task workers, ordered delivery
``_procmap.py``      process map stages: the driver threads' steps, the ledger of
                     bursts in hand (what a checkpoint takes from them)
``_fuser.py``        batches the workers write in place (``Fuser``), for the batch stage
``_pool.py``         a process map's worker processes: start (spawn), a burst's send and
                     receive, death, the end
``_handoff.py``      reading a burst's results back from shared memory
``_worker.py``       what runs inside a worker process (standard library and numpy)
``_shm.py``          shared memory: an arena of anonymous chunks cut into blocks
``_meter.py``        how stages are measured: StageStatistics
``_report.py``       a run's measurements and report: occupancy sampling,
                     StageStatistics per stage, ``describe()`` and the bottleneck
``_checkpoint.py``   ``await items.checkpoint()``: pause at rest, capture, resume
``_state.py``        PipelineState (a checkpoint) and its file
===================  ==================================================================

Only ``Pipeline``'s ``open``/``run``/``checkpoint`` methods reach from the spec into
the run. Everything here is built from the layers below: queues (``aqueue/_queues``),
runners under a coordinator (``aqueue/_running``) and ``Epochs`` (``aqueue/_input``).
"""
