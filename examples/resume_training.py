"""A training job that crashes and restarts from its last checkpoint, and sees exactly
the batches it would have seen.

The job trains a linear regression model with SGD on batches from a seeded pipeline:

    Pipeline(range(4096)).repeat()                          # example indices, for ever
        .map(make_example, concurrency=4, ordered=True)     # (x, y) pairs, on 4 threads
        .shuffle(capacity=1100, min_after_dequeue=1000, seed=1)
        .batch(32)
        .prefetch(4)

Every ``--every`` steps it saves a checkpoint: the model (numpy arrays, ``np.savez``)
and the pipeline (``await batches.checkpoint()``, then ``state.save``), each written
atomically, then a small pointer file naming the pair (written atomically last, so a
crash at any moment leaves the previous complete checkpoint in force). On start it
resumes from the checkpoint the pointer names, if there is one: the model's arrays, and
``pipe.open(state=...)``, which brings back the source position, the items in every
queue, the shuffle buffer and its random state.

Run with no flags, the script is the driver. It runs the job three times, each in a
subprocess:

a. a reference run from start to end, taking no checkpoints;
b. a run that checkpoints every ``--every`` steps and kills itself right after step
   ``--crash-at`` with ``os._exit(1)`` (no cleanup, no ``finally``: what a preempted
   machine looks like to the job);
c. the same job started again in the same folder, which resumes from the last
   checkpoint and trains to the end.

Each run writes a fingerprint (a hash of the bytes) of every batch it trained on. The
driver then checks that the crashed run and the restarted run trained on exactly the
reference run's batches at the same steps, including the steps the crashed run had done
after its last checkpoint and the restart did again, and that the final model equals
the reference model.

Run: python examples/resume_training.py [--steps 200] [--every 20] [--crash-at 70]
     [--dir DIR] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

import anyio
import numpy as np
import numpy.typing as npt

import aqueue

EXAMPLES = 4096  # examples in the data set (an epoch is 128 batches)
FEATURES = 8
BATCH = 32
LEARNING_RATE = 0.05
POINTER = "checkpoint.json"  # names the latest complete checkpoint

F32 = npt.NDArray[np.float32]


# -- the data and the model ------------------------------------------------------------------


def make_data(seed: int = 0) -> tuple[F32, F32, F32]:
    """Inputs, targets (a noisy linear function of the inputs) and the true weights."""
    rng = np.random.default_rng(seed)
    true_w = rng.normal(size=FEATURES).astype(np.float32)
    xs = rng.normal(size=(EXAMPLES, FEATURES)).astype(np.float32)
    ys = (xs @ true_w + 0.1 * rng.normal(size=EXAMPLES)).astype(np.float32)
    return xs, ys, true_w


XS, YS, TRUE_W = make_data()


def make_example(i: int) -> tuple[F32, np.float32]:
    """Example ``i`` as an (x, y) pair (runs on the map's threads)."""
    return XS[i].copy(), np.float32(YS[i])


def make_pipeline(buffer: int) -> aqueue.Pipeline[tuple[npt.NDArray[Any], ...]]:
    return (
        aqueue.Pipeline(range(EXAMPLES))
        .repeat()
        .map(make_example, concurrency=4, ordered=True)
        .shuffle(capacity=buffer + 100, min_after_dequeue=buffer, seed=1)
        .batch(BATCH)
        .prefetch(4)
    )


def sgd_step(w: F32, b: F32, x: F32, y: F32) -> None:
    """One step of SGD on the mean squared error, in place."""
    err = x @ w + b[0] - y
    w -= LEARNING_RATE * (x.T @ err) / len(y)
    b -= LEARNING_RATE * err.mean(keepdims=True)


def fingerprint(x: F32, y: F32) -> str:
    """A short hash of a batch's bytes: equal fingerprints mean equal batches."""
    return hashlib.blake2b(x.tobytes() + y.tobytes(), digest_size=8).hexdigest()


# -- checkpoints -------------------------------------------------------------------------------


def write_atomically(path: Path, write: Any) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it into
    place: a crash leaves either the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_checkpoint(folder: Path, step: int, w: F32, b: F32, state: aqueue.PipelineState) -> None:
    """Save the model and the pipeline's state after ``step``, then point at them."""
    model = folder / f"model-{step:06d}.npz"
    pipeline = folder / f"pipeline-{step:06d}.npz"
    write_atomically(model, lambda f: np.savez(f, w=w, b=b, step=np.int64(step)))
    state.save(pipeline)  # atomic too
    pointer = {"step": step, "model": model.name, "pipeline": pipeline.name}
    write_atomically(folder / POINTER, lambda f: f.write(json.dumps(pointer).encode()))
    for old in [*folder.glob("model-*.npz"), *folder.glob("pipeline-*.npz")]:
        if old.name not in (model.name, pipeline.name):
            old.unlink()  # only the checkpoint the pointer names is kept


def in_flight(state: aqueue.PipelineState) -> str:
    """What the pipeline held at the cut, in words (its stages: 0 source, 1 map,
    2 shuffle, 3 batch, 4 prefetch; the last two hold batches)."""
    buffered = sum(len(s["buffer"]) for s in state.shuffles.values())
    loose = sum(len(q) for q in state.queues[:3])
    batches = sum(len(q) for q in state.queues[3:])
    return (
        f"{buffered} examples in its shuffle buffer, {loose} more examples (or their "
        f"indices) in its queues and {batches} finished batch{'' if batches == 1 else 'es'}"
    )


def load_checkpoint(folder: Path) -> tuple[int, F32, F32, aqueue.PipelineState | None]:
    """The step, the model and the pipeline state of the latest checkpoint in
    ``folder``, or step 0, a fresh model and no state."""
    w = np.zeros(FEATURES, np.float32)
    b = np.zeros(1, np.float32)
    if not (folder / POINTER).exists():
        return 0, w, b, None
    pointer = json.loads((folder / POINTER).read_text())
    with np.load(folder / pointer["model"]) as saved:
        w, b, step = saved["w"], saved["b"], int(saved["step"])
    state = aqueue.PipelineState.load(folder / pointer["pipeline"])
    return step, w, b, state


# -- the training job ------------------------------------------------------------------------


async def train(args: argparse.Namespace, log: TextIO) -> None:
    """Train to step ``args.steps``, from the last checkpoint in ``args.dir`` if any,
    writing each batch's fingerprint to ``log``."""
    folder = Path(args.dir)
    step, w, b, state = load_checkpoint(folder)
    if state is None:
        print("job: no checkpoint here, starting at step 0")
    else:
        print(
            f"job: resuming after step {step} from its checkpoint; the pipeline comes "
            f"back with {in_flight(state)}"
        )
    pipe = make_pipeline(args.buffer)
    async with pipe.open(state=state) as batches:
        while step < args.steps:
            x, y = await batches.get()
            sgd_step(w, b, x, y)
            step += 1
            log.write(f"{step} {fingerprint(x, y)}\n")
            if step == args.crash_at:
                print(f"job: crashing on purpose right after step {step} (os._exit(1))")
                sys.stdout.flush()
                os._exit(1)
            if args.every and step % args.every == 0 and step < args.steps:
                saved = await batches.checkpoint()
                # Written on a thread: the pipeline goes on filling meanwhile. The state
                # holds the pipeline's items themselves, not copies, so it is written
                # before the next batch is taken (never change a batch in place before
                # a state that may hold it is saved).
                await anyio.to_thread.run_sync(
                    write_checkpoint, folder, step, w.copy(), b.copy(), saved
                )
                print(
                    f"job: checkpoint after step {step}: the model, and the pipeline "
                    f"with {in_flight(saved)}"
                )
    await anyio.to_thread.run_sync(lambda: np.savez(folder / "final-model.npz", w=w, b=b))
    print(f"job: finished step {step}; final model saved")


# -- the driver ------------------------------------------------------------------------------


def run_job(
    args: argparse.Namespace, folder: Path, log: Path, what: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    """Run this script as a training job in a subprocess; relay what it printed."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--job",
        f"--dir={folder}",
        f"--log={log}",
        f"--steps={args.steps}",
        f"--buffer={args.buffer}",
        f"--backend={args.backend}",
        *extra,
    ]
    print(f"{what}:")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    for line in done.stdout.splitlines():
        print(f"    {line}")
    if done.returncode not in (0, 1) or done.stderr.strip():
        print(f"    (it wrote to stderr:)\n{done.stderr}")
    return done


def read_log(path: Path) -> dict[int, str]:
    """Batch fingerprints by step (a step done twice must have had the same batch)."""
    out: dict[int, str] = {}
    for line in path.read_text().splitlines():
        step, digest = line.split()
        if out.setdefault(int(step), digest) != digest:
            raise AssertionError(f"step {step} appears twice in {path} with different batches")
    return out


def compare(name: str, got: dict[int, str], want: dict[int, str], steps: range) -> bool:
    """Say in words whether ``got`` trained on ``want``'s batches at ``steps``."""
    differ = [s for s in steps if got.get(s) != want.get(s)]
    span = f"steps {steps.start} to {steps.stop - 1}"
    if not differ:
        print(
            f"  {name}, {span}: all {len(steps)} batches equal the reference run's "
            "batches at the same steps."
        )
        return True
    print(
        f"  {name}, {span}: {len(differ)} of {len(steps)} batches differ from the "
        f"reference run's, the first at step {differ[0]}."
    )
    return False


def drive(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    reference, job = root / "reference", root / "job"
    for name in ("reference", "job", "reference.log", "crashed.log", "restarted.log"):
        if (root / name).exists():
            raise SystemExit(
                f"{root / name} is left from an earlier run; give --dir an empty folder"
            )
    print(
        f"Training linear regression for {args.steps} steps of {BATCH} examples, "
        f"shuffle buffer of {args.buffer}, on {args.backend}; files in {root}\n"
    )
    run_job(
        args,
        reference,
        root / "reference.log",
        "a. the reference run (no checkpoints)",
        "--every=0",
        "--crash-at=0",
    )
    crashed = run_job(
        args,
        job,
        root / "crashed.log",
        f"b. a run that checkpoints every {args.every} steps and crashes after step "
        f"{args.crash_at}",
        f"--every={args.every}",
        f"--crash-at={args.crash_at}",
    )
    last = json.loads((job / POINTER).read_text())["step"] if (job / POINTER).exists() else 0
    print(
        f"    (the job died with exit status {crashed.returncode}; its last checkpoint "
        f"was after step {last})"
    )
    run_job(
        args,
        job,
        root / "restarted.log",
        "c. the same job started again in the same folder",
        f"--every={args.every}",
        "--crash-at=0",
    )

    want = read_log(root / "reference.log")
    before = read_log(root / "crashed.log")
    after = read_log(root / "restarted.log")
    print("\nWhat this showed:")
    ok = crashed.returncode == 1
    ok &= compare("The crashed run", before, want, range(1, args.crash_at + 1))
    ok &= compare("The restarted run", after, want, range(last + 1, args.steps + 1))
    redone = range(last + 1, args.crash_at + 1)
    if len(redone):
        same = all(before.get(s) == after.get(s) for s in redone)
        ok &= same
        print(
            f"  Steps {redone.start} to {redone.stop - 1} came after the last checkpoint, "
            "so the crashed run trained on them and the restarted run trained on them "
            f"again: {'the same' if same else 'different'} batches both times."
        )
    with np.load(reference / "final-model.npz") as r, np.load(job / "final-model.npz") as j:
        ref_w, ref_b, job_w, job_b = r["w"], r["b"], j["w"], j["b"]
    exact = np.array_equal(ref_w, job_w) and np.array_equal(ref_b, job_b)
    gap = float(max(np.abs(ref_w - job_w).max(), np.abs(ref_b - job_b).max()))
    if exact:
        print(
            "  The final model equals the reference model bit for bit: the restarted run "
            "did the same float32 arithmetic on the same batches, in the same order, from "
            "weights saved exactly (np.savez keeps every bit)."
        )
    else:
        close = gap <= 1e-6
        ok &= close
        print(
            f"  The final model differs from the reference model by at most {gap:.2e} "
            f"per weight ({'within' if close else 'beyond'} a float32 rounding tolerance "
            "of 1e-6; a different BLAS kernel can round matrix products differently)."
        )
    print(
        f"  The model learned the data: its weights are within "
        f"{float(np.abs(job_w - TRUE_W).max()):.3f} of the true ones."
    )
    print(
        "  The reference run took no checkpoints, so the batches also show that taking "
        "a checkpoint did not change what the pipeline delivered."
        if ok
        else "  Something above did not match: the resumed job did NOT see what it would have seen."
    )
    return {"ok": bool(ok), "exact_model": exact, "max_weight_difference": gap, "resumed": last}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--steps", type=int, default=200, help="training steps in all")
    parser.add_argument("--every", type=int, default=20, help="checkpoint every N steps")
    parser.add_argument("--crash-at", type=int, default=70, help="crash right after step N")
    parser.add_argument(
        "--dir",
        default=None,
        help="folder for the runs; None uses a temporary one, removed at the end",
    )
    parser.add_argument(
        "--buffer", type=int, default=1000, help="the shuffle stage's min_after_dequeue"
    )
    parser.add_argument(
        "--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop"
    )
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--log", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.job and not 0 < args.every < args.crash_at < args.steps:
        parser.error("need 0 < --every < --crash-at < --steps")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.job:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
        with open(args.log, "a", buffering=1) as log:  # line-buffered: survives os._exit
            anyio.run(train, args, log, backend=args.backend)
        return {}
    if args.dir is not None:
        return drive(args, Path(args.dir))
    with tempfile.TemporaryDirectory() as tmp:
        return drive(args, Path(tmp))


if __name__ == "__main__":
    result = main()
    raise SystemExit(0 if result.get("ok", True) else 1)
