"""Opening a trajectory table on the server, sans I/O, and the handle its operations
share (``TrajHandle``).

A trajectory table is a replay table of kind ``traj`` whose items are windows of steps
(``_functions.lua`` of this folder): its settings are checked as the in-process
``aqueue.TrajectoryTable``'s (``step_settings`` for the steps and windows,
``table_settings`` for the items: one int64 row of ``length`` step ids each, at most
``capacity`` of them), stored by the first process that opens its name and compared by
every later one (the core's ``open_shared``, through ``rt_open``).

Invariant: a trajectory table's stored settings are its kind, max_steps, the steps'
dtypes, shapes and names, length, stride, sampler, remover, max_times_sampled, rate
limiter and the key layout's format, in that order (``rt_open``'s ``TT_SETTINGS``); the
items' cap is derived from them and stored after what the Lua reads of the rest.
"""

from __future__ import annotations

from typing import Any

from aqueue._replay._checks import TableSettings
from aqueue._replay._limiter import MinSize
from aqueue._replay._selectors import Fifo, Uniform
from aqueue._replay._trajectory._checks import (
    StepArgs,
    StepSettings,
    step_settings,
    window_settings,
)

from ..._core._codec import Codec
from ..._core._handle import Product
from ..._core._shared import open_shared
from ..._core._spec import make_spec, name_arg
from ..._core._transport import Op
from .._handle import TABLES, TableHandle
from .._open import RENDER, derived, stored_fields, stored_selection

__all__ = ["TRAJECTORIES", "TrajHandle", "open_trajectory"]

TRAJECTORIES = Product(
    functions=TABLES.functions, noun="trajectory table", short="table", format=TABLES.format
)
"""The trajectory tables: the replay tables' functions (``rt_*``; ``tt_*`` for what only
they have) and key layout, under their own noun."""

_SAME = (
    "settings: max_steps, dtypes, shapes, names, length, stride, sampler, remover, "
    "max_times_sampled and rate_limiter"
)


class TrajHandle(TableHandle):
    """A table handle for the items (the windows: rows of step ids) plus the steps'
    settings, their checks and their codec."""

    def __init__(
        self,
        *,
        name: str,
        gen: str,
        settings: TableSettings,
        steps: StepSettings,
        wait_timeout: float,
        lease_time: float,
    ) -> None:
        super().__init__(
            name=name,
            gen=gen,
            settings=settings,
            wait_timeout=wait_timeout,
            lease_time=lease_time,
        )
        self.product = TRAJECTORIES
        self.steps = steps
        self.step_args = StepArgs(steps, settings.limit)
        self.step_codec = Codec(steps.spec, name)


def open_trajectory(
    name: Any,
    max_steps: Any,
    dtypes: Any,
    shapes: Any = None,
    names: Any = None,
    *,
    length: Any,
    stride: Any = 1,
    sampler: Any = Uniform(),  # noqa: B008 - frozen, shared safely
    remover: Any = Fifo(),  # noqa: B008
    max_times_sampled: Any = 0,
    rate_limiter: Any = MinSize(1),  # noqa: B008
    seed: Any = None,
    wait_timeout: float,
    lease_time: float,
) -> Op[TrajHandle]:
    """``rt_open`` of kind ``traj``: create the trajectory table ``name`` (arguments as
    ``aqueue.TrajectoryTable``'s), or check that the one stored has these settings.

    Raises:
        ElementSpecError: A bad argument (as in process), a dtype AQ1 cannot carry, or
            a table or queue of that name exists with other settings (the message names
            the first field that differs, the stored and the given value).
    """
    name = name_arg(name, "RedisTrajectoryTable", "table name")
    owner = f"RedisTrajectoryTable '{name}'"
    st = step_settings(owner, max_steps, dtypes, shapes, names, length=length, stride=stride)
    settings = window_settings(
        st,
        sampler=sampler,
        remover=remover,
        max_times_sampled=max_times_sampled,
        rate_limiter=rate_limiter,
        seed=seed,
    )
    make_spec(owner, dtypes, shapes, names)  # (refuses what AQ1 cannot carry)
    given = {
        "kind": "traj",
        "max_steps": str(st.max_steps),
        **stored_fields(st.spec, st.shapes),
        "length": str(st.length),
        "stride": str(st.stride),
        **stored_selection(settings),
    }
    gen = yield from open_shared(
        TRAJECTORIES,
        name,
        owner,
        given,
        [*derived(settings), str(st.capacity)],
        same=_SAME,
        render=RENDER,
    )
    return TrajHandle(
        name=name,
        gen=gen,
        settings=settings,
        steps=st,
        wait_timeout=wait_timeout,
        lease_time=lease_time,
    )
