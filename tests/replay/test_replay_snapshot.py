"""Snapshots: consistent and side-effect free; a restored table goes on with exactly the
samples and evictions the original would have (golden continuation, for every
selector); save/load round trips without pickle; a corrupt, foreign, truncated or
inconsistent file raises CheckpointError naming the file and the problem."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from replay_support import SHAPE, contents, item, items
from support import settle, spawn

import aqueue

pytestmark = pytest.mark.timeout(30)

CONFIGS = {
    "uniform/fifo": {"sampler": aqueue.Uniform(), "remover": aqueue.Fifo()},
    "prioritized/fifo": {"sampler": aqueue.Prioritized(0.6), "remover": aqueue.Fifo()},
    "prioritized/prioritized": {
        "sampler": aqueue.Prioritized(1.0),
        "remover": aqueue.Prioritized(0.5),
    },
    "uniform/uniform+mts": {
        "sampler": aqueue.Uniform(),
        "remover": aqueue.Uniform(),
        "max_times_sampled": 3,
    },
    "minheap/maxheap": {"sampler": aqueue.MinHeap(), "remover": aqueue.MaxHeap()},
    "lifo/lifo+mts": {"sampler": aqueue.Lifo(), "remover": aqueue.Lifo(), "max_times_sampled": 2},
}


def make(config: str, seed: int = 123) -> aqueue.ReplayTable[Any]:
    return aqueue.ReplayTable(
        16,
        (np.float32, np.int64),
        (SHAPE, ()),
        ("obs", "step"),
        rate_limiter=aqueue.MinSize(2),
        seed=seed,
        name="golden",
        **CONFIGS[config],
    )


async def workload(t: aqueue.ReplayTable[Any], rounds: int, start: int) -> list[Any]:
    """A fixed sequence of operations; everything it observed, comparable."""
    rng = np.random.default_rng(start)
    seen: list[Any] = []
    for r in range(rounds):
        k = 3 + r % 4
        vs = np.arange(start + 10 * r, start + 10 * r + k)
        prios = rng.integers(0, 5, k).astype(np.float64)
        keys = await t.insert_many({"obs": items(vs), "step": vs}, priorities=prios)
        seen.append(keys.tolist())
        s = await t.sample(3)
        seen.append(
            (
                s.keys.tolist(),
                s.probabilities.tolist(),
                s.times_sampled.tolist(),
                s.data["step"].tolist(),
                s.table_size,
            )
        )
        found = await t.update_priorities(s.keys, rng.random(3) * 4)
        seen.append(found.tolist())
        if r % 3 == 2:
            seen.append((await t.delete([int(keys[0]), 999])).tolist())
    return seen


@pytest.mark.anyio
@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("via_file", [False, True], ids=["in-memory", "file"])
async def test_restored_table_goes_on_exactly_as_the_original(
    config: str, via_file: bool, tmp_path: Path
) -> None:
    """Golden continuation: after the same history, a table restored from a snapshot
    (in memory or through a file) and the original see exactly the same results for
    the same operations, and end in the same state."""
    original = make(config)
    await workload(original, 12, 0)
    snap = original.snapshot()
    if via_file:
        snap.save(tmp_path / "table.npz")
        snap = aqueue.ReplaySnapshot.load(tmp_path / "table.npz")
    restored = aqueue.ReplayTable.from_snapshot(snap)
    assert contents(restored) == contents(original)
    assert await workload(restored, 10, 500) == await workload(original, 10, 500)
    assert contents(restored) == contents(original)
    assert restored.statistics().inserts == original.statistics().inserts


@pytest.mark.anyio
async def test_a_seed_gives_pinned_samples() -> None:
    """Determinism is a contract: seed 0, this history, these keys (a change of the
    sampling arithmetic or of the random stream shows here)."""
    t = aqueue.ReplayTable(8, np.float32, SHAPE, sampler=aqueue.Prioritized(0.6), seed=0)
    await t.insert_many(items(range(8)), priorities=[1.0, 2.0, 3.0, 4.0, 0.0, 5.0, 6.0, 7.0])
    s = await t.sample(12)
    assert s.keys.tolist() == PINNED_PRIORITIZED
    u = aqueue.ReplayTable(8, np.float32, SHAPE, seed=0)
    await u.insert_many(items(range(8)))
    assert (await u.sample(12)).keys.tolist() == PINNED_UNIFORM


PINNED_PRIORITIZED = [6, 2, 0, 0, 7, 7, 6, 6, 5, 7, 7, 0]
PINNED_UNIFORM = [6, 5, 4, 2, 2, 0, 0, 0, 1, 6, 5, 7]  # numpy's integers(0, 8, 12), seed 0


@pytest.mark.anyio
async def test_snapshot_is_consistent_and_changes_nothing() -> None:
    """A snapshot taken while an insert and a sample wait holds what the table held;
    taking it changed nothing and the waiters go on."""
    t = aqueue.ReplayTable(
        8, np.float32, SHAPE, rate_limiter=aqueue.RateLimiter(1.0, 3, -8.0, 3.0), seed=1
    )
    await t.insert_many(items([0, 1]))
    async with anyio.create_task_group() as tg:
        sample = spawn(tg, t.sample, 3)
        await settle()
        before = contents(t)
        snap = t.snapshot()
        assert contents(t) == before
        assert len(snap) == 2
        assert snap.keys.tolist() == [0, 1]
        assert snap.statistics.samples_waiting == 1
        assert not snap.keys.flags.writeable
        assert not snap.items[0].flags.writeable
        await t.insert(item(2))
        await settle()
        assert len(sample.result()) == 3
    restored = aqueue.ReplayTable.from_snapshot(snap)
    assert restored.statistics().samples_waiting == 0
    assert (
        repr(snap) == "<ReplaySnapshot of replay table 'replay_table': 2 items, max_size 8, open>"
    )


@pytest.mark.anyio
async def test_closed_flag_statistics_and_settings_come_back(tmp_path: Path) -> None:
    """A closed table's snapshot restores closed, with its settings and statistics."""
    t = aqueue.ReplayTable(
        4,
        np.uint8,
        (2, 2),
        sampler=aqueue.MaxHeap(),
        remover=aqueue.MinHeap(),
        max_times_sampled=5,
        rate_limiter=aqueue.SampleToInsertRatio(2.0, 2, 20.0),
        seed=9,
        name="closed one",
    )
    await t.insert_many(np.arange(24, dtype=np.uint8).reshape(6, 2, 2), priorities=np.arange(6.0))
    await t.sample(2)
    t.close()
    snap = t.snapshot()
    snap.save(tmp_path / "t.npz")
    back = aqueue.ReplayTable.from_snapshot(aqueue.ReplaySnapshot.load(tmp_path / "t.npz"))
    assert back.closed
    assert (back.name, back.max_size, back.seed, back.max_times_sampled) == ("closed one", 4, 9, 5)
    assert (back.sampler, back.remover, back.rate_limiter) == (t.sampler, t.remover, t.rate_limiter)
    assert back.dtypes == (np.dtype(np.uint8),)
    assert back.shapes == ((2, 2),)
    st, bst = t.statistics(), back.statistics()
    assert dataclasses.replace(bst, insert_wait_s=0.0, sample_wait_s=0.0) == dataclasses.replace(
        st, insert_wait_s=0.0, sample_wait_s=0.0
    )
    with pytest.raises(aqueue.QueueClosedError):
        await back.insert(np.zeros((2, 2), np.uint8))


# -- corrupt, foreign and inconsistent files -----------------------------------------------


def saved(tmp_path: Path) -> Path:
    t = aqueue.ReplayTable(8, np.float32, SHAPE, sampler=aqueue.MinHeap(), seed=3)
    view = t.blocking()
    view.insert_many(items(range(5)), priorities=np.arange(5.0))
    view.sample(2)
    path = tmp_path / "snap.npz"
    t.snapshot().save(path)
    return path


def rewrite(
    path: Path, header: Any = None, drop: str | None = None, replace: dict[str, Any] | None = None
) -> None:
    """Rewrite the state file with a changed header, an array dropped or replaced."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    if header is not None:
        head = json.loads(bytes(arrays["__aqueue__"]).decode())
        header(head)
        arrays["__aqueue__"] = np.frombuffer(json.dumps(head).encode(), dtype=np.uint8)
    if drop:
        del arrays[drop]
    arrays.update(replace or {})
    with open(path, "wb") as f:
        np.savez(f, allow_pickle=False, **arrays)


def _set(key: str, value: Any) -> Any:
    def change(head: dict[str, Any]) -> None:
        head[key] = value

    return change


def _stat(key: str, value: Any) -> Any:
    def change(head: dict[str, Any]) -> None:
        head["statistics"][key] = value

    return change


CORRUPTIONS: dict[str, tuple[Any, str]] = {
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:200]), "truncated or corrupt"),
    "random bytes": (lambda p: p.write_bytes(b"\x00garbage" * 10), "not an aqueue state file"),
    "missing file": (lambda p: p.unlink(), "no such file"),
    "a queue snapshot": (
        lambda p: aqueue.FIFOQueue(2, np.int64, ()).snapshot().save(p),
        "holds 'aqueue.QueueSnapshot', expected 'aqueue.ReplaySnapshot'",
    ),
    "newer version": (lambda p: rewrite(p, _set("version", 99)), "newer aqueue"),
    "missing array": (lambda p: rewrite(p, drop="priorities"), "array 'priorities' is missing"),
    "wrong dtype": (
        lambda p: rewrite(p, replace={"keys": np.arange(5, dtype=np.int32)}),
        "keys must be int64 of shape",
    ),
    "keys not increasing": (
        lambda p: rewrite(p, replace={"keys": np.array([0, 2, 1, 3, 4])}),
        "keys must increase",
    ),
    "negative priority": (
        lambda p: rewrite(p, replace={"priorities": np.array([0.0, -1.0, 2.0, 3.0, 4.0])}),
        "priorities must be finite and >= 0",
    ),
    "counters": (lambda p: rewrite(p, _stat("deletes", 3)), "the counters do not add up"),
    "statistics field": (
        lambda p: rewrite(p, _stat("samples", "many")),
        "statistics field 'samples'",
    ),
    "sampler": (
        lambda p: rewrite(p, _set("sampler", {"kind": "Random"})),
        "not a selector description",
    ),
    "limiter": (
        lambda p: rewrite(p, _set("rate_limiter", {"kind": "MinSize", "min_size_to_sample": 0})),
        "min_size_to_sample must be >= 1",
    ),
    "rng state": (lambda p: rewrite(p, _set("rng_state", {"bit_generator": "Nope"})), "rng_state"),
    "layout": (
        lambda p: rewrite(p, replace={"layout.slots": np.array([0, 1, 2, 3, 3])}),
        "cover 0..max_size-1 once each",
    ),
    "heap tie order": (
        lambda p: rewrite(p, replace={"layout.sampler.seq": np.array([0, 0, 1, 2, 3])}),
        "seq must be distinct",
    ),
    "unexpected array": (
        lambda p: rewrite(p, replace={"extra": np.zeros(2)}),
        "unexpected arrays",
    ),
    "extra header field type": (
        lambda p: rewrite(p, _set("closed", "no")),
        "'closed' must be bool",
    ),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_bad_files_raise_checkpoint_error_naming_file_and_problem(
    corruption: str, tmp_path: Path
) -> None:
    """Every kind of bad file is refused before anything is built, with the file's
    path and what is wrong."""
    path = saved(tmp_path)
    damage, message = CORRUPTIONS[corruption]
    damage(path)
    with pytest.raises(aqueue.CheckpointError, match=message) as info:
        aqueue.ReplaySnapshot.load(path)
    assert str(path) in str(info.value)


def test_the_file_holds_no_pickle(tmp_path: Path) -> None:
    """The file is an npz of plain arrays and a JSON header: loadable with pickle off."""
    path = saved(tmp_path)
    with zipfile.ZipFile(path) as z:
        names = sorted(z.namelist())
    assert "__aqueue__.npy" in names
    assert "c0.npy" in names
    with np.load(path, allow_pickle=False) as data:
        for key in data.files:
            assert data[key].dtype.kind != "O"


def test_from_snapshot_of_a_path_or_a_queue_snapshot_says_what_to_do(tmp_path: Path) -> None:
    """A path (loaded first by ReplaySnapshot.load) or a queue's snapshot (restored by
    QueueBase.from_snapshot) is refused with a message naming what was expected, what
    was given, and the call that takes it; so is anything else."""
    path = tmp_path / "table.npz"
    aqueue.ReplayTable(4, np.float32, SHAPE).snapshot().save(path)
    with pytest.raises(aqueue.ElementSpecError) as info:
        aqueue.ReplayTable.from_snapshot(path)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"ReplayTable.from_snapshot: expected a ReplaySnapshot, got {type(path).__name__} "
        f"{str(path)!r}; load a file first: aqueue.ReplaySnapshot.load(path)"
    )
    queue_snap = aqueue.FIFOQueue(4, np.int64, ()).snapshot()
    with pytest.raises(aqueue.ElementSpecError) as info:
        aqueue.ReplayTable.from_snapshot(queue_snap)  # type: ignore[arg-type]
    assert str(info.value) == (
        "ReplayTable.from_snapshot: expected a ReplaySnapshot, got QueueSnapshot; restore "
        "that snapshot with aqueue.QueueBase.from_snapshot"
    )
    with pytest.raises(aqueue.ElementSpecError, match=r"expected a ReplaySnapshot, got dict$"):
        aqueue.ReplayTable.from_snapshot({})  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_inconsistent_snapshot_objects_are_refused() -> None:
    """from_snapshot checks a snapshot built by hand as a loaded file is checked."""
    t = aqueue.ReplayTable(8, np.float32, SHAPE, seed=1)
    await t.insert_many(items(range(3)))
    snap = t.snapshot()
    bad = dataclasses.replace(snap, next_key=2)
    with pytest.raises(aqueue.CheckpointError, match="below next_key"):
        aqueue.ReplayTable.from_snapshot(bad)
    bad = dataclasses.replace(snap, rate_limiter=aqueue.MinSize(9))
    with pytest.raises(aqueue.CheckpointError, match="its settings make no table"):
        aqueue.ReplayTable.from_snapshot(bad)
