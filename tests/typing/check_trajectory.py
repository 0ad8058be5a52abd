"""Checked by mypy (``mypy aqueue tests/typing``), never run: the types of the trajectory
helpers (``aqueue.n_step_returns``).

Each ``assert_type`` holds only if mypy infers exactly that type; the lines marked
``# type: ignore[...]`` must be errors (``warn_unused_ignores`` makes an unneeded one
an error itself), so a result that became ``Any`` fails here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import aqueue

Floats = npt.NDArray[np.floating[Any]]


def returns() -> None:
    rewards = np.ones((32, 3), np.float32)
    ret, boot = aqueue.n_step_returns(rewards, np.ones((32, 3), np.float32), 0.99)
    assert_type(ret, Floats)
    assert_type(boot, Floats)
    target = ret + boot * np.ones(32, np.float32)
    print(target)


def rejected() -> None:
    aqueue.n_step_returns([1.0], [1.0], "0.99")  # type: ignore[arg-type]
    one: float = aqueue.n_step_returns([1.0], [1.0], 0.9)  # type: ignore[assignment]
    print(one)
