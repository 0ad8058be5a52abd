"""The test-only bookkeeping is off until aqueue.testing is imported: then queues,
runners, coordinators, producer threads and blocked thread-view calls register
nothing at all; importing aqueue.testing (pytest imports its plugin when it starts)
turns it on for good. Checked in fresh interpreters: this test run has it on."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run_fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


BODY = """
import threading, time
import anyio, numpy as np
import aqueue
from aqueue._queues._queue import live_queues
from aqueue._running import _alive
from aqueue._waiting._tracking import blocked_calls, tracking

def registered():
    q = aqueue.FIFOQueue(2, np.int64, (), name="q")
    view = q.blocking()
    got = []
    t = threading.Thread(target=lambda: got.append(int(view.dequeue(timeout=10))))
    t.start()
    while not q.statistics().tasks_waiting_dequeue:
        time.sleep(0.001)
    blocked = [c.queue.name for c in blocked_calls()]
    q.enqueue_nowait(1)
    t.join()

    async def main():
        async with aqueue.Coordinator() as coord:
            coord.start(aqueue.QueueRunner(q, [lambda: 2]))
            assert int(await q.dequeue()) == 2  # (its producer thread runs)
            runners, coords = len(_alive.live_runners()), len(_alive.live_coordinators())
            threads = len(_alive.live_threads())
            coord.request_stop()
        return runners, coords, threads

    runners, coords, threads = anyio.run(main)
    return tracking.on, len(live_queues()), blocked, runners, coords, threads, got
"""


def test_off_without_aqueue_testing_registers_nothing() -> None:
    """Without aqueue.testing a queue, a blocked thread-view call, a coordinator, a
    runner and its producer thread register nothing (and still work)."""
    out = run_fresh(BODY + "print(registered())")
    assert out == "(False, 0, [], 0, 0, 0, [1])"


def test_importing_aqueue_testing_turns_it_on() -> None:
    """With aqueue.testing imported, each of them is registered while it is there."""
    out = run_fresh("import aqueue.testing\n" + BODY + "print(registered())")
    assert out == "(True, 1, ['q'], 1, 1, 1, [1])"
