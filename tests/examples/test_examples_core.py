"""The quickstart runs end to end and says what it showed; every example answers
``--help`` with each option's help text and default, and is listed in
examples/README.md."""

from __future__ import annotations

import runpy

import pytest
from support import EXAMPLES, one_line, run_example

# Every example script: examples/README.md promises that --help lists each option
# with its default.
ALL_EXAMPLES = sorted(p.stem for p in EXAMPLES.glob("*.py"))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_quickstart_says_every_number_arrived_once_in_order(backend: str) -> None:
    """53 numbers in batches of 8: six batches, five left over, all once and in order,
    and both loops ended because the queue was closed."""
    done = run_example("quickstart", "--elements", "53", "--batch", "8", "--backend", backend)
    assert done.returncode == 0, done.stderr
    out = one_line(done.stdout)
    assert "queue.batches(8): took 6 batches of 8" in out
    assert "took the 5 numbers left over" in out
    assert "all 53 numbers arrived exactly once, in the order they were enqueued" in out
    assert "Both loops ended by themselves, without an error, because the producer closed" in out


def test_quickstart_main_returns_the_numbers_in_order() -> None:
    """The quickstart's main() returns what the consumer received, in order."""
    import anyio

    module = runpy.run_path(str(EXAMPLES / "quickstart.py"))
    assert anyio.run(module["main"], 20, 8) == list(range(20))
    assert anyio.run(module["main"], 5, 8) == list(range(5))  # no full batch at all


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_example_help_describes_every_option(name: str) -> None:
    """``--help`` exits 0, starts with a whole sentence, and gives each option a help text
    with its default."""
    if name == "distributed_replay":
        pytest.importorskip("redis", reason="aqueue[redis] is not installed")
    done = run_example(name, "--help")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    description = one_line(out.split("\n\n")[1])
    assert description.endswith("."), description
    options = out.split("options:")[1]
    for line in options.splitlines():
        if line.strip().startswith("--") and "--help" not in line:
            option = line.split()[0]
            assert "(default:" in options.split(option, 1)[1].split("\n  -")[0], option


def test_examples_readme_lists_every_example() -> None:
    """examples/README.md has a line, with its command, for every example script."""
    readme = (EXAMPLES / "README.md").read_text()
    for script in sorted(EXAMPLES.glob("*.py")):
        assert f"`{script.name}`" in readme, script.name
        assert f"python examples/{script.name}" in readme, script.name
