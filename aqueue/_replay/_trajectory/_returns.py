"""n_step_returns: the n-step return and bootstrap discount of sampled windows (numpy).

The convention is that of Reverb's and Acme's n-step adder: ``discounts[k]`` is the
discount *after* step ``k`` (the environment's: 1 while the episode goes on, 0 when
step ``k`` ends it by termination), applied to every reward after ``rewards[k]``. For
``n`` steps::

    R = r[0] + g d[0] r[1] + g^2 d[0] d[1] r[2] + ... + g^(n-1) d[0] ... d[n-2] r[n-1]
    D = g^n d[0] ... d[n-1]

so the n-step target of the window's first step is ``R + D * V(s_n)``, with ``s_n`` the
step after the last reward (a window of ``n + 1`` steps ends there). Acme's
``NStepTransitionAdder`` stores ``D / g`` as the transition's discount because its
learners multiply by ``g`` once more; here ``D`` is the whole bootstrap factor.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from ..._errors import ElementSpecError

__all__ = ["n_step_returns"]

_OWNER = "n_step_returns"


def _series(value: Any, what: str) -> npt.NDArray[Any]:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ElementSpecError(f"{_OWNER}: {what} could not be read as numbers: {exc}") from exc
    if arr.dtype.kind not in "iuf":
        raise ElementSpecError(
            f"{_OWNER}: {what} must hold real numbers (int or float), got dtype {arr.dtype}"
        )
    if arr.ndim not in (1, 2):
        raise ElementSpecError(
            f"{_OWNER}: {what} must be shaped (n, length) (one row per window) or "
            f"(length,) (one window), got shape {arr.shape}"
        )
    return arr


def n_step_returns(
    rewards: Any, discounts: Any, gamma: float
) -> tuple[npt.NDArray[np.floating[Any]], npt.NDArray[np.floating[Any]]]:
    """The n-step return of each window's first step, and its bootstrap discount.

    Every step given counts: for windows of ``n + 1`` steps whose last step is the
    bootstrap state, pass ``rewards[:, :-1]`` and ``discounts[:, :-1]``.

    Args:
        rewards: shaped ``(n, length)``, one row per window (a sample's field), or
            ``(length,)`` for one window; ints or floats.
        discounts: the same shape: ``discounts[..., k]`` is the discount after step
            ``k`` (0 at a terminal step).
        gamma: the agent's discount, a number in [0, 1].

    Returns:
        ``(returns, bootstrap)``, each shaped ``(n,)`` (``()`` for one window), floats
        of the promoted dtype of the inputs (at least float32): ``returns[i] = sum_k
        gamma^k * prod_{j<k} discounts[i, j] * rewards[i, k]`` and ``bootstrap[i] =
        gamma^length * prod_k discounts[i, k]``, so the target is ``returns +
        bootstrap * V(next state)``.

    Raises:
        ElementSpecError: ``rewards`` or ``discounts`` not real numbers, not 1-d or 2-d,
            or of different shapes; ``gamma`` not a number in [0, 1].
    """
    r = _series(rewards, "rewards")
    d = _series(discounts, "discounts")
    if r.shape != d.shape:
        raise ElementSpecError(
            f"{_OWNER}: rewards and discounts must have the same shape, got {r.shape} and {d.shape}"
        )
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
        raise ElementSpecError(f"{_OWNER}: gamma must be a number, got {type(gamma).__name__}")
    g = float(gamma)
    if math.isnan(g) or not 0.0 <= g <= 1.0:
        raise ElementSpecError(f"{_OWNER}: gamma must be in [0, 1], got {gamma!r}")
    dtype = np.result_type(r.dtype, d.dtype, np.float32)
    factor = d.astype(dtype) * dtype.type(g)  # gamma * d[k]: one step of discounting
    reach = np.cumprod(factor, axis=-1)  # gamma^(k+1) * d[0] ... d[k]
    weights = np.empty_like(reach)  # gamma^k * d[0] ... d[k-1]
    weights[..., :1] = 1
    weights[..., 1:] = reach[..., :-1]
    returns = np.asarray((weights * r).sum(axis=-1, dtype=dtype))  # (0-d for one window)
    bootstrap = reach[..., -1].copy() if r.shape[-1] else np.ones(r.shape[:-1], dtype=dtype)
    return returns, bootstrap
