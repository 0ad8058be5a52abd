"""What a pipeline is defined as, its spec: the description a Pipeline's builder
methods make, and a checkpoint of a running one. Nothing here runs anything. (Named as
SPDL names its folder of definitions; ``spec/`` is where tools look for tests.)

===================  ==================================================================
file                 what it holds
===================  ==================================================================
``_stage_spec.py``   StageSpec, one stage of a chain: the checks of each builder
                     method's arguments, default queue capacities, which stages run on
                     threads and which batches a process map writes in place
``_state.py``        PipelineState (a checkpoint) and its file
===================  ==================================================================
"""
