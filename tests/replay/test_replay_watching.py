"""Watching a replay table: ``coord.report()``'s table rows, the input-bound share a
table contributes, a ``Monitor``'s table samples (history, CSV, plot, live line), the
stall watchdog and the never-started warning, and a shared table read late.

The limiter runs are arranged, not timed: the learner waits in ``sample()`` before any
actor starts, and later stops sampling until the actors wait on the limiter, each
time for a few monitor samples, so both rate-limited shares are nonzero whatever the
machine's speed. Assertions are invariants (shares in [0, 1], rate x interval summing
to the totals), never speeds.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from replay_support import item
from support import poll

import aqueue
from aqueue import (
    Coordinator,
    FIFOQueue,
    Monitor,
    MonitorReading,
    QueueRunner,
    ReplayTable,
    SampleToInsertRatio,
    add_queue_runner,
)
from aqueue._running._registry import take_registered_runners

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def limited_table(name: str = "exp") -> ReplayTable[Any]:
    """A table whose limiter keeps inserts x 2 - samples within [12, 28] once 10 items
    are in: the learner waits for the actors, and the actors for the learner."""
    return ReplayTable(1000, np.float32, (3,), rate_limiter=SampleToInsertRatio(2.0, 10, 8.0),
                       seed=0, name=name)  # fmt: skip


def actor() -> np.ndarray:
    return item(1)


async def wait_samples(seen: list[MonitorReading], more: int) -> None:
    target = len(seen) + more
    await poll(lambda: len(seen) >= target)


async def limited_run(monitor: Monitor | None, seen: list[MonitorReading]) -> tuple[Any, ...]:
    """One block: the learner waits for the first items (the actors not started yet),
    samples a while, then stops until the actors wait on the limiter, then samples
    again. Returns the table, the coordinator and the table's statistics at the body's
    end."""
    table = limited_table()

    async def learn(batches: int) -> None:
        for _ in range(batches):
            await table.sample(4)

    async with Coordinator(monitor=monitor) as coord:
        coord.watch(table)
        async with anyio.create_task_group() as tg:
            tg.start_soon(learn, 30)
            await poll(lambda: table.statistics().samples_waiting == 1)
            if monitor is not None:
                await wait_samples(seen, 2)  # the learner waits in these intervals
            coord.start(QueueRunner(table, [actor, actor], name="actors"))
        await poll(lambda: table.statistics().inserts_waiting >= 1)
        if monitor is not None:
            await wait_samples(seen, 2)  # the actors wait in these intervals
        await learn(30)
        at_end = table.statistics()
    return table, coord, at_end


async def test_report_lists_a_table_with_its_own_columns() -> None:
    """A table's row: size/max_size, the totals, inserts/s and samples/s over the body,
    the share of the body each side waited, its runner; the input-bound line names it
    (watched as the body's input) with the time the learner waited in sample()."""
    table, coord, at_end = await limited_run(None, [])
    lines = coord.report().splitlines()
    assert lines[0].split() == [
        "replay",
        "table",
        "size/max_size",
        "inserted",
        "sampled",
        "inserts/s",
        "samples/s",
        "inserts_blocked",
        "samples_blocked",
        "runners",
    ]
    assert not any(line.startswith("queue") for line in lines)  # no queue was seen
    row = lines[1].split()
    st = table.statistics()
    assert row[:4] == ["'exp'", "(closed)", f"{st.size}/1000", str(st.inserts)]
    assert row[4] == str(st.samples) == str(240)
    inserts_s, samples_s = float(row[5]), float(row[6])
    blocked = [int(x.rstrip("%")) for x in row[7:9]]
    assert all(0 <= b <= 100 for b in blocked)
    assert row[9:] == ["'actors'", "0/2", "alive"]
    m = re.fullmatch(
        r"input-bound: (\d+)% \(the body waited ([0-9.]+) s of ([0-9.]+) s on 'exp'\)", lines[-1]
    )
    assert m is not None, lines[-1]
    waited, body = float(m[2]), float(m[3])
    assert waited == pytest.approx(at_end.sample_wait_s, abs=2e-3)
    assert waited > 0
    # (the rates over the body's time, as far as the printed digits tell)
    for rate, total in ((samples_s, 240), (inserts_s, st.inserts)):
        assert abs(rate * body - total) <= rate * 0.0005 + body * 0.05 + 1e-9
    assert coord.input_bound is not None
    assert lines[-1].startswith(f"input-bound: {coord.input_bound:.0%} (")


async def test_a_runner_fed_table_at_the_end_of_a_chain_is_the_input() -> None:
    """Without ``coord.watch``, a table that a runner fills and no runner reads is the
    body's input, as a queue at the end of a chain is; a queue and a table are listed
    in their own tables."""
    table = ReplayTable(100, np.float32, (3,), name="exp")
    side: FIFOQueue[Any] = FIFOQueue(4, np.int64, (), name="side")
    async with Coordinator() as coord:
        coord.start(QueueRunner(side, [range(3)], name="side"))
        await table.enqueue(item(0))
        coord.start(QueueRunner(table, [[item(1), item(2)]], name="actors"))
        await poll(lambda: table.statistics().inserts == 3)
        [_ async for _ in side]
    lines = coord.report().splitlines()
    assert lines[0].split()[0] == "queue"
    assert any(line.startswith("'side'") for line in lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("replay table"))
    assert lines[header + 1].split()[:5] == ["'exp'", "(closed)", "3/100", "3", "0"]
    assert lines[-1].startswith("input-bound: ")
    assert "on 'exp'" in lines[-1] or "on 'side'" in lines[-1]  # both are chain ends


async def test_monitor_samples_a_table_under_a_sample_to_insert_ratio(tmp_path: Path) -> None:
    """Every sample holds the table: fill, rates whose sum over the intervals is the
    totals, and nonzero shares of time each side was held back by the limiter (the
    learner first, then the actors); the table is the input, so the input-bound share
    is its samples' share. The history, the CSV and the plot have it."""
    pytest.importorskip("matplotlib")
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    table, coord, at_end = await limited_run(monitor, seen)
    h = monitor.history()
    assert list(h.tables) == ["exp"]
    assert not h.queues
    t = h.tables["exp"]
    assert t.is_input
    assert not t.shared
    assert np.all(t.max_size == 1000)
    np.testing.assert_array_equal(t.fraction_full, t.size / 1000)
    for share in (t.insert_blocked, t.sample_blocked):
        assert np.all((share >= 0) & (share <= 1))
    assert t.sample_blocked.max() > 0  # the learner waited for the actors
    assert t.insert_blocked.max() > 0  # the actors waited for the learner
    last = seen[-1].tables["exp"]
    assert last.samples == 240 == at_end.samples
    assert math.isclose(float(np.sum(t.sample_rate * h.interval_s)), 240, rel_tol=1e-9)
    assert math.isclose(float(np.sum(t.insert_rate * h.interval_s)), last.inserts, rel_tol=1e-9)
    # (no more wait than the table counted in all)
    final = table.statistics()
    assert float(np.sum(t.insert_blocked * h.interval_s)) <= final.insert_wait_s + 1e-6
    assert float(np.sum(t.sample_blocked * h.interval_s)) <= final.sample_wait_s + 1e-6
    np.testing.assert_array_equal(h.input_bound, t.sample_blocked)
    np.testing.assert_array_equal(h.items_per_s, t.sample_rate)
    assert coord.input_bound is not None
    overall = float(np.sum(h.input_bound * h.interval_s) / np.sum(h.interval_s))
    assert overall == pytest.approx(coord.input_bound, abs=0.05)

    path = tmp_path / "run.csv"
    monitor.write_csv(path)
    rows = list(csv.reader(path.read_text().splitlines()))
    col = {name: i for i, name in enumerate(rows[0])}
    for field in ("size", "fraction_full", "insert_rate", "insert_blocked", "sample_blocked"):
        assert f"table/exp/{field}" in col
    assert [float(r[col["table/exp/insert_blocked"]]) for r in rows[1:]] == (
        t.insert_blocked.tolist()
    )
    assert rows[-1][col["table/exp/samples"]] == "240"

    png = tmp_path / "run.png"
    monitor.plot(png, title="replay")
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    import matplotlib.image

    image = matplotlib.image.imread(str(png))
    assert image.shape[0] >= 400
    assert image.shape[1] >= 600


async def test_a_queue_and_a_table_plot_together(tmp_path: Path) -> None:
    """A run with a queue and a table plots both (the queue's fill panel, the table's
    panel, one throughput panel)."""
    pytest.importorskip("matplotlib")
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    q: FIFOQueue[Any] = FIFOQueue(8, np.int64, (), name="items")
    table = limited_table()
    async with Coordinator(monitor=monitor) as coord:
        coord.start(QueueRunner(q, [iter(range(50))], name="fill"))
        coord.start(QueueRunner(table, [actor], name="actors"))
        await wait_samples(seen, 3)
        [_ async for _ in q]
        await table.sample(4)
    h = monitor.history()
    assert list(h.queues) == ["items"]
    assert list(h.tables) == ["exp"]
    monitor.plot(tmp_path / "both.png")
    assert (tmp_path / "both.png").read_bytes().startswith(PNG_SIGNATURE)


async def test_the_live_line_shows_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal, the live line has the table's fill, rates and held-back shares,
    and the closing summary their averages over the block."""
    pytest.importorskip("tqdm")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    seen: list[MonitorReading] = []
    await limited_run(Monitor(interval=0.003, live=True, callback=seen.append), seen)
    text = out.getvalue()
    assert re.search(r"exp \d+% full, [\d,]+ inserts/s \(held \d+%\), [\d,]+ samples/s", text)
    summary = text.rsplit("aqueue done in", 1)[1]
    assert "exp " in summary
    assert "inserts/s (held" in summary


async def test_watchdog_warns_about_a_stalled_table(caplog: pytest.LogCaptureFixture) -> None:
    """A watched table with a learner waiting and nothing inserted: the warning names
    the table and the blocked side."""
    table = ReplayTable(10, np.float32, (3,), name="exp")
    with caplog.at_level(logging.WARNING, logger="aqueue"):
        async with Coordinator(watchdog=0.05) as coord:
            coord.watch(table)
            async with anyio.create_task_group() as tg:
                tg.start_soon(table.sample, 2)
                await poll(lambda: "made no progress" in caplog.text)
                tg.cancel_scope.cancel()
    assert "replay table 'exp'" in caplog.text
    assert "blocked side: sample; 1 waiting to sample; size 0/10" in caplog.text


async def test_a_never_started_runner_of_a_table_is_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A learner waiting on a table whose registered runner was never started gets the
    warning naming the table, inside a coordinator's block too."""
    table = ReplayTable(10, np.float32, (3,), name="never-fed")
    with caplog.at_level(logging.WARNING, logger="aqueue"):
        add_queue_runner(QueueRunner(table, [[item(0)]], name="actors"))
        try:
            async with Coordinator(), anyio.create_task_group() as tg:
                tg.start_soon(table.sample, 1)
                await poll(lambda: "never-fed" in caplog.text)
                tg.cancel_scope.cancel()
        finally:
            take_registered_runners()  # (the test's context outlives it)
    assert "replay table 'never-fed': a consumer has waited 1 s" in caplog.text
    assert "QueueRunner 'actors' that feeds it was registered" in caplog.text
    assert "never started" in caplog.text


class SharedTable(ReplayTable[Any]):
    """A table whose statistics must be awaited (as a shared one's)."""

    async def statistics(self) -> aqueue.ReplayStatistics:  # type: ignore[override]
        await anyio.lowlevel.checkpoint()
        return ReplayTable.statistics(self)


async def test_a_shared_tables_figures_are_read_when_the_body_ends() -> None:
    """A table whose statistics are awaited has no figures while the body runs (the
    report says why), then its row as an in-process one's; a Monitor reads it too."""
    table = SharedTable(100, np.float32, (3,), name="far")
    seen: list[MonitorReading] = []
    monitor = Monitor(interval=0.003, callback=seen.append)
    async with Coordinator(monitor=monitor) as coord:
        runner = QueueRunner(table, [[item(v) for v in range(20)]], name="actors")
        coord.start(runner)
        during = coord.report().splitlines()
        await wait_samples(seen, 2)
        await table.sample(5)
        await runner.join()  # (its end closed the table)
    why = "its statistics are read from its server when the body ends"
    assert f"'far' (shared): no figures: {why}" in during
    assert during[-1] == f"input-bound: n/a ('far' is shared: {why})"
    row = coord.report().splitlines()[1].split()
    assert row[:6] == ["'far'", "(closed)", "(shared)", "20/100", "20", "5"]
    h = monitor.history()
    assert h.tables["far"].shared
    assert h.tables["far"].samples[-1] == 5


async def test_a_sink_of_your_own_is_filled_and_not_watched() -> None:
    """Any ``aqueue.Sink`` can be a runner's: its producers fill it through the
    protocol, the last one's end is reported; the coordinator lists only queues and
    tables."""

    class View:
        def __init__(self, got: list[int]) -> None:
            self.got = got

        def enqueue(self, element: Any, timeout: float | None = None) -> None:
            self.got.append(int(element))

        def enqueue_many(self, batch: Any, timeout: float | None = None) -> None:
            self.got.extend(int(x) for x in batch)

    class Collect:
        name = "collect"

        def __init__(self) -> None:
            self.got: list[int] = []
            self.ended: list[tuple[str, bool]] = []

        async def enqueue(self, element: Any) -> None:
            self.got.append(int(element))

        async def enqueue_many(self, batch: Any) -> None:
            self.got.extend(int(x) for x in batch)

        def blocking(self) -> View:
            return View(self.got)

        async def register_producer(self) -> str:
            return "p"

        async def producer_done(self, producer_id: str, *, clean: bool = True) -> None:
            self.ended.append((producer_id, clean))

        def release_producers(self) -> None:
            pass

    sink = Collect()
    assert isinstance(sink, aqueue.Sink)

    async def numbers() -> Any:
        for v in range(5, 8):
            yield v

    async with Coordinator() as coord:
        runner = QueueRunner(sink, [range(5), numbers()])
        coord.start(runner)
        await runner.join()
    assert sorted(sink.got) == list(range(8))
    assert sink.ended == [("p", True), ("p", True)]
    assert coord.report().splitlines()[-1] == "input-bound: n/a (no input queue seen)"
