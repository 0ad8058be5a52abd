"""Async workers (A3C-style): several workers update their own state and enqueue
results; the main task dequeues and averages them, then a Coordinator stops them all.

Each worker keeps its own parameter vector and, on every step, moves it towards a shared
target with some noise of its own (standing in for an A3C actor's local gradient step),
then hands (its id, its current vector) to a FIFOQueue. The workers' ``step`` methods
are the async producers of one QueueRunner, so the Coordinator runs each as a task that
calls it over and over. The main task awaits a batch of as many results as there are
workers (``dequeue_many``), averages it into the global estimate and, after ``--steps``
rounds, calls ``coord.request_stop()``: no worker starts another step, a result that
was still being computed is refused by the now closed queue, workers blocked on a full
queue are released, and the block ends without an error. (Had a worker raised, its
exception would have left the block instead.)

At the end the script prints ``coord.report()`` and says, per worker, how many steps it
took and how many of its results were averaged: a worker usually took one step more
than it delivered, the step it was in when the stop came.

Run: python examples/async_workers.py [--workers 4] [--steps 50] [--dim 8]
     [--work-ms 1.0] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

import anyio
import numpy as np

from aqueue import Coordinator, FIFOQueue, QueueRunner


class Worker:
    """One actor with its own state, stepping towards ``target``."""

    def __init__(self, worker_id: int, target: np.ndarray, work_seconds: float) -> None:
        self.worker_id = worker_id
        self.target = target
        self.value = np.zeros_like(target)
        self.steps = 0
        self._work_seconds = work_seconds
        self._rng = np.random.default_rng(worker_id)

    async def step(self) -> tuple[int, np.ndarray]:
        """Do one unit of work; return the worker's id and its current value."""
        await anyio.sleep(self._work_seconds)  # an environment step, an RPC, ...
        noise = self._rng.normal(scale=0.05, size=self.value.shape)
        self.value = self.value + 0.1 * (self.target - self.value) + noise
        self.steps += 1
        return self.worker_id, self.value


def say(text: str) -> None:
    print(textwrap.fill(text, 88, subsequent_indent="  ", break_on_hyphens=False))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the workers until the main task has averaged ``args.steps`` rounds."""
    target = np.linspace(-1.0, 1.0, args.dim)
    workers = [Worker(i, target, args.work_ms / 1000) for i in range(args.workers)]
    # Each element: (which worker, its value vector).
    results = FIFOQueue(2 * args.workers, [np.int64, np.float64], [(), (args.dim,)], name="results")
    averaged = np.zeros(args.workers, np.int64)  # results averaged, per worker
    estimate = np.zeros(args.dim)
    async with Coordinator(stop_grace_period=5.0) as coord:
        coord.start(QueueRunner(results, [w.step for w in workers], name="workers"))
        for step in range(1, args.steps + 1):
            ids, values = await results.dequeue_many(args.workers)
            estimate = values.mean(axis=0)
            averaged += np.bincount(ids, minlength=args.workers)
            if step % max(1, args.steps // 5) == 0 or step == args.steps:
                error = float(np.abs(estimate - target).max())
                print(
                    f"round {step:3d} of {args.steps}: average of {args.workers} results; "
                    f"largest gap to the target over its {args.dim} coordinates: {error:.3f}"
                )
        coord.request_stop()  # no worker starts another step; the queue closes to them
    # After the block every worker has ended: the report shows them all stopped.
    print(coord.report())
    say(
        "The table above is coord.report(), printed after the block: one row per queue "
        "with its size and totals (in elements), time_full_s (seconds during which a "
        "producer waited for room), time_empty_s (seconds during which a consumer waited "
        "for an element) and the runner feeding it, with how many of its producers are "
        "still running. Its last line, input-bound, is the share of the block's time the "
        "main task spent waiting for results."
    )
    stats = results.statistics()
    steps = [w.steps for w in workers]
    for w in workers:
        print(
            f"worker {w.worker_id}: took {w.steps} steps; {averaged[w.worker_id]} of its "
            "results were averaged"
        )
    refused = sum(steps) - stats.enqueued_total  # finished after the stop: queue closed
    error = float(np.abs(estimate - target).max())
    alive = coord.runners[0].running
    say(
        f"What this showed: {args.workers} workers ran as tasks, each updating its own "
        f"state; the main task averaged {int(averaged.sum())} of their results in "
        f"{args.steps} rounds, ending {error:.3f} from the target. Then "
        "coord.request_stop() stopped every worker. A worker in the middle of a step "
        "finished it, but by then the queue was closed and refused the result: "
        f"{refused} results were refused and {stats.size} were left unread in the queue, "
        f"so the workers took {sum(steps)} steps for {int(averaged.sum())} averaged "
        "results. " + ("Some worker was STILL running." if alive else "No worker was left running.")
    )
    return {
        "estimate": estimate,
        "target": target,
        "worker_steps": steps,
        "averaged": averaged.tolist(),
        "refused": refused,
        "left_in_queue": stats.size,
        "runner_alive": alive,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (small values make a quick smoke run)."""
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--workers", type=int, default=4, help="worker tasks")
    parser.add_argument("--steps", type=int, default=50, help="rounds the main task averages")
    parser.add_argument("--dim", type=int, default=8, help="length of each worker's vector")
    parser.add_argument("--work-ms", type=float, default=1.0, help="milliseconds per worker step")
    parser.add_argument(
        "--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; return the final estimate and per-worker step counts."""
    args = parse_args(argv)
    result: dict[str, Any] = anyio.run(run, args, backend=args.backend)
    return result


if __name__ == "__main__":
    main()
