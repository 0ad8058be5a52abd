"""Monitor: what a coordinator's queues (and pipeline stages) did over time.

The public side of monitoring: ``Monitor`` validates its settings, keeps them with the
samples in a ``Record`` that lives as long as the monitor, and turns the samples into
a ``MonitorHistory``, a CSV file or a PNG. The sampling itself, one ``Sampler`` per
coordinator block, is in ``_sampler.py``; the coordinator starts it through
``begin_monitor``.

Invariants:

- A monitor runs with one coordinator at a time (entering a second one meanwhile is a
  RuntimeError). Reused for another block, its clock, sample numbers and history
  continue; each block's first sample covers the time since that block was entered,
  and rates and the input-bound fraction are measured within a block.
- The history holds at most ``history`` samples, the oldest dropped first;
  ``MonitorReading.index`` keeps counting across drops.
- Nothing here changes a queue.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

from .._errors import ElementSpecError, int_arg
from ._live import check_live
from ._sampler import Record, Sampler, StageProvider
from ._samples import MonitorHistory, MonitorReading, build_history, csv_rows, write_rows
from ._watchdog import QueueMonitor

__all__ = ["Monitor", "begin_monitor"]


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        shown = repr(value) if isinstance(value, (int, float)) else type(value).__name__
        raise ElementSpecError(f"Monitor: {what} must be a number > 0, got {shown}")
    if math.isinf(value):
        raise ElementSpecError(f"Monitor: {what} must be finite, got {value!r}")
    return float(value)


class Monitor:
    """Samples the queues of a Coordinator while it runs: fill, rates, input-bound.

    Pass it to a coordinator: ``async with Coordinator(monitor=monitor):``. Every
    ``interval`` seconds, and once more when the body ends (before the producers are
    stopped), it reads every queue the coordinator watches and every attached pipeline
    stage, so its samples cover the body's time, as ``coord.report()`` and
    ``coord.input_bound`` do (their input-bound shares agree); then look at
    ``history()``, ``write_csv(path)`` or ``plot(path)``, or log each sample from
    ``callback``. A monitor samples one coordinator at a time, and can be passed to
    later ones: its clock and history continue.

    Args:
        interval: Seconds between samples.
        history: Samples kept; the oldest are dropped beyond this many.
        callback: Called with each ``MonitorReading``, in order, on the event loop; a
            plain function or an async one (awaited before the next sample). An
            exception it raises ends the coordinator's block and leaves it.
        live: Show a one-line progress display (items/s, each queue's fill,
            input-bound %) on the terminal, refreshed every sample. Needs tqdm
            (``pip install 'aqueue[live]'``). Does nothing, silently, when standard
            output is not a terminal (a log file, CI, a notebook's captured output).
        statistics_timeout: Seconds to wait for a shared queue's statistics before
            leaving it out of a sample (default: ``interval``, at most 1 s); the
            coordinator's own readings of shared queues (for ``report()``) use it too.

    Raises:
        ElementSpecError: ``interval`` or ``statistics_timeout`` is not a number > 0,
            ``history`` is not an int >= 1, or ``callback`` is not callable.
        ImportError: ``live=True`` on a terminal without tqdm installed.
    """

    def __init__(
        self,
        *,
        interval: float = 1.0,
        history: int = 10_000,
        callback: Callable[[MonitorReading], object] | None = None,
        live: bool = False,
        statistics_timeout: float | None = None,
    ) -> None:
        self._interval = _positive(interval, "interval")
        size = int_arg(history, "history", "Monitor", 1)
        if callback is not None and not callable(callback):
            raise ElementSpecError(
                f"Monitor: callback must be callable (a function of one MonitorReading) "
                f"or None, got {type(callback).__name__}"
            )
        if not isinstance(live, bool):
            raise ElementSpecError(f"Monitor: live must be a bool, got {type(live).__name__}")
        timeout = (
            min(self._interval, 1.0)
            if statistics_timeout is None
            else _positive(statistics_timeout, "statistics_timeout")
        )
        if live:
            check_live()
        self._rec = Record(self._interval, timeout, size, callback, live)

    def __repr__(self) -> str:
        state = "running" if self._rec.running else "idle"
        return f"<Monitor {state} interval={self._interval}s samples={len(self._rec.samples)}>"

    @property
    def interval(self) -> float:
        """Seconds between samples."""
        return self._interval

    @property
    def statistics_timeout(self) -> float:
        """Seconds to wait for a shared queue's statistics (its coordinator's readings
        for ``report()`` use it too)."""
        return self._rec.timeout

    @property
    def latest(self) -> MonitorReading | None:
        """The most recent sample, or None before the first."""
        samples = self._rec.samples
        return samples[-1] if samples else None

    def attach_stages(self, name: str, provider: StageProvider) -> None:
        """Sample pipeline stages too: ``provider()`` returns their statistics.

        ``provider`` is called on the event loop at every sample and returns one
        ``StageStatistics`` per stage (cumulative since its run started, as
        ``Pipeline.statistics()``); the monitor turns them into items/s and busy
        fraction per interval. Attaching under a name already attached replaces its
        provider (a pipeline opened again); its history continues.

        Raises:
            ElementSpecError: ``name`` is not a non-empty str or ``provider`` is not
                callable.
        """
        if not isinstance(name, str) or not name:
            shown = repr(name) if isinstance(name, str) else type(name).__name__
            raise ElementSpecError(
                f"Monitor.attach_stages: name must be a non-empty str, got {shown}"
            )
        if not callable(provider):
            raise ElementSpecError(
                "Monitor.attach_stages: provider must be callable (returning a sequence "
                f"of StageStatistics), got {type(provider).__name__}"
            )
        self._rec.providers[name] = provider

    def history(self) -> MonitorHistory:
        """The retained samples as numpy arrays (see ``MonitorHistory``)."""
        return build_history(list(self._rec.samples), self._rec.floors)

    def write_csv(self, path: str | os.PathLike[str]) -> None:
        """Write the retained samples to ``path``: a header, then one row per sample.

        Columns: ``time_s``, ``interval_s``, ``final`` (1 for a block's last sample),
        ``input_bound``, ``items_per_s``; then for each queue ``queue/<name>/<field>``
        and for each stage ``stage/<name>/<field>``, with the fields of
        ``QueueHistory`` and ``StageHistory`` (``size``, ``capacity``,
        ``fraction_full``, ``enqueue_rate``, ...). A value not available is an empty
        cell; integers are written without a decimal point.
        """
        write_rows(path, csv_rows(self.history()))

    def plot(self, path: str | os.PathLike[str], *, title: str | None = None) -> None:
        """Save a PNG of each queue's fill and throughput over time, with the periods
        when the body waited for input shaded (see the caption in the image).

        Raises:
            ImportError: matplotlib is missing (``pip install 'aqueue[plot]'``).
            RuntimeError: No sample has been taken yet.
        """
        from ._plot import plot_history

        plot_history(self.history(), path, title=title)

    def _begin(self, queues: QueueMonitor) -> Sampler:
        rec = self._rec
        if rec.running:
            raise RuntimeError(
                "this Monitor is already running with another Coordinator; a Monitor "
                "samples one coordinator at a time"
            )
        now = time.monotonic()
        if rec.t0 is None:
            rec.t0 = now
        sampler = Sampler(rec, queues, now)
        rec.running = True
        return sampler


def begin_monitor(monitor: Monitor, queues: QueueMonitor) -> Sampler:
    """Start ``monitor`` on a coordinator's queues (the coordinator's entry).

    Raises:
        RuntimeError: The monitor already runs with another coordinator.
        ImportError: ``live=True``, standard output is a terminal and tqdm is missing.
    """
    return monitor._begin(queues)
