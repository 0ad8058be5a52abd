"""README's replay-table example runs as printed and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

pytestmark = pytest.mark.timeout(60)


def test_the_replay_table_example_runs(tmp_path: Path) -> None:
    """The block of the "Replay tables" section: 1,000 frames in, a prioritized sample
    of 256, its weights, every key found, and a timed-out sample that counted nothing."""
    text = README.read_text()
    section = text[text.index("## Replay tables") :]
    code = textwrap.dedent(re.findall(r"```python\n(.*?)```", section, flags=re.S)[0])
    script = tmp_path / "replay.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == "(256, 84, 84) [0 1 2] 1.0 True"
    assert second == "256"


def test_the_trajectory_example_runs(tmp_path: Path) -> None:
    """The block of "Trajectories": 100 frames of one episode stored once, 94 windows of
    7 (a stack and the stack 3 steps later), a sample shaped (32, 4, 84, 84) twice and
    the 3-step returns of its 32 windows."""
    text = README.read_text()
    section = text[text.index("### Trajectories: frames stored once") :]
    code = textwrap.dedent(re.findall(r"```python\n(.*?)```", section, flags=re.S)[0])
    script = tmp_path / "trajectories.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(32, 4, 84, 84) (32, 4, 84, 84) (32,) 94 100"
    assert "`(32, 4, 84, 84) (32, 4, 84, 84) (32,) 94 100`" in section
