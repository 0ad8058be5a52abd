"""Async workers (A3C-style): workers update their own state and enqueue results; the
main task dequeues, averages and, after a number of steps, stops them all.

Each worker keeps its own parameter vector and, on every step, moves it towards a shared
target with some noise of its own (standing in for an A3C actor's local gradient step),
then hands its current vector to a FIFOQueue. The workers are async callables of one
QueueRunner, so a Coordinator runs them as tasks; the main task awaits a batch of as
many vectors as there are workers (``dequeue_many``), averages it into the global
estimate and,
after ``--steps`` rounds, calls ``coord.request_stop()``: the workers finish their
current step and exit, workers blocked on the full queue are released, and the block
ends without an error. If a worker raised, its exception would leave the block instead.

Run: python examples/async_workers.py [--workers 4] [--steps 50] [--dim 8]
     [--work-ms 1.0] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
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

    async def step(self) -> np.ndarray:
        """Do one unit of work and return the worker's current value."""
        await anyio.sleep(self._work_seconds)  # an environment step, an RPC, ...
        noise = self._rng.normal(scale=0.05, size=self.value.shape)
        self.value = self.value + 0.1 * (self.target - self.value) + noise
        self.steps += 1
        return self.value


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the workers until the main task has averaged ``args.steps`` rounds."""
    target = np.linspace(-1.0, 1.0, args.dim)
    workers = [Worker(i, target, args.work_ms / 1000) for i in range(args.workers)]
    results = FIFOQueue(2 * args.workers, np.float64, (args.dim,), name="results")
    estimate = np.zeros(args.dim)
    async with Coordinator(stop_grace_period=5.0) as coord:
        coord.start(QueueRunner(results, [w.step for w in workers], name="workers"))
        for step in range(1, args.steps + 1):
            batch = await results.dequeue_many(args.workers)
            estimate = batch.mean(axis=0)
            if step % max(1, args.steps // 5) == 0 or step == args.steps:
                error = float(np.abs(estimate - target).max())
                print(f"step {step:4d}: max |estimate - target| = {error:.3f}")
        coord.request_stop()  # workers finish their current step and exit
    print(coord.report())
    return {
        "estimate": estimate,
        "target": target,
        "worker_steps": [w.steps for w in workers],
        "runner_alive": coord.runners[0].running,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (small values make a quick smoke run)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--work-ms", type=float, default=1.0, help="time per worker step")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; return the final estimate and per-worker step counts."""
    args = parse_args(argv)
    result: dict[str, Any] = anyio.run(run, args, backend=args.backend)
    print(f"worker steps: {result['worker_steps']}")
    return result


if __name__ == "__main__":
    main()
