"""``Monitor.plot``: a PNG of a run for someone who has never seen aqueue.

Panels, sharing the time axis (seconds since the monitor started):

1. Queue fill: each queue's size as a percentage of its capacity (TF's
   ``fraction_of_N_full``); a dotted line marks a shuffle queue's ``min_after_dequeue``,
   the fill below which consumers cannot take anything while it is open.
2. Throughput: elements per second put into (dashed) and taken out of (solid) each
   queue, averaged over each sampling interval.
3. Pipeline stages, when attached: items per second and busy percentage per stage.
4. Input-bound: the percentage of each interval the consumer spent waiting on an empty
   input queue.

Intervals in which the consumer waited for more than half the time are shaded red in
every panel: there, the run was input-bound. A caption under the panels says so.
matplotlib is imported here only, drawing on an Agg canvas (no display, no pyplot
state); it is the ``aqueue[plot]`` extra.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._samples import Floats, MonitorHistory

__all__ = ["plot_history"]

_MISSING = "Monitor.plot needs matplotlib: pip install 'aqueue[plot]'"
_SHADE = "#d62728"
_BOUND = 0.5  # shade intervals in which the consumer waited for more than this fraction

_CAPTION = (
    "How to read it: a queue near 100% full means its producers are ahead and the consumer "
    "sets the pace;\na queue near empty (or at its dotted min_after_dequeue floor) with red "
    "shading means the consumer waited for data there: the run was input-bound."
)


def _spans(h: MonitorHistory) -> list[tuple[float, float]]:
    """Merged (start, end) times of the intervals in which the body mostly waited."""
    starts = h.times_s - h.interval_s
    spans: list[tuple[float, float]] = []
    for i in np.flatnonzero(np.nan_to_num(h.input_bound) > _BOUND):
        a, b = float(starts[i]), float(h.times_s[i])
        if spans and a <= spans[-1][1] + 1e-9:
            spans[-1] = (spans[-1][0], b)
        else:
            spans.append((a, b))
    return spans


def _points(h: MonitorHistory, y: Floats) -> tuple[Floats, Floats]:
    """x, y of a line through the samples, not joined across coordinator blocks."""
    xs: list[float] = []
    ys: list[float] = []
    for i in range(len(h)):
        xs.append(float(h.times_s[i]))
        ys.append(float(y[i]))
        if h.final[i]:
            xs.append(float("nan"))
            ys.append(float("nan"))
    return np.array(xs), np.array(ys)


def _stairs(h: MonitorHistory, y: Floats) -> tuple[Floats, Floats]:
    """x, y of a line drawing each value as flat over its interval (ending at its
    sample), not joined across coordinator blocks."""
    end = h.times_s
    start = end - h.interval_s
    xs: list[float] = []
    ys: list[float] = []
    for i in range(len(end)):
        xs += [float(start[i]), float(end[i])]
        ys += [float(y[i])] * 2
        if h.final[i]:
            xs.append(float("nan"))
            ys.append(float("nan"))
    return np.array(xs), np.array(ys)


def _step(ax: Any, h: MonitorHistory, y: Floats, **kw: Any) -> None:
    """A rate averaged over each interval, drawn flat over that interval."""
    ax.plot(*_stairs(h, y), **kw)


def _rate_limits(ax: Any, arrays: list[Floats]) -> None:
    """From 0 to a little above the highest rate, so a flat line never hides under the
    frame."""
    top = max((float(np.nanmax(a)) for a in arrays if np.isfinite(a).any()), default=0.0)
    ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)


def _overall(h: MonitorHistory) -> str:
    ok = ~np.isnan(h.input_bound)
    total = float(h.interval_s[ok].sum())
    if not ok.any() or total <= 0:
        return "no input queue was seen"
    waited = float((h.input_bound[ok] * h.interval_s[ok]).sum())
    return (
        f"the consumer waited for data {waited / total:.0%} of the time "
        f"({waited:.2f} s of {total:.2f} s)"
    )


def plot_history(
    h: MonitorHistory, path: str | os.PathLike[str], *, title: str | None = None
) -> None:
    """Draw ``h`` into a PNG at ``path`` (see the module docstring)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    if len(h) == 0:
        raise RuntimeError(
            "Monitor.plot: no samples to plot yet (pass the monitor to a Coordinator: "
            "Coordinator(monitor=monitor))"
        )
    t = h.times_s
    marker = "o" if len(h) <= 30 else None
    panels = ["fill", "rate"] + (["stage_rate", "stage_busy"] if h.stages else []) + ["bound"]
    heights = {"fill": 3.0, "rate": 2.6, "stage_rate": 2.2, "stage_busy": 2.2, "bound": 1.5}
    fig = Figure(figsize=(11, sum(heights[p] for p in panels) + 1.3), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(
        len(panels), 1, sharex=True, height_ratios=[heights[p] for p in panels], squeeze=False
    )[:, 0]
    ax = dict(zip(panels, axes))
    colors = [f"C{i % 10}" for i in range(len(h.queues))]

    for color, (name, q) in zip(colors, h.queues.items()):
        label = name + (" (consumer's input)" if q.is_input else "")
        fx, fy = _points(h, 100 * q.fraction_full)
        ax["fill"].plot(fx, fy, color=color, marker=marker, ms=3, label=label)
        if q.min_after_dequeue:
            floor = 100 * q.min_after_dequeue / np.nanmax(q.capacity)
            ax["fill"].axhline(
                floor,
                color="0.35",
                ls=(0, (1, 2)),
                lw=1.6,
                label=f"{name}: min_after_dequeue floor ({floor:.0f}%)",
            )
        _step(ax["rate"], h, q.dequeue_rate, color=color, lw=1.8, label=f"{name}: taken out")
        _step(ax["rate"], h, q.enqueue_rate, color=color, lw=1.2, ls="--", label=f"{name}: put in")
    ax["fill"].set_ylim(-3, 105)
    ax["fill"].set_ylabel("fill (% of capacity)")
    ax["fill"].set_title("Queue fill: how full each queue was", loc="left", fontsize=10)
    ax["rate"].set_ylabel("elements per second")
    _rate_limits(
        ax["rate"], [a for q in h.queues.values() for a in (q.enqueue_rate, q.dequeue_rate)]
    )
    ax["rate"].set_title("Throughput: elements put into and taken out of each queue",
                         loc="left", fontsize=10)  # fmt: skip

    if h.stages:
        for i, (name, s) in enumerate(h.stages.items()):
            c = f"C{(len(h.queues) + i) % 10}"
            _step(ax["stage_rate"], h, s.items_per_s, color=c, lw=1.6, label=name)
            _step(ax["stage_busy"], h, 100 * s.busy_fraction, color=c, lw=1.6, label=name)
        ax["stage_rate"].set_ylabel("items per second")
        _rate_limits(ax["stage_rate"], [s.items_per_s for s in h.stages.values()])
        ax["stage_rate"].set_title("Pipeline stages: items put out", loc="left", fontsize=10)
        ax["stage_busy"].set_ylabel("busy (% of workers' time)")
        ax["stage_busy"].set_ylim(-3, 105)
        ax["stage_busy"].set_title(
            "Pipeline stages: how busy the workers were", loc="left", fontsize=10
        )

    bx, by = _stairs(h, 100 * h.input_bound)
    ax["bound"].fill_between(bx, np.nan_to_num(by), color=_SHADE, alpha=0.55, lw=0)
    ax["bound"].plot(bx, by, color=_SHADE, lw=1.2)
    ax["bound"].set_ylim(0, 105)
    ax["bound"].set_ylabel("% of time\nwaiting")
    ax["bound"].set_title(
        "Input-bound: share of each interval the consumer waited for data", loc="left", fontsize=10
    )
    ax["bound"].set_xlabel("time since the monitor started (seconds)")
    ax["bound"].set_xlim(0, float(t[-1]) * 1.01 if t[-1] > 0 else 1.0)

    for a in axes:
        for start, end in _spans(h):
            a.axvspan(start, end, color=_SHADE, alpha=0.12, lw=0)
        a.grid(True, alpha=0.3)
    shade = Patch(color=_SHADE, alpha=0.25, label="consumer waited > 50% of the interval")
    for name in panels:
        if name == "bound":
            continue
        handles, labels = ax[name].get_legend_handles_labels()
        if name == "fill":
            handles, labels = [*handles, shade], [*labels, shade.get_label()]
        ax[name].legend(
            handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False
        )
    fig.suptitle(
        f"{title or 'Queue fill and throughput over time'}\nOverall, {_overall(h)}",
        fontsize=12,
    )
    fig.supxlabel(_CAPTION, fontsize=9, style="italic", x=0.01, ha="left")
    fig.savefig(os.fspath(path), format="png", dpi=100)
