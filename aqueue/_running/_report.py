"""``coord.report()``: a text table of every queue a coordinator has seen, and how long
its body waited for input.

One row per queue, in the order first seen: name (and "(closed)"), size/capacity,
enqueued and dequeued totals, seconds full and empty, and each runner feeding it with
its producers alive (a producer is alive until its task has ended, or its thread has).
A shared queue, whose statistics need its server, shows "-" in the number columns.

Input-bound fraction: the time the body spent waiting for input is read from the
``time_empty_s`` of the queues the body consumes. Those are the queues passed to
``coord.watch``; when none were, the runner queues that no other runner reads from
(the ends of the chains). The last line names the most-waited one: "input-bound: 37%
(the body waited 1.850 s of 5.000 s on 'batches')".
"""

from __future__ import annotations

from .._queues._protocol import AsyncQueue, local_statistics
from ._watchdog import QueueMonitor

__all__ = ["input_queues", "input_wait", "report"]

_HEADER = (
    "queue",
    "size/capacity",
    "enqueued",
    "dequeued",
    "time_full_s",
    "time_empty_s",
    "runners",
)


def input_queues(monitor: QueueMonitor) -> list[AsyncQueue]:
    """The queues the body is taken to consume (see the module docstring)."""
    watched = monitor.watched
    explicit = [w.queue for w in watched if w.explicit]
    if explicit:
        return explicit
    upstream = {id(src) for w in watched for r in w.runners for src in r.source_queues()}
    return [w.queue for w in watched if w.runners and id(w.queue) not in upstream]


def input_wait(monitor: QueueMonitor) -> tuple[float, AsyncQueue | None]:
    """Seconds the body waited on its most-waited input queue since first seen."""
    bases = {id(w.queue): w.base for w in monitor.watched}
    best: tuple[float, AsyncQueue | None] = (0.0, None)
    for q in input_queues(monitor):
        st, base = local_statistics(q), bases.get(id(q))
        if st is None or base is None:
            continue
        waited = st.time_empty_s - base.time_empty_s
        if best[1] is None or waited > best[0]:
            best = (waited, q)
    return best


def _alive(states: list[tuple[str, str]]) -> int:
    return sum(1 for _, state in states if state != "done")


def report(monitor: QueueMonitor, body_seconds: float) -> str:
    """The table and the input-bound line (see the module docstring)."""
    rows = [_HEADER]
    for w in monitor.watched:
        runners = ", ".join(
            f"'{r.name}' {_alive(r.producer_states())}/{len(r.producer_states())} alive"
            for r in w.runners
        )
        st = local_statistics(w.queue)
        if st is None:
            rows.append((f"'{w.queue.name}' (shared)", "-", "-", "-", "-", "-", runners or "-"))
            continue
        rows.append(
            (
                f"'{w.queue.name}'" + (" (closed)" if st.closed else ""),
                f"{st.size}/{st.capacity}",
                str(st.enqueued_total),
                str(st.dequeued_total),
                f"{st.time_full_s:.3f}",
                f"{st.time_empty_s:.3f}",
                runners or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    lines = [
        "  ".join(
            cell.ljust(width) if i in (0, 6) else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    ]
    waited, queue = input_wait(monitor)
    if queue is None:
        lines.append("input-bound: n/a (no input queue seen)")
    else:
        fraction = waited / body_seconds if body_seconds > 0 else 0.0
        lines.append(
            f"input-bound: {fraction:.0%} (the body waited {waited:.3f} s of "
            f"{body_seconds:.3f} s on '{queue.name}')"
        )
    return "\n".join(lines)
