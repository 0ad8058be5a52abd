"""The pipeline's tuner: ``concurrency="auto"`` and ``capacity="auto"``, chosen while
the pipeline runs so that its consumer never waits, every decision with its reason.

===================  ==================================================================
file                 what it holds
===================  ==================================================================
``_settings.py``     what a user asks: ``Auto`` ranges, ``Autotune`` (mode, budgets,
                     caps), the checks of ``"auto"`` arguments, default ranges
``_budget.py``       the machine's share: cores (affinity, cgroup quota) and available
                     memory, read once per run; ``resolve`` gives the ``Budget``
``_readings.py``     what the tuner reads: cumulative ``Reading`` snapshots and the
                     ``Window`` between two of them
``_knobs.py``        the settings it may change (``KnobSpec``, ``Knob``) and its
                     ``Decision`` records
``_estimates.py``    what it has learned: the consumer's demand and each stage's time
                     per item (``PerItem``), new regimes, Little's law per stage
``_tuner.py``        the controller: the model and the rule (pure: readings in,
                     decisions out)
``_buffers.py``      the buffer rule: a tuned capacity grows when its queue's two
                     sides take turns waiting on it, shrinks when it never runs empty
``_sizes.py``        bytes per item, estimated from the items sampled as they pass
``_limits.py``       how far a setting may go: the CPU and memory budgets, capacities
                     that follow the concurrency
``_gate.py``         ``Gate``: a stage's resizable limit on its workers, consulted by
                     task and thread workers before each burst
``_drive.py``        the task that runs a tuner inside a run's task group: read, decide,
                     apply, log
===================  ==================================================================

Layering: the controller in ``_tuner.py`` and the modules it reads (readings, knobs,
estimates, limits, buffers, settings, sizes) do no I/O and know nothing of the run; ``_budget.py``
reads the machine; ``_gate.py`` and ``_drive.py`` are the run's side, reached through
the ``Tunable`` protocol (what a run offers the driver). The folder sits below the
others: ``defs/`` checks ``"auto"`` arguments with it, ``flow/`` passes its gate
and ``run/`` drives it.
"""
