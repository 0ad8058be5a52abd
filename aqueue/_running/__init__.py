"""The running layer: producers that fill queues, and the coordinator that supervises them.

===================  ====================================================================
file                 what it holds
===================  ====================================================================
``_producers.py``    the four producer kinds (``classify``, ``is_async_callable``), a
                     producer's slot and state, the thread record shared by a producer
                     thread and its supervising task; ``ThreadStarter``: the one named
                     thread that starts a coordinator's producer threads
``_runner.py``       QueueRunner (construction, properties, ``join``, ``launch``), which
                     holds its current ``Launch``; ``Supervisor``: what a coordinator
                     offers a runner
``_launch.py``       ``Launch``: one start of a runner, holding its producers: registering
                     them, starting their tasks and threads, the producer loops, each end
                     reported to the queue; ``ProducerSupervisor``: what it needs
``_registry.py``     ``add_queue_runner`` (TF's QUEUE_RUNNERS collection; only registers)
``_unstarted.py``    the warning for a consumer blocked on the queue of a runner
                     registered and never started (a watch on slow first waits, with
                     or without a coordinator)
``_coordinator.py``  Coordinator: the block (entry, exit, the grace period), ``watch``,
                     ``report()``, ``input_bound``; it holds a ``Supervision`` and a
                     ``QueueMonitor`` and calls them
``_supervision.py``  ``Supervision``: a coordinator's task group, starting runners and
                     tasks, waiting for tasks and threads, clean and failed stops,
                     recorded exceptions; it is the ``Supervisor`` runners are handed
``_outcome.py``      ``block_outcome``: which exception leaves a coordinator's block, with
                     which notes (exception groups unwrapped)
``_watchdog.py``     QueueMonitor: the queues and replay tables a coordinator has seen
                     (``Watched``, ``WatchedTable``), their baselines and shared
                     readings; stall warnings
``_report.py``       ``coord.report()``: the queue table, the replay-table table and
                     the input-bound fraction (what the body consumes, and how long it
                     waited on it)
``_monitor.py``      Monitor (``Coordinator(monitor=...)``): settings, stage providers,
                     ``history()``, ``write_csv``, ``plot``; ``begin_monitor``
``_sampler.py``      Sampler: one coordinator block's sampling task and final sample;
                     Record: what a monitor keeps across blocks
``_samples.py``      MonitorReading / QueueReading / TableReading / StageReading (with a
                     tuned stage's StageDecisions), the numpy MonitorHistory built
                     from them, and the CSV rows
``_plot.py``         ``Monitor.plot``: the PNG (matplotlib, the ``plot`` extra)
``_live.py``         ``Monitor(live=True)``: the terminal line (tqdm, the ``live`` extra)
``_alive.py``        weak registries of what runs now (entered coordinators, launched
                     runners, producer threads) and of registered runners, read only by
                     ``aqueue.testing``
===================  ====================================================================

Objects hold their parts (composition); no class is spread over several files. Every
thread a runner starts is a named ``threading.Thread`` (``_producers.py``), and no
thread or task is started outside a coordinator's block (``add_queue_runner`` only
registers).

Runners and the coordinator work over the interfaces (``Sink`` and ``AsyncQueue`` in
``aqueue/_queues/_protocol.py``, ``AsyncReplayTable`` in
``aqueue/_replay/_protocol.py``), never over a backend's class, so they run the
in-process queues, the shared ones of ``aqueue.redis`` and replay tables alike: a
runner fills any ``Sink``; the coordinator watches what is an ``AsyncQueue`` or an
``SampledTable`` (a replay or trajectory table; decided once, when first seen).
"""
