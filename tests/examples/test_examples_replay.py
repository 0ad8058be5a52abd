"""The replay-table example runs end to end with small sizes, on asyncio and on trio,
and says in plain words what it showed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import example_main, one_line

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_replay_table_example_paces_actors_and_learner(
    backend: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Actor threads (a QueueRunner's producers) and a prioritized learner under
    SampleToInsertRatio: the learner takes exactly its batches, the limiter's
    difference ends inside its band, the value function is learned, and leaving the
    coordinator's block closes the table and stops every actor; the report has the
    table's row, and ``--plot`` draws the run (asyncio only)."""
    plot = tmp_path / "table.png"
    args = ["--plot", str(plot), "--interval", "0.01"] if backend == "asyncio" else []
    if args:
        pytest.importorskip("matplotlib")
    result = example_main("replay_table")(
        [
            "--steps", "60",
            "--batch", "32",
            "--min-size", "100",
            "--error-buffer", "300",
            "--backend", backend,
            *args,
        ]
    )  # fmt: skip
    assert result["samples"] == 60 * 32
    # every transition an actor produced went in, but for the bursts the stop cut short
    produced = sum(result["per_actor"])
    assert 0 <= produced - result["inserts"] <= 4 * 8  # at most one burst per actor
    lo, hi = result["band"]
    assert lo <= result["diff"] <= hi
    assert result["actors_alive"] == 0
    assert result["closed"]
    assert 0.0 <= result["actors_waited"] <= 1.0
    out = one_line(capsys.readouterr().out)
    assert "replay table size/max_size inserted sampled" in " ".join(out.split())
    assert re.search(r"'transitions' \(closed\) +\d+/20000 +\d+ +1920 ", out)
    assert "the learner sampled 1,920 (60 batches of 32)" in out
    assert "inside its band" in out
    assert "What this showed: actor threads, run by a QueueRunner, fed a replay table" in out
    assert "(0 still running)" in out
    if args:
        assert plot.read_bytes().startswith(b"\x89PNG")
        assert f"The plot in {plot}" in out


def test_replay_table_example_on_a_shared_table(capsys: pytest.CaptureFixture[str]) -> None:
    """``--redis``: the same learner on a table shared through a private redis-server,
    its actors processes; the limiter (on the server) ends inside its band, every
    transition an actor produced went in but for its last burst, and closing the table
    ends every actor process. The report has the shared table's row."""
    pytest.importorskip("redis", reason="aqueue[redis] is not installed")
    from redis_util import _binary

    if _binary() is None:
        pytest.skip("no redis-server")
    result = example_main("replay_table")(
        [
            "--redis",
            "--actors", "2",
            "--steps", "30",
            "--batch", "32",
            "--min-size", "100",
            "--error-buffer", "300",
        ]
    )  # fmt: skip
    assert result["samples"] == 30 * 32
    produced = sum(result["per_actor"])
    assert 0 <= produced - result["inserts"] < 2 * 8
    lo, hi = result["band"]
    assert lo <= result["diff"] <= hi
    assert result["actors_alive"] == 0
    assert result["closed"]
    out = one_line(capsys.readouterr().out)
    assert re.search(r"'transitions' \(shared\) +\d+/20000 +\d+ +960 ", out)
    assert "2 actor processes, on a table shared through Redis, inserted" in out
    assert "the learner sampled 960 (30 batches of 32)" in out
    assert "inside its band" in out
    assert "What this showed: actor processes fed a replay table shared through Redis" in out
    assert "(0 still running)" in out
