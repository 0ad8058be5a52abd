"""Fixtures of the replay-table tests.

``make_table`` builds an empty table for the contract tests: ``await make_table(max_size,
dtypes, shapes, names, **options)`` with the constructor's options. It is parametrised
over the backends that implement a replay table (the in-process ``aqueue.ReplayTable``
for now); a backend whose tables live elsewhere adds a parameter here, and every
contract test body runs over it unchanged. The bodies therefore use only what every
backend offers: awaited operations, ``await table.statistics()``, the blocking view.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import aqueue

MakeTable = Callable[..., Awaitable[Any]]


@pytest.fixture(params=["in-process"])
def make_table(request: pytest.FixtureRequest) -> MakeTable:
    """A factory of empty tables of one backend."""
    assert request.param == "in-process"

    async def make(
        max_size: int, dtypes: Any, shapes: Any = None, names: Any = None, **options: Any
    ) -> Any:
        return aqueue.ReplayTable(max_size, dtypes, shapes, names, **options)

    return make
