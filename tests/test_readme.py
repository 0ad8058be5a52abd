"""README is a front page: at most 200 lines, every link of it resolves (a page of the
documentation site, and a heading of it after ``#``), the 30-line tour runs as printed,
and every Python block of it, with the typing checks of tests/typing, passes
``mypy --strict`` (skipped, saying so, where mypy is not installed). The rest of what
README used to hold lives on the documentation site, checked by tests/test_docs.py."""

from __future__ import annotations

import getpass
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from test_docs import DOCS, FENCE, LINK, anchors_of

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


# -- every Python block type-checks ---------------------------------------------------

ROOT = README.parent

# What README's snippets may take as given, as typed stand-ins (the tour defines all it
# uses). Each block is checked as the body of an async function after this prelude, so
# top-level ``await`` type-checks, and a name a block assigns is its own.
PRELUDE = """\
from __future__ import annotations

import anyio
import numpy as np

import aqueue
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
    assert any("anyio.run(main)" in code for _, code in blocks)


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


# -- a front page: short, and every link resolves ------------------------------------------

MAX_LINES = 200


def test_the_readme_is_a_front_page_of_at_most_200_lines() -> None:
    n = len(README.read_text().splitlines())
    assert n <= MAX_LINES, (
        f"README.md has {n} lines, more than {MAX_LINES}: move the detail to a page of docs/"
    )


def readme_links() -> list[str]:
    """The relative targets of README's Markdown links (code blocks left out)."""
    text = FENCE.sub("", README.read_text())
    return [m["target"] for m in LINK.finditer(text) if not re.match(r"[a-z]+:", m["target"])]


def test_every_readme_link_resolves() -> None:
    """Each relative link names a file of the repository and, with ``#``, a heading of
    that page; the table of where to go links every guide, migration page and reference
    page of the site."""
    problems = []
    for target in readme_links():
        file, _, frag = target.partition("#")
        dest = (ROOT / file).resolve()
        if not dest.is_file() or ROOT not in dest.parents:
            problems.append(f"README.md: {target}: no such file")
        elif frag and frag not in anchors_of(dest):
            problems.append(f"README.md: {target}: no such heading")
    assert not problems, "\n".join(problems)
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in readme_links()}
    wanted = [
        *sorted((DOCS / "guides").glob("*.md")),
        *sorted((DOCS / "migration").glob("*.md")),
        *(
            DOCS / p
            for p in (
                "index.md",
                "tour.md",
                "semantics.md",
                "design.md",
                "benchmarks.md",
                "api/index.md",
            )
        ),
    ]
    assert len(wanted) >= 18
    assert [p.relative_to(DOCS).as_posix() for p in wanted if p not in linked] == []
