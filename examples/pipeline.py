"""The input-pipeline job of examples/input_pipeline.py, written with Pipeline.

    from_iterable(record addresses).repeat(2)
        .map(read_record, concurrency=4)        # blocking np.fromfile, on 4 threads
        .shuffle(capacity=2000, min_after_dequeue=1000, seed=0)
        .batch(32, allow_smaller_final_batch=True)
        .prefetch(4)

The source lists (file, record index) pairs, so each map call reads one record, as a
TF reader does; ``repeat(2)`` reads them for two epochs. The trainer iterates with
``async for``; at the end the script prints ``pipe.describe()``: each stage with its
counts, busy time, queue occupancy and waits, and the bottleneck. ``--read-ms`` adds a
simulated storage latency per record (a sleep) to make the reader the bottleneck.

Run: python examples/pipeline.py [--files 8] [--records 400] [--batch-size 32]
     [--capacity 2000] [--min-after-dequeue 1000] [--threads 4] [--epochs 2]
     [--read-ms 0] [--backend asyncio|trio]
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
    exact = len(seen) == total and set(seen.values()) == {args.epochs}
    print(
        f"{steps} steps, {sum(seen.values())} examples in {elapsed:.2f} s; "
        f"every record seen {args.epochs} times: {exact}"
    )
    report = pipe.describe()
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
    parser.add_argument("--read-ms", type=float, default=0.0)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        files = write_files(Path(tmp), args.files, args.records)
        result: dict[str, Any] = anyio.run(train, args, files, backend=args.backend)
    return result


if __name__ == "__main__":
    main()
