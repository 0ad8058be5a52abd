"""TensorFlow's input functions: producers of file names, ranges and slices, and the
batching functions, each a queue filled by a QueueRunner.

===================  ==================================================================
file                 what it holds
===================  ==================================================================
``_epochs.py``       Epochs: the one loop that reads a source ``num_epochs`` times
                     (in order or permuted per epoch); the Pipeline's sources read
                     through it too
``_functions.py``    ``input_producer``, ``string_input_producer``,
                     ``range_input_producer``, ``slice_input_producer``,
                     ``limit_epochs``
``_batch_spec.py``   the arguments of a batch queue: given, from a source queue, or
                     inferred from the first example
``_batching.py``     Batches, and the plan that builds a batch queue and its runner
``_batch_fns.py``    ``batch``, ``shuffle_batch`` (one source), and how the batching
                     functions' overloads type their Batches
``_batch_join.py``   ``batch_join``, ``shuffle_batch_join`` (one producer per source)
===================  ==================================================================

Everything here is built from the two layers below: queues (``aqueue/_queues``) and
runners under a coordinator (``aqueue/_running``). The Pipeline (``aqueue/_pipeline``)
is above it.
"""
