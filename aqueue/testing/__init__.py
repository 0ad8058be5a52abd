"""aqueue.testing: helpers for testing pipelines built on aqueue (pytest or not).

    from aqueue.testing import StallError, drain, stall_guard

    async def test_batches():
        q = aqueue.FIFOQueue(8, np.int64, ())
        async with stall_guard(5), aqueue.Coordinator() as coord:
            coord.start(aqueue.QueueRunner(q, [iter(range(10))]))
            assert (await drain(q, stack=True)).tolist() == list(range(10))

- ``await drain(source, timeout=None, stack=False, batched=None)``: everything a queue,
  a ``Batches``, an element or batch iterator or a running pipeline's ``items`` gives
  until its end, as a list or (``stack=True``) as one batch; ``timeout`` raises
  StallError naming the source, the items drained and the queues waited on.
- ``stall_guard(seconds, release=True)``: a sync and async context manager that turns
  a hang into StallError once no in-process queue of its block (created or used while
  it is on) has made progress for ``seconds``, naming each such queue that tasks or
  threads wait on (size/capacity, which side waits, how
  many, the runners feeding it) and the runners registered with ``add_queue_runner``
  and never started. The async form cancels its body; the sync form, for a thread
  blocked in a ``q.blocking()`` call, wakes it by closing the stuck queues.
- ``StallError``: an AssertionError subclass.
- ``aqueue.testing.plugin``: the pytest plugin (``aqueue_leak_check`` fixture, which
  also names and releases threads left blocked in a queue's blocking call, and
  ``@pytest.mark.aqueue_timeout(seconds)``); registered by the ``pytest11`` entry point
  and inert until a test uses it.

How it sees things. Importing ``aqueue.testing`` (pytest imports its plugin when it
starts) turns on aqueue's test-only bookkeeping (``tracking`` of
``aqueue/_waiting/_tracking.py``), which nothing turns off: from then on every
in-process queue joins a weak registry when created (``aqueue/_queues/_queue.py``);
coordinators, runners and producer threads join weak registries when they start
(``aqueue/_running/_alive.py``); a thread inside a blocking call of a thread view (of
either backend) is listed while it is there (``aqueue/_waiting/_tracking.py``).
Nothing is kept alive by them. Without ``aqueue.testing`` none of this is written:
import it before building what a guard or ``drain`` should see (a queue created
earlier, while it was off, is not seen). Queues of
``aqueue.redis`` are not registered: their statistics need their server and their
waiters may be other processes, so the guard and the reports cover in-process queues
only (a body stuck on a Redis queue still fires the guard, with a report saying no
in-process queue has waiters).

The guard's rule and limits are in ``_stall.py``; the stacking rules in ``_drain.py``;
what counts as a leak in ``_leaks.py``.
"""

from __future__ import annotations

from .._waiting._tracking import tracking as _tracking
from ._drain import drain as drain
from ._stall import StallError as StallError
from ._stall import StallGuard as StallGuard
from ._stall import stall_guard as stall_guard

__all__ = ["StallError", "StallGuard", "drain", "stall_guard"]

_tracking.on = True  # (see "How it sees things" above)

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("aqueue.testing."):
        _obj.__module__ = "aqueue.testing"
del _name, _obj, _tracking
