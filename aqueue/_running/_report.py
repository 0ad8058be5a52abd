"""``coord.report()`` and the input-bound share: what a coordinator's queues and replay
tables did during its body, read from the ``QueueMonitor`` (``_watchdog.py``).

``report()``: one table of the queues, then one of the replay tables, each in the
order first seen, then a line per shared one without figures, then the input-bound
line. The queue table exists whenever a queue was seen (or nothing at all was); the
table table whenever a table was.

- A queue's row: name (and "(closed)", "(shared)"), size/capacity, enqueued and
  dequeued totals (since the queue was created), seconds full and empty, and each
  runner feeding it with its producers alive (a producer is alive until its task has
  ended, or its thread has).
- A replay table's row: name (and the same marks), size/max_size, inserted and sampled
  totals (since the table was created), inserts/s and samples/s during the body (the
  change since it was first seen, over the body's seconds), the share of the body's
  time during which inserts waited (the rate limiter held the actors back) and
  samples waited (it held the learner back, or too few items were held), and its
  runners.

A shared one without figures shows "-" in the number columns, and a line below says
why.

Input-bound fraction: the time the body spent waiting for input is read from what
the body consumes: the queues and tables passed to ``coord.watch``; when none were,
the runner sinks that no other runner reads from (the ends of the chains). A queue
contributes its ``time_empty_s``, a table its ``sample_wait_s`` (a learner waiting in
``sample()`` for the actors, or for ``min_size_to_sample`` items, is waiting for
input); the most-waited one counts, and the last line names it: "input-bound: 37% (the
body waited 1.850 s of 5.000 s on 'batches')".

Tuned pipeline stages (``concurrency="auto"`` maps of a pipeline opened with the
coordinator's ``Monitor``): a line each above the input-bound line, from the Monitor's
latest reading: the concurrency in force, who set it and the tuner's last decision.
"""

from __future__ import annotations

from typing import Any

from .._queues._protocol import QueueStatistics
from .._replay._results import ReplayStatistics
from ._samples import SET_BY, MonitorHistory, MonitorReading, last_decision
from ._watchdog import QueueMonitor, Seen, Watched, WatchedTable, alive

__all__ = ["input_wait", "inputs", "report", "tuned_lines", "waited_for_input"]

_QUEUE_HEADER = (
    "queue",
    "size/capacity",
    "enqueued",
    "dequeued",
    "time_full_s",
    "time_empty_s",
    "runners",
)
_TABLE_HEADER = (
    "replay table",
    "size/max_size",
    "inserted",
    "sampled",
    "inserts/s",
    "samples/s",
    "inserts_blocked",
    "samples_blocked",
    "runners",
)


def inputs(monitor: QueueMonitor) -> list[Seen[Any]]:
    """The queues and tables the body is taken to consume (see the module docstring)."""
    seen = monitor.seen
    explicit = [w for w in seen if w.explicit]
    if explicit:
        return explicit
    upstream = {id(src) for w in seen for r in w.runners for src in r.source_queues()}
    return [w for w in seen if w.runners and id(w.source) not in upstream]


def waited_for_input(st: QueueStatistics | ReplayStatistics) -> float:
    """Seconds consumers waited on it since its creation: a queue's time empty, a
    table's sample wait."""
    return st.time_empty_s if isinstance(st, QueueStatistics) else st.sample_wait_s


def _missing(w: Seen[Any], ended: bool) -> str:
    """Why a shared one has no figures (yet)."""
    if w.problem is not None:
        return w.problem
    if not ended:
        return "its statistics are read from its server when the body ends"
    return "its statistics were not read"


def input_wait(monitor: QueueMonitor, ended: bool) -> tuple[float, Seen[Any] | None, str]:
    """Seconds the body waited on its most-waited input since first seen, that input;
    or (0, None, why the figure cannot be had). ``ended``: the body has ended."""
    best: tuple[float, Seen[Any] | None] = (0.0, None)
    found = inputs(monitor)
    if not found:
        return 0.0, None, "no input queue seen"
    for w in found:
        st, base = w.figures(), w.base
        if st is None or base is None:
            return 0.0, None, f"'{w.name}' is shared: {_missing(w, ended)}"
        waited = waited_for_input(st) - waited_for_input(base)
        if best[1] is None or waited > best[0]:
            best = (waited, w)
    return best[0], best[1], ""


def _runners(w: Seen[Any]) -> str:
    return (
        ", ".join(
            f"'{r.name}' {alive(r.producer_states())}/{len(r.producer_states())} alive"
            for r in w.runners
        )
        or "-"
    )


def _marks(w: Seen[Any], closed: bool) -> str:
    return f"'{w.name}'" + (" (closed)" if closed else "") + (" (shared)" if w.shared else "")


def _queue_row(w: Watched) -> tuple[str, ...] | None:
    st = w.figures()
    if st is None:
        return None
    return (
        _marks(w, st.closed),
        f"{st.size}/{st.capacity}",
        str(st.enqueued_total),
        str(st.dequeued_total),
        f"{st.time_full_s:.3f}",
        f"{st.time_empty_s:.3f}",
        _runners(w),
    )


def _share(seconds: float, body_seconds: float) -> str:
    return f"{min(1.0, max(0.0, seconds / body_seconds)):.0%}" if body_seconds > 0 else "-"


def _table_row(w: WatchedTable, body_seconds: float) -> tuple[str, ...] | None:
    st, base = w.figures(), w.base
    if st is None:
        return None
    if base is None:  # (a shared table whose baseline was not read: totals only)
        rates = ("-", "-", "-", "-")
    else:
        per_s = 1.0 / body_seconds if body_seconds > 0 else 0.0
        rates = (
            f"{(st.inserts - base.inserts) * per_s:.1f}",
            f"{(st.samples - base.samples) * per_s:.1f}",
            _share(st.insert_wait_s - base.insert_wait_s, body_seconds),
            _share(st.sample_wait_s - base.sample_wait_s, body_seconds),
        )
    return (
        _marks(w, st.closed),
        f"{st.size}/{st.max_size}",
        str(st.inserts),
        str(st.samples),
        *rates,
        _runners(w),
    )


def _layout(rows: list[tuple[str, ...]]) -> list[str]:
    """Columns padded: the first and the last left-aligned, the numbers right-aligned."""
    last = len(rows[0]) - 1
    widths = [max(len(row[i]) for row in rows) for i in range(last + 1)]
    return [
        "  ".join(
            cell.ljust(width) if i in (0, last) else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    ]


def tuned_lines(latest: MonitorReading | None, history: MonitorHistory) -> list[str]:
    """A line per tuned stage of a Monitor's latest reading: its concurrency, who set
    it, and the tuner's last decision on it that the Monitor kept (``describe()``'s
    words; times on the monitor's clock)."""
    if latest is None:
        return []
    out = []
    for name, st in latest.stages.items():
        if st.set_by is None or st.set_by == "user":
            continue
        kept = history.stages[name].decisions if name in history.stages else ()
        who = SET_BY.get(st.set_by, st.set_by)
        out.append(
            f"tuned {name}: concurrency {st.concurrency} (set by {who}); {last_decision(kept)}"
        )
    return out


def report(monitor: QueueMonitor, body_seconds: float, ended: bool) -> str:
    """The tables and the input-bound line (see the module docstring)."""
    lines: list[str] = []
    notes: list[str] = []
    queues, tables = monitor.watched, monitor.tables
    if queues or not tables:
        rows: list[tuple[str, ...]] = [_QUEUE_HEADER]
        for q in queues:
            row = _queue_row(q)
            if row is None:
                row = (_marks(q, False), *["-"] * 5, _runners(q))
                notes.append(f"'{q.name}' (shared): no figures: {_missing(q, ended)}")
            rows.append(row)
        lines.extend(_layout(rows))
    if tables:
        rows = [_TABLE_HEADER]
        for t in tables:
            row = _table_row(t, body_seconds)
            if row is None:
                row = (_marks(t, False), *["-"] * 7, _runners(t))
                notes.append(f"'{t.name}' (shared): no figures: {_missing(t, ended)}")
            rows.append(row)
        lines.extend(_layout(rows))
    lines.extend(notes)
    waited, w, why = input_wait(monitor, ended)
    if w is None:
        lines.append(f"input-bound: n/a ({why})")
    else:
        fraction = min(1.0, waited / body_seconds) if body_seconds > 0 else 0.0
        lines.append(
            f"input-bound: {fraction:.0%} (the body waited {waited:.3f} s of "
            f"{body_seconds:.3f} s on '{w.name}')"
        )
    return "\n".join(lines)
