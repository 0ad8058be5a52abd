"""W9, process maps: a GIL-bound function on threads and on processes, and what handing a
150 KB array result back costs the main process.

Part 1, GIL-bound scaling. ``spin`` is a pure-Python loop that holds the GIL; its loop
count is calibrated at start so that one call takes about ``--gil-us`` µs here (default
200). N items (default 20,000) at C = 1, 2, 4:

- ``single thread``: ``spin`` called in a loop, no pipeline (the baseline, 1.0x);
- ``aqueue threads``: ``Pipeline(range(N)).map(spin, concurrency=C)``, a consumer that
  takes every item;
- ``aqueue processes``: the same with ``executor="process"``;
- ``aqueue processes -> batch(64)``: the same followed by ``batch(64)``, the consumer
  taking batches (the floor's consumer takes whole bursts, never an item at a time);
- ``floor``: not a peer, the leanest code doing the job with worker processes: C spawned
  processes, each sent bursts of items (as many as aqueue's bursts hold) over a pipe
  with two bursts in flight, the results pickled back, one main thread waiting on all
  the pipes (``multiprocessing.connection.wait``); no queues, order, statistics, failure
  handling or checkpoints;
- ``multiprocessing.Pool(C).imap`` with the same chunk size (for information).

Part 2, the hand-off of a 150 KB array. ``image(i)`` sleeps ``--work-us`` µs (default
2,000: sleeping leaves the cores to the main process, whose CPU is what is measured)
and returns a ``uint8[224, 224, 3]`` array (150,528 bytes); N items (default 6,000),
C = 2. The figure is the main process's CPU time (``time.process_time``, every
thread) from the first item received to the last, per item:

- ``aqueue map -> consumer``: the items are views of shared memory;
- ``aqueue map -> batch(64)``: the workers write the batches in place;
- ``aqueue map -> prefetch -> batch(64)``: a stage between the two, so the batch stage
  copies the views into each batch (one copy in the main process);
- ``floor (views)``: C spawned processes, each with a ring of slots in a shared-memory
  file; the main thread sends bursts of slot numbers (two in flight per worker), the
  worker writes each array into its slot and answers; the main thread makes a view of
  each slot, the consumer drops it, the slot is reused: only what the contract needs;
- ``floor (batches)``: the same, the workers writing rows of batches of 64 in place,
  the main thread taking a view of each complete batch;
- ``multiprocessing.Pool(C).imap``: the array pickled back, for information.

Each timed run goes from building the pipeline (or starting the processes) to the last
item consumed, start-up included; *steady* divides the items after the first by the
time from the first to the last. Rounds are interleaved (every row once per round),
``--repeat`` rounds; the tables show medians and the spread (max/min - 1) of the rounds.
This is a script, not a test; nothing is asserted. Targets, printed with the ratios:
aqueue processes at C = 2 >= 1.8x the single thread; main-process CPU of the hand-off of
a 150 KB array <= 30 µs per item.

Run: python benchmarks/bench_procs.py [--part gil,handoff] [--items N] [--gil-us 200]
     [--concurrency 1,2,4] [--handoff-items 6000] [--work-us 2000] [--repeat 3]
     [--only REGEX] [--calm LOAD] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import mmap
import multiprocessing
import multiprocessing.connection
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

SPIN_LOOPS = 1_000  # set by calibrate() (and passed to spawned workers through spin_arg)
SHAPE = (224, 224, 3)
NBYTES = 224 * 224 * 3
BATCH = 64
_TEMPLATE = np.arange(NBYTES, dtype=np.uint64).astype(np.uint8).reshape(SHAPE)


# -- the functions the workers run ------------------------------------------------------------


def spin(arg: tuple[int, int]) -> int:
    """Pure Python that holds the GIL: ``loops`` rounds of integer arithmetic."""
    i, loops = arg
    total = 0
    for k in range(loops):
        total += (k * i) % 7
    return total


def image(arg: tuple[int, float]) -> np.ndarray:
    """Sleep ``seconds``, then a 150 KB uint8 image that depends on ``i``."""
    i, seconds = arg
    if seconds:
        time.sleep(seconds)
    out = _TEMPLATE.copy()
    out[0, 0, 0] = i % 251
    return out


def calibrate(target_us: float) -> int:
    """The loop count for which one ``spin`` call takes about ``target_us`` µs here."""
    loops = 1_000
    while True:
        t0 = time.perf_counter()
        for i in range(20):
            spin((i, loops))
        took = (time.perf_counter() - t0) / 20
        if took > 20e-6:
            return max(1, round(loops * target_us * 1e-6 / took))
        loops *= 4


# -- aqueue ------------------------------------------------------------------------------------


async def aqueue_items(
    fn: Callable[[Any], Any], args: list[Any], c: int, how: str
) -> dict[str, float]:
    """Items of ``Pipeline(args).map(fn)`` as ``how`` says; times and main-process CPU."""
    from aqueue import Pipeline

    t0 = time.perf_counter()
    if how == "threads":
        pipe = Pipeline(args).map(fn, concurrency=c)
    elif how == "processes":
        pipe = Pipeline(args).map(fn, concurrency=c, executor="process")
    elif how == "fused":
        pipe = Pipeline(args).map(fn, concurrency=c, executor="process").batch(BATCH)
    else:  # "copied": a stage between the map and the batch
        pipe = Pipeline(args).map(fn, concurrency=c, executor="process").prefetch(2).batch(BATCH)
    count = 0
    t_first = cpu_first = 0.0
    async with pipe.open() as items:
        async for x in items:
            if not count:
                t_first, cpu_first = time.perf_counter(), time.process_time()
            count += len(x) if how in ("fused", "copied") else 1
        t1, cpu1 = time.perf_counter(), time.process_time()
    want = len(args) // BATCH * BATCH if how in ("fused", "copied") else len(args)
    if count != want:
        raise AssertionError(f"{how}: got {count} items, want {want}")
    first = BATCH if how in ("fused", "copied") else 1
    return {
        "seconds": t1 - t0,
        "steady_s": t1 - t_first,
        "steady_items": count - first,
        "cpu_per_item": (cpu1 - cpu_first) / (count - first),
        "items": count,
    }


# -- the floor: spawned workers fed bursts over pipes ----------------------------------------------


def _floor_worker(conn: Any, fn: Callable[[Any], Any], fd_info: tuple[int, int] | None) -> None:
    """Serve bursts: ``("b", args, slots)``; answer the results (pickled), or write each
    array into its slot of the shared file and answer the slots."""
    import socket

    view = None
    if fd_info is not None:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        _, fds, _, _ = socket.recv_fds(sock, 1, 1)
        mm = mmap.mmap(fds[0], fd_info[1])
        view = np.frombuffer(mm, dtype=np.uint8)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        _, args, slots = msg
        if view is None:
            conn.send([fn(a) for a in args])
            continue
        for a, off in zip(args, slots):
            view[off : off + NBYTES] = fn(a).reshape(-1)
        conn.send(slots)


def floor_run(
    fn: Callable[[Any], Any], args: list[Any], c: int, burst: int, mode: str
) -> dict[str, float]:
    """The floor (see the module docstring): ``mode`` "values" (results pickled), "views"
    (a view per item) or "batches" (rows of batches of 64 written in place)."""
    import socket

    ctx = multiprocessing.get_context("spawn")
    t0 = time.perf_counter()
    shared = mode != "values"
    region = -(-2 * burst * NBYTES // mmap.PAGESIZE) * mmap.PAGESIZE  # a worker's 2 bursts
    batches = 2 * c + 2  # batch slots: more than the bursts in flight can span
    size = batches * BATCH * NBYTES if mode == "batches" else region * c
    fd = os.memfd_create("floor") if shared else -1
    if shared:
        os.ftruncate(fd, size)
    conns, procs = [], []
    for _ in range(c):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_floor_worker, args=(child, fn, (0, size) if shared else None))
        p.start()
        child.close()
        if shared:
            socket.send_fds(socket.socket(fileno=os.dup(parent.fileno())), [b"f"], [fd])
        conns.append(parent)
        procs.append(p)
    mm = mmap.mmap(fd, size) if shared else None
    whole = np.frombuffer(mm, dtype=np.uint8) if mm is not None else None
    if shared:
        os.close(fd)
    nxt = 0
    inflight: dict[Any, list[tuple[int, list[int]]]] = {conn: [] for conn in conns}
    # "views": each worker owns two bursts of slots (one being written, one in the
    # consumer's hands at most); "batches": rows of batch slots, assigned in take order.
    free_bursts = {
        conn: [i * region + k * burst * NBYTES for k in range(2)] for i, conn in enumerate(conns)
    }
    batch_base = 0
    batch_row = 0
    batch_slots = [b * BATCH * NBYTES for b in range(batches)]
    done_rows: dict[int, int] = {}
    count = 0
    t_first = cpu_first = 0.0

    def send(conn: Any) -> None:
        nonlocal nxt, batch_row, batch_base
        if nxt >= len(args):
            return
        part = args[nxt : nxt + burst]
        if mode == "batches":
            part = args[nxt : nxt + min(burst, BATCH - batch_row)]
            slots = [batch_slots[batch_base] + (batch_row + j) * NBYTES for j in range(len(part))]
            tag = (batch_base, len(part))
            batch_row += len(part)
            if batch_row == BATCH:
                batch_row = 0
                batch_base = (batch_base + 1) % len(batch_slots)
        elif mode == "views":
            start = free_bursts[conn].pop(0)
            slots = [start + j * NBYTES for j in range(len(part))]
            tag = (start, len(part))
        else:
            slots, tag = [], (0, len(part))
        nxt += len(part)
        conn.send(("b", part, slots))
        inflight[conn].append(tag)

    for conn in conns:
        send(conn)
        send(conn)
    live = list(conns)
    while live:
        for conn in multiprocessing.connection.wait(live):
            got = conn.recv()
            start, n = inflight[conn].pop(0)
            if not count:
                t_first, cpu_first = time.perf_counter(), time.process_time()
            if mode == "values":
                count += len(got)
            elif mode == "views":
                assert whole is not None
                for off in got:
                    item = whole[off : off + NBYTES].reshape(SHAPE)
                    del item  # the consumer takes it and drops it
                count += n
                free_bursts[conn].append(start)
            else:
                done_rows[start] = done_rows.get(start, 0) + n
                if done_rows[start] == BATCH:
                    assert whole is not None
                    batch = whole[batch_slots[start] : batch_slots[start] + BATCH * NBYTES]
                    batch = batch.reshape((BATCH, *SHAPE))
                    del batch
                    done_rows[start] = 0
                    count += BATCH
            if nxt < len(args):
                send(conn)
            elif not inflight[conn]:
                live.remove(conn)
    t1, cpu1 = time.perf_counter(), time.process_time()
    for conn in conns:
        conn.send(None)
    for p in procs:
        p.join()
    del whole
    if mm is not None:
        mm.close()
    want = len(args) // BATCH * BATCH if mode == "batches" else len(args)
    if count != want:
        raise AssertionError(f"floor {mode}: got {count} items, want {want}")
    first = BATCH if mode == "batches" else 1
    return {
        "seconds": t1 - t0,
        "steady_s": t1 - t_first,
        "steady_items": count - first,
        "cpu_per_item": (cpu1 - cpu_first) / (count - first),
    }


def pool_run(fn: Callable[[Any], Any], args: list[Any], c: int, chunk: int) -> dict[str, float]:
    """``multiprocessing.Pool(C).imap(fn, chunksize)`` (spawn): results pickled back."""
    t0 = time.perf_counter()
    count = 0
    t_first = cpu_first = 0.0
    with multiprocessing.get_context("spawn").Pool(c) as pool:
        for _ in pool.imap(fn, args, chunksize=chunk):
            if not count:
                t_first, cpu_first = time.perf_counter(), time.process_time()
            count += 1
        t1, cpu1 = time.perf_counter(), time.process_time()
    return {
        "seconds": t1 - t0,
        "steady_s": t1 - t_first,
        "steady_items": count - 1,
        "cpu_per_item": (cpu1 - cpu_first) / (count - 1),
    }


def single_run(fn: Callable[[Any], Any], args: list[Any]) -> dict[str, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    for a in args:
        fn(a)
    t1, c1 = time.perf_counter(), time.process_time()
    return {
        "seconds": t1 - t0,
        "steady_s": t1 - t0,
        "steady_items": len(args),
        "cpu_per_item": (c1 - c0) / len(args),
    }


# -- cases, rounds, report ----------------------------------------------------------------------


def burst_for(item_s: float) -> int:
    """As many items as an aqueue burst holds at concurrency 2 (its lower bound)."""
    try:
        from aqueue._pipeline.process._driver import PROCESS_BURST_S
    except ImportError:  # an older revision (compare_revisions.py), before the folders
        from aqueue._pipeline._procmap import PROCESS_BURST_S  # type: ignore[no-redef]

    return max(1, min(256, int(PROCESS_BURST_S / item_s)))


def gil_cases(
    args: list[Any], item_s: float, cs: list[int]
) -> list[tuple[str, int, Callable[[], dict[str, float]]]]:
    chunk = burst_for(item_s)
    cases: list[tuple[str, int, Callable[[], dict[str, float]]]] = [
        ("single thread", 1, lambda: single_run(spin, args))
    ]
    for c in cs:
        cases += [
            ("aqueue threads", c, lambda c=c: asyncio.run(aqueue_items(spin, args, c, "threads"))),
            (
                "aqueue processes",
                c,
                lambda c=c: asyncio.run(aqueue_items(spin, args, c, "processes")),
            ),
            (
                f"aqueue processes -> batch({BATCH})",
                c,
                lambda c=c: asyncio.run(aqueue_items(spin, args, c, "fused")),
            ),
            (
                f"floor: spawned workers, bursts of {chunk}",
                c,
                lambda c=c: floor_run(spin, args, c, chunk, "values"),
            ),
            (
                f"multiprocessing.Pool.imap, chunksize {chunk}",
                c,
                lambda c=c: pool_run(spin, args, c, chunk),
            ),
        ]
    return cases


def handoff_cases(
    args: list[Any], item_s: float, c: int
) -> list[tuple[str, int, Callable[[], dict[str, float]]]]:
    burst = burst_for(item_s)
    return [
        (
            "aqueue map -> consumer (views)",
            c,
            lambda: asyncio.run(aqueue_items(image, args, c, "processes")),
        ),
        (
            "aqueue map -> batch(64) (written in place)",
            c,
            lambda: asyncio.run(aqueue_items(image, args, c, "fused")),
        ),
        (
            "aqueue map -> prefetch -> batch(64) (copied)",
            c,
            lambda: asyncio.run(aqueue_items(image, args, c, "copied")),
        ),
        (f"floor (views), bursts of {burst}", c, lambda: floor_run(image, args, c, burst, "views")),
        (
            f"floor (batches), bursts of {burst}",
            c,
            lambda: floor_run(image, args, c, burst, "batches"),
        ),
        (
            f"multiprocessing.Pool.imap (pickled), chunksize {burst}",
            c,
            lambda: pool_run(image, args, c, burst),
        ),
    ]


def busy_cores(seconds: float = 2.0) -> float:
    """Cores the whole machine kept busy over the next ``seconds`` (/proc/stat; Linux)."""

    def ticks() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]  # all, idle + iowait

    total0, idle0 = ticks()
    time.sleep(seconds)
    total1, idle1 = ticks()
    cores = os.cpu_count() or 1
    return cores * (1 - (idle1 - idle0) / max(1, total1 - total0))


def wait_calm(limit: float, most_s: float = 600.0) -> None:
    """Wait until the machine keeps fewer than ``limit`` cores busy (at most ``most_s``):
    on a shared machine, start a round when the others are quiet."""
    deadline = time.monotonic() + most_s
    while time.monotonic() < deadline and busy_cores() >= limit:
        pass


def spread(values: list[float]) -> float:
    return max(values) / min(values) - 1 if min(values) > 0 else math.inf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", default="gil,handoff", help="gil, handoff or both (comma-separated)"
    )
    parser.add_argument("--items", type=int, default=20_000, help="items of the GIL-bound part")
    parser.add_argument(
        "--gil-us", type=float, default=200.0, help="µs per call of the GIL-bound function"
    )
    parser.add_argument("--concurrency", default="1,2,4", help="C values of the GIL-bound part")
    parser.add_argument(
        "--handoff-items", type=int, default=6_000, help="items of the hand-off part"
    )
    parser.add_argument("--work-us", type=float, default=2_000.0, help="µs each image call sleeps")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--quick", action="store_true", help="smoke run: few items, 1 round")
    parser.add_argument(
        "--only", default=None, help="run only the rows whose label matches this regex"
    )
    parser.add_argument(
        "--calm",
        type=float,
        default=None,
        help="before each round, wait (at most 10 minutes) until the machine keeps fewer "
        "than this many cores busy (measured over 2 s; for a shared machine); default: "
        "do not wait",
    )
    parser.add_argument("--json", default=None, help="also write the JSON report here")
    args = parser.parse_args(argv)
    parts = args.part.split(",")
    n, hn, repeat = args.items, args.handoff_items, args.repeat
    cs = [int(x) for x in args.concurrency.split(",")]
    if args.quick:
        n, hn, repeat = 2_000, 640, 1
    loops = calibrate(args.gil_us)
    gil_args = [(i, loops) for i in range(n)]
    t0 = time.perf_counter()
    single_run(spin, gil_args[:500])
    item_s = (time.perf_counter() - t0) / 500
    work_s = args.work_us * 1e-6
    img_args = [(i, work_s) for i in range(hn)]
    cases: list[tuple[str, str, int, Callable[[], dict[str, float]]]] = []
    if "gil" in parts:
        cases += [("gil", label, c, run) for label, c, run in gil_cases(gil_args, item_s, cs)]
    if "handoff" in parts:
        cases += [
            ("handoff", label, c, run) for label, c, run in handoff_cases(img_args, work_s, 2)
        ]
    if args.only is not None:
        cases = [x for x in cases if x[1] == "single thread" or re.search(args.only, x[1])]
    results: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    loads = []
    for r in range(repeat):
        if args.calm is not None:
            wait_calm(args.calm)
        loads.append(os.getloadavg()[0])
        print(f"round {r + 1}/{repeat} (load {loads[-1]:.1f})", file=sys.stderr, flush=True)
        for part, label, c, run in cases:
            print(f"  {part}: {label} C={c} ...", file=sys.stderr, flush=True)
            results.setdefault((part, label, c), []).append(run())
    cores = os.cpu_count() or 1
    print(
        f"W9 on {platform.machine()}, {cores} cores, CPython {platform.python_version()}; "
        f"{repeat} round(s); load average at the start of each round: "
        + ", ".join(f"{x:.1f}" for x in loads)
    )
    doc: dict[str, Any] = {"loads": loads, "rows": []}
    if "gil" in parts:
        base = statistics.median(n / x["seconds"] for x in results[("gil", "single thread", 1)])
        print(
            f"\nGIL-bound: {n:,} calls of spin ({loops} loops, {item_s * 1e6:.0f} µs per call "
            f"here); single thread {base:.0f} calls/s\n"
        )
        print("| row | C | calls/s (spread) | x single thread | steady calls/s | x single thread |")
        print("|---|--:|--:|--:|--:|--:|")
        for (part, label, c), runs in results.items():
            if part != "gil":
                continue
            rates = [x.get("items", n) / x["seconds"] for x in runs]
            steady = [x["steady_items"] / x["steady_s"] for x in runs]
            rate, st = statistics.median(rates), statistics.median(steady)
            print(
                f"| {label} | {c} | {rate:.0f} ({spread(rates):.0%}) | {rate / base:.2f}x | "
                f"{st:.0f} | {st / base:.2f}x |"
            )
            doc["rows"].append({"part": part, "label": label, "c": c, "runs": runs})
    if "handoff" in parts:
        print(
            f"\nHand-off of a 150,528-byte array: {hn:,} items, C = 2, each call sleeping "
            f"{args.work_us:.0f} µs; main-process CPU per item from the first item to the last\n"
        )
        print("| row | µs of main-process CPU per item (spread) | items/s | steady items/s |")
        print("|---|--:|--:|--:|")
        for (part, label, c), runs in results.items():
            if part != "handoff":
                continue
            cpu = [x["cpu_per_item"] * 1e6 for x in runs]
            rate = statistics.median(hn / x["seconds"] for x in runs)
            st = statistics.median(x["steady_items"] / x["steady_s"] for x in runs)
            med = statistics.median(cpu)
            print(f"| {label} | {med:.1f} ({spread(cpu):.0%}) | {rate:.0f} | {st:.0f} |")
            doc["rows"].append({"part": part, "label": label, "c": c, "runs": runs})
    print(json.dumps(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
