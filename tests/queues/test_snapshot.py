"""Queue snapshots, through the public API: ``q.snapshot()``, ``Kind.from_snapshot``,
``QueueSnapshot.save``/``load``.

A snapshot holds the spec, the elements in dequeue order (a shuffle queue: its pool and
its generator's state), claims of a waiting batch dequeue and the closed flag; taking it
changes nothing; restoring gives a queue that continues exactly as the original would;
bad files and bad snapshots raise clear errors.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import numpy as np
import pytest
from support import KINDS, Kind, drain_nowait, settle, spawn

import aqueue
from aqueue._queues._files import read_state_file, write_state_file

FORMAT = "aqueue.QueueSnapshot"
KIND_IDS = [k.label for k in KINDS]


# -- helpers ---------------------------------------------------------------------------


def spec_of(q: Any) -> tuple[Any, ...]:
    """Everything a restored queue must share with its original."""
    return (
        type(q),
        q.name,
        q.capacity,
        q.dtypes,
        q.shapes,
        q.names,
        getattr(q, "min_after_dequeue", 0),
        getattr(q, "seed", None),
    )


def snap_values(kind: Kind, snap: aqueue.QueueSnapshot[Any]) -> list[int]:
    """The ints the snapshot's elements carry (component tuples, see support.Kind)."""
    if kind.form == "pyobj":
        return [int(comps[0][1]) for comps in snap.elements]
    if kind.form == "priority":
        assert all(int(p) == int(v) for p, v in snap.elements)
    return [int(comps[0]) for comps in snap.elements]


def same_statistics(a: aqueue.QueueStatistics, b: aqueue.QueueStatistics) -> bool:
    """Equal but for the time counters, which grow while anything waits."""
    return dataclasses.replace(a, time_full_s=0, time_empty_s=0) == dataclasses.replace(
        b, time_full_s=0, time_empty_s=0
    )


def restore(snap: aqueue.QueueSnapshot[Any], tmp_path: Path, via_file: bool) -> Any:
    """The queue ``snap`` describes, built from it directly or after a save/load."""
    if via_file:
        path = tmp_path / "queue.snap"
        snap.save(path)
        snap = aqueue.QueueSnapshot.load(path)
    return aqueue.QueueBase.from_snapshot(snap)


def filled(kind: Kind) -> tuple[Any, list[int]]:
    """A queue of ``kind`` holding 8 of 0..10 (3..10 for the ordered kinds) after 3
    takes: a ring's head is not at slot 0, a pool's generator has moved on."""
    q = kind.make(8, "src")
    q.enqueue_many_nowait(kind.batch(range(6)))
    taken = kind.values(q.dequeue_many_nowait(3), 3)
    q.enqueue_many_nowait(kind.batch(range(6, 11)))
    return q, sorted(set(range(11)) - set(taken))


def drain_raw(q: Any) -> list[Any]:
    """Every element, as dequeue_nowait gives them."""
    out = []
    while q.size():
        out.append(q.dequeue_nowait())
    return out


def take_all(q: Any, kind: Kind) -> list[int]:
    """A batch of 2 (the batch form), then the rest one by one."""
    return kind.values(q.dequeue_many_nowait(2), 2) + drain_nowait(q, kind)


# -- round trips -----------------------------------------------------------------------


@pytest.mark.parametrize("closed", [False, True], ids=["open", "closed"])
@pytest.mark.parametrize("via_file", [False, True], ids=["memory", "file"])
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_round_trip(kind: Kind, via_file: bool, closed: bool, tmp_path: Path) -> None:
    """Spec, contents, order and closed flag come back, through memory or a file; the
    restored queue continues exactly as the original does (a shuffle queue too: its
    generator's state comes back)."""
    q, held = filled(kind)
    if closed:
        q.close()
    snap = q.snapshot()
    assert len(snap) == q.size() == 8
    assert snap.kind == type(q).__name__
    assert snap.closed is closed
    kind.check(snap_values(kind, snap), held)
    r = restore(snap, tmp_path, via_file)
    assert spec_of(r) == spec_of(q)
    assert r.closed is closed
    assert r.size() == 8
    want = take_all(q, kind)
    got = take_all(r, kind)
    kind.check(got, held)
    assert got == want
    if not closed:  # both still work as queues
        r.enqueue_nowait(kind.elem(20))
        assert drain_nowait(r, kind) == [20]


@pytest.mark.parametrize("via_file", [False, True], ids=["memory", "file"])
def test_empty_queue_round_trip(via_file: bool, tmp_path: Path) -> None:
    """An empty queue, and a shuffle queue's floor, come back."""
    q = aqueue.RandomShuffleQueue(9, 4, [np.float32, np.int8], [(2,), ()], names=["x", "y"])
    r = restore(q.snapshot(), tmp_path, via_file)
    assert spec_of(r) == spec_of(q)
    assert (r.size(), r.min_after_dequeue, r.seed) == (0, 4, None)


@pytest.mark.parametrize("via_file", [False, True], ids=["memory", "file"])
def test_undeclared_shapes_round_trip(via_file: bool, tmp_path: Path) -> None:
    """Queues without shapes (a deque, a list pool) keep each element's own shape,
    dtype and Python objects."""
    fifo = aqueue.FIFOQueue(8, [np.int16, object])
    items = [
        (5, "five"),
        ([1, 2, 3], [b"x", None]),
        (np.arange(6, dtype=np.int16).reshape(2, 3), 2.5),
        (np.zeros((0, 2), np.int16), ("t", [1, (2, True)])),
    ]
    for item in items:
        fifo.enqueue_nowait(item)
    r = restore(fifo.snapshot(), tmp_path, via_file)
    assert spec_of(r) == spec_of(fifo)
    for a, b in zip(drain_raw(fifo), drain_raw(r)):
        for x, y in zip(a, b):
            assert type(x) is type(y)
            if isinstance(x, np.ndarray):
                assert (x.dtype, x.shape) == (y.dtype, y.shape)
                assert x.tolist() == y.tolist()
            else:
                assert x == y

    pool = aqueue.RandomShuffleQueue(8, 0, np.float64, seed=5)
    for k in range(6):
        pool.enqueue_nowait(np.full(k, k / 2))
    r = restore(pool.snapshot(), tmp_path, via_file)
    assert [x.tolist() for x in drain_raw(pool)] == [x.tolist() for x in drain_raw(r)]


def test_snapshot_and_restored_queues_are_independent() -> None:
    """A snapshot's arrays are read-only copies: changing what a queue gives back, or
    the queue itself, never changes the snapshot, and each restore starts equal."""
    for q in (
        aqueue.PaddingFIFOQueue(4, np.float32, [(None,)]),  # a deque
        aqueue.FIFOQueue(4, np.float32),  # a deque, no shapes
        aqueue.FIFOQueue(4, np.float32, [(2,)]),  # a ring (restored as one batch)
        aqueue.PriorityQueue(4, np.float32, [(2,)]),  # a heap (restored as one batch)
        aqueue.PriorityQueue(4, np.float32),  # a heap (restored element by element)
    ):
        prio = isinstance(q, aqueue.PriorityQueue)
        q.enqueue_nowait((1, [1.0, 2.0]) if prio else [1.0, 2.0])
        snap = q.snapshot()
        taken = q.dequeue_nowait()
        (taken[1] if prio else taken)[:] = 9  # the original's element, changed in place
        first = aqueue.QueueBase.from_snapshot(snap)
        x = first.dequeue_nowait()
        x = x[1] if prio else x
        assert x.flags.writeable
        assert x.tolist() == [1.0, 2.0]
        x[:] = 7
        comps = snap.elements[0]
        assert not comps[-1].flags.writeable
        assert comps[-1].tolist() == [1.0, 2.0]
        second = aqueue.QueueBase.from_snapshot(snap).dequeue_nowait()
        assert (second[1] if prio else second).tolist() == [1.0, 2.0]


class Frames(aqueue.FIFOQueue[Any]):
    """A user's subclass of a kind."""


def test_a_subclass_restores_as_itself() -> None:
    """A subclass's snapshot names its kind; restored through the subclass, the queue
    is of the subclass."""
    q = Frames(4, np.uint8, (2,))
    q.enqueue_nowait([1, 2])
    snap = q.snapshot()
    assert snap.kind == "FIFOQueue"
    r = Frames.from_snapshot(snap)
    assert type(r) is Frames
    assert r.dequeue_nowait().tolist() == [1, 2]
    assert type(aqueue.QueueBase.from_snapshot(snap)) is aqueue.FIFOQueue


def test_snapshot_of_a_priority_queue_is_in_priority_order() -> None:
    """Ascending priority, ties in arrival order."""
    q = aqueue.PriorityQueue(8, object, ())
    for p, tag in [(3, "a"), (1, "b"), (3, "c"), (0, "d"), (1, "e")]:
        q.enqueue_nowait((p, tag))
    snap = q.snapshot()
    assert [(int(p), t) for p, t in snap.elements] == [
        (0, "d"),
        (1, "b"),
        (1, "e"),
        (3, "a"),
        (3, "c"),
    ]


# -- the seeded shuffle continues exactly ----------------------------------------------


@pytest.mark.parametrize("via_file", [False, True], ids=["memory", "file"])
@pytest.mark.parametrize("pool_size", [40, 3000], ids=["small-pool", "large-pool"])
@pytest.mark.parametrize(
    "shapes", [(), (200,), None], ids=["fixed-pool", "fixed-pool-1600B", "list-pool"]
)
def test_seeded_shuffle_continues_exactly(
    shapes: Any, pool_size: int, via_file: bool, tmp_path: Path
) -> None:
    """Golden: take k from the original after the snapshot, restore, take k from the
    copy: identical, through single takes, batch takes (the small-pool shuffle path and
    the large-pool choice path) and enqueues in between. (Small elements are restored
    as one batch, large ones one by one.)"""
    q = aqueue.RandomShuffleQueue(4000, 5, np.int64, shapes, seed=11)

    def elem(v: int) -> Any:
        return np.full(200, v) if shapes == (200,) else v

    for v in range(pool_size):
        q.enqueue_nowait(elem(v))
    for _ in range(7):
        q.dequeue_nowait()  # the generator has moved on, the pool is permuted
    snap = q.snapshot()
    r = restore(snap, tmp_path, via_file)

    def script(queue: Any) -> list[int]:
        out = [queue.dequeue_nowait() for _ in range(10)]
        if shapes is not None:
            out += list(queue.dequeue_many_nowait(8))
        for v in range(10_000, 10_005):
            queue.enqueue_nowait(elem(v))
        out += [queue.dequeue_nowait() for _ in range(10)]
        assert all(np.all(x == np.ravel(x)[0]) for x in out)
        return [int(np.ravel(x)[0]) for x in out]

    want = script(q)
    assert script(r) == want
    assert len(set(want)) == len(want)


def test_unseeded_shuffle_also_continues_exactly() -> None:
    """Without a seed the generator's state still comes back."""
    q = aqueue.RandomShuffleQueue(100, 0, np.int64, ())
    q.enqueue_many_nowait(np.arange(100))
    r = aqueue.RandomShuffleQueue.from_snapshot(q.snapshot())
    assert r.dequeue_many_nowait(50).tolist() == q.dequeue_many_nowait(50).tolist()


# -- snapshots while operations wait ----------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("via_file", [False, True], ids=["memory", "file"])
async def test_snapshot_while_a_batch_dequeue_fills(via_file: bool, tmp_path: Path) -> None:
    """A FIFO dequeue_many waiting at the head holds the ring's elements in its own
    batch: they are in the snapshot, and nothing changes."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    q.enqueue_many_nowait(np.arange(3))
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue_many, 4)
        await settle()
        assert op.pending
        assert q.size() == 0  # claimed: out of the ring, into the batch
        before = q.statistics()
        snap = q.snapshot()
        assert same_statistics(q.statistics(), before)
        assert q.size() == 0
        assert [int(c[0]) for c in snap.elements] == [0, 1, 2]
        await q.enqueue(3)
        await settle()
        assert op.result().tolist() == [0, 1, 2, 3]
    r = restore(snap, tmp_path, via_file)
    assert r.dequeue_many_nowait(3).tolist() == [0, 1, 2]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
async def test_snapshot_while_a_progressive_dequeue_claims(kind: Kind, tmp_path: Path) -> None:
    """A dequeue_many larger than the capacity claims as elements come: its claims are
    in the snapshot, first, and so are elements admitted since; nothing changes."""
    q = kind.make(4)
    q.enqueue_many_nowait(kind.batch(range(4)))
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue_many, 6)
        await settle()
        assert op.pending
        assert q.size() == 0  # all four claimed
        snap = q.snapshot()
        kind.check(snap_values(kind, snap), range(4))
        q.enqueue_nowait(kind.elem(4))  # in the storage until the dequeue runs
        before = q.statistics()
        snap = q.snapshot()
        assert same_statistics(q.statistics(), before)
        assert q.size() == 1
        kind.check(snap_values(kind, snap), range(5))
        await settle()
        assert op.pending
        await q.enqueue(kind.elem(5))
        await settle()
        kind.check(kind.values(op.result(), 6), range(6))
    r = restore(snap, tmp_path, via_file=True)
    assert r.size() == 5  # more than the capacity: claims count
    kind.check(drain_nowait(r, kind), range(5))


@pytest.mark.anyio
async def test_snapshot_sorts_claims_of_a_priority_queue_in() -> None:
    """An element admitted after a progressive dequeue claimed others, with a lower
    priority, comes first in the snapshot, as a dequeue would see it."""
    q = aqueue.PriorityQueue(2, np.int64, ())
    q.enqueue_many_nowait((np.array([5, 6]), np.array([50, 60])))
    async with anyio.create_task_group() as tg:
        op = spawn(tg, q.dequeue_many, 3)
        await settle()
        q.enqueue_nowait((1, 10))
        snap = q.snapshot()
        assert [int(p) for p, _ in snap.elements] == [1, 5, 6]
        await settle()
        assert op.result()[0].tolist() == [1, 5, 6]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
async def test_snapshot_while_producers_wait(kind: Kind) -> None:
    """Producers blocked on a full queue: their elements are not admitted (not in the
    snapshot); nothing changes, and they complete once room frees."""
    q = kind.make(4)
    q.enqueue_many_nowait(kind.batch(range(4)))
    async with anyio.create_task_group() as tg:
        one = spawn(tg, q.enqueue, kind.elem(4))
        await settle()
        many = spawn(tg, q.enqueue_many, kind.batch([5, 6]))
        await settle()
        before = q.statistics()
        assert before.tasks_waiting_enqueue == 2
        snap = q.snapshot()
        assert same_statistics(q.statistics(), before)
        kind.check(snap_values(kind, snap), range(4))
        r = aqueue.QueueBase.from_snapshot(snap)
        got = kind.values(await q.dequeue_many(3), 3)
        await settle()
        assert one.result() is None
        assert many.result() is None
        got += drain_nowait(q, kind)
        kind.check(got, range(7))
    kind.check(drain_nowait(r, kind), range(4))


def test_snapshot_from_another_thread_while_a_thread_enqueues() -> None:
    """Taken under the queue's lock: consistent while a thread enqueues (every
    snapshot holds a prefix of what was enqueued)."""
    q = aqueue.FIFOQueue(20_000, np.int64, ())
    done = threading.Event()

    def produce() -> None:
        view = q.blocking()
        for start in range(0, 20_000, 100):
            view.enqueue_many(np.arange(start, start + 100))
            time.sleep(0.0002)  # so that snapshots fall between the batches
        done.set()

    t = threading.Thread(target=produce)
    t.start()
    sizes = []
    while not done.is_set() or not sizes:
        snap = q.snapshot()
        values = [int(c[0]) for c in snap.elements]
        assert values == list(range(len(values)))
        sizes.append(len(values))
        # Let the producer in: the lock is not fair, and a loop that takes it again at
        # once can starve the producer for many seconds on a busy two-core machine.
        time.sleep(0.001)
    t.join()
    assert sum(0 < size < 20_000 for size in sizes) >= 2, sizes
    assert len(aqueue.FIFOQueue.from_snapshot(q.snapshot())) == 20_000


# -- bad input ---------------------------------------------------------------------------


def test_from_snapshot_of_another_kind_is_refused() -> None:
    """The message names both kinds; QueueBase.from_snapshot takes any kind."""
    shuffle = aqueue.RandomShuffleQueue(4, 0, np.int64, (), name="pool").snapshot()
    with pytest.raises(aqueue.ElementSpecError, match=r"RandomShuffleQueue.*'pool'.*FIFOQueue"):
        aqueue.FIFOQueue.from_snapshot(shuffle)
    fifo = aqueue.FIFOQueue(4, np.int64, ()).snapshot()
    for cls in (aqueue.PaddingFIFOQueue, aqueue.PriorityQueue, aqueue.RandomShuffleQueue):
        with pytest.raises(aqueue.ElementSpecError, match=f"FIFOQueue.*not a {cls.__name__}"):
            cls.from_snapshot(fifo)
    assert type(aqueue.QueueBase.from_snapshot(shuffle)) is aqueue.RandomShuffleQueue
    with pytest.raises(aqueue.ElementSpecError, match="expected a QueueSnapshot, got dict"):
        aqueue.FIFOQueue.from_snapshot({})


def test_from_snapshot_of_a_path_or_a_table_snapshot_says_what_to_do(tmp_path: Path) -> None:
    """A path (loaded first by QueueSnapshot.load) or a replay table's snapshot (restored
    by ReplayTable.from_snapshot) is refused with a message naming what was expected,
    what was given, and the call that takes it."""
    path = saved(tmp_path)
    for given in (path, str(path)):
        with pytest.raises(aqueue.ElementSpecError) as info:
            aqueue.QueueBase.from_snapshot(given)  # type: ignore[arg-type]
        assert str(info.value) == (
            f"QueueBase.from_snapshot: expected a QueueSnapshot, got {type(given).__name__} "
            f"{str(path)!r}; load a file first: aqueue.QueueSnapshot.load(path)"
        )
    table = aqueue.ReplayTable(4, np.float32, ())
    with pytest.raises(aqueue.ElementSpecError) as info:
        aqueue.FIFOQueue.from_snapshot(table.snapshot())  # type: ignore[arg-type]
    assert str(info.value) == (
        "FIFOQueue.from_snapshot: expected a QueueSnapshot, got ReplaySnapshot; restore "
        "that snapshot with aqueue.ReplayTable.from_snapshot"
    )


def test_from_snapshot_checks_what_a_hand_made_snapshot_holds() -> None:
    """Elements that do not fit the spec, an unknown kind, a bad generator state."""
    snap = aqueue.FIFOQueue(4, np.int64, (2,)).snapshot()
    bad = dataclasses.replace(snap, elements=((np.zeros(3, np.int64),),))
    with pytest.raises(aqueue.ElementSpecError, match=r"element 0 does not fit.*\(2,\)"):
        aqueue.FIFOQueue.from_snapshot(bad)
    with pytest.raises(aqueue.ElementSpecError, match="element 0 does not fit"):
        aqueue.FIFOQueue.from_snapshot(dataclasses.replace(snap, elements=((1, 2),)))
    ints = aqueue.FIFOQueue(4, np.int64, ()).snapshot()
    fine = (np.int64(1),)
    for bad_value in (np.float64(1.5), "1", None):
        bad = dataclasses.replace(ints, elements=(fine, fine, (bad_value,)))
        with pytest.raises(aqueue.ElementSpecError, match="element 2 does not fit"):
            aqueue.FIFOQueue.from_snapshot(bad)
    with pytest.raises(aqueue.ElementSpecError, match="unknown queue kind 'Stack'"):
        aqueue.QueueBase.from_snapshot(dataclasses.replace(snap, kind="Stack"))
    pool = aqueue.RandomShuffleQueue(4, 0, np.int64, ()).snapshot()
    with pytest.raises(aqueue.CheckpointError, match="rng_state"):
        aqueue.RandomShuffleQueue.from_snapshot(dataclasses.replace(pool, rng_state={"x": 1}))


class Point(NamedTuple):
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": 1}, "element 1 is a dict"),
        (("ok", {1, 2}), "element 1 is a tuple holding a set"),
        (Point(1, 2), "element 1 is a Point"),
    ],
    ids=["dict", "set-in-tuple", "namedtuple"],
)
def test_save_refuses_unsavable_objects(value: Any, message: str, tmp_path: Path) -> None:
    """Object components are saved when they hold str, bytes, int, float, bool, None
    and tuples and lists of these; otherwise CheckpointError naming the component and
    the type, and no file."""
    q = aqueue.RandomShuffleQueue(4, 0, [np.int64, object], [(), ()], names=["n", "meta"])
    q.enqueue_nowait({"n": 0, "meta": "fine"})
    q.enqueue_nowait({"n": 1, "meta": value})
    snap = q.snapshot()
    assert int(snap.elements[1][0]) == 1  # (nothing taken yet: the pool's order is arrival)
    path = tmp_path / "q.snap"
    with pytest.raises(aqueue.CheckpointError, match=rf"component 1 \('meta'\).*{message}"):
        snap.save(path)
    assert os.listdir(tmp_path) == []


def saved(tmp_path: Path, kind: Kind | None = None) -> Path:
    """A saved snapshot file of a queue of ``kind`` (default: the ragged padding deque)."""
    kind = kind or next(k for k in KINDS if k.form == "ragged")
    q = kind.make(8)
    q.enqueue_many_nowait(kind.batch(range(7)))
    path = tmp_path / "queue.snap"
    q.snapshot().save(path)
    return path


@pytest.mark.parametrize("cut", [0.5, 0.99, 10], ids=["half", "tail", "head"])
def test_truncated_file(cut: float, tmp_path: Path) -> None:
    path = saved(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * cut) if cut < 1 else int(cut)])
    with pytest.raises(aqueue.CheckpointError, match=r"queue\.snap"):
        aqueue.QueueSnapshot.load(path)


def test_corrupt_files(tmp_path: Path) -> None:
    """Random bytes, an empty file, a flipped byte in the data (the zip's checksum)."""
    path = tmp_path / "x.snap"
    path.write_bytes(np.random.default_rng(0).bytes(3000))
    with pytest.raises(aqueue.CheckpointError, match="not an npz archive"):
        aqueue.QueueSnapshot.load(path)
    path.write_bytes(b"")
    with pytest.raises(aqueue.CheckpointError, match="empty"):
        aqueue.QueueSnapshot.load(path)
    path = saved(tmp_path, KINDS[0])
    data = bytearray(path.read_bytes())
    at = data.find(np.arange(7, dtype=np.int64).tobytes())
    assert at > 0
    data[at + 9] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(aqueue.CheckpointError, match="corrupt"):
        aqueue.QueueSnapshot.load(path)
    with pytest.raises(aqueue.CheckpointError, match="no such file"):
        aqueue.QueueSnapshot.load(tmp_path / "missing.snap")


def test_foreign_files(tmp_path: Path) -> None:
    """Another npz, an .npy file, another aqueue format."""
    path = tmp_path / "other.npz"
    np.savez(path, a=np.arange(3))
    with pytest.raises(aqueue.CheckpointError, match="not an aqueue state file"):
        aqueue.QueueSnapshot.load(path)
    path = tmp_path / "array.npy"
    np.save(path, np.arange(3))
    with pytest.raises(aqueue.CheckpointError, match="not an npz archive"):
        aqueue.QueueSnapshot.load(path)
    path = tmp_path / "pipeline.state"
    write_state_file(path, {"format": "aqueue.Other", "version": 1}, {})
    with pytest.raises(aqueue.CheckpointError, match=r"holds 'aqueue\.Other'"):
        aqueue.QueueSnapshot.load(path)


def rewrite(path: Path, change: Callable[[dict[str, Any], dict[str, Any]], None]) -> None:
    """Rewrite a snapshot file's header and arrays through the container."""
    header, arrays = read_state_file(path, FORMAT, 1_000)
    change(header, arrays)
    write_state_file(path, header, arrays)


def test_newer_version_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path)
    rewrite(path, lambda h, a: h.update(version=h["version"] + 1))
    with pytest.raises(aqueue.CheckpointError, match=r"newer aqueue.*upgrade"):
        aqueue.QueueSnapshot.load(path)


def _set(key: str, value: Any) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    return lambda h, a: h.update({key: value})


# Each changes a saved file of the ragged padding deque (components: int64 "stacked",
# int64 (None,) "ragged"), or of a shuffle queue with an object component.
INCONSISTENT: dict[str, tuple[str, Callable[[dict[str, Any], dict[str, Any]], None], str]] = {
    "count": ("ragged", _set("count", 8), "c0"),
    "stacked-dtype": ("ragged", lambda h, a: a.update(c0=a["c0"].astype(np.int32)), "int32"),
    "stacked-rows": ("ragged", lambda h, a: a.update(c0=a["c0"][:-1]), "c0"),
    "missing": ("ragged", lambda h, a: a.pop("c1"), "'c1' is missing"),
    "extra": ("ragged", lambda h, a: a.update(zz=np.zeros(1)), "unexpected arrays"),
    "ragged-data": ("ragged", lambda h, a: a.update(c1=a["c1"][:-1]), "c1"),
    "ragged-rank": ("ragged", lambda h, a: a.update(c1_ndim=a["c1_ndim"] * 2), "c1_dims"),
    "negative-dim": (
        "ragged",
        lambda h, a: a.update(c1_dims=-a["c1_dims"].astype(np.int64)),
        "c1_dims",
    ),
    "layout": ("ragged", lambda h, a: h["components"][1].update(layout="stacked"), "layout"),
    "dtype": ("ragged", _set("dtypes", ["<i8", "not-a-dtype"]), "dtypes"),
    "shape": ("ragged", _set("shapes", [[], [None, None]]), "element 0 has shape"),
    "kind": ("ragged", _set("kind", "FIFOQueue"), "None dimensions"),
    "capacity": ("ragged", _set("capacity", "8"), "'capacity' must be int"),
    "closed": ("ragged", _set("closed", 1), "'closed' must be bool"),
    "rng-on-fifo": ("ragged", _set("rng_state", {}), "has no rng_state"),
    "rng-state": ("object", lambda h, a: h["rng_state"].update(state=1), "rng_state"),
    "rng-missing": ("object", _set("rng_state", None), "needs its rng_state"),
    "floor": ("object", _set("min_after_dequeue", 8), "min_after_dequeue must be < capacity"),
    "values": ("object", lambda h, a: h["components"][1]["values"].pop(), "'values' must"),
    "value-type": ("object", lambda h, a: h["components"][1]["values"].__setitem__(0, {}), "keys"),
}


@pytest.mark.parametrize("case", list(INCONSISTENT))
def test_inconsistent_files_are_refused(case: str, tmp_path: Path) -> None:
    """Loading checks the arrays and fields against the header's spec."""
    form, change, message = INCONSISTENT[case]
    path = saved(tmp_path, next(k for k in KINDS if k.form == form))
    aqueue.QueueSnapshot.load(path)  # (fine before the change)
    rewrite(path, change)
    with pytest.raises(aqueue.CheckpointError, match=message) as info:
        aqueue.QueueSnapshot.load(path)
    assert "queue.snap" in str(info.value)


@pytest.mark.parametrize("existing", [False, True], ids=["new", "overwrite"])
def test_save_is_atomic(existing: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save that fails at the last step leaves the target as it was (absent, or the
    previous snapshot) and no temporary file."""
    path = tmp_path / "queue.snap"
    if existing:
        path = saved(tmp_path)
    before = path.read_bytes() if existing else None
    q = aqueue.FIFOQueue(4, np.int64, ())
    q.enqueue_nowait(1)
    snap = q.snapshot()

    def fail(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(aqueue.CheckpointError, match="No space left") as info:
        snap.save(path)
    monkeypatch.undo()
    assert str(info.value) == f"cannot save {path}: No space left on device"
    assert os.listdir(tmp_path) == (["queue.snap"] if existing else [])
    if existing:
        assert path.read_bytes() == before
        assert len(aqueue.QueueSnapshot.load(path)) == 7


async def _three_states() -> dict[str, Any]:
    """A queue snapshot, a replay snapshot and a pipeline state: every kind of state
    file aqueue saves."""
    q = aqueue.FIFOQueue(4, np.int64, ())
    q.enqueue_nowait(1)
    table = aqueue.ReplayTable(4, np.float32, ())
    await table.insert(1.0)
    async with aqueue.Pipeline(range(8)).batch(2).open() as items:
        await items.get()
        state = await items.checkpoint()
    return {"queue": q.snapshot(), "replay": table.snapshot(), "pipeline": state}


@pytest.mark.parametrize("place", ["missing folder", "a directory", "file as folder"])
def test_a_save_the_system_refuses_names_the_path_and_leaves_nothing(
    place: str, tmp_path: Path
) -> None:
    """Saving where no file can be written raises CheckpointError naming the path the
    user gave (never the hidden temporary file), for queue snapshots, replay snapshots
    and pipeline states alike, and leaves no temporary file behind."""
    (tmp_path / "plain").write_bytes(b"x")
    target = {
        "missing folder": tmp_path / "nope" / "x.npz",
        "a directory": tmp_path,
        "file as folder": tmp_path / "plain" / "x.npz",
    }[place]
    reason = {
        "missing folder": f"its folder {target.parent} does not exist",
        "a directory": "it is a directory",
        "file as folder": f"its folder {target.parent} does not exist",
    }[place]
    for what, state in anyio.run(_three_states).items():
        with pytest.raises(aqueue.CheckpointError) as info:
            state.save(target)
        assert str(info.value) == f"cannot save {target}: {reason}", what
        assert ".tmp" not in str(info.value)
        assert sorted(os.listdir(tmp_path)) == ["plain"], what


# -- the file's size ---------------------------------------------------------------------


def test_file_size_is_the_raw_bytes(tmp_path: Path) -> None:
    """Fixed-shape components are stored as one array each, ragged ones flat: the file
    is about the elements' raw bytes."""
    path = tmp_path / "q.snap"
    q = aqueue.FIFOQueue(500, [np.float32, np.uint8], [(64,), (3, 5)])
    q.enqueue_many_nowait((np.ones((500, 64), np.float32), np.ones((500, 3, 5), np.uint8)))
    raw = 500 * (64 * 4 + 15)
    q.snapshot().save(path)
    assert path.stat().st_size <= 1.1 * raw + 4096

    p = aqueue.PaddingFIFOQueue(500, np.int16, [(None,)])
    lengths = np.random.default_rng(1).integers(50, 150, 500)
    for n in lengths:
        p.enqueue_nowait(np.ones(n, np.int16))
    raw = int(lengths.sum()) * 2
    p.snapshot().save(path)
    assert path.stat().st_size <= 1.1 * raw + 4096

    # Short ragged elements: their shapes cost 1-3 bytes each (int8 ranks, narrow dims).
    tokens = aqueue.PaddingFIFOQueue(2000, np.int32, [(None,)])
    lengths = np.random.default_rng(2).integers(1, 12, 2000)
    for n in lengths:
        tokens.enqueue_nowait(np.ones(n, np.int32))
    tokens.snapshot().save(path)
    assert path.stat().st_size <= int(lengths.sum()) * 4 + 3 * 2000 + 4096
