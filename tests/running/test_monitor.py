"""aqueue.Monitor through the public API: sampling a coordinator's queues while it runs
(thread producers, a draining consumer), rates consistent with totals, the bounded
history, CSV, sync and async callbacks, stage providers, shared queues that answer late
or never, reuse for a second block, the live line (off when stdout is not a terminal),
the plot, the errors for missing extras, and argument checks.

No test checks a speed: samples are awaited with ``poll`` and every assertion is an
invariant (fractions in [0, 1], rate x interval summing to the totals, ...).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from support import stage_statistics, wait_samples

import aqueue
from aqueue import (
    Coordinator,
    ElementSpecError,
    FIFOQueue,
    Monitor,
    MonitorReading,
    QueueRunner,
    StageStatistics,
)

pytestmark = pytest.mark.timeout(60)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def items_after(k: int) -> int:
    """Items put out in the first k seconds: 10 in odd seconds, 30 in even ones."""
    return sum(10 if i % 2 else 30 for i in range(1, k + 1))


def stage(name: str, k: int, *, concurrency: int = 2) -> StageStatistics:
    """The reading of a stage ``k`` seconds into its run (see ``Stages``)."""
    return stage_statistics(
        name,
        items_in=items_after(k),
        items_out=items_after(k),
        items_per_s=10.0,
        busy_s=0.5 * k,
        concurrency=concurrency,
        elapsed_s=1.0 * k,
    )


class Stages:
    """A stage provider, as ``Pipeline.open(monitor=...)`` attaches one. Its stages put
    out 10 items in odd seconds of their run and 30 in even ones, and work 0.5 s (over
    their 2 workers) per second; the run restarts (counters back to zero) after
    ``restart_after`` calls."""

    def __init__(self, *names: str, restart_after: int = 0) -> None:
        self.names = names
        self.calls = 0
        self.restart_after = restart_after

    def __call__(self) -> list[StageStatistics]:
        self.calls += 1
        k = self.calls
        if self.restart_after and k > self.restart_after:
            k -= self.restart_after
        return [stage(n, k) for n in self.names]


class Unanswering(FIFOQueue[Any]):
    """A shared queue whose server never answers: statistics() is a coroutine that hangs."""

    async def statistics(self) -> aqueue.QueueStatistics:  # type: ignore[override]
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


class Answering(FIFOQueue[Any]):
    """A shared queue whose server answers: statistics() is a coroutine."""

    async def statistics(self) -> aqueue.QueueStatistics:  # type: ignore[override]
        await anyio.lowlevel.checkpoint()
        return FIFOQueue.statistics(self)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def terminal(monkeypatch: pytest.MonkeyPatch) -> FakeTerminal:
    """Replace standard output by a terminal that records what is written (in the test
    itself: pytest's capture puts its own stdout back between setup and call)."""
    out = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", out)
    return out


def hide(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    """Make ``import package`` (and its submodules) fail, as if it were not installed."""
    monkeypatch.setitem(sys.modules, package, None)
    for name in list(sys.modules):
        if name.startswith(package + "."):
            monkeypatch.setitem(sys.modules, name, None)


async def run_block(monitor: Monitor, samples: int, seen: list[MonitorReading]) -> FIFOQueue[Any]:
    """One coordinator block: a thread producer fills a queue, a consumer drains it,
    until the monitor has taken ``samples`` samples; returns the queue."""
    q: FIFOQueue[Any] = FIFOQueue(8, np.int64, (), name="items")
    async with Coordinator(monitor=monitor) as coord:
        coord.start(QueueRunner(q, [iter(range(100))], name="fill"))
        await wait_samples(seen, samples)
        async for _ in q:
            pass
    return q


# -- sampling -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_samples_while_threads_fill_and_a_consumer_drains() -> None:
    """Two producer threads fill a queue while the body drains it: the history grows
    while it runs, fractions stay in [0, 1], and each rate times its interval sums to
    the queue's totals; the last sample is the final one, taken after the producers."""
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.005, callback=seen.append)
    q: FIFOQueue[Any] = FIFOQueue(16, np.int64, (), name="items")
    lengths = []
    got = []
    async with Coordinator(monitor=monitor) as coord:
        coord.start(QueueRunner(q, [iter(range(200)), iter(range(1000, 1200))], name="fill"))
        async for x in q:
            got.append(int(x))
            if len(got) % 100 == 0:
                await wait_samples(seen, 1)
                lengths.append(len(monitor.history()))
    assert sorted(got) == [*range(200), *range(1000, 1200)]
    assert lengths == sorted(lengths)
    assert lengths[-1] > lengths[0]
    h = monitor.history()
    n = len(h)
    assert n == len(seen) >= 5
    assert np.all(np.diff(h.times_s) > 0)
    assert np.all(h.interval_s > 0)
    assert h.final.tolist() == [False] * (n - 1) + [True]
    items = h.queues["items"]
    assert list(h.queues) == ["items"]
    assert items.is_input
    assert not items.shared
    assert np.all(items.capacity == 16)
    assert np.all((items.fraction_full >= 0) & (items.fraction_full <= 1))
    np.testing.assert_array_equal(items.fraction_full, items.size / 16)
    assert np.all(np.diff(items.enqueued_total) >= 0)
    stats = q.statistics()
    assert items.enqueued_total[-1] == stats.enqueued_total == 400
    assert items.dequeued_total[-1] == stats.dequeued_total == 400
    assert math.isclose(float(np.sum(items.enqueue_rate * h.interval_s)), 400, rel_tol=1e-9)
    assert math.isclose(float(np.sum(items.dequeue_rate * h.interval_s)), 400, rel_tol=1e-9)
    assert math.isclose(float(np.nansum(h.items_per_s * h.interval_s)), 400, rel_tol=1e-9)
    bound = h.input_bound[~np.isnan(h.input_bound)]
    assert len(bound) >= n - 1
    assert np.all((bound >= 0) & (bound <= 1))
    assert monitor.latest is seen[-1]
    assert seen[-1].final
    assert [s.index for s in seen] == list(range(n))


@pytest.mark.anyio
async def test_input_bound_is_the_share_of_the_interval_the_body_waited() -> None:
    """While the body waits on its (watched, empty) input queue, each sample's
    input-bound fraction is near 1; once that queue holds an element nobody waits for,
    it is 0, although a task waits on a runner's queue that is not watched (so not an
    input: watching a queue makes the watched ones the inputs)."""
    seen: list[MonitorReading] = []
    inbox: FIFOQueue[Any] = FIFOQueue(4, np.int64, (), name="inbox")
    side: FIFOQueue[Any] = FIFOQueue(4, np.int64, (), name="side")
    gate = anyio.Event()

    def on_sample(sample: MonitorReading) -> None:
        seen.append(sample)
        if len(seen) == 4:
            inbox.enqueue_nowait(7)

    async def held() -> int:
        await gate.wait()
        raise aqueue.OutOfRangeError("done")

    monitor = Monitor(interval=0.005, callback=on_sample)
    async with Coordinator(monitor=monitor) as coord:
        coord.watch(inbox)
        coord.start(QueueRunner(side, [held], name="side"))
        coord.start_soon(side.dequeue)  # waits on the empty side queue
        assert int(await inbox.dequeue()) == 7
        inbox.enqueue_nowait(8)
        idle_from = len(seen) + 1
        await wait_samples(seen, 3)
        gate.set()
    # (the first sample also covers the body's start, before it waits: on a loaded
    # machine that start can fill most of a 5 ms interval)
    waiting = seen[1:4]
    assert all(s.input_bound is not None and s.input_bound > 0.5 for s in waiting)
    assert all(s.queues["inbox"].waiting_dequeue == 1 for s in waiting)
    assert all(s.queues["inbox"].is_input for s in seen)
    assert not any(s.queues["side"].is_input for s in seen)
    idle = seen[idle_from:-1]
    assert idle
    assert all(s.queues["side"].waiting_dequeue == 1 for s in idle)
    assert all(s.input_bound == 0.0 for s in idle)
    assert all(s.items_per_s == 0.0 for s in idle)


@pytest.mark.anyio
async def test_the_final_sample_is_dated_at_the_body_end_however_late_it_is_taken() -> None:
    """The final sample is taken after the periodic ones have stopped; when a callback
    still runs at the body's end (here for 0.3 s), that is long after it. The final
    sample is dated at the body's end all the same, so the samples cover the body's time
    and their overall input-bound share stays the coordinator's figure."""
    slow_callback = anyio.Event()

    async def on_sample(sample: Any) -> None:
        if slow_callback.is_set():
            await anyio.sleep(0.3)

    def frame() -> np.ndarray[Any, Any]:
        time.sleep(0.02)
        return np.zeros(4, np.float32)

    q: FIFOQueue[Any] = FIFOQueue(8, np.float32, (4,), name="frames")
    monitor = Monitor(interval=0.01, callback=on_sample)
    async with Coordinator(monitor=monitor) as coord:
        coord.start(QueueRunner(q, [frame]))
        for _ in range(8):
            await q.dequeue()
        slow_callback.set()
        await anyio.sleep(0.03)  # a periodic sample's callback is now sleeping
        body_end = time.monotonic()
    assert time.monotonic() - body_end > 0.2  # the final sample waited for it
    h = monitor.history()
    assert h.final[-1]
    assert h.interval_s[-1] < 0.1  # it covers the body's last moments, not the wait after
    ok = ~np.isnan(h.input_bound)
    overall = float((h.input_bound[ok] * h.interval_s[ok]).sum() / h.interval_s[ok].sum())
    assert coord.input_bound is not None
    assert overall == pytest.approx(coord.input_bound, abs=0.03)


@pytest.mark.anyio
async def test_overall_input_bound_is_the_reports_figure() -> None:
    """The monitor's samples end when the body ends, so their overall input-bound share
    (waited time over sampled time) is the coordinator's figure, the one report()
    prints, even when stopping the producers takes long after the body: here a
    producer thread is inside a 0.4 s call when the body leaves."""
    calls = 0
    slow = threading.Event()

    def frame() -> np.ndarray[Any, Any]:
        nonlocal calls
        calls += 1
        if calls > 6:
            slow.set()
        time.sleep(0.02 if calls <= 6 else 0.4)
        return np.zeros(4, np.float32)

    q: FIFOQueue[Any] = FIFOQueue(8, np.float32, (4,), name="frames")
    monitor = Monitor(interval=0.01)
    async with Coordinator(monitor=monitor) as coord:
        coord.start(QueueRunner(q, [frame]))
        for _ in range(6):
            await q.dequeue()
        await anyio.to_thread.run_sync(slow.wait)  # the producer is in its slow call
        body_end = time.monotonic()
    teardown = time.monotonic() - body_end
    h = monitor.history()
    ok = ~np.isnan(h.input_bound)
    overall = float((h.input_bound[ok] * h.interval_s[ok]).sum() / h.interval_s[ok].sum())
    assert teardown > 0.2
    assert coord.input_bound is not None
    assert coord.input_bound > 0.5
    assert overall == pytest.approx(coord.input_bound, abs=0.03)
    assert f"input-bound: {coord.input_bound:.0%}" in coord.report()


@pytest.mark.anyio
async def test_bounded_history_keeps_the_newest_samples() -> None:
    """history=3: only the last three samples are kept; sample numbers keep counting."""
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.002, history=3, callback=seen.append)
    await run_block(monitor, 8, seen)
    h = monitor.history()
    assert len(h) == 3
    assert len(seen) >= 9
    np.testing.assert_array_equal(h.times_s, [s.time_s for s in seen[-3:]])
    assert monitor.latest is seen[-1]
    assert monitor.latest.index == len(seen) - 1


@pytest.mark.anyio
async def test_a_monitor_continues_over_a_second_block() -> None:
    """Reused for a second coordinator block, the history, clock and sample numbers
    continue; the second block's first sample covers the time since its entry. A
    monitor runs with one coordinator at a time."""
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    await run_block(monitor, 2, seen)
    first = len(seen)
    async with Coordinator(monitor=monitor):
        with pytest.raises(RuntimeError, match="already running with another Coordinator"):
            async with Coordinator(monitor=monitor):
                pass
        await wait_samples(seen, 2)
    h = monitor.history()
    assert len(h) == len(seen)
    assert h.final.sum() == 2
    assert h.final[first - 1]
    assert np.all(np.diff(h.times_s) > 0)
    assert [s.index for s in seen] == list(range(len(seen)))
    assert h.times_s[first] - h.interval_s[first] >= h.times_s[first - 1]
    assert "items" in h.queues
    assert np.isnan(h.queues["items"].size[first:]).all()  # not watched in block 2


@pytest.mark.anyio
async def test_queues_with_the_same_name_get_distinct_keys() -> None:
    """Two watched queues named alike are told apart as 'q' and 'q#2'."""
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    a: FIFOQueue[Any] = FIFOQueue(2, np.int64, (), name="q")
    b: FIFOQueue[Any] = FIFOQueue(4, np.int64, (), name="q")
    async with Coordinator(monitor=monitor) as coord:
        coord.watch(a, b)
        b.enqueue_nowait(1)
        await wait_samples(seen, 1)
    h = monitor.history()
    assert list(h.queues) == ["q", "q#2"]
    assert h.queues["q"].capacity[-1] == 2
    assert h.queues["q#2"].size[-1] == 1


# -- csv and callbacks ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_write_csv_has_the_documented_columns_and_one_row_per_sample(
    tmp_path: Path,
) -> None:
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    monitor.attach_stages("pipe", Stages("map(load)"))
    await run_block(monitor, 3, seen)
    path = tmp_path / "monitor.csv"
    monitor.write_csv(path)
    rows = list(csv.reader(path.read_text().splitlines()))
    fields = [
        "size",
        "capacity",
        "fraction_full",
        "enqueue_rate",
        "dequeue_rate",
        "enqueued_total",
        "dequeued_total",
        "waiting_enqueue",
        "waiting_dequeue",
    ]
    assert rows[0] == [
        "time_s",
        "interval_s",
        "final",
        "input_bound",
        "items_per_s",
        *[f"queue/items/{k}" for k in fields],
        "stage/pipe/map(load)/items_out",
        "stage/pipe/map(load)/items_per_s",
        "stage/pipe/map(load)/busy_fraction",
        "stage/pipe/map(load)/concurrency",
    ]
    body = rows[1:]
    h = monitor.history()
    assert len(body) == len(h) == len(seen)
    col = {name: i for i, name in enumerate(rows[0])}
    assert [float(r[col["time_s"]]) for r in body] == h.times_s.tolist()
    assert [r[col["final"]] for r in body] == ["0"] * (len(body) - 1) + ["1"]
    assert [int(r[col["queue/items/capacity"]]) for r in body] == [8] * len(body)
    assert [float(r[col["queue/items/fraction_full"]]) for r in body] == (
        h.queues["items"].fraction_full.tolist()
    )
    assert body[-1][col["queue/items/enqueued_total"]] == "100"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_callback_is_called_once_per_sample_with_the_documented_fields(kind: str) -> None:
    """A plain or an async callback gets every sample, in order, as a MonitorReading
    holding QueueSamples with the documented fields."""
    seen: list[MonitorReading] = []

    def sync_cb(sample: MonitorReading) -> None:
        seen.append(sample)

    async def async_cb(sample: MonitorReading) -> None:
        await anyio.lowlevel.checkpoint()
        seen.append(sample)

    monitor = Monitor(interval=0.003, callback=sync_cb if kind == "sync" else async_cb)
    await run_block(monitor, 3, seen)
    assert len(seen) == len(monitor.history())
    assert [s.index for s in seen] == list(range(len(seen)))
    assert [s.final for s in seen] == [False] * (len(seen) - 1) + [True]
    assert {f.name for f in dataclasses.fields(MonitorReading)} == {
        "index",
        "time_s",
        "interval_s",
        "final",
        "queues",
        "stages",
        "input_bound",
        "items_per_s",
        "missing",
        "tables",
    }
    assert {f.name for f in dataclasses.fields(aqueue.QueueReading)} == {
        "name",
        "size",
        "capacity",
        "fraction_full",
        "enqueue_rate",
        "dequeue_rate",
        "enqueued_total",
        "dequeued_total",
        "waiting_enqueue",
        "waiting_dequeue",
        "closed",
        "shared",
        "is_input",
    }
    last = seen[-1].queues["items"]
    assert isinstance(last, aqueue.QueueReading)
    assert (last.name, last.capacity, last.enqueued_total, last.closed) == ("items", 8, 100, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        last.size = 3  # type: ignore[misc]


@pytest.mark.anyio
async def test_a_failing_callback_ends_the_block_with_its_error() -> None:
    """The callback's exception leaves the coordinator's block (noted as the monitor's
    callback); the callback is not called again, not even for the final sample."""
    calls = []

    def cb(sample: MonitorReading) -> None:
        calls.append(sample)
        if len(calls) == 2:
            raise ValueError("cannot log")

    monitor = Monitor(interval=0.003, callback=cb)
    with pytest.raises(ValueError, match="cannot log") as info:
        async with Coordinator(monitor=monitor):
            await anyio.sleep(30)  # the failure cancels this
    assert "raised by the callback of an aqueue Monitor" in info.value.__notes__
    assert len(calls) == 2
    assert monitor.latest is not None
    assert monitor.latest.final  # the final sample is still recorded


# -- stages and shared queues -------------------------------------------------------------------


@pytest.mark.anyio
async def test_stage_providers_are_sampled_into_rates_and_busy_fractions() -> None:
    """A provider of cumulative StageStatistics is called once per sample; the monitor
    turns the differences between readings into items/s (10, 30, 10, ... here) and the
    busy fraction (0.5 s of work per second over 2 workers = 0.25); a restarted run
    (counters back to zero) is measured from its start. Repeated labels get '#2';
    attaching under the same name replaces the provider."""
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    monitor.attach_stages("pipe", Stages("ignored"))
    provider = Stages("map(load)", "batch", "batch", restart_after=3)
    monitor.attach_stages("pipe", provider)
    async with Coordinator(monitor=monitor):
        await wait_samples(seen, 6)
    h = monitor.history()
    assert provider.calls == len(h)
    assert list(h.stages) == ["pipe/map(load)", "pipe/batch", "pipe/batch#2"]
    # seconds into the run at each call: 1, 2, 3, then 1, 2, 3, ... after the restart
    ks = [k if k <= 3 else k - 3 for k in range(1, len(h) + 1)]
    want = [items_after(k) if k == 1 or c == 4 else items_after(k) - items_after(k - 1)
            for c, k in enumerate(ks, 1)]  # fmt: skip
    for s in h.stages.values():
        assert s.items_per_s.tolist() == want
        np.testing.assert_allclose(s.busy_fraction, 0.25)
        assert s.items_out.tolist() == [items_after(k) for k in ks]
    assert want[:4] == [10, 30, 10, 10]
    assert seen[-1].stages["pipe/batch"].concurrency == 2
    assert seen[0].queues == {}
    assert seen[0].input_bound is None


@pytest.mark.anyio
async def test_a_failing_stage_provider_ends_the_block() -> None:
    def broken() -> list[StageStatistics]:
        raise KeyError("stage gone")

    monitor = Monitor(interval=0.003)
    monitor.attach_stages("pipe", broken)
    with pytest.raises(KeyError) as info:
        async with Coordinator(monitor=monitor):
            await anyio.sleep(30)
    assert "raised by the stage provider 'pipe' of an aqueue Monitor" in info.value.__notes__


@pytest.mark.anyio
async def test_shared_queues_are_awaited_and_a_silent_one_never_stalls_sampling() -> None:
    """A queue whose statistics() is a coroutine is sampled with await, from the
    baseline the coordinator read when it first saw it: rates sum to the elements moved.
    One that never answers is left out of each sample (listed in ``missing``) after
    ``statistics_timeout``, and the block still ends; the report says why it has no
    figures."""
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, statistics_timeout=0.005, callback=seen.append)
    shared: Answering = Answering(64, np.int64, (), name="shared")
    dead: Unanswering = Unanswering(4, np.int64, (), name="dead")
    async with Coordinator(monitor=monitor) as coord:
        coord.watch(shared, dead)
        await wait_samples(seen, 1)
        for i in range(3):
            await shared.enqueue_many(np.arange(5))
            await wait_samples(seen, 1)
            await shared.dequeue_many(2 + i)
    assert all(s.missing == ("dead",) for s in seen)
    assert all("dead" not in s.queues for s in seen)
    h = monitor.history()
    assert list(h.queues) == ["shared"]
    q = h.queues["shared"]
    assert q.shared
    assert q.enqueued_total[-1] == 15
    moved = np.sum(q.enqueue_rate * h.interval_s)
    assert math.isclose(float(moved), 15, rel_tol=1e-9)  # since the (empty) baseline
    text = coord.report()
    assert "'shared' (shared)" in text
    assert "'dead' (shared): no figures: its server did not answer within 0.005 s" in text


# -- live line --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_live_line_is_silent_when_stdout_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """live=True writes nothing when standard output is captured (not a TTY)."""
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, live=True, callback=seen.append)
    await run_block(monitor, 3, seen)
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", "")


def drawn_line(sample: MonitorReading) -> str:
    """What the live line should read for ``sample`` (the run_block queue, "items")."""
    parts = [f"aqueue {sample.time_s:.1f} s"]
    if sample.items_per_s is not None and not math.isnan(sample.items_per_s):
        parts.append(f"{sample.items_per_s:,.0f} items/s")
    parts.append(f"fill: items {sample.queues['items'].fraction_full:.0%}")
    if sample.input_bound is not None:
        parts.append(f"input-bound {sample.input_bound:.0%}")
    return " | ".join(parts)


@pytest.mark.anyio
async def test_live_line_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal, live=True redraws one line in place (carriage returns, one newline
    at the very end): once per sample, with that sample's figures, then as a summary of
    the block."""
    pytest.importorskip("tqdm")
    out = terminal(monkeypatch)
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, live=True, callback=seen.append)
    await run_block(monitor, 3, seen)
    text = out.getvalue()
    assert text.endswith("\n")
    assert text.count("\n") == 1  # one terminal line, left in place at the end
    draws = [d.rstrip() for d in text[:-1].split("\r") if d.strip()]
    *running, final = seen
    assert final.final
    assert not any(s.final for s in running)
    # one redraw per sample, in order, each with that sample's figures ...
    assert draws[: len(running)] == [drawn_line(s) for s in running]
    # ... then the summary (which closing the line may draw once more)
    summary = draws[len(running) :]
    assert 1 <= len(summary) <= 2
    assert len(set(summary)) == 1
    assert re.fullmatch(
        r"aqueue done in \d+\.\d s \| [\d,]+ items/s on average \| fill: items 0% "
        r"\| input-bound \d+% overall",
        summary[0],
    ), summary[0]


def test_live_on_a_terminal_without_tqdm_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal(monkeypatch)
    hide(monkeypatch, "tqdm")
    with pytest.raises(ImportError, match=r"pip install 'aqueue\[live\]'"):
        Monitor(live=True)
    Monitor(live=False)


@pytest.mark.anyio
async def test_live_without_tqdm_off_a_terminal_is_silent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tqdm, live=True off a terminal is no error (no line would be shown), and
    a whole block with it writes nothing to standard output."""
    hide(monkeypatch, "tqdm")
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, live=True, callback=seen.append)
    await run_block(monitor, 3, seen)
    assert seen[-1].final
    assert out.getvalue() == ""


# -- plot -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_plot_writes_a_png(tmp_path: Path) -> None:
    """plot() writes a PNG that decodes, for a run with stages and two blocks."""
    pytest.importorskip("matplotlib")
    import matplotlib.image

    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    monitor.attach_stages("pipe", Stages("map(load)"))
    await run_block(monitor, 3, seen)
    await run_block(monitor, 3, seen)
    path = tmp_path / "monitor.png"
    monitor.plot(path, title="test run")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    image = matplotlib.image.imread(str(path))
    assert image.ndim == 3
    assert image.shape[0] >= 400
    assert image.shape[1] >= 600


def test_plot_without_samples_says_so(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    with pytest.raises(RuntimeError, match="no samples"):
        Monitor().plot(tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


@pytest.mark.anyio
async def test_plot_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    await run_block(monitor, 1, seen)
    hide(monkeypatch, "matplotlib")
    with pytest.raises(ImportError, match=r"pip install 'aqueue\[plot\]'"):
        monitor.plot(tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


# -- arguments ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"interval": 0}, "interval must be a number > 0, got 0"),
        ({"interval": -1.5}, "interval must be a number > 0, got -1.5"),
        ({"interval": math.nan}, "interval must be a number > 0, got nan"),
        ({"interval": math.inf}, "interval must be finite, got inf"),
        ({"interval": "1"}, "interval must be a number > 0, got str"),
        ({"interval": True}, "interval must be a number > 0, got True"),
        ({"history": 0}, "history must be >= 1, got 0"),
        ({"history": 2.5}, "history must be an int, got float"),
        ({"callback": 3}, "callback must be callable (a function of one MonitorReading) "
                          "or None, got int"),
        ({"statistics_timeout": 0}, "statistics_timeout must be a number > 0, got 0"),
        ({"live": "yes"}, "live must be a bool, got str"),
    ],
)  # fmt: skip
def test_bad_arguments_name_what_was_expected_and_given(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ElementSpecError) as info:
        Monitor(**kwargs)
    assert str(info.value) == f"Monitor: {message}"


@pytest.mark.anyio
async def test_bad_attach_stages_arguments_change_nothing() -> None:
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    with pytest.raises(ElementSpecError, match="name must be a non-empty str, got ''"):
        monitor.attach_stages("", Stages("a"))
    with pytest.raises(ElementSpecError, match=r"provider must be callable .* got int"):
        monitor.attach_stages("pipe", 3)  # type: ignore[arg-type]
    async with Coordinator(monitor=monitor):
        await wait_samples(seen, 1)
    assert all(s.stages == {} for s in seen)


def test_coordinator_checks_its_monitor_argument() -> None:
    with pytest.raises(TypeError, match=r"monitor must be an aqueue\.Monitor or None, got str"):
        Coordinator(monitor="yes")  # type: ignore[arg-type]
    assert "idle" in repr(Monitor())
