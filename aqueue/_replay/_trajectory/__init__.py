"""Trajectory tables: timesteps stored once, sampled as windows (frame stacks, n-step
returns, sequences). The design, and how it joins the replay core, is the docstring
of the store, ``_steps.py``.

=======================  ========================================================================
file                     what it holds
=======================  ========================================================================
``_returns.py``          ``n_step_returns``: a window's n-step return and bootstrap discount
                         (pure numpy, Acme's convention)
``_checks.py``           StepSettings and StepArgs: the table's step and window arguments,
                         and appended steps, checked
``_episodes.py``         Episode: one writer's place in its episode, its pending windows
                         and the positions stored
``_ring.py``             StepRing: the preallocated field arrays, slots, references, the
                         free stack and the id log (the oldest held step)
``_steps.py``            StepStore: appending, ending episodes, the windows that complete,
                         eviction, the steps the items hold and free, the gather of windows
``_state.py``            dump_steps and load_steps: a step store's state as plain arrays
                         (what a snapshot keeps), and back
``_items.py``            CoreWindows and TableSteps: the windows as the items of a replay
                         core, and the steps as the engine sees them
``_results.py``          TrajectoryStatistics: the items' and the steps' counters
``_snapshot.py``         TrajectorySnapshot: a table at one moment, its checks, its file form
``_writer.py``           TrajectoryWriter and BlockingTrajectoryWriter: one stream of steps;
                         BlockingTrajectoryTable: the table's thread view (the replay
                         layer's ``BlockingSampling``, named for trajectories)
``_table.py``            TrajectoryTable: the public class
=======================  ========================================================================

Dependencies point down the table: the returns and the checks know nothing of the
storage; the episodes and the ring know nothing of each other; the store holds both
and talks to the items through the ``WindowItems`` protocol; the items know the store
and the replay core; the writer knows the engine, the store and the results; the table
knows all of them. The folder imports the queues layer (specs), the waiting kernel and
the replay layer's files (checks, core, engine, ops, results, views), nothing above.
"""
