"""The TensorFlow input-pipeline tutorial, as async code.

    file names --string_input_producer--> reader --shuffle_batch--> trainer

The script writes a few binary files of (features, label, id) records. Then, as in a
TF1 program:

1. ``string_input_producer(files, num_epochs=2)`` queues the file names, reshuffled
   each epoch;
2. an async *reader* takes a file name when it has no records left, loads the file on a
   worker thread and returns one record per call (TF's ``reader.read(filename_queue)``);
3. ``shuffle_batch(reader, 32, capacity=2000, min_after_dequeue=1000, num_threads=4)``
   runs four reader producers into a RandomShuffleQueue;
4. ``coord.start_queue_runners()`` starts everything, and the trainer takes batches
   until OutOfRangeError, after two epochs.

Every record is seen exactly ``--epochs`` times (``allow_smaller_final_batch`` keeps the
last short batch), which the script checks.

Run: python examples/input_pipeline.py [--files 8] [--records 400] [--batch-size 32]
     [--capacity 2000] [--min-after-dequeue 1000] [--threads 4] [--epochs 2]
     [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import collections
import tempfile
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

    def __init__(self, names: aqueue.QueueBase) -> None:
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
                losses.append(float(-np.mean(labels * np.log(p + 1e-7))))
                seen.update(ids.tolist())
                steps += 1
        except aqueue.OutOfRangeError:
            pass  # num_epochs reached: the end of training, as in TF
        report = coord.report()
    elapsed = time.perf_counter() - t0
    total = len(files) * args.records
    exact = len(seen) == total and set(seen.values()) == {args.epochs}
    print(
        f"{steps} steps, {sum(seen.values())} examples in {elapsed:.2f} s; "
        f"every record seen {args.epochs} times: {exact}; "
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f}"
    )
    print(report)
    return {"steps": steps, "examples": sum(seen.values()), "exact": exact, "report": report}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--capacity", type=int, default=2000)
    parser.add_argument("--min-after-dequeue", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp), args.files, args.records)
        result: dict[str, Any] = anyio.run(train, args, files, backend=args.backend)
    return result


if __name__ == "__main__":
    main()
