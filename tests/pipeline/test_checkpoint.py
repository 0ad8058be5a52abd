"""Pipeline checkpoints: a consistent cut of a running pipeline, and resuming from it.

With every random stage seeded and every map ordered, a pipeline opened with a state
delivers exactly what the checkpointed run delivered after the cut, batch for batch;
otherwise every source item is delivered once, before or after the cut. Checkpoints
work while stages wait on empty and on full queues, a cancelled checkpoint changes
nothing, and bad states and files are refused before anything starts.
"""

from __future__ import annotations

import multiprocessing
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import aqueue
from aqueue import CheckpointError, ElementSpecError, Pipeline, PipelineState

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def triple(x: int) -> int:
    return 3 * x


def seeded(n: int = 10_000) -> Pipeline:
    """The deterministic pipeline: ordered thread map, seeded shuffle, batch, prefetch."""
    return (
        Pipeline(range(n))
        .map(triple, concurrency=4, ordered=True)
        .shuffle(capacity=1_100, min_after_dequeue=1_000, seed=7)
        .batch(32)
        .prefetch(4)
    )


def same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


async def test_resume_delivers_exactly_what_the_run_would_have_delivered() -> None:
    """37 batches, a checkpoint, 50 more: a fresh pipeline opened with the state gives
    those same 50 batches, and the uninterrupted run is unaffected by the checkpoint."""
    async with seeded().open() as batches:
        before = [await batches.get() for _ in range(37)]
        state = await batches.checkpoint()
        after = [await batches.get() for _ in range(50)]
    async with seeded().open() as batches:
        plain = [await batches.get() for _ in range(87)]
    assert same(before + after, plain)
    async with seeded().open(state=state) as batches:
        resumed = [await batches.get() for _ in range(50)]
    assert same(resumed, after)
    assert state.items_held > 1_000  # the shuffle buffer and the queues came along
    assert (state.exact, state.inexact) == (True, ())  # (and no CheckpointWarning)


def _resume_in_another_process(path: str, out: Any) -> None:
    async def main() -> list[list[int]]:
        state = PipelineState.load(path)
        async with seeded().open(state=state) as batches:
            return [(await batches.get()).tolist() for _ in range(50)]

    out.put(anyio.run(main))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_resume_from_a_saved_state_in_another_process(tmp_path: Path) -> None:
    """The state saved to a file and loaded in a separate process (spawned) resumes
    the same 50 batches."""
    async with seeded().open() as batches:
        for _ in range(37):
            await batches.get()
        state = await batches.checkpoint()
        after = [(await batches.get()).tolist() for _ in range(50)]
    path = tmp_path / "state.npz"
    state.save(path)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_resume_in_another_process, args=(str(path), out))
    proc.start()
    got = await anyio.to_thread.run_sync(out.get, True, 30)
    proc.join(10)
    assert proc.exitcode == 0
    assert got == after


async def test_exactly_once_across_the_cut_without_order_or_seed(tmp_path: Path) -> None:
    """An unordered map and an unseeded shuffle: what was received before the cut plus
    what a resumed pipeline delivers is every source item once. checkpoint() says that
    the resume will not give the same batches (a CheckpointWarning naming both stages
    and what would fix them), and the state says it too, also once saved and loaded."""

    async def slowish(x: int) -> int:
        if x % 7 == 0:
            await anyio.lowlevel.checkpoint()
        return x

    def pipe() -> Pipeline:
        return (
            Pipeline(range(3_000))
            .map(slowish, concurrency=8)
            .shuffle(capacity=300, min_after_dequeue=200)
            .batch(16, allow_smaller_final_batch=True)
        )

    got: list[int] = []
    async with pipe().open() as batches:
        for _ in range(40):
            got.extend(int(x) for x in await batches.get())
        with pytest.warns(aqueue.CheckpointWarning, match="not the same batches") as seen:
            state = await batches.checkpoint()
    assert seen[0].filename == __file__  # it points at the checkpoint() call
    loose = (
        "map(slowish): 8 workers, ordered=False (pass ordered=True)",
        "shuffle: no seed (pass seed=...)",
    )
    assert all(why in str(seen[0].message) for why in loose)
    assert (state.exact, state.inexact) == (False, loose)
    state.save(tmp_path / "cut.aqs")
    assert aqueue.PipelineState.load(tmp_path / "cut.aqs").inexact == loose
    async with pipe().open(state=state) as batches:
        async for b in batches:
            got.extend(int(x) for x in b)
    assert sorted(got) == list(range(3_000))


async def test_a_checkpoint_every_batch_for_a_whole_epoch() -> None:
    """Checkpointing after every batch neither loses, repeats nor deadlocks, and each
    state resumes to the rest of the epoch."""
    pipe = Pipeline(list(range(640))).map(triple, concurrency=3, ordered=True).batch(32).prefetch(2)
    got: list[int] = []
    states = []
    async with pipe.open() as batches:
        async for b in batches:
            got.extend(int(x) for x in b)
            states.append((len(got), await batches.checkpoint()))
    assert got == [3 * x for x in range(640)]
    for received, state in states[::5]:
        async with pipe.open(state=state) as batches:
            rest = [int(x) async for b in batches for x in b]
        assert rest == got[received:]


async def test_checkpoint_while_stages_wait_on_empty_and_on_full_queues() -> None:
    """A slow thread map leaves its consumer waiting on an empty queue while the source
    waits on a full one; the checkpoint captures every item once."""

    def slow(x: int) -> int:
        time.sleep(0.001)
        return x

    pipe = Pipeline(list(range(400))).map(slow, concurrency=2, ordered=True).prefetch(1)
    async with pipe.open() as items:
        first = [await items.get() for _ in range(10)]
        await anyio.sleep(0.02)  # the source queue is full, prefetch waits
        state = await items.checkpoint()
        rest_live = [x async for x in items]
    assert first + rest_live == list(range(400))
    async with pipe.open(state=state) as items:
        rest = [x async for x in items]
    assert rest == rest_live


async def test_a_cancelled_checkpoint_leaves_the_run_going_unchanged() -> None:
    """A checkpoint cancelled while it waits for a worker's item (held up on purpose)
    leaves the pipeline running, and the run still delivers exactly the uninterrupted
    output."""
    gate = threading.Event()

    def held(x: int) -> int:
        time.sleep(0.002)  # slow enough that workers take one item at a time
        if x == 5:
            gate.wait(10)  # a worker is busy with item 5 when the checkpoint starts
        return x

    pipe = Pipeline(list(range(30))).map(held, concurrency=2, ordered=True)
    async with pipe.open() as items:
        got = [await items.get() for _ in range(5)]
        with anyio.move_on_after(0.05) as scope:
            await items.checkpoint()
        assert scope.cancelled_caught
        gate.set()
        got += [x async for x in items]
    assert got == list(range(30))


async def test_a_one_shot_source_is_refused_with_the_reason() -> None:
    """A generator source cannot say where it is: checkpoint() raises CheckpointError
    naming the stage and what to do, and the run goes on."""
    pipe = Pipeline(x for x in range(100)).map(triple)
    async with pipe.open() as items:
        await items.get()
        with pytest.raises(
            CheckpointError, match=r"stage 0 .*generator.*list, tuple, range or array"
        ):
            await items.checkpoint()
        assert len([x async for x in items]) == 99


async def test_an_array_source_resumes_exactly(tmp_path: Path) -> None:
    """A numpy array is an in-memory sequence like a list: it can say where it is, so a
    pipeline reading one checkpoints and resumes exactly (after a round trip through a
    file)."""
    pipe = Pipeline(np.arange(60)).map(triple, ordered=True).batch(4)
    async with pipe.open() as items:
        head = [await items.get() for _ in range(3)]
        state = await items.checkpoint()
        tail = [b async for b in items]
    assert [b.tolist() for b in head + tail] == [
        [3 * x for x in range(i, i + 4)] for i in range(0, 60, 4)
    ]
    state.save(tmp_path / "arr.aqs")
    again = PipelineState.load(tmp_path / "arr.aqs")
    async with pipe.open(state=again) as items:
        resumed = [b async for b in items]
    assert [b.tolist() for b in resumed] == [b.tolist() for b in tail]
    held = r"PipelineState\(3 stages, source (ended|at epoch 0 item \d+), (\d+) items held\)"
    m = re.fullmatch(held, repr(state))
    assert m is not None
    assert int(m.group(2)) == state.items_held > 0


class Counter:
    """A user's source that is checkpointable: it says where it is and goes back there.
    With ``delay_s`` it sleeps that long before each number (a slow reader)."""

    def __init__(self, n: int, delay_s: float = 0.0) -> None:
        self.n = n
        self.i = 0
        self.delay_s = delay_s

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        if self.i >= self.n:
            raise StopIteration
        if self.delay_s:
            time.sleep(self.delay_s)
        self.i += 1
        return self.i - 1

    def state(self) -> dict[str, int]:
        return {"i": self.i}

    def restore(self, state: dict[str, int]) -> None:
        self.i = state["i"]


def double(x: int) -> int:
    return 2 * x


async def adouble(x: int) -> int:
    await anyio.lowlevel.checkpoint()
    return 2 * x


@pytest.mark.parametrize("fn", [double, adouble], ids=["threads", "tasks"])
async def test_an_ordered_map_whose_input_runs_dry_checkpoints_and_resumes(fn: Any) -> None:
    """An ordered map of 4 workers over a slow source: when the checkpoint begins, one
    worker is parked on the empty input queue holding the take lock and others wait
    for that lock. They hold nothing, so the checkpoint returns (it used to wait for
    ever), and the resumed run goes on with exactly the items that came next."""
    got: list[int] = []
    slow = Pipeline(Counter(150, delay_s=0.002)).map(fn, concurrency=4, ordered=True)
    async with slow.open() as items:
        for _ in range(3):
            for _ in range(20):
                got.append(await items.get())
            with anyio.fail_after(10):
                state = await items.checkpoint()
        rest = [x async for x in items]
    assert got + rest == [2 * x for x in range(150)]
    resumed = Pipeline(Counter(150, delay_s=0.002)).map(fn, concurrency=4, ordered=True)
    async with resumed.open(state=state) as items:
        assert [x async for x in items] == rest


async def test_frequent_checkpoints_add_nothing_to_the_queues() -> None:
    """A checkpoint after every batch for 60 batches: what a cut holds stays within the
    stage queues' own sizes (a worker parked on a full queue keeps its items waiting
    there, captured, instead of the queue being opened for them), so frequent
    checkpoints neither grow the queues nor the states."""

    def slow(x: int) -> int:
        time.sleep(0.002)
        return x

    pipe = Pipeline(range(100_000)).map(slow, concurrency=4, ordered=True).batch(8)
    held: list[int] = []
    async with pipe.open() as batches:
        for _ in range(60):
            await batches.get()
            held.append((await batches.checkpoint()).items_held)
    assert max(held) < 700, held  # source queue 256 + a refill, map queue 8, batches


async def test_a_source_with_state_and_restore_is_checkpointable(tmp_path: Path) -> None:
    """A source implementing state()/restore(state) resumes where it was cut (here
    through a saved file)."""
    pipe = Pipeline(Counter(500)).map(triple, concurrency=2, ordered=True).batch(10)
    async with pipe.open() as batches:
        before = [int(x) for _ in range(5) for x in await batches.get()]
        state = await batches.checkpoint()
    state.save(tmp_path / "s.npz")
    resumed_pipe = Pipeline(Counter(500)).map(triple, concurrency=2, ordered=True).batch(10)
    async with resumed_pipe.open(state=PipelineState.load(tmp_path / "s.npz")) as batches:
        after = [int(x) async for b in batches for x in b]
    assert before + after == [3 * x for x in range(500)]


async def test_a_state_of_another_pipeline_is_refused_before_anything_starts() -> None:
    """Another seed, another stage or another source length: ElementSpecError names the
    first difference, and nothing starts."""
    async with seeded(2_000).open() as batches:
        await batches.get()
        state = await batches.checkpoint()
    other_seed = (
        Pipeline(range(2_000))
        .map(triple, concurrency=4, ordered=True)
        .shuffle(capacity=1_100, min_after_dequeue=1_000, seed=8)
        .batch(32)
        .prefetch(4)
    )
    with pytest.raises(ElementSpecError, match="stage 2 differs in seed: the state has 7"):
        other_seed.open(state=state)
    with pytest.raises(ElementSpecError, match="stage 0 differs in length"):
        seeded(3_000).open(state=state)
    with pytest.raises(ElementSpecError, match="5 stages, this one has 4"):
        Pipeline(range(2_000)).map(triple).batch(32).prefetch(4).open(state=state)
    with pytest.raises(TypeError, match="PipelineState"):
        seeded(2_000).open(state={"stages": []})  # type: ignore[arg-type]


async def test_saving_an_item_that_needs_pickle_names_the_stage_and_type(
    tmp_path: Path,
) -> None:
    """Items that cannot be saved without pickle make save() raise CheckpointError
    naming where they are and their type; nothing is written."""
    pipe = Pipeline([{1, x} for x in range(50)]).prefetch(4)  # the queues hold sets
    async with pipe.open() as items:
        await items.get()
        state = await items.checkpoint()
    path = tmp_path / "s.npz"
    with pytest.raises(CheckpointError, match=r"stage \d's queue: an item is a set"):
        state.save(path)
    assert not path.exists()
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240 - a test's own temporary folder


async def test_bad_state_files_are_refused_clearly(tmp_path: Path) -> None:
    """Truncated, corrupt, foreign and newer-version files raise CheckpointError on
    load, naming the file and the problem."""
    async with seeded(2_000).open() as batches:
        await batches.get()
        state = await batches.checkpoint()
    good = tmp_path / "good.npz"
    state.save(good)
    data = good.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        PipelineState.load(cut)
    noise = tmp_path / "noise.npz"
    noise.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(CheckpointError, match="not an aqueue state file"):
        PipelineState.load(noise)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, x=np.arange(3))
    with pytest.raises(CheckpointError, match="not an aqueue state file"):
        PipelineState.load(foreign)
    with pytest.raises(CheckpointError, match="no such file"):
        PipelineState.load(tmp_path / "missing.npz")
    from aqueue._queues._files import read_state_file, write_state_file

    header, arrays = read_state_file(good, "aqueue.PipelineState", 2)
    header["version"] = 3
    newer = tmp_path / "newer.npz"
    write_state_file(newer, header, arrays)
    with pytest.raises(CheckpointError, match="newer aqueue"):
        PipelineState.load(newer)
    header["version"] = 2
    for bad in ({"1": {"concurrency": 0}}, {"1": {"concurrency": "8"}}, {"1": []}):
        header["settings"] = bad
        wrong = tmp_path / "wrong.npz"
        write_state_file(wrong, header, arrays)
        with pytest.raises(CheckpointError, match=r"inconsistent pipeline state.*stage 1"):
            PipelineState.load(wrong)
    header["settings"] = {}
    header["format"] = "aqueue.QueueSnapshot"
    other = tmp_path / "other.npz"
    write_state_file(other, header, arrays)
    with pytest.raises(CheckpointError, match=r"holds 'aqueue\.QueueSnapshot'"):
        PipelineState.load(other)


async def test_items_of_many_forms_survive_save_and_load(tmp_path: Path) -> None:
    """Tuples, dicts, lists, bytes, numpy scalars and arrays of several shapes come back
    equal from a saved state."""
    items = [
        (i, f"s{i}", b"\x00\x01", np.float32(i), {"a": np.arange(i % 3), "b": [i, None]})
        for i in range(40)
    ]
    pipe = Pipeline(items).prefetch(8)
    async with pipe.open() as out:
        first = await out.get()
        state = await out.checkpoint()
    state.save(tmp_path / "s.npz")
    async with pipe.open(state=PipelineState.load(tmp_path / "s.npz")) as out:
        rest = [x async for x in out]
    for got, want in zip([first, *rest], items):
        assert got[:3] == want[:3]
        assert got[3] == want[3]
        assert type(got[3]) is np.float32
        assert np.array_equal(got[4]["a"], want[4]["a"])
        assert got[4]["b"] == want[4]["b"]
    assert len(rest) == 39


async def test_file_size_is_about_the_raw_bytes(tmp_path: Path) -> None:
    """A state holding thousands of float32[32, 32] items takes about their raw bytes
    on disk (stacked by shape, no per-item overhead to speak of)."""

    def frame(i: int) -> Any:
        return np.full((32, 32), i, dtype=np.float32)

    pipe = (
        Pipeline(range(3_000)).map(frame).shuffle(capacity=2_100, min_after_dequeue=2_000, seed=1)
    )
    async with pipe.open() as out:
        await out.get()
        state = await out.checkpoint()
    held = state.items_held
    path = tmp_path / "s.npz"
    state.save(path)
    assert held >= 2_000
    assert path.stat().st_size <= 1.1 * held * 32 * 32 * 4


def test_public_names() -> None:
    """PipelineState and CheckpointError are public."""
    assert aqueue.PipelineState is PipelineState
    assert issubclass(aqueue.CheckpointError, aqueue.QueueError)
    assert issubclass(aqueue.CheckpointError, ValueError)
