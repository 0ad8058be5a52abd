"""The checkpoint guide's resumable source (a reader's own class with ``state()`` and
``restore()``) resumes where it was, past what the pipeline's queues hold, so the
source itself must resume (the docs suite runs the block; this checks the claim)."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

import aqueue
from aqueue.testing import drain

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "checkpoint.md"


def lines_class() -> type:
    """The ``Lines`` class as the guide defines it (its block's other statements await
    at the top level; only the class is taken)."""
    text = GUIDE.read_text()
    section = text[text.index("## Sources that resume") :]
    block = next(
        textwrap.dedent(b)
        for b in re.findall(r"```python\n(.*?)```", section, flags=re.S)
        if "class Lines" in b
    )
    tree = ast.parse(block)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Lines"]
    assert len(classes) == 1
    scope: dict[str, object] = {}
    exec(compile(ast.Module(body=classes, type_ignores=[]), str(GUIDE), "exec"), scope)
    cls = scope["Lines"]
    assert isinstance(cls, type)
    return cls


@pytest.mark.anyio
async def test_the_guides_resumable_source_resumes_where_it_was() -> None:
    lines = lines_class()
    n = 5_000
    first_pipe = aqueue.Pipeline(lines(n)).map(str.upper)
    async with first_pipe.open() as items:
        first = [await items.__anext__() for _ in range(10)]
        state = await items.checkpoint()
        rest = await drain(items)
    assert first == [f"RECORD {i}" for i in range(10)]
    assert rest == [f"RECORD {i}" for i in range(10, n)]

    resumed_pipe = aqueue.Pipeline(lines(n)).map(str.upper)
    async with resumed_pipe.open(state=state) as items:
        assert await drain(items) == rest
