"""The input layer: TensorFlow's input functions, batching, and the composable Pipeline.

===================  ==================================================================
file                 what it holds
===================  ==================================================================
``_epochs.py``       Epochs: the one loop that reads a source ``num_epochs`` times
                     (in order or permuted per epoch)
``_functions.py``    ``input_producer``, ``string_input_producer``,
                     ``range_input_producer``, ``slice_input_producer``,
                     ``limit_epochs``
``_batch_spec.py``   the arguments of a batch queue: given, from a source queue, or
                     inferred from the first example
``_batching.py``     Batches, and the plan that builds a batch queue and its runner
``_batch_fns.py``    ``batch``, ``shuffle_batch`` (one source), and how the batching
                     functions' overloads type their Batches
``_batch_join.py``   ``batch_join``, ``shuffle_batch_join`` (one producer per source)
``_pipeline.py``     Pipeline: the builder's public methods (sources, stages, ``open``,
                     ``run``, ``statistics``, ``describe``)
``_stage_spec.py``   StageSpec, one stage of a chain: the checks of each builder
                     method's arguments, and default queue capacities
``_pipeline_run.py`` one run of a pipeline: PipelineRun (its queues, runners and stage
                     steps), OpenPipeline and PipelineItems
``_report.py``       a run's measurements and report: occupancy sampling,
                     StageStatistics per stage, ``describe()`` and the bottleneck
``_control.py``      Control: how a run tells its workers to stop or to pause (and
                     Stage, one stage's share of it)
``_sources.py``      the source stage's producers
``_stages.py``       what the other stages do per burst (filter, shuffle, batch,
                     prefetch, ``to_queue``), and how bursts are sized
``_maps.py``         map stages: thread, task and process workers, ordered delivery
``_meter.py``        how stages are measured: StageStatistics
``_checkpoint.py``   ``await items.checkpoint()``: pause at rest, capture, resume
``_state.py``        PipelineState (a checkpoint) and its file
===================  ==================================================================

Everything here is built from the two layers below: queues (``aqueue/_queues``) and
runners under a coordinator (``aqueue/_running``).
"""
