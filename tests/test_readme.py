"""README's code that a newcomer copies runs as printed: the 30-line tour, and the
resumable user source of the checkpoint section."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import aqueue
from aqueue.testing import drain

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_block_after(heading: str, contains: str) -> str:
    """The first ```python block after ``heading`` whose text holds ``contains``."""
    text = README.read_text()
    start = text.index(heading)
    for block in re.findall(r"```python\n(.*?)```", text[start:], flags=re.S):
        if contains in block:
            return textwrap.dedent(block)
    raise AssertionError(f"README: no python block holding {contains!r} after {heading!r}")


def test_the_tour_runs_and_prints_what_its_comments_say(tmp_path: Path) -> None:
    code = _python_block_after("## A tour in 30 lines", "anyio.run(main)")
    assert len(code.splitlines()) <= 60
    script = tmp_path / "tour.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[1, 2, 3]"
    assert lines[1] == "(32, 84, 84)"
    assert "input-bound" in done.stdout
    assert "bottleneck" in done.stdout


@pytest.mark.anyio
async def test_the_resumable_source_example_resumes_where_it_was() -> None:
    code = _python_block_after("## Checkpoint and resume", "class Lines")
    scope: dict[str, object] = {"aqueue": aqueue}
    exec(compile(code, "README-Lines", "exec"), scope)
    lines_cls = scope["Lines"]
    pipe = scope["pipe"]
    assert isinstance(pipe, aqueue.Pipeline)

    # Longer than the pipeline's queues hold, so the source itself must resume.
    n = 5_000
    first_pipe = aqueue.Pipeline(lines_cls(n)).map(str.upper)  # type: ignore[operator]
    async with first_pipe.open() as items:
        first = [await items.__anext__() for _ in range(10)]
        state = await items.checkpoint()
        rest = await drain(items)
    assert first == [f"RECORD {i}" for i in range(10)]
    assert rest == [f"RECORD {i}" for i in range(10, n)]

    resumed_pipe = aqueue.Pipeline(lines_cls(n)).map(str.upper)  # type: ignore[operator]
    async with resumed_pipe.open(state=state) as items:
        assert await drain(items) == rest
