"""Every Python block of the documentation site type-checks with ``mypy --strict``.

A page's blocks run in order in one namespace (``tests/test_docs.py``), so each page is
checked as one unit: its blocks one after the other as the body of one ``async def``
(the pages run a top-level ``await`` on asyncio). Blocks of pytest tests are checked one
file each, as they run. Blocks marked as not run are checked too: a reader copies them
all. Errors are reported at their page and line.
"""

from __future__ import annotations

import getpass
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from test_docs import DOCS, PAGES, Block, blocks_of, page_name

ROOT = Path(__file__).resolve().parents[1]

MYPY_INI = """\
[mypy]
strict = True
warn_unused_ignores = True
mypy_path = {root}

[mypy-trio.*,msgpack.*,tqdm.*,torch.*,matplotlib.*]
ignore_missing_imports = True
"""

TEST_BLOCK = re.compile(r"^(?:async )?def test_", flags=re.M)


def modules(tmp_path: Path) -> tuple[list[str], dict[str, list[tuple[int, int, Block]]]]:
    """Write one module per page (and one per block of tests); return the files and, per
    file name, the spans ``(first module line, last, block)`` that map lines back."""
    files: list[str] = []
    spans: dict[str, list[tuple[int, int, Block]]] = {}

    def write(name: str, blocks: list[Block], *, body: bool) -> None:
        lines = ["from __future__ import annotations"]
        indent = ""
        if body:  # mypy has no top-level ``async with`` / ``async for``
            lines.append("async def _page() -> None:")
            indent = "    "
        mapping = []
        for block in blocks:
            first = len(lines) + 1
            lines.extend(indent + row for row in block.code.rstrip("\n").split("\n"))
            mapping.append((first, len(lines), block))
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        files.append(str(path))
        spans[name] = mapping

    for page in PAGES:
        blocks = blocks_of(page)
        if not blocks:
            continue
        stem = re.sub(r"\W", "_", page_name(page).removesuffix(".md"))
        tests = [b for b in blocks if TEST_BLOCK.search(b.code)]
        rest = [b for b in blocks if not TEST_BLOCK.search(b.code)]
        if rest:
            write(f"docs_{stem}.py", rest, body=True)
        for block in tests:
            write(f"docs_{stem}_line_{block.line}.py", [block], body=False)
    return files, spans


def test_every_page_is_checked() -> None:
    """The extraction sees the pages (an empty list would check nothing)."""
    files, spans = modules(Path(tempfile.mkdtemp()))
    assert len(files) >= 10
    assert sum(len(s) for s in spans.values()) >= 25


def test_every_python_block_of_the_docs_type_checks_strictly(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api", reason="mypy is not installed: nothing type-checks")
    if tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 4):
        # The pages write ``np.ndarray`` bare, as readers do; numpy's stubs give its type
        # parameters defaults in the versions the pages are checked with (2.4 on), and
        # older ones make ``--strict`` ask for them (Python 3.10 stops at numpy 2.2).
        pytest.skip(f"numpy {np.__version__}: bare np.ndarray is checked from numpy 2.4 on")
    files, spans = modules(tmp_path)
    config = tmp_path / "mypy.ini"
    config.write_text(MYPY_INI.format(root=ROOT))
    # mypy checks each file's hash, so a cache of its own is never stale.
    cache = Path(tempfile.gettempdir()) / f"aqueue-docs-mypy-{getpass.getuser()}"
    out, err, status = api.run(["--config-file", str(config), "--cache-dir", str(cache), *files])
    problems = []
    for line in out.splitlines():
        m = re.match(r"(?:.*[/\\])?(docs_\w+\.py):(\d+): (.*)", line)
        if m:
            n = int(m[2])
            where = next(
                (
                    f"docs/{b.page}:{b.line + n - first}"
                    for first, last, b in spans[m[1]]
                    if first <= n <= last
                ),
                m[1],
            )
            problems.append(f"{where}: {m[3]}")
        elif ": error:" in line or ": note:" in line:
            problems.append(line)
    assert not problems, "\n".join(problems)
    assert status == 0, out + err


def test_a_block_starts_where_the_mapping_says(tmp_path: Path) -> None:
    """The line mapping points into the page: a block's first row in the checked
    module is the block's first line, indented into the page's body."""
    page = DOCS / "tour.md"
    blocks = blocks_of(page)
    assert blocks
    _, spans = modules(tmp_path)
    name = "docs_tour.py"
    first, _, block = spans[name][-1]
    assert block.page == "tour.md"
    row = (tmp_path / name).read_text().split("\n")[first - 1]
    assert row == "    " + block.code.split("\n")[0]
