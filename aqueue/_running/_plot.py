"""``Monitor.plot``: a PNG of a run for someone who has never seen aqueue.

Panels, sharing the time axis (seconds since the monitor started):

1. Queue fill, when queues were watched: each queue's size as a percentage of its
   capacity (TF's ``fraction_of_N_full``); a dotted line marks a shuffle queue's
   ``min_after_dequeue``, the fill below which consumers cannot take anything while it
   is open.
2. Throughput: elements per second put into (dashed) and taken out of (solid) each
   queue, and items inserted (dashed) and sampled (solid) per second for each replay
   table, averaged over each sampling interval.
3. One panel per replay table: its fill (% of ``max_size``), and, shaded per interval,
   the share of the interval during which its inserts waited on the rate limiter
   (orange: the actors were held back) and its samples waited (purple: the learner
   was held back, or too few items were held).
4. Pipeline stages, when attached: items per second and busy percentage per stage;
   when the pipeline's tuner changed a stage (``concurrency="auto"``), a panel of each
   such stage's concurrency over time, each decision a marker labelled with its new
   value (hollow: a recommendation, nothing changed), and the same decisions as thin
   vertical lines in the stage's colour on the items-per-second panel.
5. Input-bound: the percentage of each interval the consumer spent waiting on an empty
   input queue (or, for an input table, in ``sample()``).

Intervals in which the consumer waited for more than half the time are shaded red in
every panel but the tables' (which have their own shading): there, the run was
input-bound. A caption under the panels says so.
matplotlib is imported here only, drawing on an Agg canvas (no display, no pyplot
state); it is the ``aqueue[plot]`` extra.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._samples import Floats, MonitorHistory, TableHistory

__all__ = ["plot_history"]

_MISSING = "Monitor.plot needs matplotlib: pip install 'aqueue[plot]'"
_SHADE = "#d62728"
_INSERTS_HELD = "#ff7f0e"  # a table's inserts waiting on its rate limiter
_SAMPLES_HELD = "#9467bd"  # a table's samples waiting
_BOUND = 0.5  # shade intervals in which the consumer waited for more than this fraction

_CAPTION = (
    "How to read it: a queue near 100% full means its producers are ahead and the consumer "
    "sets the pace;\na queue near empty (or at its dotted min_after_dequeue floor) with red "
    "shading means the consumer waited for data there: the run was input-bound."
)
_TABLE_CAPTION = (
    "In a replay table's panel, orange shades the share of each interval its inserts waited "
    "on the rate limiter (the actors were ahead),\npurple the share its samples waited (the "
    "learner was ahead, or too few items were held)."
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


def _table_panel(
    a: Any, h: MonitorHistory, name: str, tb: TableHistory, color: str, marker: str | None
) -> None:
    """One replay table's panel: its fill over time, and each interval shaded by the
    share its inserts (orange) and samples (purple) waited on the rate limiter."""
    ix, iy = _stairs(h, 100 * tb.insert_blocked)
    sx, sy = _stairs(h, 100 * tb.sample_blocked)
    a.fill_between(ix, np.nan_to_num(iy), color=_INSERTS_HELD, alpha=0.35, lw=0,
                   label="inserts held back by the rate limiter (% of interval)")  # fmt: skip
    a.fill_between(sx, np.nan_to_num(sy), color=_SAMPLES_HELD, alpha=0.35, lw=0,
                   label="samples held back (% of interval)")  # fmt: skip
    fx, fy = _points(h, 100 * tb.fraction_full)
    size = np.nanmax(tb.max_size) if np.isfinite(tb.max_size).any() else float("nan")
    label = f"{name}: fill (% of max_size {size:,.0f})" + (
        " (consumer's input)" if tb.is_input else ""
    )
    a.plot(fx, fy, color=color, lw=2.0, marker=marker, ms=3, label=label)
    a.set_ylim(-3, 105)
    a.set_ylabel("% (fill, time held)")
    a.set_title(
        f"Replay table '{name}': fill, and the share of each interval each side waited on "
        "its rate limiter",
        loc="left",
        fontsize=10,
    )


def _setting_panel(a: Any, h: MonitorHistory, tuned: list[tuple[str, str]]) -> None:
    """Each tuned stage's concurrency over time: a step at each decision applied, a
    marker labelled with the new value at every decision (hollow: recommended)."""
    end = float(h.times_s[-1])
    top = 1.0
    for name, color in tuned:
        s = h.stages[name]
        first = s.decisions[0]
        xs, ys = [0.0], [float(first.old)]
        for d in s.decisions:
            if d.applied and d.setting == "concurrency":
                xs += [d.time_s, d.time_s]
                ys += [ys[-1], float(d.new)]
        xs.append(end)
        ys.append(ys[-1])
        a.plot(xs, ys, color=color, lw=1.8, label=f"{name}: concurrency in force")
        shown_t = -np.inf
        for d in s.decisions:
            top = max(top, d.new, d.old)
            face = color if d.applied else "white"
            a.plot([d.time_s], [d.new], marker="o", ms=6, color=color, mfc=face, ls="")
            # a label for each decision unless it would sit on the previous one's
            if d.time_s - shown_t > 0.02 * end:
                a.annotate(f"{d.old}\u2192{d.new}", (d.time_s, d.new), xytext=(4, 4),
                           textcoords="offset points", fontsize=9, color=color,
                           fontweight="bold")  # fmt: skip
                shown_t = d.time_s
    a.set_yscale("log", base=2)
    a.set_ylim(0.8, top * 1.8)
    a.yaxis.set_major_formatter("{x:.0f}")
    a.set_ylabel("workers (log scale)")
    a.set_title(
        "Tuned stages: concurrency in force; each dot a tuner decision with its new value "
        "(hollow: recommended only)",
        loc="left",
        fontsize=10,
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
    tables = [f"table:{name}" for name in h.tables]
    panels = (
        (["fill"] if h.queues or not h.tables else [])
        + ["rate"]
        + tables
        + (["stage_rate", "stage_busy"] if h.stages else [])
        + (["setting"] if any(s.decisions for s in h.stages.values()) else [])
        + ["bound"]
    )
    heights = {"fill": 3.0, "rate": 2.6, "stage_rate": 2.2, "stage_busy": 2.2, "bound": 1.5}
    heights["setting"] = 2.4
    heights.update((p, 2.6) for p in tables)
    fig = Figure(figsize=(11, sum(heights[p] for p in panels) + 1.3), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(
        len(panels), 1, sharex=True, height_ratios=[heights[p] for p in panels], squeeze=False
    )[:, 0]
    ax = dict(zip(panels, axes))
    colors = [f"C{i % 10}" for i in range(len(h.queues))]
    table_colors = [f"C{(len(h.queues) + i) % 10}" for i in range(len(h.tables))]

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
    if "fill" in ax:
        ax["fill"].set_ylim(-3, 105)
        ax["fill"].set_ylabel("fill (% of capacity)")
        ax["fill"].set_title("Queue fill: how full each queue was", loc="left", fontsize=10)
    for color, (name, tb) in zip(table_colors, h.tables.items()):
        _table_panel(ax[f"table:{name}"], h, name, tb, color, marker)
        _step(ax["rate"], h, tb.sample_rate, color=color, lw=1.8, label=f"{name}: sampled")
        _step(
            ax["rate"], h, tb.insert_rate, color=color, lw=1.2, ls="--", label=f"{name}: inserted"
        )
    ax["rate"].set_ylabel("elements per second")
    _rate_limits(
        ax["rate"],
        [a for q in h.queues.values() for a in (q.enqueue_rate, q.dequeue_rate)]
        + [a for tb in h.tables.values() for a in (tb.insert_rate, tb.sample_rate)],
    )
    moved = []
    if h.queues or not h.tables:
        moved.append("elements put into and taken out of each queue")
    if h.tables:
        moved.append("items inserted into and sampled from each table")
    ax["rate"].set_title(f"Throughput: {', '.join(moved)}", loc="left", fontsize=10)

    if h.stages:
        tuned: list[tuple[str, str]] = []
        for i, (name, s) in enumerate(h.stages.items()):
            c = f"C{(len(h.queues) + i) % 10}"
            _step(ax["stage_rate"], h, s.items_per_s, color=c, lw=1.6, label=name)
            _step(ax["stage_busy"], h, 100 * s.busy_fraction, color=c, lw=1.6, label=name)
            for j, d in enumerate(s.decisions):
                ax["stage_rate"].axvline(
                    d.time_s, color=c, lw=1.3, ls=(0, (3, 2)),
                    label=f"{name}: a tuner decision" if j == 0 else None,
                )  # fmt: skip
            if s.decisions:
                tuned.append((name, c))
        if tuned:
            _setting_panel(ax["setting"], h, tuned)
        ax["stage_rate"].set_ylabel("items per second")
        _rate_limits(ax["stage_rate"], [s.items_per_s for s in h.stages.values()])
        ax["stage_rate"].set_title(
            "Pipeline stages: items put out"
            + (" (dashed vertical lines: the tuner's decisions)" if tuned else ""),
            loc="left",
            fontsize=10,
        )
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

    for name, a in ax.items():
        if not name.startswith("table:"):  # (a table's panel has its own shading)
            for start, end in _spans(h):
                a.axvspan(start, end, color=_SHADE, alpha=0.12, lw=0)
        a.grid(True, alpha=0.3)
    shade = Patch(color=_SHADE, alpha=0.25, label="consumer waited > 50% of the interval")
    for name in panels:
        if name == "bound":
            continue
        handles, labels = ax[name].get_legend_handles_labels()
        if name == panels[0]:
            handles, labels = [*handles, shade], [*labels, shade.get_label()]
        ax[name].legend(
            handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False
        )
    fig.suptitle(
        f"{title or 'Queue fill and throughput over time'}\nOverall, {_overall(h)}",
        fontsize=12,
    )
    if not h.tables:
        caption = _CAPTION
    elif h.queues:
        caption = f"{_CAPTION}\n{_TABLE_CAPTION}"
    else:
        caption = f"How to read it: {_TABLE_CAPTION[0].lower()}{_TABLE_CAPTION[1:]}"
    fig.supxlabel(caption, fontsize=9, style="italic", x=0.01, ha="left")
    fig.savefig(os.fspath(path), format="png", dpi=100)
