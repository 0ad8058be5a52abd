"""Compare aqueue's own benchmark rows at two git revisions, interleaved, in one run.

    python benchmarks/compare_revisions.py BEFORE AFTER [--rounds N] [--suites LIST]

Each revision is checked out into a temporary ``git worktree`` (detached). Then, for
``--rounds`` rounds, every suite runs once on BEFORE and once on AFTER, alternating, in
fresh interpreters whose ``PYTHONPATH`` points at that revision's tree, so both see the
same machine state over the whole run. The benchmark scripts of AFTER are used for
both sides, so only the package changes. Per row the median over rounds is reported,
with AFTER / BEFORE; a row is "slower" when that ratio is below ``--floor`` (default
0.97). Peers are skipped (they do not change between revisions).

Suites (aqueue rows only):

- ``queues``: ``bench_queues.py --reps 1 --no-tf --only aqueue`` (elements/s);
- ``overlap``: ``bench_overlap.py --reps 1 --no-tf --only aqueue`` (efficiency);
- ``pipeline``: ``bench_pipeline.py --no-peers --runs b`` (items/s per C);
- ``replay``: ``bench_replay.py --rows aqueue --redis no --r1-only --reps 3 --loops 100``
  (R1, loops/s of the in-process table's loop, uniform and prioritized);
- ``items``: ``bench_items.py --no-peers --repeat 1 --items 51200`` (W7, items/s of
  the aqueue rows per C);
- ``procs``: ``bench_procs.py --repeat 1 --only aqueue`` with 4,000 GIL-bound calls and
  1,280 hand-offs (W9: items/s of the GIL-bound aqueue rows, items per second of the
  main process's CPU of the hand-off rows);
- ``redis``: ``bench_redis.py --rows fifo,shuffle,pipeline --repeat 1`` (W5, elements/s
  of the aqueue.redis rows: FIFO and RandomShuffle with ``dequeue_many(32)``, and FIFO
  read by ``Pipeline.from_queue(q).batch(32)``), each run on a private redis-server.

Not a test: run it alone on a quiet machine; it takes a few minutes per round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _worktree(rev: str, where: Path) -> Path:
    path = where / rev.replace("/", "_")
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), rev],
        check=True,
        capture_output=True,
    )
    return path


def _run(tree: Path, args: list[str]) -> str:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} failed on {tree}:\n{done.stderr[-2000:]}")
    return done.stdout


def suite_queues(tree: Path, tmp: Path) -> dict[str, float]:
    out = tmp / "queues.json"
    _run(
        tree,
        [
            str(HERE / "bench_queues.py"),
            "--reps",
            "1",
            "--no-tf",
            "--only",
            "aqueue",
            "--json",
            str(out),
        ],
    )
    rows = json.loads(out.read_text())["results"]
    return {r["key"]: r["median_elements_per_s"] for r in rows if r.get("median_elements_per_s")}


def suite_overlap(tree: Path, tmp: Path) -> dict[str, float]:
    out = tmp / "overlap.json"
    _run(
        tree,
        [
            str(HERE / "bench_overlap.py"),
            "--reps",
            "1",
            "--no-tf",
            "--only",
            "aqueue",
            "--json",
            str(out),
        ],
    )
    rows = json.loads(out.read_text())["results"]
    return {f"W4/{k}": v["efficiency"] for k, v in rows.items()}


def suite_pipeline(tree: Path, tmp: Path) -> dict[str, float]:
    text = _run(tree, [str(HERE / "bench_pipeline.py"), "--no-peers", "--runs", "b"])
    rows: list[dict[str, Any]] = json.loads(text.strip().splitlines()[-1])
    return {
        f"pipeline/{r['peer']}/C={r['C']}": r["items_per_s"]
        for r in rows
        if r["peer"].startswith("aqueue")
    }


def suite_redis(tree: Path, tmp: Path) -> dict[str, float]:
    out = tmp / "redis.json"
    rows = "fifo,shuffle,pipeline"
    _run(tree, [str(HERE / "bench_redis.py"), "--rows", rows, "--repeat", "1", "--json", str(out)])
    rates: dict[str, float] = json.loads(out.read_text())["elements_per_s"]
    return {f"redis/W5/{kind}": rate for kind, rate in rates.items()}


def suite_items(tree: Path, tmp: Path) -> dict[str, float]:
    out = tmp / "items.json"
    _run(
        tree,
        [
            str(HERE / "bench_items.py"),
            "--no-peers",
            "--repeat",
            "1",
            "--items",
            "51200",
            "--json",
            str(out),
        ],
    )
    rows = json.loads(out.read_text())["rows"]
    return {
        f"W7/{r['label']}/C={c}": rates[0]
        for r in rows
        if r["label"].startswith("aqueue")
        for c, rates in r["items_per_s"].items()
    }


def suite_procs(tree: Path, tmp: Path) -> dict[str, float]:
    out = tmp / "procs.json"
    args = ["--repeat", "1", "--only", "aqueue", "--items", "4000", "--handoff-items", "1280"]
    _run(tree, [str(HERE / "bench_procs.py"), *args, "--json", str(out)])
    rows: list[dict[str, Any]] = json.loads(out.read_text())["rows"]
    # GIL-bound rows: items/s from the first item to the last; hand-off rows (bound by
    # their sleeping calls): items per second of the main process's CPU
    found: dict[str, float] = {}
    for r in rows:
        if not r["label"].startswith("aqueue"):
            continue
        run = r["runs"][0]
        key = f"W9/{r['part']}/{r['label']}/C={r['c']}"
        if r["part"] == "gil":
            found[key] = run.get("items", 4000) / run["seconds"]
        else:
            found[f"{key}/per CPU s"] = 1 / run["cpu_per_item"]
    return found


def suite_replay(tree: Path, tmp: Path) -> dict[str, float]:
    out = tmp / "replay.json"
    args = ["--rows", "aqueue", "--redis", "no", "--r1-only", "--reps", "3", "--loops", "100"]
    _run(tree, [str(HERE / "bench_replay.py"), *args, "--json", str(out)])
    rates: dict[str, float] = json.loads(out.read_text())["loops_per_s"]
    return {f"R1/{key}": rate for key, rate in rates.items()}


SUITES = {
    "queues": suite_queues,
    "replay": suite_replay,
    "overlap": suite_overlap,
    "pipeline": suite_pipeline,
    "items": suite_items,
    "procs": suite_procs,
    "redis": suite_redis,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suites", default="queues,overlap,pipeline")
    parser.add_argument("--floor", type=float, default=0.97)
    args = parser.parse_args()
    suites = [SUITES[s] for s in args.suites.split(",")]
    samples: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        trees = {"before": _worktree(args.before, tmp), "after": _worktree(args.after, tmp)}
        try:
            for rnd in range(args.rounds):
                order = ["before", "after"] if rnd % 2 == 0 else ["after", "before"]
                for suite in suites:
                    for side in order:
                        for key, value in suite(trees[side], tmp).items():
                            samples.setdefault((key, side), []).append(value)
                print(f"# round {rnd + 1}/{args.rounds} done", file=sys.stderr)
        finally:
            for tree in trees.values():
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                    check=False,
                    capture_output=True,
                )
    keys = sorted({k for k, _ in samples})
    print(f"| row | before ({args.before}) | after ({args.after}) | after/before |")
    print("|---|--:|--:|--:|")
    slower = []
    for key in keys:
        b = samples.get((key, "before"))
        a = samples.get((key, "after"))
        if not a or not b:
            continue
        mb, ma = statistics.median(b), statistics.median(a)
        ratio = ma / mb if mb else float("nan")
        flag = "" if ratio >= args.floor else " (slower)"
        if flag:
            slower.append(key)
        print(f"| {key} | {mb:,.3f} | {ma:,.3f} | {ratio:.3f}{flag} |")
    print(
        f"\nmedian of {args.rounds} interleaved rounds; rows below {args.floor}: "
        f"{', '.join(slower) or 'none'}"
    )


if __name__ == "__main__":
    main()
