"""The runner examples run end to end with small sizes (experience replay, file
prefetching, async workers), on asyncio and on trio."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import example_main, one_line, run_example

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mode", ["runner", "threads"])
def test_experience_replay_samples_frame_stacks_stored_once(
    mode: str, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--replay trajectory``: the games append frames once to a TrajectoryTable; every
    sampled stack is 4 consecutive frames of one episode, every n-step return equals
    the step-by-step one, and the table holds at most --capacity frames, far fewer than
    stacking each window would."""
    result = example_main("experience_replay")(
        [
            "--replay", "trajectory",
            "--steps", "20",
            "--capacity", "300",
            "--min-after-dequeue", "50",
            "--frame-ms", "0",
            "--mode", mode,
            "--backend", backend,
        ]
    )  # fmt: skip
    assert result["checked"] == 20 * 32
    assert (result["crossed"], result["wrong_returns"]) == (0, 0)
    assert 0 < result["frames_held"] <= 300
    assert result["windows_held"] * result["length"] > 2 * result["frames_held"]
    out = one_line(capsys.readouterr().out)
    assert "every one of the 640 sampled stacks was 4 consecutive frames" in out
    assert "equalled the one computed step by step" in out
    assert ("'replay'" in result["report"]) == (mode == "runner")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mode", ["runner", "threads"])
def test_experience_replay_every_screen_distinct(
    mode: str, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four game threads fill the replay queue; every dequeued screen is distinct, the
    script says so, and it shows one input-bound figure (the report's, in runner mode,
    taken after the games have ended)."""
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
    assert result["produced"] >= result["enqueued"]
    assert result["enqueued"] == result["consumed"] + result["left_in_queue"]
    out = one_line(capsys.readouterr().out)
    assert "every one of the 640 screens the trainer dequeued was distinct" in out
    assert "every game thread ended when training did" in out
    assert "set the pace" in out
    figures = re.findall(r"input-bound:? \d+%|spent \d+% of the run waiting", out)
    assert len(figures) == 1, figures
    if mode == "runner":
        assert figures[0].startswith("input-bound: ")
        assert "'games' 0/4 alive" in result["report"]
        assert "'replay' (closed)" in result["report"]
        assert "4/4 alive" not in out
        assert "The report's input-bound line tells who set the pace" in out
    else:
        assert result["report"] == ""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_prefetch_files_trains_on_every_record(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With and without prefetch, the trainer sees every record exactly once per epoch;
    the script says how much loading time prefetching hid, with one input-bound figure."""
    result = example_main("prefetch_files")(
        [
            "--files", "4",
            "--records", "50",
            "--features", "8",
            "--batch", "16",
            "--io-ms", "2",
            "--step-ms", "1",
            "--epochs", "2",
            "--backend", backend,
        ]
    )  # fmt: skip
    assert result["records"] == 400
    assert result["plain_examples"] == 400
    assert result["prefetch_examples"] == 400
    out = one_line(capsys.readouterr().out)
    assert "without prefetch:" in out
    assert "with prefetch:" in out
    assert "Without prefetch they add up" in out
    assert re.search(r"prefetching hid \d+% of the loading time behind training", out)
    assert "both runs trained on all 400 examples" in out
    assert len(re.findall(r"input-bound:? \d+%", out)) == 1
    assert "'file-loader' 0/1 alive" in out


def test_prefetch_files_without_latency_says_there_was_nothing_to_overlap(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example_main("prefetch_files")(
        ["--files", "2", "--records", "20", "--features", "4", "--io-ms", "0"]
    )
    out = one_line(capsys.readouterr().out)
    assert "there was nothing to overlap" in out
    assert "both runs trained on all 40 examples" in out


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_workers_are_stopped_by_the_coordinator(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The main task averages the workers' values, then request_stop() ends them all;
    the script accounts for every step a worker took (averaged, refused by the closed
    queue, or left in it)."""
    result = example_main("async_workers")(
        ["--workers", "3", "--steps", "30", "--work-ms", "0", "--backend", backend]
    )
    assert result["runner_alive"] is False
    assert sum(result["averaged"]) == 3 * 30
    steps = sum(result["worker_steps"])
    assert steps == sum(result["averaged"]) + result["refused"] + result["left_in_queue"]
    assert abs(result["estimate"] - result["target"]).max() < 0.5
    out = one_line(capsys.readouterr().out)
    assert "the main task averaged 90 of their results in 30 rounds" in out
    assert f"so the workers took {steps} steps for 90 averaged results" in out
    assert "No worker was left running." in out
    assert "'workers' 0/3 alive" in out
    for worker in range(3):
        assert f"worker {worker}: took " in out


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
    out = one_line(capsys.readouterr().out)
    assert f"plot: {path}" in out
    assert "the periods in which the trainer waited for screens are shaded red" in out
    assert len(re.findall(r"input-bound:? \d+%", out)) == 1


def test_experience_replay_games_get_ahead_of_a_slower_trainer(tmp_path: Path) -> None:
    """The watching guide's claim: with --train-ms 20 the trainer takes at most 1,600 screens/s and
    the games (a frame per millisecond, four of them) render up to 4,000, so once the
    queue has filled to its floor the trainer no longer waits: the plot's shading (an
    interval in which it waited more than half the time) stops after the first fill."""
    pytest.importorskip("matplotlib")
    result = example_main("experience_replay")(
        [
            "--steps", "60",
            "--min-after-dequeue", "200",
            "--train-ms", "20",
            "--monitor-interval", "0.05",
            "--plot", str(tmp_path / "replay.png"),
        ]
    )  # fmt: skip
    bound = result["monitor"].history().input_bound
    shaded = [not (b <= 0.5) for b in bound]  # (NaN: not measured, counted as shaded)
    assert False in shaded, list(bound)
    first_clear = shaded.index(False)
    assert not any(shaded[first_clear:]), list(bound)


def test_experience_replay_live_off_a_terminal_prints_only_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--live`` with standard output captured (not a terminal) shows no live line and
    no note about one; the run and its claims are unchanged."""
    result = example_main("experience_replay")(
        ["--steps", "5", "--capacity", "200", "--min-after-dequeue", "20", "--frame-ms", "0",
         "--live", "--monitor-interval", "0.01"]
    )  # fmt: skip
    assert result["duplicates"] == 0
    out = capsys.readouterr().out
    assert "\r" not in out
    assert "live line" not in out
    assert "every one of the 160 screens the trainer dequeued was distinct" in one_line(out)


def test_experience_replay_plot_needs_the_runner_mode() -> None:
    with pytest.raises(SystemExit):
        example_main("experience_replay")(["--mode", "threads", "--plot", "x.png"])


def test_experience_replay_runs_as_a_script() -> None:
    """``python examples/experience_replay.py`` works as a command."""
    done = run_example(
        "experience_replay",
        "--steps", "5",
        "--capacity", "200",
        "--min-after-dequeue", "20",
        "--frame-ms", "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = one_line(done.stdout)
    assert "every one of the 160 screens the trainer dequeued was distinct" in out
    assert "What this showed:" in out
