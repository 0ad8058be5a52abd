"""A failing stage, seen from the consumer: the iteration raises the stage's error.

Whatever stage raises (a source of any kind, a filter, a map on tasks, threads or
processes, a shuffle, a batch, a prefetch, a ``to_queue``), the consumer first receives
every item that had passed the failing stage, and then its read (``async for``,
``items.get()``, ``pipe.run()``) raises the stage's own exception, with the note naming
the stage, before any code after the loop runs. The block's exit then raises nothing
new: the same exception object goes on (or, when the body caught it and finished,
nothing). Every test runs on asyncio and on trio.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import proc_fns
import pytest
from support import notes

import aqueue
from aqueue import ElementSpecError, FIFOQueue, OutOfRangeError, Pipeline
from aqueue._pipeline.flow import _control

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@dataclass
class Outcome:
    """What a consumer saw of one run."""

    items: list[Any] = field(default_factory=list)
    in_loop: BaseException | None = None  # what the `async for` raised
    after_loop: bool = False  # code after the loop ran
    left_with: BaseException | None = None  # what left `async with pipe.open()`


async def consume(pipe: Pipeline[Any]) -> Outcome:
    """Read ``pipe`` as a training loop does, recording where an error showed."""
    out = Outcome()
    try:
        with anyio.fail_after(30):
            async with pipe.open() as items:
                try:
                    async for x in items:
                        out.items.append(x)
                except Exception as exc:
                    out.in_loop = exc
                    raise
                out.after_loop = True
    except Exception as exc:
        out.left_with = exc
    return out


def raised_in_the_loop(out: Outcome, kind: type[BaseException], stage: str) -> BaseException:
    """The loop raised the stage's error (noted with the stage), nothing after the loop
    ran, and the same object left the block."""
    assert out.in_loop is not None, f"the loop ended quietly after {len(out.items)} items"
    assert not out.after_loop
    assert isinstance(out.in_loop, kind), repr(out.in_loop)
    assert out.left_with is out.in_loop
    assert f"pipeline stage {stage}" in notes(out.in_loop)
    return out.in_loop


def failing_source(n: int) -> Iterator[int]:
    yield from range(n)
    raise OSError("disk gone")


class FailingAsyncSource:
    def __init__(self, n: int) -> None:
        self.next = 0
        self.n = n

    def __aiter__(self) -> FailingAsyncSource:
        return self

    async def __anext__(self) -> int:
        if self.next == self.n:
            raise OSError("stream broke")
        self.next += 1
        return self.next - 1


def fail_at_5(x: int) -> int:
    if x == 5:
        raise ValueError(f"bad item {x}")
    return x


async def afail_at_5(x: int) -> int:
    return fail_at_5(x)


# -- sources -------------------------------------------------------------------------------


@pytest.mark.parametrize("after", ["", "map", "prefetch", "batch"])
async def test_a_failing_sync_source(after: str) -> None:
    """A generator that yields 0..4 and raises: the consumer gets 0..4 (batched: the
    full batches and the smaller last one), then OSError in the loop."""
    pipe: Pipeline[Any] = Pipeline(failing_source(5))
    if after == "map":
        pipe = pipe.map(operator.neg)
    elif after == "prefetch":
        pipe = pipe.prefetch(2)
    elif after == "batch":
        pipe = pipe.batch(2, allow_smaller_final_batch=True)
    out = await consume(pipe)
    raised_in_the_loop(out, OSError, "0 'from_iterable(generator)'")
    if after == "batch":
        assert [b.tolist() for b in out.items] == [[0, 1], [2, 3], [4]]
    elif after == "map":
        assert out.items == [0, -1, -2, -3, -4]
    else:
        assert out.items == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("after", ["", "map"])
async def test_a_failing_async_source(after: str) -> None:
    pipe: Pipeline[Any] = Pipeline.from_async_iterable(FailingAsyncSource(4))
    if after:
        pipe = pipe.map(afail_at_5, concurrency=2, ordered=True)
    out = await consume(pipe)
    raised_in_the_loop(out, OSError, "0 'from_async_iterable(FailingAsyncSource)'")
    assert out.items == [0, 1, 2, 3]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_failing_producer(kind: str) -> None:
    count = iter(range(100))

    def produce() -> int:
        x = next(count)
        if x == 3:
            raise OSError("sensor gone")
        return x

    async def aproduce() -> int:
        return produce()

    fn: Callable[[], Any] = produce if kind == "sync" else aproduce
    out = await consume(Pipeline.from_producer(fn).prefetch(2))
    raised_in_the_loop(out, OSError, "0 'from_producer(")
    assert out.items == [0, 1, 2]


# -- filter, map, batch --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_failing_filter(kind: str) -> None:
    def keep(x: int) -> bool:
        return fail_at_5(x) % 2 == 0

    async def akeep(x: int) -> bool:
        return keep(x)

    out = await consume(Pipeline(range(20)).filter(keep if kind == "sync" else akeep).prefetch(2))
    raised_in_the_loop(out, ValueError, "1 'filter(")
    assert out.items == [0, 2, 4]


@pytest.mark.parametrize("executor", ["task", "thread", "process"])
@pytest.mark.parametrize("after", ["", "prefetch", "batch", "batch-drop"])
async def test_a_failing_map(executor: str, after: str) -> None:
    """A one-worker map raising on item 7 (process: fail_at_7 in the worker): every item
    before it reaches the consumer (in batches after ``batch``: the smaller last one,
    or none with a batch that drops its remainder), then ValueError in the loop."""
    if executor == "task":
        fn: Any = afail_at_5
        bad = 5
    elif executor == "thread":
        fn, bad = fail_at_5, 5
    else:
        fn, bad = proc_fns.fail_at_7, 7
    pipe: Pipeline[Any] = Pipeline(range(50)).map(
        fn, executor="process" if executor == "process" else None
    )
    if after == "prefetch":
        pipe = pipe.prefetch(3)
    elif after == "batch":
        pipe = pipe.batch(2, allow_smaller_final_batch=True)
    elif after == "batch-drop":
        pipe = pipe.batch(2)
    out = await consume(pipe)
    err = raised_in_the_loop(out, ValueError, "1 'map(")
    assert f"bad item {bad}" in str(err)
    if after.startswith("batch"):
        want = [[i, i + 1] for i in range(0, bad - 1, 2)]
        if bad % 2 and after == "batch":
            want.append([bad - 1])
        assert [b.tolist() for b in out.items] == want
    else:
        assert out.items == list(range(bad))


@pytest.mark.parametrize("executor", ["thread", "process"])
async def test_a_failing_map_with_several_workers(executor: str) -> None:
    """Four workers, completion order: the error reaches the loop; whatever the map
    had handed on before it was delivered (the last stage's count says how many)."""
    fn = proc_fns.fail_at_7
    pipe = (
        Pipeline(range(200))
        .map(fn, concurrency=4, executor="process" if executor == "process" else None)
        .prefetch(4)
    )
    out = await consume(pipe)
    raised_in_the_loop(out, ValueError, "1 'map(fail_at_7)'")
    assert 7 not in out.items
    assert len(out.items) == pipe.statistics()[-1].items_out


async def test_a_failing_batch() -> None:
    """Items of a new shape at item 5: the batches before it, then ElementSpecError."""

    def shaped(x: int) -> np.ndarray:
        return np.zeros(3 if x == 5 else 2) + x

    out = await consume(Pipeline(range(20)).map(shaped).batch(2).prefetch(2))
    raised_in_the_loop(out, ElementSpecError, "2 'batch(2)'")
    assert [b[:, 0].tolist() for b in out.items] == [[0, 1], [2, 3]]


# -- any stage kind ------------------------------------------------------------------------


@pytest.fixture
def fault(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, int], None]:
    """``fault(label, n)``: the stage labelled ``label`` raises OSError at the start of
    its ``n``-th burst (the stages with no user code of their own, shuffle and
    prefetch, cannot fail otherwise)."""

    def arm(label: str, n: int) -> None:
        calls = [0]
        thread_start, task_start = _control.Stage.start_thread, _control.Stage.start_task

        def trip(stage: _control.Stage) -> None:
            if stage.label.endswith(f"'{label}'"):
                calls[0] += 1
                if calls[0] == n:
                    raise OSError(f"stage {label} broke")

        def start_thread(stage: _control.Stage, slot: int = 0) -> None:
            trip(stage)
            thread_start(stage, slot)

        async def start_task(stage: _control.Stage, slot: int = 0) -> None:
            trip(stage)
            await task_start(stage, slot)

        monkeypatch.setattr(_control.Stage, "start_thread", start_thread)
        monkeypatch.setattr(_control.Stage, "start_task", start_task)

    return arm


@pytest.mark.parametrize(
    ("label", "build"),
    [
        ("shuffle", lambda p: p.shuffle(capacity=8, min_after_dequeue=2, seed=1)),
        ("prefetch(2)", lambda p: p.prefetch(2)),
        ("batch(3)", lambda p: p.batch(3)),
        ("map(neg)", lambda p: p.map(operator.neg, concurrency=2)),
        ("filter(truth)", lambda p: p.filter(operator.truth)),
    ],
    ids=["shuffle", "prefetch", "batch", "map", "filter"],
)
async def test_any_stage_kind(
    fault: Callable[[str, int], None], label: str, build: Callable[[Pipeline[Any]], Any]
) -> None:
    """A stage that raises after handing on some bursts: the loop raises its error
    after the items it had handed on (the last stage's count)."""

    async def slow(x: int) -> int:
        await anyio.lowlevel.checkpoint()
        return x

    fault(label, 3)
    pipe = build(Pipeline(range(1, 200)).map(slow, name="feed")).prefetch(1, name="last")
    out = await consume(pipe)
    raised_in_the_loop(out, OSError, f"2 '{label}'")
    assert f"stage {label} broke" in str(out.in_loop)
    assert len(out.items) == pipe.statistics()[-1].items_out


# -- other ways of reading ------------------------------------------------------------------


async def test_get_raises_the_error_after_the_items() -> None:
    """items.get(): 0..4, then the source's OSError (not OutOfRangeError), and the same
    object again at each later read and when the block is left."""
    raised: list[BaseException] = []

    async def read() -> None:
        async with Pipeline(failing_source(5)).map(operator.neg).open() as items:
            assert [await items.get() for _ in range(5)] == [0, -1, -2, -3, -4]
            for _ in range(2):
                try:
                    await items.get()
                except OSError as exc:
                    raised.append(exc)
            await items.get()

    with pytest.raises(OSError, match="disk gone") as info:
        await read()
    assert len(raised) == 2
    assert raised[0] is raised[1] is info.value
    assert not isinstance(info.value, OutOfRangeError)


async def test_a_caught_error_is_not_raised_again_at_exit() -> None:
    """The body catches the stage's error and finishes (with awaits: the body is not
    cancelled by the failure): leaving the block raises nothing."""
    done = []
    async with Pipeline(failing_source(3)).prefetch(2).open() as items:
        try:
            async for _ in items:
                pass
        except OSError:
            await anyio.lowlevel.checkpoint()
            done.append("handled")
    assert done == ["handled"]


async def settle_tasks() -> None:
    """Let the event loop run a while (an async source's failure is a task's)."""
    for _ in range(200):
        await anyio.lowlevel.checkpoint()


async def test_an_unread_failure_is_raised_at_exit() -> None:
    """The body leaves the block without reading up to the failure: the block raises it
    when it is left."""
    pipe = Pipeline.from_async_iterable(FailingAsyncSource(0)).prefetch(2)
    with pytest.raises(OSError, match="stream broke"):
        async with pipe.open():
            await settle_tasks()


async def test_the_bodys_own_error_wins_over_an_unread_failure() -> None:
    """The body raises its own error while a stage failure is unread: the body's error
    leaves the block, with a note naming the pipeline's."""
    pipe = Pipeline.from_async_iterable(FailingAsyncSource(0)).prefetch(2)

    async def body() -> None:
        async with pipe.open():
            await settle_tasks()
            raise KeyError("the body's own")

    with pytest.raises(KeyError) as info:
        await body()
    assert "stream broke" in notes(info.value)


async def test_run_raises_the_error() -> None:
    """pipe.run(): the stage's error, with its note."""
    with pytest.raises(ValueError, match="bad item 5") as info:
        await Pipeline(range(20)).map(fail_at_5).run()
    assert "pipeline stage 1 'map(fail_at_5)'" in notes(info.value)


async def test_to_queue_raises_the_error_in_run_and_in_the_loop() -> None:
    """A to_queue stage whose target refuses an item: run() raises the target's
    ElementSpecError, and so does an iteration of open(); the items before it were
    sent."""

    def item(x: int) -> Any:
        return "not a number" if x == 6 else x

    for how in ("run", "loop"):
        q = FIFOQueue(100, np.int64, ())
        pipe = Pipeline(range(20)).map(item).to_queue(q)
        if how == "run":
            with pytest.raises(ElementSpecError) as info:
                await pipe.run()
            err: BaseException = info.value
        else:
            out = await consume(pipe)
            err = raised_in_the_loop(out, ElementSpecError, "2 'to_queue(")
            assert out.items == []
        assert "to_queue" in notes(err)
        sent = []
        while q.size():
            sent.append(int(q.dequeue_nowait()))
        assert sent == list(range(6))[: len(sent)]


async def test_inside_a_users_coordinator() -> None:
    """pipe.open(coord): the loop raises the error too, which then leaves the
    coordinator's block as any body error does."""
    pipe = Pipeline(failing_source(4)).prefetch(2)
    seen: list[int] = []
    caught: list[BaseException] = []

    async def body() -> None:
        async with aqueue.Coordinator() as coord, pipe.open(coord) as items:
            try:
                async for x in items:
                    seen.append(x)
            except OSError as exc:
                caught.append(exc)
                raise

    with pytest.raises(OSError, match="disk gone") as info:
        await body()
    assert caught == [info.value]
    assert seen == [0, 1, 2, 3]


async def test_a_failure_during_a_checkpoint_is_raised_by_it() -> None:
    """checkpoint() of a run whose stage has failed raises the stage's error."""

    class Resumable:
        def __init__(self) -> None:
            self.at = 0

        def __iter__(self) -> Iterator[int]:
            return self

        def __next__(self) -> int:
            self.at += 1
            if self.at > 2:
                raise OSError("disk gone")
            return self.at

        def state(self) -> dict[str, int]:
            return {"at": self.at}

        def restore(self, state: dict[str, int]) -> None:
            self.at = state["at"]

    async def checkpoints() -> None:
        async with Pipeline(Resumable()).prefetch(2).open() as items:
            assert await items.get() == 1
            assert await items.get() == 2
            with anyio.fail_after(10):
                while True:
                    await items.checkpoint()
                    await anyio.sleep(0.01)

    with pytest.raises(OSError, match="disk gone"):
        await checkpoints()


async def test_an_item_a_process_map_cannot_send() -> None:
    """An item that does not pickle: the items before it come out, in order, then the
    loop raises ElementSpecError naming it."""
    lock = threading.Lock()

    def item(i: int) -> Any:
        return lock if i == 20 else i

    pipe = Pipeline(range(40)).map(item).map(proc_fns.jitter, executor="process")
    out = await consume(pipe)
    err = raised_in_the_loop(out, ElementSpecError, "2 'map(jitter)'")
    assert "_thread.lock" in str(err)
    assert out.items == list(range(len(out.items)))
    assert len(out.items) <= 20
