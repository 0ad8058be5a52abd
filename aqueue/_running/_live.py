"""The live line of ``Monitor(live=True)``: one terminal line, redrawn every sample.

Built on tqdm (the ``aqueue[live]`` extra), which owns the line: it redraws it in place,
fits it to the terminal's width, and keeps it below text printed with ``tqdm.write``.
Only ever shown when standard output is a terminal: otherwise ``open_live`` returns
None and nothing is written (a log file or CI output gets no control characters).
The line reads::

    aqueue 12.3 s | 3,146 items/s | fill: replay 10%, batches 3% | input-bound 97%

items/s: elements per second the body took from its input queues over the last
interval; fill: each queue's size over its capacity; input-bound: the share of the last
interval the body spent waiting for input. The block's final sample turns the line into
a summary of the block: its length, and items/s and input-bound averaged over it::

    aqueue done in 3.1 s | 3,115 items/s on average | fill: replay 10% | input-bound 97% overall
"""

from __future__ import annotations

import math
import sys
from typing import Any, TextIO

from ._samples import MonitorSample

__all__ = ["LiveLine", "check_live", "format_line", "open_live"]

_MISSING = "Monitor(live=True) needs tqdm: pip install 'aqueue[live]'"


def _is_tty(stream: TextIO | None) -> bool:
    isatty = getattr(stream, "isatty", None)
    if isatty is None:
        return False
    try:
        return bool(isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


def _tqdm() -> Any:
    try:
        from tqdm import tqdm
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    return tqdm


def check_live() -> None:
    """Raise ImportError naming the extra if a live line would be shown but cannot be."""
    if _is_tty(sys.stdout):
        _tqdm()


def open_live() -> LiveLine | None:
    """A live line on standard output, or None when it is not a terminal."""
    stream = sys.stdout
    if not _is_tty(stream):
        return None
    return LiveLine(stream)


def format_line(
    sample: MonitorSample, block: tuple[float, float | None, float | None] | None = None
) -> str:
    """The text of the live line for ``sample`` (see the module docstring); with
    ``block`` (seconds, items/s, input-bound over the block), the closing summary."""
    items, bound = sample.items_per_s, sample.input_bound
    if block is None:
        parts = [f"aqueue {sample.time_s:.1f} s"]
        items_text, bound_text = "items/s", "input-bound {:.0%}"
    else:
        seconds, items, bound = block
        parts = [f"aqueue done in {seconds:.1f} s"]
        items_text, bound_text = "items/s on average", "input-bound {:.0%} overall"
    if items is not None and not math.isnan(items):
        parts.append(f"{items:,.0f} {items_text}")
    if sample.queues:
        fills = ", ".join(f"{q.name} {q.fraction_full:.0%}" for q in sample.queues.values())
        parts.append(f"fill: {fills}")
    if bound is not None:
        parts.append(bound_text.format(bound))
    if sample.missing:
        parts.append(f"no answer: {', '.join(sample.missing)}")
    return " | ".join(parts)


class LiveLine:
    """One tqdm line showing the latest sample, then a summary of the block."""

    def __init__(self, stream: TextIO) -> None:
        self._bar: Any = _tqdm()(
            bar_format="{desc}", file=stream, leave=True, dynamic_ncols=True, mininterval=0
        )
        self._seconds = 0.0  # the block so far
        self._items = 0.0  # elements taken from the input queues
        self._waited = 0.0  # seconds the body waited for input
        self._measured = 0.0  # seconds with an input queue read

    def show(self, sample: MonitorSample) -> None:
        dt = sample.interval_s
        self._seconds += dt
        items, bound = sample.items_per_s, sample.input_bound
        if bound is not None and items is not None and not math.isnan(items):
            self._items += items * dt
            self._waited += bound * dt
            self._measured += dt
        block = None
        if sample.final:
            m = self._measured
            block = (
                self._seconds,
                self._items / m if m > 0 else None,
                self._waited / m if m > 0 else None,
            )
        self._bar.set_description_str(format_line(sample, block), refresh=True)

    def close(self) -> None:
        self._bar.close()
