"""The running layer: producers that fill queues, and the coordinator that supervises them.

===================  ====================================================================
file                 what it holds
===================  ====================================================================
``_producers.py``    the four producer kinds (``classify``, ``is_async_callable``), a
                     producer's slot and state, the thread record shared by a producer
                     thread and its supervising task, ``start_threads``
``_runner.py``       QueueRunner (construction, properties, ``join``, ``launch``), and
                     ``Supervisor``: what a coordinator offers a runner
``_launch.py``       a runner's launch: registering its producers, starting their tasks
                     and threads, the producer loops, each end reported to the queue
``_registry.py``     ``add_queue_runner`` (TF's QUEUE_RUNNERS collection) and the watch
                     for registered runners that were never started
``_coordinator.py``  Coordinator: one task group and its cancel scope; entry, exit and
                     the grace period; ``watch``, ``report()``, ``input_bound``; which
                     exception leaves the block, with which notes
``_supervision.py``  the Coordinator's starting of runners and tasks, waiting for tasks
                     and threads, clean and failed stops, recorded exceptions; the
                     ``RunnerSupervisor``, the ``Supervisor`` it hands runners
``_watchdog.py``     QueueMonitor: the queues a coordinator has seen; stall warnings;
                     ``coord.report()``: the queue table and the input-bound fraction
``_monitor.py``      Monitor (``Coordinator(monitor=...)``): settings, stage providers,
                     ``history()``, ``write_csv``, ``plot``; ``begin_monitor``
``_sampler.py``      Sampler: one coordinator block's sampling task and final sample;
                     Record: what a monitor keeps across blocks
``_samples.py``      MonitorSample / QueueSample / StageSample, the numpy
                     MonitorHistory built from them, and the CSV rows
``_plot.py``         ``Monitor.plot``: the PNG (matplotlib, the ``plot`` extra)
``_live.py``         ``Monitor(live=True)``: the terminal line (tqdm, the ``live`` extra)
``_alive.py``        weak registries of what runs now (entered coordinators, launched
                     runners, producer threads), read by ``aqueue.testing``
===================  ====================================================================

Runners and the coordinator work over the queue interface (``AsyncQueue`` in
``aqueue/_queues/_protocol.py``), never over a backend's class, so they run the
in-process queues and the shared ones of ``aqueue.redis`` alike.
"""
