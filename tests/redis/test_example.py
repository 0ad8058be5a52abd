"""examples/distributed_replay.py runs end to end (small sizes) against the session's
server and says, in plain words, that every screen arrived exactly once."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed_replay.py"


def test_distributed_replay_example(url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--url", url, "--screens", "15", "--batch", "8"],
        capture_output=True,
        text=True,
        timeout=80,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "received 120 distinct screens of 120" in done.stdout
    assert "every screen arrived exactly once" in done.stdout
    assert "closed itself after the last actor" in done.stdout


def test_distributed_replay_on_two_hosts(url: str) -> None:
    """The two-host recipe of README: a trainer process (--role trainer) and, started
    separately, an actors process (--role actors) that share only the server URL."""
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    common = ["--url", url, "--name", "two-hosts", "--actors", "3", "--screens", "10"]
    trainer = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--role", "trainer", *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert trainer.stdout is not None
        assert "The trainer is ready" in trainer.stdout.readline()  # registered its guard
        actors = subprocess.run(
            [sys.executable, str(EXAMPLE), "--role", "actors", *common],
            capture_output=True,
            text=True,
            timeout=80,
            env=env,
            check=False,
        )
        out, err = trainer.communicate(timeout=80)  # the rest of its output
    finally:
        trainer.kill()
    assert actors.returncode == 0, actors.stderr
    assert "3 actor processes sent their screens and ended" in actors.stdout
    assert trainer.returncode == 0, err
    assert "received 60 distinct screens of 60" in out
    assert "every screen arrived exactly once" in out


def _trainer(url: str, *args: str) -> subprocess.Popen[str]:
    """A trainer process (--role trainer), once it has said it is ready."""
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    trainer = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--role", "trainer", "--url", url, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own terminal, as it were: Ctrl-C reaches it alone
    )
    assert trainer.stdout is not None
    assert "The trainer is ready" in trainer.stdout.readline()  # registered its guard
    return trainer


def test_the_trainer_counts_what_the_actors_sent(url: str) -> None:
    """Actors started with another --screens than the trainer: the trainer checks and
    reports what they sent (3 x 2 x 10 = 60 screens), and its rates are computed from
    what arrived."""
    common = ["--name", "other-screens", "--actors", "3"]
    few = ["--screens", "10"]
    trainer = _trainer(url, *common, "--screens", "25")
    try:
        env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
        actors = subprocess.run(
            [sys.executable, str(EXAMPLE), "--role", "actors", "--url", url, *common, *few],
            capture_output=True,
            text=True,
            timeout=80,
            env=env,
            check=False,
        )
        out, err = trainer.communicate(timeout=80)
    finally:
        trainer.kill()
    assert actors.returncode == 0, actors.stderr
    assert trainer.returncode == 0, out + err
    text = " ".join(out.split())
    assert "received 60 distinct screens of 60 sent by 3 actor processes" in text
    assert "every screen arrived exactly once" in text
    m = re.search(r"It took ([0-9.]+) s: ([0-9,]+) screens/s \(([0-9]+) MB/s\)", text)
    assert m is not None, text
    rate, mb = float(m[2].replace(",", "")), int(m[3])
    # 60 frames of 84 x 84 x 4 bytes arrived; the MB/s follow from the screens/s.
    assert abs(mb - rate * 84 * 84 * 4 / 1e6) <= 1


async def _until_screens_flow(url: str, name: str) -> None:
    """Wait until actors have put screens into the shared queue (they are running)."""
    import anyio
    import numpy as np

    import aqueue.redis

    async with aqueue.redis.connect(url) as server:
        q = await server.random_shuffle_queue(name, 1000, 100, np.uint8, (84, 84, 4))
        with anyio.fail_after(60):
            while (await q.statistics()).enqueued_total == 0:  # noqa: ASYNC110 - other processes
                await anyio.sleep(0.05)


def test_ctrl_c_prints_one_line_per_process(url: str) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) on the actors'
    host and then on the trainer's: one line per actor process, one for the trainer,
    exit status 130, and no traceback."""
    import anyio

    common = ["--name", "ctrl-c", "--actors", "3", "--screens", "1000000"]
    trainer = _trainer(url, *common)
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1])}
    actors = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--role", "actors", "--url", url, *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        anyio.run(_until_screens_flow, url, "ctrl-c")
        os.killpg(trainer.pid, signal.SIGINT)  # Ctrl-C on both hosts
        os.killpg(actors.pid, signal.SIGINT)
        out, err = actors.communicate(timeout=60)
        t_out, t_err = trainer.communicate(timeout=60)
    finally:
        actors.kill()
        trainer.kill()
    assert actors.returncode == 130, out + err
    assert "Traceback" not in err, err
    lines = out.splitlines()
    assert len(lines) == 3, out
    said = r"actor ([0-2]): stopped \(Ctrl-C\) (after \d+ screens|before it started)\."
    matches = [re.fullmatch(said, line) for line in lines]
    assert all(matches), out
    assert sorted(m[1] for m in matches if m) == ["0", "1", "2"]
    assert trainer.returncode == 130, t_out + t_err
    assert "Traceback" not in t_err, t_err
    assert t_out.splitlines() == ["trainer: interrupted (Ctrl-C)."]


def test_distributed_replay_roles_need_a_url() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--role", "actors"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "--role actors runs one side of a two-host run: pass --url" in done.stderr
