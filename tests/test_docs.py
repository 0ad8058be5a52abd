"""The documentation site (docs/) is checked as code: every Python block of every page
runs, every internal link resolves, the API reference names every public name, the
design page's file lists are the folders on disk, the guarantees page names tests that
exist, and Sphinx builds the site with warnings as errors.

How a page's blocks run: in order, in one namespace per page (a page reads as one
session), in a temporary working directory. A block with a top-level ``await`` runs as
a coroutine on asyncio, as it would in ``python -m asyncio`` or a notebook; a block that
calls ``anyio.run(main)`` is a script and runs as one. Blocks that connect to
``redis://localhost:6379`` get a private test server's URL instead (the suite's
``redis_util``; without ``redis-server`` they are skipped, and under ``CI=true`` they
fail). A block that defines pytest tests is run by pytest in a subprocess. A block that
cannot run here says so on the line above it, ``<!-- not run: REASON -->``, and the
reason must name a file of this repository that runs the same code; the pages that
have such blocks, and how many, are listed in ``NOT_RUN`` below, so a new one is a
deliberate change of this file.

The Sphinx build needs the ``docs`` extra (Python >= 3.11; the ``test`` extra brings it
there). Where Sphinx is missing the build test is skipped, except under ``CI=true``,
where that is a failure: CI installs it on every Python that can build the docs.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

import aqueue
import aqueue.redis
import aqueue.testing

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
LOCAL_REDIS = "redis://localhost:6379/0"

# Pages with blocks that are shown but not run here, and how many each has.
NOT_RUN = {
    "guides/redis.md": 1,
    "guides/threads-or-processes.md": 1,
    "guides/watching.md": 1,
}

FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    flags=re.M | re.S,
)
NOT_RUN_MARK = re.compile(r"<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to docs/
    line: int  # where its code starts
    code: str
    not_run: str | None  # the reason, for a block marked as not run


def page_name(path: Path) -> str:
    return path.relative_to(DOCS).as_posix()


def blocks_of(path: Path, info: str = "python") -> list[Block]:
    """The fenced blocks of one page whose info string is ``info``, dedented."""
    text = path.read_text()
    found = []
    for m in FENCE.finditer(text):
        if m["info"].strip() != info:
            continue
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = NOT_RUN_MARK.search(before)
        line = text.count("\n", 0, m.start("body")) + 1
        found.append(
            Block(page_name(path), line, textwrap.dedent(m["body"]), mark and mark["reason"])
        )
    return found


def python_pages() -> list[str]:
    return [page_name(p) for p in PAGES if blocks_of(p)]


# -- every Python block runs ----------------------------------------------------------


@pytest.fixture(scope="module")
def docs_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server for the pages that use one (skipped without one, a
    failure under CI=true, as for the Redis suite)."""
    pytest.importorskip("redis", reason="aqueue[redis] is not installed")
    from redis_util import start_redis, stop_redis

    server = start_redis(tmp_path_factory.mktemp("docs-redis"))
    yield server.url
    stop_redis(server)


def run_block(block: Block, namespace: dict[str, Any]) -> None:
    """Run one block in ``namespace``: a top-level ``await`` runs it on asyncio."""
    code = compile(
        block.code,
        f"docs/{block.page}:{block.line}",
        "exec",
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
    )
    if code.co_flags & inspect.CO_COROUTINE:

        async def body() -> None:
            await eval(code, namespace)

        anyio.run(body)
    else:
        exec(code, namespace)


def run_pytest_blocks(blocks: list[Block], tmp_path: Path) -> None:
    """Blocks of pytest tests run under pytest, as a reader would run them: one file
    each, one pytest run for the page."""
    files, n_tests = [], 0
    for block in blocks:
        test_file = tmp_path / f"test_docs_line_{block.line}.py"
        test_file.write_text(block.code)
        files.append(str(test_file))
        n_tests += len(re.findall(r"^(?:async )?def test_", block.code, flags=re.M))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-o",
            "asyncio_mode=strict",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            "--rootdir",
            str(tmp_path),
            *files,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    report = f"docs/{blocks[0].page}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, report
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed, report
    assert int(passed[1]) >= n_tests, report  # (an anyio test may run once per backend)
    assert not re.search(r"\d+ (failed|error|skipped)", done.stdout), report


@pytest.mark.parametrize("page", python_pages())
def test_every_python_block_of_the_page_runs(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    blocks = blocks_of(DOCS / page)
    url = None
    if any(LOCAL_REDIS in b.code for b in blocks if not b.not_run):
        url = request.getfixturevalue("docs_redis_url")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    pytest_blocks = []
    for block in blocks:
        if block.not_run:
            continue
        if url is not None:
            block = Block(block.page, block.line, block.code.replace(LOCAL_REDIS, url), None)
        if re.search(r"^(?:async )?def test_", block.code, flags=re.M):
            pytest_blocks.append(block)
        else:
            run_block(block, namespace)
    if pytest_blocks:
        run_pytest_blocks(pytest_blocks, tmp_path)


def test_blocks_not_run_are_the_listed_ones_with_a_reason_naming_a_file() -> None:
    counts: dict[str, int] = {}
    for path in PAGES:
        for block in blocks_of(path):
            if block.not_run is None:
                continue
            counts[block.page] = counts.get(block.page, 0) + 1
            files = re.findall(r"`([\w./-]+\.py)`", block.not_run)
            assert files, f"docs/{block.page}:{block.line}: the reason names no file"
            for f in files:
                assert (ROOT / f).is_file(), f"docs/{block.page}:{block.line}: no {f}"
    assert counts == NOT_RUN


def test_the_pages_have_python_blocks() -> None:
    """The extraction sees the blocks (an empty list would check nothing)."""
    pages = python_pages()
    assert "tour.md" in pages
    assert {"guides/replay.md", "guides/redis.md", "guides/testing.md"} <= set(pages)
    assert sum(len(blocks_of(DOCS / p)) for p in pages) >= 25


# -- links -----------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\((?P<target>[^)\s]+)\)")


def anchor(heading: str) -> str:
    """MyST's anchor for a heading (GitHub's rule): lower case, punctuation but ``-``
    and ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {anchor(m[1]) for m in re.finditer(r"^#{1,3} (.+)$", text, flags=re.M)}


def test_every_internal_link_resolves() -> None:
    """Every relative link of every page names a file of docs/ and, with ``#``, one of
    its headings (level 1 to 3, which get anchors). Needs no network and no Sphinx."""
    checked = 0
    problems = []
    for path in PAGES:
        text = FENCE.sub("", path.read_text())
        for m in LINK.finditer(text):
            target = m["target"]
            if re.match(r"[a-z]+:", target):
                continue  # an external address: not fetched
            file, _, frag = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            checked += 1
            if not dest.is_file() or DOCS not in dest.parents:
                problems.append(f"docs/{page_name(path)}: {target}: no such page")
            elif frag and frag not in anchors_of(dest):
                problems.append(f"docs/{page_name(path)}: {target}: no such heading")
    assert checked >= 40
    assert not problems, "\n".join(problems)


# -- API reference -----------------------------------------------------------------


def documented_names() -> set[str]:
    names = set()
    for path in (DOCS / "api").glob("*.md"):
        names |= set(re.findall(r"^\.\. auto\w+:: (\S+)", path.read_text(), flags=re.M))
    return names


@pytest.mark.parametrize("module", [aqueue, aqueue.redis, aqueue.testing])
def test_the_api_reference_has_every_public_name(module: Any) -> None:
    documented = documented_names()
    missing = [n for n in module.__all__ if f"{module.__name__}.{n}" not in documented]
    assert not missing, f"docs/api/ does not document: {missing}"


def test_the_api_reference_names_only_public_names_once() -> None:
    modules = (aqueue, aqueue.redis, aqueue.testing)
    public = {f"{m.__name__}.{n}" for m in modules for n in m.__all__}
    listed: list[str] = []
    for path in (DOCS / "api").glob("*.md"):
        listed += re.findall(r"^\.\. auto\w+:: (\S+)", path.read_text(), flags=re.M)
    assert sorted(set(listed) - public) == []
    assert len(listed) == len(set(listed))


# -- the design page's file lists are the folders on disk ------------------------------


def design_folders() -> dict[str, set[str]]:
    """From docs/design.md: each ``### `aqueue/.../` `` heading and the ``*.py`` and
    ``*.lua`` files named in the first column of the table under it."""
    text = (DOCS / "design.md").read_text()
    folders: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^#{2,4} `(aqueue/[\w/]*)`", line)
        if m:
            current = m[1].rstrip("/")
            folders[current] = set()
        elif current and line.startswith("| `"):
            folders[current] |= set(re.findall(r"`([\w.]+\.(?:py|lua))`", line.split("|")[1]))
        elif line.startswith("#"):
            current = None
    return folders


def test_the_design_page_lists_every_folder_and_file_on_disk() -> None:
    """Every package folder, and every ``.py`` and ``.lua`` file of each (its
    ``__init__.py`` too), is listed, and nothing that is not there: a file added, moved
    or removed without its row fails."""
    listed = design_folders()
    on_disk = {
        d.relative_to(ROOT).as_posix(): {
            p.name for p in d.iterdir() if p.is_file() and p.suffix in (".py", ".lua")
        }
        for d in [ROOT / "aqueue", *(ROOT / "aqueue").rglob("*")]
        if d.is_dir() and (d / "__init__.py").exists()
    }
    assert len(on_disk) > 10
    assert sorted(listed) == sorted(on_disk)
    for folder, files in on_disk.items():
        assert listed[folder] == files, folder


# -- the guarantees page names tests that exist ---------------------------------------


def test_every_test_the_guarantees_page_names_exists() -> None:
    text = (DOCS / "semantics.md").read_text()
    refs = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)
    assert len(refs) >= 14
    for file, name in refs:
        path = ROOT / file
        assert path.is_file(), file
        if name:
            assert re.search(rf"^\s*(?:async )?def {name}\(", path.read_text(), flags=re.M), (
                f"{file} has no test {name}"
            )
    sections = re.findall(r"^## (.+)$", text, flags=re.M)
    for section in (
        "Cancellation",
        "Order",
        "Exactly once and leases",
        "End of data",
        "Failures",
        "Thread safety",
        "Determinism",
    ):
        assert section in sections


# -- the site builds --------------------------------------------------------------------


def test_sphinx_builds_the_site_with_warnings_as_errors(tmp_path: Path) -> None:
    if sys.version_info < (3, 11):
        pytest.skip("the docs build on Python 3.11 and later (Sphinx 8.2+)")
    if importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("furo") is None:
        msg = "the docs extra is not installed: pip install -e '.[docs]'"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(tmp_path / "doctrees"),
            str(DOCS),
            str(tmp_path / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "html" / "api" / "queues.html").is_file()
    queues = (tmp_path / "html" / "api" / "queues.html").read_text()
    assert 'id="aqueue.FIFOQueue"' in queues  # autodoc ran (not an empty page)
