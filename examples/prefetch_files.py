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

The script prints each run's time, steps, examples and accuracy, ``coord.report()`` of
the prefetch run (taken after the block) with a sentence on how to read it, and what
the run showed: how much of the loading time prefetching hid behind training.

Run: python examples/prefetch_files.py [--files 20] [--records 512] [--features 64]
     [--batch 64] [--io-ms 40] [--step-ms 5] [--epochs 1] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import tempfile
import textwrap
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


async def train_with_prefetch(args: argparse.Namespace, paths: list[Path]) -> tuple[Trainer, str]:
    """The same loader as a thread producer: it reads ahead while the trainer steps.
    Returns the trainer and the coordinator's report."""
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
    return trainer, coord.report()  # after the block: the loader thread has ended


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (small values make a quick smoke run)."""
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--files", type=int, default=20, help="files to write")
    add("--records", type=int, default=512, help="records per file")
    add("--features", type=int, default=64, help="features per record")
    add("--batch", type=int, default=64, help="records per training step")
    add("--capacity", type=int, default=2048, help="prefetch queue capacity (records)")
    add("--io-ms", type=float, default=40.0, help="extra milliseconds per file read")
    add("--step-ms", type=float, default=5.0, help="milliseconds each training step blocks")
    add("--epochs", type=int, default=1, help="passes over the files")
    add("--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop")
    return parser.parse_args(argv)


def say(text: str) -> None:
    print(textwrap.fill(text, 88, subsequent_indent="  ", break_on_hyphens=False))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run both variants, print the comparison and return the measurements."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aqueue-prefetch-") as tmp:
        paths = write_files(Path(tmp), args.files, args.records, args.features)
        x_first, y_first = load_file(paths[0], args.features, 0.0)

        t0 = time.perf_counter()
        plain = train_without_prefetch(args, paths)
        plain_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        prefetched, report = anyio.run(train_with_prefetch, args, paths, backend=args.backend)
        prefetch_s = time.perf_counter() - t0

    for label, trainer, seconds in (
        ("without prefetch", plain, plain_s),
        ("with prefetch", prefetched, prefetch_s),
    ):
        print(
            f"{label + ':':18}{seconds:5.2f} s for {trainer.steps} steps on "
            f"{trainer.examples:,} examples; accuracy on the first file "
            f"{trainer.accuracy(x_first, y_first):.1%}"
        )
    print(report)
    say(
        "The table above is coord.report() of the prefetch run: the 'records' queue "
        "(size and totals in records, time_full_s and time_empty_s in seconds during "
        "which the loader waited for room or the trainer for records) and the loader "
        "thread, ended. Its last line, input-bound, is the share of the training loop's "
        "time spent waiting for records."
    )
    reads = args.files * args.epochs
    load_s = reads * args.io_ms / 1000
    step_s = plain.steps * args.step_ms / 1000
    say(
        f"Loading takes {load_s:.2f} s in all ({reads} file reads x {args.io_ms:g} ms) and "
        f"training {step_s:.2f} s ({plain.steps} steps x {args.step_ms:g} ms). Without "
        f"prefetch they add up: {plain_s:.2f} s. With prefetch the loader read ahead "
        f"while the trainer stepped: {prefetch_s:.2f} s, {plain_s / prefetch_s:.2f}x "
        f"faster; the ideal is the larger of the two totals, {max(load_s, step_s):.2f} s."
    )
    same = plain.examples == prefetched.examples == args.files * args.records * args.epochs
    data = (
        f"both runs trained on all {prefetched.examples:,} examples"
        if same
        else "the runs did NOT train on the same number of examples"
    )
    hideable = min(load_s, step_s)  # at best the shorter total hides behind the longer
    if hideable > 0:
        hidden = min(1.0, max(0.0, (plain_s - prefetch_s) / hideable))
        if load_s <= step_s:
            gain = f"prefetching hid {hidden:.0%} of the loading time behind training"
        else:
            gain = (
                f"prefetching hid {hidden:.0%} of the training time behind loading (loading "
                "takes longer here, so it sets the pace)"
            )
    else:
        gain = "with --io-ms 0 or --step-ms 0 there was nothing to overlap"
    say(
        f"What this showed: the same loader, unchanged, run as a thread producer of a "
        f"QueueRunner, read ahead while the trainer stepped: {gain}; {data}."
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
