"""The replay-table example runs end to end with small sizes, on asyncio and on trio,
and says in plain words what it showed."""

from __future__ import annotations

import pytest
from support import example_main, one_line

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_replay_table_example_paces_actors_and_learner(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Actor threads and a prioritized learner under SampleToInsertRatio: the learner
    takes exactly its batches, the limiter's difference ends inside its band, the
    value function is learned, and closing the table stops every actor."""
    result = example_main("replay_table")(
        [
            "--steps", "60",
            "--batch", "32",
            "--min-size", "100",
            "--error-buffer", "300",
            "--backend", backend,
        ]
    )  # fmt: skip
    assert result["samples"] == 60 * 32
    assert result["inserts"] == sum(result["per_actor"])
    lo, hi = result["band"]
    assert lo <= result["diff"] <= hi
    assert result["actors_alive"] == 0
    assert 0.0 <= result["actors_waited"] <= 1.0
    out = one_line(capsys.readouterr().out)
    assert "the learner sampled 1,920 (60 batches of 32)" in out
    assert "inside its band" in out
    assert "What this showed: actor threads fed a replay table" in out
    assert "(0 still running)" in out
