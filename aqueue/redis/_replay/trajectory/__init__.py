"""The trajectory tables of ``aqueue.redis`` (``server.trajectory_table``): replay tables
of kind ``traj`` whose items are windows of steps stored once, built on the replay
tables' files one folder up (handle, opening, ops, RedisReplayTable and its thread view)
and on the core.

=====================  =================================================================
file                   what it holds
=====================  =================================================================
``_functions.lua``     the trajectory tables' part of the function library: steps
                       stored once, windows as items, the hooks freeing steps
``_open.py``           opening a trajectory table (the in-process checks) and
                       TrajHandle
``_ops.py``            a trajectory table's own ops, sans I/O: AppendOp,
                       TrajSampleOp, a writer's end and close, statistics
``_table.py``          RedisTrajectoryTable and RedisTrajectoryWriter
``_blocking.py``       their thread views: BlockingRedisTrajectoryTable (the sampling
                       side of ``../_blocking.py``'s) and BlockingRedisTrajectoryWriter
=====================  =================================================================

Imports point down: ``_table.py`` → ``_blocking.py`` → ``_ops.py`` → ``_open.py`` →
the replay tables' files → the core (``_blocking.py`` names the table and the writer
for types only); nothing one folder up imports this folder, but ``aqueue/redis``'s
``__init__.py`` and ``_server.py``.
"""
