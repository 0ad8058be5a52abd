"""README's code that a newcomer copies runs as printed (the 30-line tour, and the
resumable user source of the checkpoint section), and every Python block of it, with
the typing checks of tests/typing, passes ``mypy --strict`` (skipped, saying so, where
mypy is not installed)."""

from __future__ import annotations

import getpass
import re
import subprocess
import sys
import tempfile
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


# -- every Python block type-checks ---------------------------------------------------

ROOT = README.parent

# What README's snippets take as given (a game environment, a training step, file
# names, a loader, ...), as typed stand-ins. Each block is checked as the body of an
# async function after this prelude, so top-level ``await`` type-checks, and a name a
# block assigns is its own (it shadows the stand-in).
PRELUDE = """\
from __future__ import annotations

import os
import threading
from typing import Any, NamedTuple

import anyio
import numpy as np
import numpy.typing as npt
import pytest

import aqueue
import aqueue.redis


class Env:
    def grab_screen(self) -> npt.NDArray[np.uint8]:
        return np.zeros((84, 84, 4), np.uint8)


class Record(NamedTuple):
    path: str
    size: int


def train_step(batch: Any) -> int:
    return 0


def read_one() -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    return np.zeros(3, np.float32), np.zeros((), np.int64)


def load(path: str) -> bytes:
    return path.encode()


async def decode(raw: bytes) -> npt.NDArray[np.uint8]:
    return np.frombuffer(raw, np.uint8)


envs = [Env() for _ in range(4)]
steps = 100
files = ["a.csv", "b.csv"]
paths = ["a.jpg", "b.jpg"]
replay = aqueue.RandomShuffleQueue(1000, 100, np.uint8, (84, 84, 4), seed=0)
pipe = aqueue.Pipeline(paths).map(load).batch(32)
actor_id, n_actors = 0, 4
"""

MYPY_INI = """\
[mypy]
strict = True
warn_unused_ignores = True
mypy_path = {root}

[mypy-trio.*,msgpack.*,tqdm.*,torch.*]
ignore_missing_imports = True
"""


def readme_python_blocks() -> list[tuple[int, str]]:
    """Every ```python block of README.md (indented ones in lists too), dedented, with
    the README line its code starts on."""
    text = README.read_text()
    blocks = []
    for m in re.finditer(r"^( *)```python\n(.*?)^\1```", text, flags=re.M | re.S):
        first = text.count("\n", 0, m.start(2)) + 1
        blocks.append((first, textwrap.dedent(m.group(2))))
    return blocks


def test_readme_has_python_blocks() -> None:
    """The extraction sees the blocks (an empty list would check nothing)."""
    blocks = readme_python_blocks()
    assert len(blocks) >= 10
    assert any("anyio.run(main)" in code for _, code in blocks)
    assert any("class Lines" in code for _, code in blocks)  # (indented in a list)


def test_every_python_block_of_the_readme_type_checks_strictly(tmp_path: Path) -> None:
    """``mypy --strict`` over each README Python block (as the body of an async
    function after PRELUDE) and over tests/typing, in one run; errors are reported at
    their README line."""
    api = pytest.importorskip("mypy.api", reason="mypy is not installed: nothing type-checks")
    prelude_lines = PRELUDE.count("\n") + 2  # then the line "async def _readme_block"
    files, origin = [], {}
    for first, code in readme_python_blocks():
        path = tmp_path / f"readme_line_{first}.py"
        body = textwrap.indent(code, "    ") or "    pass\n"
        path.write_text(f"{PRELUDE}\n\nasync def _readme_block() -> None:\n{body}")
        files.append(str(path))
        origin[path.name] = first
    files += [str(p) for p in sorted((ROOT / "tests" / "typing").glob("check_*.py"))]
    config = tmp_path / "mypy.ini"
    config.write_text(MYPY_INI.format(root=ROOT))
    # A cache of its own beside the system's temporary files: later runs take a second
    # instead of a cold ten (mypy checks each file's hash, so it is never stale).
    cache = Path(tempfile.gettempdir()) / f"aqueue-readme-mypy-{getpass.getuser()}"
    out, err, status = api.run(["--config-file", str(config), "--cache-dir", str(cache), *files])
    problems = []
    for line in out.splitlines():
        m = re.match(r"(?:.*[/\\])?(readme_line_(\d+)\.py):(\d+): (.*)", line)
        if m:
            readme_line = origin[m[1]] + int(m[3]) - prelude_lines - 2
            problems.append(f"README.md:{readme_line}: {m[4]}")
        elif ": error:" in line or ": note:" in line:
            problems.append(line)
    assert not problems, "\n".join(problems)
    assert status == 0, out + err


# -- "How aqueue is built": the tree names every file of every folder ----------------------

_PACKAGE = ROOT / "aqueue"


def _design_tree() -> dict[str, set[str]]:
    """The files README's design tree names per folder (relative to ``aqueue/``; ``""`` is
    the package itself): a folder row opens a folder, ``name.py`` / ``name.lua`` rows and
    names on the folder's own row are its files."""
    text = README.read_text()
    section = text[text.index("## How aqueue is built") :]
    block = section[section.index("```\n") + 4 :]
    block = block[: block.index("```")]
    tree: dict[str, set[str]] = {}
    stack: list[tuple[int, str]] = []  # (indent of the row's name, folder path)
    for row in block.splitlines():
        body = row.lstrip("│├└─ ")
        if not body:
            continue
        indent = len(row) - len(body)
        name = body.split()[0]
        files = set(re.findall(r"\b[\w]+\.(?:py|lua)\b", body))
        if name == "aqueue/":
            stack = [(indent, "")]
            tree[""] = files
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        if name.endswith("/"):
            path = f"{parent}{name}"
            stack.append((indent, path))
            tree[path] = files
        elif name.endswith((".py", ".lua")):
            tree[parent].add(name)
        # else: a description's continuation
    return tree


def test_the_design_tree_names_every_file_of_every_folder() -> None:
    """README's "How aqueue is built" lists every folder of the package and every file
    of each but ``__init__.py`` (a file added, moved or removed without its row fails),
    and names nothing that is not there."""
    tree = _design_tree()
    on_disk: dict[str, set[str]] = {}
    for folder in [_PACKAGE, *(p.parent for p in _PACKAGE.rglob("__init__.py"))]:
        rel = folder.relative_to(_PACKAGE).as_posix()
        key = "" if rel == "." else f"{rel}/"
        on_disk[key] = {
            p.name
            for p in folder.iterdir()
            if p.suffix in (".py", ".lua") and p.is_file() and p.name != "__init__.py"
        }
    tree = {k: v - {"__init__.py"} for k, v in tree.items()}  # every folder has one
    assert len(on_disk) > 10
    assert sorted(tree) == sorted(on_disk)
    assert {k: sorted(v ^ tree[k]) for k, v in on_disk.items() if v != tree[k]} == {}
