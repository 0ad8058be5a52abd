"""The composable Pipeline: what a pipeline is (its spec), apart from what a running
pipeline does (its run), with the process executor in a folder of its own.

The spec: a ``Pipeline`` is a chain of ``StageSpec`` records, checked when each builder
method is called; nothing runs until ``open()``/``run()``, which hand the specs to a
run. The run: one ``PipelineRun`` per ``open()`` builds a queue between each two
stages and the runners that move bursts of items through them, under a coordinator.

The folders, from the bottom up (each imports only the ones below it; a test checks):

================  =====================================================================
folder / file     what it holds
================  =====================================================================
``tune/``         the tuner of ``concurrency="auto"``: what a user asks (``Auto``,
                  ``Autotune``), the controller (readings in, decisions out), the
                  gate that resizes a stage's workers live, the task that drives it
``defs/``         what a pipeline is defined as (its spec): StageSpec and the builder
                  methods' checks; PipelineState, a checkpoint, and its file
``flow/``         what every running stage works with, whatever its kind: its control
                  (stop, pause), bursts of items, turns of ordered output, its meter
``process/``      the process executor: worker processes, their shared memory, the
                  hand-off of a burst, the driver of a process map and the batches its
                  workers write in place
``run/``          one run: its queues, runners and the steps of each stage kind (built
                  from a table), checkpoints, statistics and ``describe()``; the
                  objects ``open()`` gives
``_pipeline.py``  Pipeline: the builder's public methods (sources, stages, ``open``,
                  ``run``, ``statistics``, ``describe``)
================  =====================================================================

Only ``Pipeline``'s ``open``/``run``/``checkpoint`` methods reach from the spec into
the run. Everything here is built from the layers below: queues (``aqueue/_queues``),
runners under a coordinator (``aqueue/_running``) and ``Epochs`` (``aqueue/_input``).
"""
