"""The op driver (``aqueue.redis._core._transport.run``): every call runs shielded, so
an op whose rounds make calls only can be cancelled only at the ``Checkpoint`` it
yields; a cancel scope then ends it, on asyncio and trio, and the op undoes first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

pytest.importorskip("redis", reason="aqueue[redis] is not installed")
from aqueue.redis._core._transport import Call, Checkpoint, Op, run

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
