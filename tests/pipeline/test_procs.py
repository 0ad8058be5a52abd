"""Process maps (``map(fn, executor="process")``): worker processes that return numpy
results through shared memory.

What the items are (the same as a thread map's, arrays as views of shared memory),
order and determinism, batches written in place, checkpoints, every way a run can end
(normal end, an exception in the function, a worker killed or exiting, a cancellation,
Ctrl-C, the main process killed) with no worker process and no shared memory left
behind, and what ``describe()``, ``statistics()`` and a Monitor say. The functions the
workers run are in ``proc_fns.py`` beside this file: pytest puts this folder on
``sys.path``, and a spawned worker starts with its parent's ``sys.path``.
"""

from __future__ import annotations

import gc
import mmap
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import proc_fns
import pytest
from support import collect, notes, stage_statistics

import aqueue
from aqueue import ElementSpecError, Monitor, Pipeline, WorkerProcessError

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

HERE = Path(__file__).resolve().parent  # holds proc_fns.py, which the workers import
ROOT = HERE.parents[1]  # the checkout: aqueue for a child started with PYTHONPATH


# -- helpers ------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def shm_names() -> set[str]:
    """aqueue's names in /dev/shm (there should never be any for long)."""
    return {n for n in os.listdir("/dev/shm") if "aqueue" in n}


def mapped_chunks() -> list[str]:
    """This process's mappings and descriptors of aqueue's shared memory."""
    with open("/proc/self/maps") as f:
        maps = [line for line in f if "aqueue" in line]
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if "aqueue" in target:
            fds.append(target)
    return maps + fds


def assert_nothing_left(pids: set[int] = frozenset()) -> None:  # type: ignore[assignment]
    """No worker process alive, no name in /dev/shm, and (once every item is gone) no
    mapping or descriptor of the arena in this process."""
    gc.collect()
    assert not [p for p in pids if alive(p)]
    assert not shm_names()
    assert not mapped_chunks()


def in_shared_memory(a: np.ndarray) -> bool:
    """Whether ``a`` views an mmap (the arena), rather than memory of its own."""
    obj: Any = a
    while isinstance(obj, np.ndarray):
        obj = obj.base
    if isinstance(obj, memoryview):
        obj = obj.obj
        while isinstance(obj, np.ndarray):
            obj = obj.base
        if isinstance(obj, memoryview):
            obj = obj.obj
    return isinstance(obj, mmap.mmap)


# -- what the items are -----------------------------------------------------------------


async def test_results_are_the_thread_maps_with_arrays_in_shared_memory() -> None:
    """Every kind of result (arrays of many dtypes and layouts, nested in dicts, lists
    and tuples, beside plain values) arrives as a thread map gives it; each numpy
    array (but object arrays) is a view of shared memory, not unpickled bytes."""
    want = await collect(Pipeline(range(20)).map(proc_fns.shapes, ordered=True, concurrency=2))
    got = await collect(
        Pipeline(range(20)).map(proc_fns.shapes, executor="process", ordered=True, concurrency=2)
    )
    assert len(got) == len(want) == 20
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for key in w:
            if isinstance(w[key], np.ndarray):
                assert g[key].dtype == w[key].dtype
                assert g[key].shape == w[key].shape
                if w[key].dtype.hasobject:
                    assert g[key].tolist() == w[key].tolist()
                else:
                    assert np.array_equal(g[key], w[key])
                    assert in_shared_memory(g[key]), key
        assert g["i"] == w["i"]
        assert g["name"] == w["name"]
        assert g["none"] is None
        assert np.array_equal(g["nested"][1][1]["deep"], w["nested"][1][1]["deep"])
        assert in_shared_memory(g["nested"][1][1]["deep"])
    del got, g
    assert_nothing_left()


async def test_ordered_map_keeps_input_order_and_workers_live_across_epochs() -> None:
    """ordered=True delivers in input order across 3 epochs (repeat), and the same
    worker processes serve every epoch."""
    order = await collect(
        Pipeline(list(range(150)))
        .repeat(3)
        .map(proc_fns.jitter, executor="process", ordered=True, concurrency=3)
    )
    assert order == list(range(150)) * 3
    pids = await collect(
        Pipeline(list(range(100))).repeat(3).map(proc_fns.pid, executor="process", concurrency=2)
    )
    assert len(pids) == 300
    assert len(set(pids)) == 2
    assert_nothing_left(set(pids))


# -- batches written in place -------------------------------------------------------------


async def test_batches_after_a_process_map_are_written_in_place() -> None:
    """map(process) -> batch: the same batches as a thread map, in order; after the
    first one (its layout is learned from the first result) every batch is the
    workers' own shared-memory column, which describe() reports."""

    def pipe(executor: str) -> Pipeline[Any]:
        return (
            Pipeline(range(203))
            .map(proc_fns.frame, executor=executor, ordered=True, concurrency=2)
            .batch(16, allow_smaller_final_batch=True)
        )

    want = await collect(pipe("thread"))
    fused = pipe("process")
    got = await collect(fused)
    assert len(got) == len(want) == 13
    for (ga, gi), (wa, wi) in zip(got, want):
        assert np.array_equal(ga, wa)
        assert np.array_equal(gi, wi)
    assert [len(a) for a, _ in got] == [16] * 12 + [11]
    assert all(in_shared_memory(a) for a, _ in got[1:])
    assert "12 of 13 batches of stage 2 written in place" in fused.describe()
    del got, ga, gi
    assert_nothing_left()


@pytest.mark.parametrize("fn", [proc_fns.jitter, proc_fns.lagging], ids=["ints", "frames"])
async def test_batches_written_in_place_by_unordered_workers(fn: Any) -> None:
    """Three unordered workers writing batches in place (buffers complete out of order;
    with a slow item 280, the last, short one before the full one holding 280): every
    item once, every batch full but the last, and the stages count items (rows), not
    batches."""
    n, size = 301, 8
    pipe = (
        Pipeline(range(n))
        .map(fn, executor="process", concurrency=3)
        .batch(size, allow_smaller_final_batch=True)
    )
    got = await collect(pipe)
    if fn is proc_fns.lagging:  # (arrays, ids): the ids, and each array matches its id
        assert all(np.array_equal(a[:, 0, 0], i) for a, i in got)
        got = [i for _, i in got]
    assert sorted(int(x) for b in got for x in b) == list(range(n))
    assert [len(b) for b in got] == [size] * (n // size) + [n % size]
    _, mapped, batched = pipe.statistics()
    assert (mapped.items_in, mapped.items_out) == (n, n)
    assert (batched.items_in, batched.items_out) == (n, len(got))
    del got
    assert_nothing_left()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_rows_that_miss_their_column_are_copied_into_the_batch() -> None:
    """A result of another dtype cannot go in place: its batch is stacked as usual (and
    gets numpy's common dtype); items of several lengths need dynamic_pad, as for
    threads, and then nothing is written in place."""
    got = await collect(
        Pipeline(range(40))
        .map(proc_fns.odd_dtype, executor="process", ordered=True, concurrency=2)
        .batch(8)
    )
    want = [np.stack([proc_fns.odd_dtype(i) for i in range(k, k + 8)]) for k in range(0, 40, 8)]
    assert [g.dtype for g in got] == [w.dtype for w in want]
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    padded = await collect(
        Pipeline(range(9))
        .map(proc_fns.sized, executor="process", ordered=True, concurrency=2)
        .batch(3, dynamic_pad=True)
    )
    assert [p.shape for p in padded] == [(3, 3)] * 3
    with pytest.raises(ElementSpecError, match="different shapes"):
        await collect(
            Pipeline(range(9)).map(proc_fns.sized, executor="process", concurrency=2).batch(3)
        )
    del got, padded
    assert_nothing_left()


# -- checkpoints --------------------------------------------------------------------------


def resumable(fused: bool) -> Pipeline[Any]:
    pipe = (
        Pipeline(range(2_000))
        .map(proc_fns.frame, executor="process", ordered=True, concurrency=2)
        .shuffle(capacity=300, min_after_dequeue=200, seed=5)
    )
    if fused:  # the map writes the batch after it
        pipe = (
            Pipeline(range(2_000))
            .map(proc_fns.frame, executor="process", ordered=True, concurrency=2)
            .batch(8)
        )
    return pipe.batch(4) if not fused else pipe


@pytest.mark.parametrize("fused", [False, True], ids=["map-shuffle-batch", "map-batch"])
async def test_checkpoint_and_resume_are_exact(fused: bool) -> None:
    """A checkpoint mid-run (items in the workers' hands finish first; a batch being
    written in place comes along as items) and a resume give exactly the batches the
    uninterrupted run gives."""
    with anyio.fail_after(60):
        async with resumable(fused).open() as batches:
            before = [await batches.get() for _ in range(23)]
            state = await batches.checkpoint()
            after = [await batches.get() for _ in range(30)]
        async with resumable(fused).open(state=state) as batches:
            resumed = [await batches.get() for _ in range(30)]
    assert state.exact
    assert len(before) == 23
    for r, a in zip(resumed, after):
        assert np.array_equal(r[0], a[0])
        assert np.array_equal(r[1], a[1])
    del before, after, resumed, state, r, a, batches
    assert_nothing_left()


# -- faults -------------------------------------------------------------------------------


async def test_an_exception_in_the_function_ends_the_run_with_it() -> None:
    """fn raising on item 7: the pipeline ends with that exception, a note holding the
    worker's traceback and another naming the stage; every worker is gone."""
    pipe = Pipeline(range(40)).map(proc_fns.fail_at_7, executor="process", concurrency=2)
    with pytest.raises(ValueError, match="bad item 7") as info:
        await collect(pipe)
    text = notes(info.value)
    assert "traceback in worker process" in text
    assert 'in fail_at_7\n    raise ValueError(f"bad item {i}")' in text
    assert "raised in pipeline stage 1 'map(fail_at_7)'" in text
    assert_nothing_left()


@pytest.mark.parametrize(
    ("fn", "how"),
    [
        (proc_fns.die_at_7, "was killed by SIGKILL (signal 9)"),
        (proc_fns.exit_at_7, "exited with code 3"),
    ],
    ids=["sigkill", "os._exit"],
)
async def test_a_worker_that_dies_ends_the_run_naming_stage_pid_and_cause(
    fn: Any, how: str
) -> None:
    """A worker killed by a signal or leaving with os._exit: WorkerProcessError naming
    the stage, the pid and the signal or exit code; the other worker is stopped."""
    pipe = Pipeline(range(40)).map(fn, executor="process", concurrency=2)
    with pytest.raises(WorkerProcessError) as info:
        await collect(pipe)
    err = info.value
    assert err.stage == "1 'map(" + fn.__name__ + ")'"
    assert err.pid is not None
    assert f"pipeline stage 1 'map({fn.__name__})': worker process {err.pid} {how}" in str(err)
    assert err.exitcode == (-signal.SIGKILL if "SIGKILL" in how else 3)
    # Neither writes anything: the message must not send the user to a traceback.
    assert "stderr" not in str(err)
    assert "traceback" not in str(err)
    if "exited" in how:
        assert "sys.exit or os._exit in the function" in str(err)
    assert_nothing_left({err.pid})


class _Forever:
    """An async source that gives one item, then waits forever."""

    def __init__(self) -> None:
        self.given = 0

    def __aiter__(self) -> _Forever:
        return self

    async def __anext__(self) -> int:
        if not self.given:
            self.given = 1
            return 1
        await anyio.sleep_forever()
        raise AssertionError


async def test_a_worker_killed_while_idle_is_seen_at_once() -> None:
    """A worker killed while its driver waits for input (nothing would ever reach the
    worker again) still ends the run with WorkerProcessError: the pool watches each
    worker's process, not only its answers."""
    pipe = Pipeline.from_async_iterable(_Forever()).map(proc_fns.pid, executor="process")
    killed: list[int] = []

    async def kill_one_then_wait() -> None:
        with anyio.fail_after(30):
            async with pipe.open() as items:
                killed.append(await items.get())
                os.kill(killed[0], signal.SIGTERM)
                await items.get()

    with pytest.raises(WorkerProcessError, match="SIGTERM") as info:
        await kill_one_then_wait()
    pid = killed[0]
    assert info.value.pid == pid
    assert_nothing_left({pid})


async def test_cancelling_the_consumer_stops_busy_workers(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Cancelled while every worker is 30 s into an item: the block is left within a
    few seconds (the workers get a grace period, then SIGKILL) and nothing is left."""
    slow = Pipeline(range(10)).map(proc_fns.slow, executor="process", concurrency=2)
    pids: set[int] = set()
    t0 = time.monotonic()
    with anyio.CancelScope() as scope:
        async with slow.open() as items, anyio.create_task_group() as tg:
            tg.start_soon(items.get)
            while len(pids) < 2:  # both workers are in their 30 s item
                await anyio.sleep(0.02)
                out = capfd.readouterr().out
                pids |= {int(x.split()[1]) for x in out.splitlines() if x.startswith("WORKER ")}
            scope.cancel()
    assert scope.cancelled_caught
    assert time.monotonic() - t0 < 20  # (a hang guard, not a timing claim)
    assert_nothing_left(pids)


async def test_a_result_that_does_not_pickle_names_the_item() -> None:
    """A result that does not pickle ends the run with that error and a note saying a
    result must pickle."""
    pipe = Pipeline(range(10)).map(proc_fns.unpicklable_result, executor="process")
    with pytest.raises(TypeError, match="pickle") as info:
        await collect(pipe)
    assert "a result must pickle" in notes(info.value)
    assert_nothing_left()


async def test_a_function_the_workers_cannot_import() -> None:
    """A function whose module exists only in the main process: WorkerProcessError
    saying the worker could not load it, and how to define it."""
    import types

    module = types.ModuleType("only_here")
    exec("def double(x):\n    return 2 * x\n", module.__dict__)
    sys.modules["only_here"] = module
    try:
        pipe = Pipeline(range(4)).map(module.double, executor="process")
        with pytest.raises(WorkerProcessError, match="could not load the function") as info:
            await collect(pipe)
        assert "module level" in str(info.value)
        assert "No module named 'only_here'" in notes(info.value)
    finally:
        del sys.modules["only_here"]
    assert_nothing_left()


async def test_an_item_that_does_not_pickle_names_the_item_and_the_stage() -> None:
    """An item that cannot be sent to a worker (a lock): ElementSpecError naming the
    stage, the item and why; the items before its burst went through."""
    import threading

    lock = threading.Lock()

    def item(i: int) -> Any:
        return lock if i == 5 else i

    pipe = Pipeline(range(10)).map(item).map(proc_fns.jitter, executor="process")
    with pytest.raises(ElementSpecError) as info:
        await collect(pipe)
    text = str(info.value)
    assert "pipeline stage 2 'map(jitter)'" in text
    assert "<unlocked _thread.lock object" in text
    assert "cannot be sent to a worker process" in text
    assert "cannot pickle '_thread.lock' object" in text
    assert_nothing_left()


UNGUARDED = """
import sys
import anyio
sys.path.insert(0, {tests!r})
import proc_fns
from aqueue import Pipeline

async def main():
    print("items:", await Pipeline(range(8)).map(proc_fns.frame, executor="process").run())

anyio.run(main)  # no `if __name__ == "__main__":` guard
"""


def test_a_main_script_without_the_guard_gets_a_hint(tmp_path: Path) -> None:
    """A main script that starts a process map at its top level, unguarded: each worker
    re-runs that top level and fails there (spawn cannot start a process while one is
    starting); the main process's WorkerProcessError says so and shows the guard."""
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(UNGUARDED.format(tests=str(HERE))))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode != 0
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("aqueue.WorkerProcessError")]
    assert "before its first answer" in line
    assert "re-runs the main script's top level" in line
    assert 'if __name__ == "__main__":' in line


def test_functions_that_do_not_pickle_are_refused_when_the_stage_is_built() -> None:
    """A lambda or a local function: ElementSpecError at map(), naming what to do."""

    def local(x: int) -> int:
        return x

    for fn in (lambda x: x, local):
        with pytest.raises(ElementSpecError, match=r"does not pickle.*module level"):
            Pipeline(range(3)).map(fn, executor="process")


async def test_shared_memory_without_memfd(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where memfd_create is missing (macOS), chunks are shm_open-ed and unlinked at
    once: the run works and /dev/shm holds no name of aqueue's."""
    monkeypatch.delattr(os, "memfd_create")
    got = await collect(
        Pipeline(range(30))
        .map(proc_fns.image, executor="process", ordered=True, concurrency=2)
        .batch(10)
    )
    assert [int(a[:, 0, 0, 0].sum()) for a, _ in got] == [45, 145, 245]
    assert not shm_names()
    del got
    assert_nothing_left()


# -- the main process interrupted or killed -------------------------------------------------

SCRIPT = """
import sys
import anyio
sys.path.insert(0, {tests!r})
import proc_fns
from aqueue import Pipeline

async def main():
    pipe = Pipeline(range(1000)).map(proc_fns.{fn}, executor="process", concurrency=2)
    async with pipe.open() as items:
        async for _ in items:
            pass

if __name__ == "__main__":
    anyio.run(main)
"""


def run_and_signal(
    tmp_path: Path, fn: str, sig: int, group: bool = False
) -> tuple[subprocess.Popen[str], set[int]]:
    """Run a pipeline in a child process until both workers said their pid; then send
    ``sig`` to the child, or with ``group`` to its whole process group (its workers
    too, as a terminal's Ctrl-C does)."""
    script = tmp_path / "run_pipeline.py"
    script.write_text(textwrap.dedent(SCRIPT.format(tests=str(HERE), fn=fn)))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=group,
    )
    pids: set[int] = set()
    assert child.stdout is not None
    while len(pids) < 2:
        line = child.stdout.readline()
        assert line, f"the child ended early: {child.stderr.read() if child.stderr else ''}"
        if line.startswith("WORKER "):
            pids.add(int(line.split()[1]))
    if group:
        os.killpg(child.pid, sig)
    else:
        child.send_signal(sig)
    return child, pids


def wait_gone(pids: set[int], limit: float) -> set[int]:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        left = {p for p in pids if alive(p)}
        if not left:
            return left
        time.sleep(0.02)
    return {p for p in pids if alive(p)}


def test_ctrl_c_ends_the_pipeline_and_its_workers(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the process group) while the workers are 30 s into an item:
    the main process ends with KeyboardInterrupt within seconds (the workers ignore
    the signal: no traceback of theirs, no WorkerProcessError), and its workers are
    gone."""
    child, pids = run_and_signal(tmp_path, "slow", signal.SIGINT, group=True)
    try:
        _, err = child.communicate(timeout=20)
    finally:
        child.kill()
    # (Python 3.10's asyncio tasks cannot be "uncancelled": anyio's runner then ends with
    # the CancelledError it used to stop the main task, where 3.11+ raises KeyboardInterrupt)
    assert "KeyboardInterrupt" in err or (sys.version_info < (3, 11) and "CancelledError" in err)
    assert "proc_fns.py" not in err  # (a worker's traceback would show its function)
    assert "WorkerProcessError" not in err
    assert child.returncode != 0
    assert not wait_gone(pids, 5)
    assert not shm_names()


def test_workers_exit_when_the_main_process_is_killed(tmp_path: Path) -> None:
    """SIGKILL to the main process (no cleanup code runs there): its workers see it
    gone and exit, and nothing is left in /dev/shm (the arena had no name)."""
    child, pids = run_and_signal(tmp_path, "slow", signal.SIGKILL)
    child.wait(timeout=20)
    try:
        assert not wait_gone(pids, 10)  # (not communicate(): the workers share its pipes)
        assert not shm_names()
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        child.communicate()


# -- what it reports ------------------------------------------------------------------------


async def test_describe_statistics_and_monitor_show_the_workers() -> None:
    """A process stage reports like a thread stage (its workers' busy share, items/s)
    plus the hand-off's cost; describe() names the interpreter and says the workers
    are the bottleneck when the function is slow; a Monitor samples the stage."""
    samples: list[aqueue.MonitorReading] = []
    monitor = Monitor(interval=0.05, callback=samples.append)
    pipe = Pipeline(range(120)).map(proc_fns.jitter, executor="process", concurrency=2)
    with anyio.fail_after(60):
        async with pipe.open(monitor=monitor) as items:
            async for _ in items:
                pass
    stats = pipe.statistics()[1]
    assert (stats.items_in, stats.items_out, stats.concurrency) == (120, 120, 2)
    assert 0.0 < stats.busy_s < 2 * stats.elapsed_s
    assert stats.handoff_s > 0.0
    text = pipe.describe()
    assert "with the GIL" in text.splitlines()[0] or "free-threaded" in text.splitlines()[0]
    assert "1 map(jitter): 2 worker processes (spawn, ready after" in text
    assert "µs of main-process CPU per item" in text
    stage = [s for s in samples[-1].stages.values() if s.name.endswith("map(jitter)")]
    assert stage
    assert stage[0].concurrency == 2
    assert any(s.stages[stage[0].name].busy_fraction > 0 for s in samples)


async def test_describe_says_whether_threads_share_a_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    """describe()'s first line names the interpreter and says whether it runs with a
    GIL (sys._is_gil_enabled, Python 3.13+); with one, a busy thread map's advice
    points to executor='process'."""
    from aqueue._pipeline.run._describe import bottleneck  # (the rule itself, on made-up figures)

    pipe = Pipeline(range(200)).map(proc_fns.gil_bound, concurrency=2)
    await collect(pipe)
    first = pipe.describe().splitlines()[0]
    busy = (_stage("from_iterable(range)", 0.01, 0.0, 1), _stage("map(gil_bound)", 0.9, 0.0))
    if getattr(sys, "_is_gil_enabled", lambda: True)():
        assert "with the GIL" in first
        verdict = bottleneck(busy, pipe._specs)
        assert verdict.startswith("map(gil_bound) — its 2 workers were busy 90% of the time")
        assert "a function that holds it scales with executor='process'" in verdict
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    assert "free-threaded: no GIL" in pipe.describe().splitlines()[0]
    assert "executor='process'" not in bottleneck(busy, pipe._specs)


def free_threaded_python() -> str | None:
    """A free-threaded CPython (3.13t or later) installed here, if any."""
    import glob
    import shutil

    found = [shutil.which(f"python3.{v}t") for v in range(13, 20)]
    found += glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python3.*t"))
    for python in filter(None, found):
        probe = subprocess.run(
            [python, "-c", "import sys; print(sys._is_gil_enabled())"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.stdout.strip() == "False":
            return python
    return None


SCALING = """
import sys, time, anyio
sys.path.insert(0, {tests!r})
import proc_fns
from aqueue import Pipeline

async def main():
    pipe = Pipeline(range(3000)).map(proc_fns.gil_bound, concurrency=2)
    c0, t0 = time.process_time(), time.perf_counter()
    async with pipe.open() as items:
        async for _ in items:
            pass
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    print(cpu / wall)
    print(pipe.describe().splitlines()[0])

anyio.run(main)
"""


def test_threads_run_python_in_parallel_without_a_gil(tmp_path: Path) -> None:
    """On free-threaded CPython two thread workers of a pure-Python function run at
    once: the process uses well over one core's CPU time per second of the map (with
    a GIL it cannot use more than one). A CPU/wall ratio, not a speed threshold."""
    python = free_threaded_python()
    if python is None:
        pytest.skip("no free-threaded CPython (python3.13t or later) is installed here")
    probe = subprocess.run(
        [python, "-c", "import numpy, anyio"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"{python} cannot import numpy and anyio: {probe.stderr.strip()[-200:]}")
    script = tmp_path / "scaling.py"
    script.write_text(SCALING.format(tests=str(HERE)))
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHON_GIL="0")
    done = subprocess.run(
        [python, str(script)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    ratio, first = done.stdout.splitlines()[:2]
    assert "free-threaded: no GIL" in first
    assert float(ratio) > 1.3


def _stage(name: str, busy: float, handoff: float, conc: int = 2) -> aqueue.StageStatistics:
    """A stage's statistics over a 10 s run: ``busy`` of its workers' time, ``handoff``
    seconds of main-process CPU."""
    return stage_statistics(
        name,
        items_in=10_000,
        items_out=10_000,
        items_per_s=1_000.0,
        busy_s=busy * conc * 10.0,
        concurrency=conc,
        starved_fraction=0.5,
        elapsed_s=10.0,
        handoff_s=handoff,
    )


def test_the_bottleneck_of_a_process_stage_is_its_workers_or_its_hand_off() -> None:
    """describe()'s verdict for a process map: its worker processes when they are busy
    (with the hand-off's share beside it), the hand-off when the workers wait for the
    main process, the workers' start-up when it took half the run."""
    from aqueue._pipeline.run._describe import bottleneck  # (the rule itself, on made-up figures)

    pipe = Pipeline(range(3)).map(proc_fns.jitter, executor="process")
    specs = pipe._specs
    source = _stage("from_iterable(range)", 0.01, 0.0, 1)
    busy = bottleneck((source, _stage("map(jitter)", 0.9, 0.4)), specs)
    assert busy.startswith("map(jitter) — its 2 worker processes were busy 90% of the time")
    assert "(the hand-off took 4% of one core)" in busy
    handoff = bottleneck((source, _stage("map(jitter)", 0.2, 7.0)), specs)
    assert handoff.startswith("map(jitter) — handing items to and from its worker processes")
    assert "700 µs per item" in handoff
    assert "the hand-off, not the workers, sets the pace" in handoff
    startup = bottleneck((source, _stage("map(jitter)", 0.2, 0.1)), specs, {1: 6.0})
    assert startup.startswith("worker start-up — the 2 worker processes of map(jitter) took 6.00 s")


async def test_empty_input_an_early_exit_and_a_given_coordinator(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """An empty source ends at once; leaving the block before any item (workers maybe
    still starting) and running in a coordinator of one's own leave nothing behind:
    the block is left only once every worker process is reaped."""
    assert await collect(Pipeline([]).map(proc_fns.pid, executor="process")) == []
    with anyio.fail_after(30):
        async with Pipeline(range(10)).map(proc_fns.pid_once, executor="process").open():
            pass
        async with aqueue.Coordinator() as coord:
            pipe = Pipeline(range(50)).map(proc_fns.pid_once, executor="process", concurrency=2)
            async with pipe.open(coord) as items:
                got = [await items.get() for _ in range(5)]
            out = capfd.readouterr().out
            pids = {int(x.split()[1]) for x in out.splitlines() if x.startswith("WORKER ")}
            assert pids
            assert not [p for p in pids if alive(p)]  # (before the coordinator's exit)
    assert len(got) == 5
    assert_nothing_left(pids)


def open_descriptors() -> list[str]:
    """What this process's descriptors point to."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # (the listing's own descriptor, closed meanwhile)
    return sorted(out)


async def test_no_descriptor_outlives_its_pipeline() -> None:
    """Runs that end normally, that are left early and that fail close every descriptor
    they opened (the workers' sockets, their process sentinels and start-up pipes, the
    shared memory) by the time the block is left, without the garbage collector: the
    count stays where one warm-up run left it."""

    async def normal() -> None:
        await collect(Pipeline(range(30)).map(proc_fns.frame, executor="process", concurrency=3))

    async def early() -> None:
        pipe = Pipeline(range(300)).map(proc_fns.jitter, executor="process", concurrency=3)
        async with pipe.open() as items:
            await items.get()

    async def failing() -> None:
        with pytest.raises(ValueError, match="bad item 7"):
            await collect(Pipeline(range(30)).map(proc_fns.fail_at_7, executor="process"))

    gc.collect()
    gc.disable()
    try:
        await normal()  # (a first run may open what lives as long as the process)
        baseline = open_descriptors()
        for _ in range(2):
            for run in (normal, early, failing):
                await run()
                assert open_descriptors() == baseline, run.__name__
    finally:
        gc.enable()
