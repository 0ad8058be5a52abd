"""One run of a pipeline: what ``open()`` starts and what it gives.

===================  ==================================================================
file                 what it holds
===================  ==================================================================
``_run.py``          one run of a pipeline: PipelineRun (its queues, runners and stage
                     steps, how a failure or the end stops them), OpenPipeline and
                     PipelineItems
``_sources.py``      the source stage's producers
``_stages.py``       what the other stages do per burst (filter, shuffle, batch,
                     prefetch, ``to_queue``)
``_maps.py``         map stages on threads and tasks
``_checkpoint.py``   ``await items.checkpoint()``: pause at rest, capture, resume
``_describe.py``     a run's measurements and report: occupancy sampling,
                     StageStatistics per stage, ``describe()`` and the bottleneck
===================  ==================================================================
"""
