"""examples/image_pipeline.py runs end to end with small images (needs Pillow), and says
what to install when Pillow is missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import EXAMPLES, run_example

pytestmark = pytest.mark.timeout(120)

SCRIPT = EXAMPLES / "image_pipeline.py"
SMALL = ["--images", "40", "--size", "64", "--crop", "48", "--batch-size", "16", "--threads", "2"]


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_example("image_pipeline", *args, timeout=100, env=env)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_image_pipeline_sees_every_image_once(backend: str) -> None:
    """40 images in batches of 16 (the last one 8): every image reaches the trainer once."""
    pytest.importorskip("PIL")
    done = run([*SMALL, "--backend", backend])
    assert done.returncode == 0, done.stderr
    assert "3 steps, 40 images of 48x48" in done.stdout
    assert "every image seen once: True" in done.stdout
    assert "map(load)" in done.stdout
    assert "bottleneck:" in done.stdout
    assert "What this showed:" in done.stdout
    # One rule, stated once: the closing paragraph gives describe()'s own verdict.
    verdict = next(
        line for line in done.stdout.splitlines() if line.startswith("bottleneck: ")
    ).removeprefix("bottleneck: ")
    showed = done.stdout[done.stdout.index("What this showed:") :]
    assert f"in describe()'s words: {verdict}." in " ".join(showed.split())


def test_image_pipeline_in_worker_processes() -> None:
    """--executor process: the same images reach the trainer once each, decoded in 2
    worker processes that write the batches in place, and the script says so."""
    pytest.importorskip("PIL")
    done = run([*SMALL, "--executor", "process"])
    assert done.returncode == 0, done.stderr
    assert "3 steps, 40 images of 48x48" in done.stdout
    assert "with 2 decoding processes; every image seen once: True" in done.stdout
    assert "2 worker processes (spawn, ready after" in done.stdout
    assert "batches of stage 2 written in place by the workers" in done.stdout
    assert "decoded in 2 worker processes" in " ".join(done.stdout.split())


def test_image_pipeline_reads_a_folder(tmp_path: Path) -> None:
    """--dir reads the JPEGs already in a folder (here written by the script's helper)."""
    pytest.importorskip("PIL")
    import runpy

    helpers = runpy.run_path(str(SCRIPT), run_name="example_image_pipeline")
    helpers["write_jpegs"](tmp_path, 10, 64)
    done = run(["--dir", str(tmp_path), "--crop", "48", "--batch-size", "4"])
    assert done.returncode == 0, done.stderr
    assert "10 images of 48x48" in done.stdout
    assert "every image seen once: True" in done.stdout


def test_image_pipeline_without_pillow_names_the_install(tmp_path: Path) -> None:
    """With Pillow hidden, the script exits with status 2 and names `pip install pillow`."""
    fake = tmp_path / "PIL"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('Pillow hidden by the test')\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    done = run(SMALL, env=dict(os.environ, PYTHONPATH=path))
    assert done.returncode == 2
    assert "pip install pillow" in done.stderr
