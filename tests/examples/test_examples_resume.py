"""examples/resume_training.py runs end to end with small sizes, on asyncio and on trio:
a job crashes with os._exit(1), restarts from its last checkpoint, and trains on exactly
the batches of an uninterrupted run, ending with the same model."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_example

pytestmark = pytest.mark.timeout(60)

SMALL = ["--steps", "60", "--every", "10", "--crash-at", "35", "--buffer", "300"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_resume_training_sees_the_uninterrupted_batches(backend: str, tmp_path: Path) -> None:
    """The script exits 0 and says that the crashed run, the restarted run and the
    reference run trained on the same batches, and that the final models agree."""
    done = run_example("resume_training", *SMALL, "--backend", backend, "--dir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "crashing on purpose right after step 35" in out
    assert "died with exit status 1; its last checkpoint was after step 30" in out
    assert "resuming after step 30 from its checkpoint" in out
    assert "The crashed run, steps 1 to 35: all 35 batches equal the reference run's batches" in out
    assert (
        "The restarted run, steps 31 to 60: all 30 batches equal the reference run's batches" in out
    )
    assert "Steps 31 to 35 came after the last checkpoint" in out
    assert "the same batches both times" in out
    assert (
        "The final model equals the reference model bit for bit" in out
        or "within a float32 rounding tolerance" in out
    )
    assert "batches differ" not in out
    assert "did NOT see" not in out


def test_resume_training_refuses_a_used_folder(tmp_path: Path) -> None:
    """Run twice in one --dir, the second run stops with a message instead of mixing
    its checkpoints with the first run's."""
    (tmp_path / "job").mkdir()
    done = run_example("resume_training", *SMALL, "--dir", str(tmp_path))
    assert done.returncode != 0
    assert "left from an earlier run" in done.stderr
