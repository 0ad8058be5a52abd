"""The TensorFlow input-pipeline tutorial, as async code.

    file names --string_input_producer--> reader --shuffle_batch--> trainer

The script writes a few binary files of (features, label, id) records. Then, as in a
TF1 program:

1. ``string_input_producer(files, num_epochs=2)`` queues the file names, reshuffled
   each epoch;
2. an async *reader* takes a file name when it has no records left, loads the file on a
   worker thread and returns one record per call (TF's ``reader.read(filename_queue)``);
3. ``shuffle_batch(reader, 32, capacity=2000, min_after_dequeue=1000, num_threads=4)``
   runs four reader producers into a RandomShuffleQueue (the record layout is given with
   ``dtypes=`` and ``shapes=``, as TF knows it from the reader's tensors);
4. ``coord.start_queue_runners()`` starts everything, and the trainer (logistic
   regression) takes batches until OutOfRangeError, after two epochs: the clean end of
   training, as in TF.

At the end the script prints the run's figures, ``coord.report()`` (taken after the
block) with a sentence on how to read it, and what the run showed: whether every record
was seen exactly ``--epochs`` times (``allow_smaller_final_batch`` keeps the last short
batch) and how much of the time the trainer waited for input.

Run: python examples/input_pipeline.py [--files 8] [--records 400] [--batch-size 32]
     [--capacity 2000] [--min-after-dequeue 1000] [--threads 4] [--epochs 2]
     [--backend asyncio|trio]
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


class RecordReader:
    """An async reader: one record per call, a new file from the name queue when empty.

    Several producers may share it: a producer that finds no record left loads the next
    file itself; records are handed out in file order.
    """

    def __init__(self, names: aqueue.QueueBase[Any]) -> None:
        self._names = names
        self._records: collections.deque[Any] = collections.deque()

    async def __call__(self) -> tuple[np.ndarray, np.int64, np.int64]:
        while not self._records:
            # OutOfRangeError here (no file left) ends this producer cleanly.
            name = await self._names.dequeue()
            data = await anyio.to_thread.run_sync(np.fromfile, name, record_dtype())
            self._records.extend(data)
        r = self._records.popleft()
        return r["features"], r["label"], r["id"]


def cross_entropy(p: np.ndarray, labels: np.ndarray) -> float:
    """Mean binary cross-entropy of predicted probabilities ``p`` against 0/1 labels."""
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))


def say(text: str) -> None:
    print(textwrap.fill(text, 88, subsequent_indent="  ", break_on_hyphens=False))


async def train(args: argparse.Namespace, files: list[str]) -> dict[str, Any]:
    names = aqueue.string_input_producer(files, num_epochs=args.epochs, seed=0)
    batches = aqueue.shuffle_batch(
        RecordReader(names),
        args.batch_size,
        capacity=args.capacity,
        min_after_dequeue=args.min_after_dequeue,
        num_threads=args.threads,
        seed=0,
        allow_smaller_final_batch=True,
        dtypes=[np.float32, np.int64, np.int64],  # features, label, id
        shapes=[(FEATURES,), (), ()],
    )
    w = np.zeros(FEATURES, np.float32)
    seen: collections.Counter[int] = collections.Counter()
    steps = 0
    losses = []
    t0 = time.perf_counter()
    async with aqueue.Coordinator() as coord:
        coord.start_queue_runners()
        try:
            while True:
                features, labels, ids = await batches.dequeue()
                p = 1 / (1 + np.exp(-(features @ w)))
                w -= 0.1 * features.T @ (p - labels) / len(labels)
                losses.append(cross_entropy(p, labels))
                seen.update(ids.tolist())
                steps += 1
        except aqueue.OutOfRangeError:
            pass  # num_epochs reached: the end of training, as in TF
    report = coord.report()  # after the block: every producer has ended
    elapsed = time.perf_counter() - t0
    total = len(files) * args.records
    examples = sum(seen.values())
    exact = len(seen) == total and set(seen.values()) == {args.epochs}
    say(
        f"Trained {steps} steps on {examples:,} examples ({len(files)} files x "
        f"{args.records} records x {args.epochs} epochs) in {elapsed:.2f} s "
        f"({examples / elapsed:,.0f} examples/s); the training loss (binary cross-entropy "
        f"per example) fell from {losses[0]:.3f} at the first step to {losses[-1]:.3f} at "
        "the last."
    )
    print(report)
    say(
        "The table above is coord.report(): one row per queue, the file names "
        "('string_input_producer') and the shuffled records ('shuffle_batch'), with size "
        "and totals in elements (file names, records), time_full_s and time_empty_s in "
        "seconds during which a producer waited for room or a consumer for an element, "
        "and each queue's runner with how many of its producers are still running. Its "
        "last line, input-bound, is the share of the training loop's time spent waiting "
        "for a batch."
    )
    once = (
        f"every one of the {total:,} records reached the trainer exactly {args.epochs} "
        "times, once per epoch, in shuffled batches"
        if exact
        else "records were NOT seen exactly once per epoch: some were lost or repeated"
    )
    say(
        f"What this showed: the three TF steps (create the input functions, which add "
        "their queue runners; start_queue_runners; dequeue until OutOfRangeError) worked "
        f"as in TF: {once}, and OutOfRangeError after the last epoch ended training "
        "cleanly, with every producer stopped."
    )
    return {"steps": steps, "examples": examples, "exact": exact, "report": report}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--files", type=int, default=8, help="files to write")
    add("--records", type=int, default=400, help="records per file")
    add("--batch-size", type=int, default=32, help="records per training batch")
    add("--capacity", type=int, default=2000, help="shuffle queue capacity (records)")
    add(
        "--min-after-dequeue",
        type=int,
        default=1000,
        help="records the shuffle queue keeps while more are coming",
    )
    add("--threads", type=int, default=4, help="reader producers (num_threads)")
    add("--epochs", type=int, default=2, help="passes over the files (num_epochs)")
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
