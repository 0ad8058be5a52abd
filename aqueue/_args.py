"""Argument checks shared by the constructors and functions of aqueue.

Each check raises ElementSpecError naming the owner, the argument, what was expected and
what was given, and returns the normalised value.
"""

from __future__ import annotations

import numbers
from typing import Any

from ._errors import ElementSpecError

__all__ = ["epochs_arg", "int_arg", "name_arg", "seed_arg"]


def int_arg(value: Any, what: str, owner: str, minimum: int) -> int:
    """``value`` as an int >= ``minimum`` (bools are refused; numpy integers accepted)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ElementSpecError(f"{owner}: {what} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ElementSpecError(f"{owner}: {what} must be >= {minimum}, got {value}")
    return int(value)


def epochs_arg(num_epochs: Any, owner: str) -> int | None:
    """None (no limit) or a number of epochs >= 1."""
    return None if num_epochs is None else int_arg(num_epochs, "num_epochs", owner, 1)


def seed_arg(seed: Any, owner: str) -> int | None:
    """None (fresh entropy) or a seed >= 0."""
    return None if seed is None else int_arg(seed, "seed", owner, 0)


def name_arg(name: Any, default: str, what: str = "name") -> str:
    """``default`` when ``name`` is None, else ``name``, which must be a str."""
    if name is None:
        return default
    if not isinstance(name, str):
        raise ElementSpecError(f"{what} must be a str, got {type(name).__name__}")
    return name
