"""What every running stage works with, whatever its kind (a source, a map on tasks,
threads or processes, a filter, a batch): the pieces that the run's steps (``run/``)
and a process map's driver (``process/``) share, so that neither imports the other.

=================  ====================================================================
file               what it holds
=================  ====================================================================
``_control.py``    Control: how a run tells its workers to stop (from the source down)
                   or to pause; Stage, one stage's share of it
``_bursts.py``     bursts: the 1-d object arrays items travel in, how large a worker's
                   is, taking one, naming the stage in an exception
``_turns.py``      ThreadTurns and AsyncTurns: the output order of an ordered map
``_meter.py``      how stages are measured: Meter and Worker, StageStatistics
=================  ====================================================================
"""
