"""The live line of ``Monitor(live=True)``: one terminal line, redrawn every sample.

Built on tqdm (the ``aqueue[live]`` extra), which owns the line: it redraws it in place,
fits it to the terminal's width, and keeps it below text printed with ``tqdm.write``.
Only ever shown when standard output is a terminal: otherwise ``open_live`` returns
None and nothing is written (a log file or CI output gets no control characters).
The line reads::

    aqueue 12.3 s | 3,146 items/s | fill: replay 10%, batches 3% | input-bound 97%

items/s: elements per second the body took from its input queues over the last
interval; fill: each queue's size over its capacity; input-bound: the share of the last
interval the body spent waiting for input. Each replay table adds its part: its fill,
items inserted and sampled per second, and the share of the interval each side was
held back by the rate limiter::

    transitions 100% full, 1,236 inserts/s (held 41%), 4,944 samples/s (held 2%)

The block's final sample turns the line into a summary of the block: its length, and
items/s, input-bound and each table's rates and held-back shares averaged over it::

    aqueue done in 3.1 s | 3,115 items/s on average | fill: replay 10% | input-bound 97% overall
"""

from __future__ import annotations

import math
import sys
from typing import Any, TextIO

from ._samples import MonitorReading

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


TableFigures = tuple[float, float, float, float]
"""A table's inserts/s, samples/s, and the shares inserts and samples were held back."""


def _table_part(name: str, fill: float, figures: TableFigures) -> str:
    ins, smp, ins_held, smp_held = figures
    text = f"{name} {fill:.0%} full"
    if not math.isnan(ins):
        text += f", {ins:,.0f} inserts/s (held {ins_held:.0%}), {smp:,.0f} samples/s"
        text += f" (held {smp_held:.0%})"
    return text


def format_line(
    sample: MonitorReading,
    block: tuple[float, float | None, float | None] | None = None,
    tables: dict[str, TableFigures] | None = None,
) -> str:
    """The text of the live line for ``sample`` (see the module docstring); with
    ``block`` (seconds, items/s, input-bound over the block) and ``tables`` (each
    table's figures over the block), the closing summary."""
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
    for name, t in sample.tables.items():
        figures = (t.insert_rate, t.sample_rate, t.insert_blocked, t.sample_blocked)
        if tables is not None and name in tables:
            figures = tables[name]
        parts.append(_table_part(name, t.fraction_full, figures))
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
        # per table: seconds measured, items inserted and sampled, seconds each side held
        self._tables: dict[str, list[float]] = {}

    def show(self, sample: MonitorReading) -> None:
        dt = sample.interval_s
        self._seconds += dt
        items, bound = sample.items_per_s, sample.input_bound
        if bound is not None and items is not None and not math.isnan(items):
            self._items += items * dt
            self._waited += bound * dt
            self._measured += dt
        for name, t in sample.tables.items():
            if not math.isnan(t.insert_rate):
                acc = self._tables.setdefault(name, [0.0] * 5)
                acc[0] += dt
                acc[1] += t.insert_rate * dt
                acc[2] += t.sample_rate * dt
                acc[3] += t.insert_blocked * dt
                acc[4] += t.sample_blocked * dt
        block = None
        tables = None
        if sample.final:
            m = self._measured
            block = (
                self._seconds,
                self._items / m if m > 0 else None,
                self._waited / m if m > 0 else None,
            )
            tables = {
                name: (acc[1] / acc[0], acc[2] / acc[0], acc[3] / acc[0], acc[4] / acc[0])
                for name, acc in self._tables.items()
                if acc[0] > 0
            }
        self._bar.set_description_str(format_line(sample, block, tables), refresh=True)

    def close(self) -> None:
        self._bar.close()
