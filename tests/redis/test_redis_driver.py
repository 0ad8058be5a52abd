"""The op driver (``aqueue.redis._core._transport.run``): every call runs shielded, so
an op whose rounds make calls only can be cancelled only at the ``Checkpoint`` it
yields; a cancel scope then ends it, on asyncio and trio, and the op undoes first. A
process's line (``Gate``, ``Ungate``): one turn at a time, given back by the driver
when the op ends, on every way out, in tasks and in threads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

pytest.importorskip("redis", reason="aqueue[redis] is not installed")
from aqueue.redis._core._line import Line
from aqueue.redis._core._transport import Call, Checkpoint, Gate, Op, Ungate, run, run_blocking

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class Shielded:
    """An AsyncTransport whose calls, like the real ones, run to their end shielded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def call(self, call: Call) -> Any:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.001)
        self.calls.append(call.fn)
        return 0

    async def read(self, keys: Sequence[str]) -> list[Any]:
        raise AssertionError("not used")

    async def wait(self, key: str, seconds: float) -> bytes | None:
        raise AssertionError("not used")

    async def aclose(self) -> None:
        pass


def looping() -> Op[None]:
    """Rounds of calls that never wait (a sharded op starting over after a race),
    which give back what they hold when they leave."""
    try:
        while True:
            yield Checkpoint()  # (without it, the op below loops forever)
            yield Call("take", "k", [])
    except BaseException:
        yield Call("leave", "k", [])
        raise


async def test_a_cancel_scope_ends_an_op_whose_rounds_only_call() -> None:
    transport = Shielded()
    with anyio.fail_after(5):
        with anyio.move_on_after(0.05) as scope:
            await run(looping(), transport)
    assert scope.cancelled_caught
    assert transport.calls[-1] == "leave"  # it undid before it left
    assert transport.calls.count("leave") == 1


# -- a process's line (Gate, Ungate) ------------------------------------------------------


def in_line(line: Line, seen: list[str], name: str, fail: bool = False) -> Op[None]:
    """Take the turn at ``line`` (waiting up to 5 s), call once, then end: normally, or
    with an error (the driver gives the turn back either way)."""
    got = yield Gate(line, 5.0)
    seen.append(f"{name}:{got}")
    yield Call(name, "k", [])
    if fail:
        raise RuntimeError("the op failed")


def try_line(line: Line, seen: list[str]) -> Op[None]:
    """Ask for the turn without waiting, then give it back early (``Ungate``)."""
    got = yield Gate(line, 0)
    seen.append(f"try:{got}")
    yield Ungate(line)
    seen.append(f"after:{(yield Gate(line, 0))}")


async def test_a_line_gives_one_turn_at_a_time_and_the_driver_gives_it_back() -> None:
    line, seen, transport = Line(), [], Shielded()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, in_line(line, seen, "first"), transport)
            await anyio.wait_all_tasks_blocked()  # (first holds the turn, in its call)
            await run(try_line(line, seen), transport)  # busy: no turn now
            tg.start_soon(run, in_line(line, seen, "second"), transport)
        assert seen[:2] == ["first:True", "try:False"]
        with pytest.raises(RuntimeError):
            await run(in_line(line, seen, "third", fail=True), transport)
        await run(try_line(line, seen), transport)  # free again after the failed op
    assert seen[2:] == ["after:False", "second:True", "third:True", "try:True", "after:True"]


async def test_a_wait_in_line_ends_at_its_timeout_or_its_cancel_scope() -> None:
    line, seen = Line(), []

    class Slow(Shielded):
        async def call(self, call: Call) -> Any:
            await anyio.sleep(0.5 if call.fn == "hold" else 0)
            return 0

    def holder() -> Op[None]:
        seen.append(f"holder:{(yield Gate(line, 0))}")
        yield Call("hold", "k", [])

    def waiter(seconds: float) -> Op[None]:
        seen.append(f"waiter:{(yield Gate(line, seconds))}")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, holder(), Slow())
            await anyio.wait_all_tasks_blocked()
            await run(waiter(0.05), Slow())  # the turn is held: its timeout ends it
            with anyio.move_on_after(0.05) as scope:
                await run(waiter(10), Slow())  # ended by its scope while in line
            assert scope.cancelled_caught
        await run(waiter(0), Slow())  # the holder's op ended: the turn is free
    assert seen == ["holder:True", "waiter:False", "waiter:True"]


def test_the_thread_driver_gives_one_turn_at_a_time() -> None:
    import threading

    line, seen = Line(), []
    inside = threading.Event()
    leave = threading.Event()

    class Blocking:
        def call(self, call: Call) -> Any:
            if call.fn == "first":
                inside.set()
                leave.wait(5)
            return 0

    first = threading.Thread(target=run_blocking, args=(in_line(line, seen, "first"), Blocking()))
    first.start()
    assert inside.wait(5)
    run_blocking(try_line(line, seen), Blocking())  # type: ignore[arg-type]
    leave.set()
    first.join(5)
    run_blocking(try_line(line, seen), Blocking())  # type: ignore[arg-type]
    assert seen == ["first:True", "try:False", "after:False", "try:True", "after:True"]
