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
