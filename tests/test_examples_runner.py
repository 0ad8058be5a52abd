"""The runner examples run end to end with small sizes (experience replay, file
prefetching, async workers), on asyncio and on trio."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example_main(name: str) -> Any:
    """The ``main(argv)`` function of examples/<name>.py, loaded without running it."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=f"example_{name}")["main"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mode", ["runner", "threads"])
def test_experience_replay_every_screen_distinct(mode: str, backend: str) -> None:
    """Four game threads fill the replay queue; every dequeued screen is distinct."""
    result = example_main("experience_replay")(
        [
            "--steps", "20",
            "--capacity", "300",
            "--min-after-dequeue", "50",
            "--frame-ms", "0",
            "--mode", mode,
            "--backend", backend,
        ]
    )  # fmt: skip
    assert result["consumed"] == 20 * 32
    assert result["distinct"] == result["consumed"]
    assert result["duplicates"] == 0
    assert result["produced"] >= result["consumed"] + 50
    if mode == "runner":
        assert "input-bound:" in result["report"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_prefetch_files_trains_on_every_record(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With and without prefetch, the trainer sees every record exactly once per epoch."""
    result = example_main("prefetch_files")(
        [
            "--files", "4",
            "--records", "50",
            "--features", "8",
            "--batch", "16",
            "--io-ms", "1",
            "--step-ms", "0",
            "--epochs", "2",
            "--backend", backend,
        ]
    )  # fmt: skip
    assert result["records"] == 400
    assert result["plain_examples"] == 400
    assert result["prefetch_examples"] == 400
    out = capsys.readouterr().out
    assert "with prefetch" in out
    assert "without prefetch" in out


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_workers_are_stopped_by_the_coordinator(backend: str) -> None:
    """The main task averages the workers' values, then request_stop() ends them all."""
    result = example_main("async_workers")(
        ["--workers", "3", "--steps", "30", "--work-ms", "0", "--backend", backend]
    )
    assert result["runner_alive"] is False
    assert sum(result["worker_steps"]) >= 3 * 30
    assert abs(result["estimate"] - result["target"]).max() < 0.5


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_experience_replay_plots_its_queue(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--plot out.png`` monitors the replay queue and saves a real PNG of it; the
    script says in words what the plot shows."""
    pytest.importorskip("matplotlib")
    import matplotlib.image

    path = tmp_path / "replay.png"
    result = example_main("experience_replay")(
        [
            "--steps", "20",
            "--capacity", "300",
            "--min-after-dequeue", "50",
            "--frame-ms", "0",
            "--backend", backend,
            "--monitor-interval", "0.01",
            "--plot", str(path),
        ]
    )  # fmt: skip
    assert result["duplicates"] == 0
    assert len(result["monitor"].history()) >= 1
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert 20_000 < len(data) < 2_000_000
    image = matplotlib.image.imread(str(path))
    assert image.shape[0] >= 400
    assert image.shape[1] >= 800
    out = capsys.readouterr().out
    assert f"plot: {path}" in out
    assert "the trainer waited for screens" in out


def test_experience_replay_plot_needs_the_runner_mode() -> None:
    with pytest.raises(SystemExit):
        example_main("experience_replay")(["--mode", "threads", "--plot", "x.png"])


def test_experience_replay_runs_as_a_script() -> None:
    """``python examples/experience_replay.py`` works as a command."""
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "experience_replay.py"),
            "--steps", "5",
            "--capacity", "200",
            "--min-after-dequeue", "20",
            "--frame-ms", "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "all distinct" in done.stdout
