"""The input-pipeline examples run end to end with small sizes, on asyncio and on trio."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(60)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SMALL = [
    "--files", "3",
    "--records", "40",
    "--batch-size", "8",
    "--capacity", "60",
    "--min-after-dequeue", "20",
    "--threads", "3",
    "--epochs", "2",
]  # fmt: skip


def example_main(name: str) -> Any:
    """The ``main(argv)`` function of examples/<name>.py, loaded without running it."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=f"example_{name}")["main"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_input_pipeline_sees_every_record_once_per_epoch(backend: str) -> None:
    """string_input_producer -> reader -> shuffle_batch: two epochs, then the end."""
    result = example_main("input_pipeline")([*SMALL, "--backend", backend])
    assert result["exact"]
    assert result["examples"] == 2 * 3 * 40
    assert result["steps"] == 30
    assert "input-bound:" in result["report"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_pipeline_example_reports_stages(backend: str) -> None:
    """The Pipeline version does the same job and prints the stage report."""
    result = example_main("pipeline")([*SMALL, "--backend", backend])
    assert result["exact"]
    assert result["examples"] == 2 * 3 * 40
    assert "map(read)" in result["report"]
    assert "bottleneck:" in result["report"]


def test_pipeline_example_runs_as_a_script() -> None:
    """``python examples/pipeline.py`` with small flags exits 0 and prints the report."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "pipeline.py"), *SMALL, "--read-ms", "0.1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "every record seen 2 times: True" in done.stdout
