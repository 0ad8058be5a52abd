"""One run of a pipeline: what ``open()`` starts and what it gives.

===================  ==================================================================
file                 what it holds
===================  ==================================================================
``_open.py``         OpenPipeline and PipelineItems: the block ``open()`` gives, the
                     reads of its items, where a stage's failure is raised
``_run.py``          PipelineRun: its queues, runners and stages, the process maps'
                     worker processes, how a failure or the end stops them
``_build.py``        the table of stage builders: each kind's steps, by kind
``_sources.py``      the source stage's producers
``_stages.py``       what the other stages do per burst (filter, shuffle, batch,
                     prefetch, ``to_queue``), and the batch stage after a process map
                     that writes its batches in place
``_maps.py``         map stages on threads and tasks
``_checkpoint.py``   ``await items.checkpoint()``: pause at rest, capture, resume
``_describe.py``     a run's measurements and report: occupancy sampling,
                     StageStatistics per stage, ``describe()`` and the bottleneck
``_tuning.py``       Tuning: the run's side of the tuner of ``concurrency="auto"``
                     maps (gates, readings, decisions put into force, notes)
``_buffers.py``      TunedBuffers: the run's side of ``capacity="auto"`` and
                     ``prefetch("auto")`` (capacity knobs, queue readings, bytes per
                     item, resizes, notes)
===================  ==================================================================
"""
