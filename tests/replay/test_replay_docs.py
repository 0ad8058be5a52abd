"""The replay guide's examples print what their comments and the text say (the docs
suite runs every block; these check the output a reader is told to expect)."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "replay.md"

pytestmark = pytest.mark.timeout(60)


def _first_python_block(heading: str) -> tuple[str, str]:
    """The first ```python block under ``heading`` of the guide, and the section's text."""
    text = GUIDE.read_text()
    section = text[text.index(heading) :]
    return textwrap.dedent(re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]), section


def test_the_replay_table_example_prints_what_its_comments_say() -> None:
    """The block of "A table, a sample, new priorities": 1,000 frames in, a prioritized
    sample of 256, its weights, every key found, and a timed-out sample that counted
    nothing. (It awaits at the top level, as in ``python -m asyncio``.)"""
    code, _ = _first_python_block("## A table, a sample, new priorities")
    compiled = compile(code, str(GUIDE), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    out = io.StringIO()
    namespace: dict[str, Any] = {}

    async def body() -> None:
        with contextlib.redirect_stdout(out):
            await eval(compiled, namespace)

    anyio.run(body)
    first, second = out.getvalue().splitlines()
    assert first == "(256, 84, 84) [0 1 2] 1.0 True"
    assert second == "256"


def test_the_trajectory_example_prints_what_the_text_says(tmp_path: Path) -> None:
    """The block of "Trajectories": 100 frames of one episode stored once, 94 windows of
    7 (a stack and the stack 3 steps later), a sample shaped (32, 4, 84, 84) twice and
    the 3-step returns of its 32 windows; the text quotes that line."""
    code, section = _first_python_block("### Trajectories: frames stored once")
    script = tmp_path / "trajectories.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(32, 4, 84, 84) (32, 4, 84, 84) (32,) 94 100"
    assert "`(32, 4, 84, 84) (32, 4, 84, 84) (32,) 94 100`" in section
