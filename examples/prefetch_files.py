"""Prefetching a custom loader: np.fromfile in a thread while the trainer steps.

The script writes a few binary files of (features, label) records, then trains a small
logistic-regression model over them twice:

- without prefetch: read a file, train on its batches, read the next file, ...;
- with prefetch: the same loader, unchanged, runs as a thread producer of a QueueRunner
  feeding a FIFOQueue, and the trainer awaits batches while the loader reads ahead.

Each file read takes ``--io-ms`` of extra latency (the files are small and sit in the
page cache, so the latency of a real disk or network store is simulated with a sleep),
and each training step blocks the event loop for ``--step-ms`` like a real step that
waits for an accelerator. The loader thread enqueues through the queue's blocking view,
so reading continues while a step blocks the loop: with prefetch the wall time drops to
about the larger of the two totals instead of their sum.

Run: python examples/prefetch_files.py [--files 20] [--records 512] [--features 64]
     [--batch 64] [--io-ms 40] [--step-ms 5] [--epochs 1] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from aqueue import Coordinator, FIFOQueue, QueueRunner


def record_dtype(features: int) -> np.dtype[Any]:
    """One on-disk record: a float32 feature vector and an int64 label."""
    return np.dtype([("features", np.float32, (features,)), ("label", np.int64)])


def write_files(directory: Path, files: int, records: int, features: int) -> list[Path]:
    """Write ``files`` binary files of linearly separable records."""
    rng = np.random.default_rng(0)
    true_w = rng.normal(size=features).astype(np.float32)
    paths = []
    for i in range(files):
        data = np.empty(records, dtype=record_dtype(features))
        data["features"] = rng.normal(size=(records, features))
        data["label"] = (data["features"] @ true_w > 0).astype(np.int64)
        path = directory / f"part-{i:04d}.bin"
        data.tofile(path)
        paths.append(path)
    return paths


def load_file(path: Path, features: int, io_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """The custom loader: one blocking read of a whole file."""
    time.sleep(io_seconds)  # the latency of a real storage system
    data = np.fromfile(path, dtype=record_dtype(features))
    return data["features"], data["label"]


def loader(
    paths: list[Path], features: int, io_seconds: float, epochs: int
) -> Iterator[dict[str, np.ndarray]]:
    """Yield each file's records as one batch, ``epochs`` times, then stop."""
    for _ in range(epochs):
        for path in paths:
            x, y = load_file(path, features, io_seconds)
            yield {"features": x, "label": y}


class Trainer:
    """Logistic regression by SGD; each step also blocks for ``step_seconds``."""

    def __init__(self, features: int, step_seconds: float) -> None:
        self.w = np.zeros(features, np.float32)
        self.step_seconds = step_seconds
        self.steps = 0
        self.examples = 0

    def step(self, x: np.ndarray, y: np.ndarray) -> None:
        """One SGD step on a batch (a blocking call, like a real training step)."""
        p = 1.0 / (1.0 + np.exp(-(x @ self.w)))
        self.w -= 0.1 * x.T @ (p - y) / len(x)
        time.sleep(self.step_seconds)  # the rest of a real step: blocks the event loop
        self.steps += 1
        self.examples += len(x)

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        """Fraction of records classified correctly."""
        return float(np.mean((x @ self.w > 0) == y))


def train_without_prefetch(args: argparse.Namespace, paths: list[Path]) -> Trainer:
    """Read, then train, then read again: loading and training never overlap."""
    trainer = Trainer(args.features, args.step_ms / 1000)
    for records in loader(paths, args.features, args.io_ms / 1000, args.epochs):
        x, y = records["features"], records["label"]
        for start in range(0, len(x), args.batch):
            trainer.step(x[start : start + args.batch], y[start : start + args.batch])
    return trainer


async def train_with_prefetch(args: argparse.Namespace, paths: list[Path]) -> Trainer:
    """The same loader as a thread producer: it reads ahead while the trainer steps."""
    trainer = Trainer(args.features, args.step_ms / 1000)
    queue = FIFOQueue(
        args.capacity,
        [np.float32, np.int64],
        [(args.features,), ()],
        names=["features", "label"],
        name="records",
    )
    files = loader(paths, args.features, args.io_ms / 1000, args.epochs)
    async with Coordinator() as coord:
        # enqueue_many: each loaded file is a batch of records. When the loader is
        # exhausted the runner closes the queue, and the loop below ends after the
        # short final batch.
        coord.start(QueueRunner(queue, [files], enqueue_many=True, name="file-loader"))
        async for batch in queue.batches(args.batch, allow_smaller_final_batch=True):
            trainer.step(batch["features"], batch["label"])
        print(coord.report())
    return trainer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (small values make a quick smoke run)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--records", type=int, default=512, help="records per file")
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--capacity", type=int, default=2048, help="queue capacity (records)")
    parser.add_argument("--io-ms", type=float, default=40.0, help="latency of one file read")
    parser.add_argument("--step-ms", type=float, default=5.0, help="blocking time per step")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run both variants, print the comparison and return the measurements."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aqueue-prefetch-") as tmp:
        paths = write_files(Path(tmp), args.files, args.records, args.features)
        x_all, y_all = load_file(paths[0], args.features, 0.0)

        t0 = time.perf_counter()
        plain = train_without_prefetch(args, paths)
        plain_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        prefetched: Trainer = anyio.run(train_with_prefetch, args, paths, backend=args.backend)
        prefetch_s = time.perf_counter() - t0

    load_s = args.files * args.epochs * args.io_ms / 1000
    step_s = plain.steps * args.step_ms / 1000
    print(f"{'':18}{'wall s':>8}{'steps':>7}{'examples':>10}{'accuracy':>10}")
    for label, trainer, seconds in (
        ("without prefetch", plain, plain_s),
        ("with prefetch", prefetched, prefetch_s),
    ):
        print(
            f"{label:18}{seconds:8.2f}{trainer.steps:7d}{trainer.examples:10d}"
            f"{trainer.accuracy(x_all, y_all):10.1%}"
        )
    print(
        f"total load time {load_s:.2f} s, total step time {step_s:.2f} s: ideal with "
        f"prefetch {max(load_s, step_s):.2f} s; speed-up {plain_s / prefetch_s:.2f}x"
    )
    return {
        "plain_seconds": plain_s,
        "prefetch_seconds": prefetch_s,
        "plain_examples": plain.examples,
        "prefetch_examples": prefetched.examples,
        "records": args.files * args.records * args.epochs,
    }


if __name__ == "__main__":
    main()
