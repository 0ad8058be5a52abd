"""The replay layer: tables whose items stay, are sampled by a selector and evicted by
another, paced by a rate limiter (DeepMind Reverb's model), in one process.

=======================  ========================================================================
file                     what it holds
=======================  ========================================================================
``_selectors.py``        the public selector settings (Uniform, Prioritized, Fifo, Lifo,
                         MinHeap, MaxHeap) and their JSON form
``_limiter.py``          the public rate limiters (RateLimiter, MinSize, SampleToInsertRatio):
                         Reverb's arithmetic, the never-satisfiable rules, their JSON form
``_sumtree.py``          SumTree: a float64 sum tree, set and searched in batches
``_repeats.py``          values repeated within a batch: finding them, ordering their draws
``_logs.py``             logs of ids: their oldest live entries (``first_live``), read by the
                         item store and the trajectory ring
``_checks.py``           argument checks of the operations (priorities, keys, counts)
``_results.py``          ReplaySample (one sample) and ReplayStatistics (the counters)
``_protocol.py``         AsyncReplayTable and ReplayView: the table interfaces the
                         upper layers name (every backend implements them; a table is a
                         ``Sink``)
``_store.py``            ItemStore: preallocated storage, slots, keys and the key log
``_ordered.py``          the deterministic selector states (key order, heap)
``_selection.py``        the selector states' one interface (``SelectorState``), the random
                         ones (dense list, sum tree), and ``make_state`` from the settings
``_core.py``             TableCore: what insert, sample, update and delete do to the items,
                         selectors and counters (what a batch means); its invariants
``_engine.py``           ReplayEngine and its requests (InsertRequest, SampleRequest): the
                         lock, the waiting lists and wake-ups, closing; the ``Steps`` the
                         waiting kernel drives; the invariants, checked by
                         ``check_invariants``
``_ops.py``              TableOps: the checks and conversions before each engine step,
                         shared by the table and its thread view
``_snapshot.py``         ReplaySnapshot: a table at one moment, its checks and its file form
``_views.py``            BlockingSampling (the sampling side of every in-process table's
                         thread view), BlockingReplayTable (it, with the inserts) and
                         SampleIterator
``_sampling.py``         SamplingSide: the sampling side every in-process table shares
                         (sample, samples, update_priorities, delete, the settings)
``_table.py``            ReplayTable: the public class (also a ``Sink``: ``enqueue``,
                         ``enqueue_many``, producer accounting)
``_trajectory/``         trajectory tables: timesteps stored once, their windows as items
=======================  ========================================================================

Dependencies point down the table: the settings, the sum tree, the repeats, the checks,
the results and the protocols know nothing of the engine (another backend reuses them:
the same arithmetic, the same messages, the same records, the same interface); the
store knows the specs' shapes; the states know the store; the core knows both; the
engine knows the core and the waiting kernel (``aqueue/_waiting/``); the table knows
all of them. The layer imports the queues layer (specs, files, producer accounting)
and the waiting kernel (requests, their lists, the waits, the event-loop primitives),
and nothing above them.
"""
