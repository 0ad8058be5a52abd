"""An image input pipeline: JPEG files -> decode on threads or processes -> augment ->
batch -> trainer.

    pipe = (Pipeline.from_iterable(enumerate(paths))
            .map(load, concurrency=workers,       # read + decode + crop + flip
                 executor=executor)                # "thread" or "process"
            .batch(batch_size, allow_smaller_final_batch=True)
            .prefetch(2))
    async with pipe.open() as batches:
        async for images, ids in batches:
            await train_step(images)               # a tiny numpy op, then the loop is free

``load`` reads one file and decodes it with Pillow, then takes a random crop and a
random horizontal flip with numpy. On threads (``--executor thread``, the default),
Pillow releases the GIL while it decodes, so several threads decode at once, but the
Python parts of ``load`` take turns. With ``--executor process`` each worker is a
process of its own: every part runs in parallel, the images come back through shared
memory, and the workers write each batch in place. ``load`` is a module-level function
(with ``functools.partial`` for its crop size), so worker processes can import it.
Each item carries its index, so the script can check that every image reached the
trainer exactly once. Without ``--dir`` it first writes a small folder of JPEGs into a
temporary directory (removed at the end).

At the end it prints images/s, ``pipe.describe()`` (each stage's counts, busy time, queue
occupancy and waits, and the bottleneck) and what the run showed, in plain words.

Needs Pillow (``pip install pillow``); without it the script says so and exits with
status 2.

Run: python examples/image_pipeline.py [--dir DIR] [--images 512] [--size 256]
     [--crop 224] [--batch-size 64] [--workers 2] [--executor thread|process]
     [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np

import aqueue


def write_jpegs(directory: Path, count: int, size: int) -> list[str]:
    """Write ``count`` JPEGs of ``size`` x ``size``: smooth random colours plus noise,
    so decoding them costs what decoding a photo of that size costs."""
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        field = rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)
        smooth = np.asarray(Image.fromarray(field).resize((size, size), Image.BICUBIC))
        noisy = smooth.astype(np.int16) + rng.normal(0, 10, smooth.shape).astype(np.int16)
        path = directory / f"img-{i:05d}.jpg"
        Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(path, quality=90)
        paths.append(str(path))
    return paths


def load(item: tuple[int, str], crop: int) -> tuple[np.ndarray, int]:
    """The per-image work, run by the map stage's workers (threads or processes)."""
    from PIL import Image

    index, path = item
    with Image.open(path) as im:  # reading and decoding release the GIL
        if im.mode != "RGB":
            im = im.convert("RGB")
        if min(im.size) < crop:
            im = im.resize((max(crop, im.width), max(crop, im.height)))
        img = np.asarray(im)
    y = random.randrange(img.shape[0] - crop + 1)
    x = random.randrange(img.shape[1] - crop + 1)
    out = img[y : y + crop, x : x + crop]
    if random.random() < 0.5:
        out = out[:, ::-1]  # horizontal flip
    return np.ascontiguousarray(out), index


async def train(args: argparse.Namespace, paths: list[str]) -> dict[str, Any]:
    pipe = (
        aqueue.Pipeline.from_iterable(list(enumerate(paths)))
        .map(
            functools.partial(load, crop=args.crop),
            concurrency=args.workers,
            executor=args.executor,
            name="map(load)",
        )
        .batch(args.batch_size, allow_smaller_final_batch=True)
        .prefetch(2)
    )
    mean = np.zeros(3)  # the "model": a running mean colour
    seen: list[int] = []
    steps = 0
    t0 = time.perf_counter()
    async with pipe.open() as batches:
        async for images, ids in batches:
            mean += 0.1 * (images.mean(axis=(0, 1, 2)) - mean)  # the training step
            # Where a real trainer awaits its device or an RPC (anyio.sleep(0) does the same).
            await anyio.lowlevel.checkpoint()
            seen.extend(ids.tolist())
            steps += 1
    elapsed = time.perf_counter() - t0
    exact = sorted(seen) == list(range(len(paths)))
    rate = len(seen) / elapsed
    report = pipe.describe()
    workers = f"{args.workers} decoding {'processes' if args.executor == 'process' else 'threads'}"
    print(
        f"{steps} steps, {len(seen)} images of {args.crop}x{args.crop} in {elapsed:.2f} s: "
        f"{rate:.0f} images/s with {workers}; "
        f"every image seen once: {exact}"
    )
    print(report)
    stats = pipe.statistics()
    load_stage = stats[1]
    # describe()'s last line is its verdict: the one rule for what limited the speed.
    verdict = report.splitlines()[-1].removeprefix("bottleneck: ")
    if args.executor == "process":
        how = (
            f"in {args.workers} worker processes, which wrote the images into shared "
            "memory and each batch in place"
        )
        who = "worker processes"
    else:
        how = f"on {args.workers} threads"
        who = "threads"
    print(
        f"\nWhat this showed: {len(paths)} JPEG files were read and decoded {how}, "
        f"cropped and flipped, stacked into {steps} batches of up to {args.batch_size}, "
        "and an async training loop took each batch exactly once "
        f"({'checked' if exact else 'NOT the case: some images were lost or repeated'}). "
        f"Decoding kept each of its {who} busy {load_stage.busy_fraction:.0%} of the "
        f"time. What limited the speed, in describe()'s words: {verdict}. The trainer "
        f"waited on an empty queue {stats[-1].starved_fraction:.0%} of the time: near 0% "
        "would mean training, not input, set the pace."
    )
    return {"steps": steps, "images": len(seen), "exact": exact, "report": report, "rate": rate}


def find_jpegs(directory: Path) -> list[str]:
    paths = sorted(str(p) for p in directory.iterdir() if p.suffix.lower() in (".jpg", ".jpeg"))
    if not paths:
        raise SystemExit(f"no .jpg or .jpeg files in {directory}")
    return paths


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="a folder of JPEG files to read; None writes --images JPEGs into a temporary one",
    )
    parser.add_argument(
        "--images", type=int, default=512, help="how many JPEGs to write (without --dir)"
    )
    parser.add_argument("--size", type=int, default=256, help="side of the written images, pixels")
    parser.add_argument("--crop", type=int, default=224, help="side of the random crop, pixels")
    parser.add_argument("--batch-size", type=int, default=64, help="images per training batch")
    parser.add_argument(
        "--workers",
        "--threads",
        dest="workers",
        type=int,
        default=2,
        help="decoding workers: threads, or processes with --executor process (map concurrency)",
    )
    parser.add_argument(
        "--executor",
        choices=["thread", "process"],
        default="thread",
        help="run the decoding on threads (Pillow releases the GIL while decoding) or in "
        "worker processes (everything in parallel; images through shared memory)",
    )
    parser.add_argument(
        "--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop"
    )
    args = parser.parse_args(argv)
    try:
        import PIL  # noqa: F401
    except ImportError:
        print(
            "examples/image_pipeline.py needs Pillow to read and decode JPEGs: pip install pillow",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    if args.dir is not None:
        paths = find_jpegs(args.dir)
        result: dict[str, Any] = anyio.run(train, args, paths, backend=args.backend)
        return result
    if args.crop > args.size:
        parser.error(f"--crop ({args.crop}) must not exceed --size ({args.size})")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"writing {args.images} JPEGs of {args.size}x{args.size} into {tmp} ...")
        paths = write_jpegs(Path(tmp), args.images, args.size)
        result = anyio.run(train, args, paths, backend=args.backend)
    return result


if __name__ == "__main__":
    main()
