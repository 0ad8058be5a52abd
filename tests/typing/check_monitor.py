"""Checked by mypy (``mypy aqueue tests/typing``), never run: the Monitor's result types.

Each ``assert_type`` holds only if mypy infers exactly that type; the lines marked
``# type: ignore[...]`` must be errors, so a result that became ``Any`` (or a callback
of the wrong shape that became acceptable) fails here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import aqueue

Floats = npt.NDArray[np.float64]


def on_sample(sample: aqueue.MonitorReading) -> None:
    assert_type(sample.index, int)
    assert_type(sample.time_s, float)
    assert_type(sample.interval_s, float)
    assert_type(sample.final, bool)
    assert_type(sample.input_bound, float | None)
    assert_type(sample.items_per_s, float | None)
    assert_type(sample.missing, tuple[str, ...])
    assert_type(sample.queues, Mapping[str, aqueue.QueueReading])
    assert_type(sample.stages, Mapping[str, aqueue.StageReading])
    q = sample.queues["batches"]
    assert_type(q.fraction_full, float)
    assert_type(q.size, int)
    assert_type(q.enqueue_rate, float)
    assert_type(q.waiting_dequeue, int)
    assert_type(q.is_input, bool)
    s = sample.stages["pipe/map(load)"]
    assert_type(s.items_per_s, float)
    assert_type(s.busy_fraction, float)
    assert_type(s.set_by, str | None)
    assert_type(s.worker_processes, int)  # (a process map's processes at the sample)
    assert_type(s.decisions, tuple[aqueue.StageDecision, ...])
    for d in s.decisions:
        assert_type(d.time_s, float)
        assert_type(d.new, int)
        assert_type(d.reason, str)
    assert_type(sample.tables, Mapping[str, aqueue.TableReading])
    t = sample.tables["transitions"]
    assert_type(t.fraction_full, float)
    assert_type(t.insert_rate, float)
    assert_type(t.insert_blocked, float)
    assert_type(t.sample_blocked, float)
    assert_type(t.samples, int)
    assert_type(t.is_input, bool)


async def on_sample_async(sample: aqueue.MonitorReading) -> None:
    del sample


def stages() -> Sequence[aqueue.StageStatistics]:
    return ()


async def monitored() -> None:
    monitor = aqueue.Monitor(interval=0.5, history=100, callback=on_sample, live=True)
    aqueue.Monitor(callback=on_sample_async)
    monitor.attach_stages("pipe", stages)
    async with aqueue.Coordinator(monitor=monitor):
        pass
    h = monitor.history()
    assert_type(h, aqueue.MonitorHistory)
    assert_type(h.times_s, Floats)
    assert_type(h.interval_s, Floats)
    assert_type(h.input_bound, Floats)
    assert_type(h.final, npt.NDArray[np.bool_])
    assert_type(h.queues["batches"], aqueue.QueueHistory)
    assert_type(h.queues["batches"].fraction_full, Floats)
    assert_type(h.queues["batches"].dequeue_rate, Floats)
    assert_type(h.queues["batches"].min_after_dequeue, int)
    assert_type(h.stages["pipe/batch"], aqueue.StageHistory)
    assert_type(h.stages["pipe/batch"].busy_fraction, Floats)
    assert_type(h.stages["pipe/batch"].concurrency, Floats)
    assert_type(h.stages["pipe/batch"].decisions, tuple[aqueue.StageDecision, ...])
    assert_type(h.tables, Mapping[str, aqueue.TableHistory])
    assert_type(h.tables["transitions"].insert_blocked, Floats)
    assert_type(h.tables["transitions"].sample_rate, Floats)
    assert_type(h.tables["transitions"].is_input, bool)
    assert_type(monitor.latest, aqueue.MonitorReading | None)
    monitor.write_csv("monitor.csv")
    monitor.plot("monitor.png", title="run")


def rejected() -> None:
    aqueue.Monitor(interval="1")  # type: ignore[arg-type]
    aqueue.Monitor(5)  # type: ignore[call-arg]
    aqueue.Coordinator(monitor=3)  # type: ignore[arg-type]
    monitor = aqueue.Monitor()
    monitor.attach_stages("pipe", 3)  # type: ignore[arg-type]
    n: int = monitor.history().times_s  # type: ignore[assignment]
    del n
