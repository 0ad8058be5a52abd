"""The input-pipeline examples run end to end with small sizes, on asyncio and on trio."""

from __future__ import annotations

import re

import pytest
from support import example_main, one_line, run_example

pytestmark = pytest.mark.timeout(60)

SMALL = [
    "--files", "3",
    "--records", "40",
    "--batch-size", "8",
    "--capacity", "60",
    "--min-after-dequeue", "20",
    "--threads", "3",
    "--epochs", "2",
]  # fmt: skip


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_input_pipeline_sees_every_record_once_per_epoch(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """string_input_producer -> reader -> shuffle_batch: two epochs, then OutOfRangeError
    ends training; the report, taken after the block, shows every producer ended."""
    result = example_main("input_pipeline")([*SMALL, "--backend", backend])
    assert result["exact"]
    assert result["examples"] == 2 * 3 * 40
    assert result["steps"] == 30
    report = result["report"]
    assert "input-bound:" in report
    assert "'shuffle_batch' 0/3 alive" in report
    assert "'string_input_producer' 0/1 alive" in report
    assert "awaiting its first example" not in report  # dtypes and shapes are given
    out = one_line(capsys.readouterr().out)
    assert "Trained 30 steps on 240 examples (3 files x 40 records x 2 epochs)" in out
    assert "every one of the 120 records reached the trainer exactly 2 times" in out
    assert "OutOfRangeError after the last epoch ended training cleanly" in out
    assert "input-bound, is the share of the training loop's time" in out
    losses = re.search(r"fell from ([0-9.]+) at the first step to ([0-9.]+)", out)
    assert losses is not None
    assert float(losses[2]) < float(losses[1])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_pipeline_example_reports_stages(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The Pipeline version does the same job, prints the stage report, a legend for it
    and one sentence on what the bottleneck line means."""
    result = example_main("pipeline")([*SMALL, "--backend", backend])
    assert result["exact"]
    assert result["examples"] == 2 * 3 * 40
    assert "map(read)" in result["report"]
    assert "bottleneck:" in result["report"]
    out = one_line(capsys.readouterr().out)
    assert "How to read the table" in out
    assert "The bottleneck line names what limited the speed" in out
    assert "every one of the 120 records reached the trainer exactly 2 times" in out
    assert re.search(r"Reading ended on 3 threads \(--threads\), \d+% busy", out)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_pipeline_example_lets_the_tuner_choose_the_readers_by_default(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --threads, a slow store (2 ms per record) makes the tuner add reader
    threads; the report shows the map as tuned, and every record still arrives once
    per epoch."""
    i = SMALL.index("--threads")
    args = SMALL[:i] + SMALL[i + 2 :]
    result = example_main("pipeline")(
        [*args, "--records", "100", "--read-ms", "2", "--backend", backend]
    )
    assert result["exact"]
    assert "(auto" in result["report"]
    out = one_line(capsys.readouterr().out)
    m = re.search(r"Reading ended on (\d+) threads \(chosen by the tuner\)", out)
    assert m is not None, out
    assert int(m[1]) > 1


@pytest.mark.parametrize("bad", ["0", "-2", "fast"])
def test_pipeline_example_refuses_a_bad_thread_count(bad: str) -> None:
    done = run_example("pipeline", "--threads", bad)
    assert done.returncode == 2
    assert f"expected 'auto' or a number >= 1, got '{bad}'" in done.stderr


def test_pipeline_example_runs_as_a_script() -> None:
    """``python examples/pipeline.py`` with small flags exits 0 and says what it showed."""
    done = run_example("pipeline", *SMALL, "--read-ms", "0.1")
    assert done.returncode == 0, done.stderr
    out = one_line(done.stdout)
    assert "bottleneck:" in out
    assert "What this showed:" in out
    assert "every one of the 120 records reached the trainer exactly 2 times" in out


def test_input_pipeline_runs_as_a_script() -> None:
    done = run_example("input_pipeline", *SMALL, "--backend", "trio")
    assert done.returncode == 0, done.stderr
    assert "What this showed:" in done.stdout
