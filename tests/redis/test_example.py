"""examples/distributed_replay.py runs end to end (small sizes) against the session's
server and says, in plain words, that every screen arrived exactly once."""

from __future__ import annotations

import os
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
