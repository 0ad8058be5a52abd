"""The input-pipeline job of examples/input_pipeline.py, written as one Pipeline, and
how to read its stage report.

    from_iterable(record addresses).repeat(2)
        .map(read_record, concurrency="auto")   # blocking np.fromfile, on threads the tuner adds
        .shuffle(capacity=2000, min_after_dequeue=1000, seed=0)
        .batch(32, allow_smaller_final_batch=True)
        .prefetch(4)

The script writes a few binary files of (features, label, id) records. The source lists
(file, record index) pairs, so each map call reads one record, as a TF reader does;
``repeat(2)`` reads them for two epochs. (Each read opens its file, so this script is
slower than examples/input_pipeline.py, which loads whole files.) The trainer (logistic
regression) iterates with ``async for`` and the loop ends by itself after the last
batch. At the end the script prints ``pipe.describe()`` (each stage with its counts,
busy time, queue occupancy and waits, then the bottleneck), a legend for its columns,
and what the run showed: whether every record was seen exactly once per epoch, and how
busy the reader was. ``--read-ms`` adds a simulated storage latency per record (a
sleep), which makes the reader the bottleneck; by default the pipeline's tuner
chooses how many reader threads run (``--threads auto``), and ``--threads N`` fixes it.

Run: python examples/pipeline.py [--files 8] [--records 400] [--batch-size 32]
     [--capacity 2000] [--min-after-dequeue 1000] [--threads auto|N] [--epochs 2]
     [--read-ms 0] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

import aqueue

FEATURES = 16


def record_dtype() -> np.dtype[Any]:
    """One on-disk record: features, a label and a global record id."""
    return np.dtype([("features", np.float32, (FEATURES,)), ("label", np.int64), ("id", np.int64)])


def write_files(directory: Path, files: int, records: int) -> list[str]:
    """Write ``files`` files of ``records`` linearly separable records each."""
    rng = np.random.default_rng(0)
    true_w = rng.normal(size=FEATURES).astype(np.float32)
    names = []
    for f in range(files):
        data = np.empty(records, dtype=record_dtype())
        data["features"] = rng.normal(size=(records, FEATURES))
        data["label"] = (data["features"] @ true_w > 0).astype(np.int64)
        data["id"] = np.arange(f * records, (f + 1) * records)
        path = directory / f"part-{f:04d}.bin"
        data.tofile(path)
        names.append(str(path))
    return names


def make_reader(read_seconds: float) -> Any:
    """A blocking reader of one record, given (path, index)."""
    dtype = record_dtype()

    def read_record(address: tuple[str, int]) -> tuple[np.ndarray, np.int64, np.int64]:
        path, index = address
        if read_seconds:
            time.sleep(read_seconds)  # the latency of a real storage system
        (r,) = np.fromfile(path, dtype=dtype, count=1, offset=index * dtype.itemsize)
        return r["features"], r["label"], r["id"]

    return read_record


def say(text: str) -> None:
    print(textwrap.fill(text, 88, subsequent_indent="  ", break_on_hyphens=False))


LEGEND = (
    "How to read the table (its first line gives the run's length in seconds): conc = "
    "workers of the stage; in and out = items taken in and "
    "put out (batches, after the batch stage); items/s = items put out per second; busy "
    "= share of the workers' time spent in the stage's own work; occ = mean fill of the "
    "stage's output queue (0 to 1); starved = share of the run the next stage waited on "
    "that queue; get and put p50/p99 = median and 99th-percentile milliseconds a worker "
    "waited for its input, and to hand over its output."
)
BOTTLENECK = (
    "The bottleneck line names what limited the speed: the trainer itself when the "
    "pipeline kept ahead of it; else a stage whose workers were busy at least 60% of the "
    "time, with what would help a stage of its kind; else, when every stage was busy "
    "less than 30% of the time, the cost of handing items from stage to stage; in "
    "between, no clear bottleneck."
)


async def train(args: argparse.Namespace, files: list[str]) -> dict[str, Any]:
    addresses = [(f, i) for f in files for i in range(args.records)]
    pipe = (
        aqueue.Pipeline.from_iterable(addresses)
        .repeat(args.epochs)
        .map(make_reader(args.read_ms / 1000), concurrency=args.threads, name="map(read)")
        .shuffle(args.capacity, args.min_after_dequeue, seed=0)
        .batch(args.batch_size, allow_smaller_final_batch=True)
        .prefetch(4)
    )
    w = np.zeros(FEATURES, np.float32)
    seen: collections.Counter[int] = collections.Counter()
    steps = 0
    t0 = time.perf_counter()
    async with pipe.open() as batches:
        async for features, labels, ids in batches:
            p = 1 / (1 + np.exp(-(features @ w)))
            w -= 0.1 * features.T @ (p - labels) / len(labels)
            seen.update(ids.tolist())
            steps += 1
    elapsed = time.perf_counter() - t0
    total = len(files) * args.records
    examples = sum(seen.values())
    exact = len(seen) == total and set(seen.values()) == {args.epochs}
    say(
        f"Trained {steps} steps on {examples:,} examples ({len(files)} files x "
        f"{args.records} records x {args.epochs} epochs) in {elapsed:.2f} s "
        f"({examples / elapsed:,.0f} examples/s)."
    )
    report = pipe.describe()
    print(report)
    say(LEGEND)
    say(BOTTLENECK)
    read = next(s for s in pipe.statistics() if s.name == "map(read)")
    chosen = "chosen by the tuner" if args.threads == "auto" else "--threads"
    once = (
        f"every one of the {total:,} records reached the trainer exactly {args.epochs} "
        "times, once per epoch"
        if exact
        else "records were NOT seen exactly once per epoch: some were lost or repeated"
    )
    say(
        "What this showed: the reader, the shuffle buffer and the batching ran as one "
        f"chain of stages; {once}, and the `async for` loop ended by itself after the "
        f"last batch. Reading ended on {read.concurrency} threads ({chosen}), "
        f"{read.busy_fraction:.0%} busy on average. (Try --read-ms 1, a slow store, to make "
        "reading the clear bottleneck: with --threads 1 the report names it, and the tuner "
        "relieves it by adding threads.)"
    )
    return {"steps": steps, "examples": examples, "exact": exact, "report": report}


def threads(text: str) -> int | str:
    """``--threads``: ``auto`` or a whole number of at least 1."""
    if text == "auto":
        return text
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number >= 1, got {text!r}")
    return n


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--files", type=int, default=8, help="files to write")
    add("--records", type=int, default=400, help="records per file")
    add("--batch-size", type=int, default=32, help="records per training batch")
    add("--capacity", type=int, default=2000, help="shuffle buffer capacity (records)")
    add(
        "--min-after-dequeue",
        type=int,
        default=1000,
        help="records the shuffle buffer keeps while more are coming",
    )
    add(
        "--threads",
        type=threads,
        default="auto",
        help="reader threads: a number, or 'auto' (the pipeline's tuner chooses)",
    )
    add("--epochs", type=int, default=2, help="passes over the records")
    add("--read-ms", type=float, default=0.0, help="extra milliseconds per record read")
    add("--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop")
    args = parser.parse_args(argv)
    if not 0 <= args.min_after_dequeue < args.capacity:
        parser.error("--min-after-dequeue must be at least 0 and less than --capacity")
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp), args.files, args.records)
        result: dict[str, Any] = anyio.run(train, args, files, backend=args.backend)
    return result


if __name__ == "__main__":
    main()
