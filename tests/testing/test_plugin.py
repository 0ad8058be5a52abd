"""The pytest plugin (``aqueue.testing.plugin``), run on small test files with pytester.

One subprocess run of one file covers every case under pytest-asyncio in strict mode
and under anyio's plugin on asyncio and trio, with the project's own strictness
(``--strict-markers``, ``filterwarnings = error``): leaks fail their test at teardown
naming what leaked, hangs under ``@pytest.mark.aqueue_timeout`` fail fast with the
stall report, clean tests pass. The outcome of each test is read from the JUnit XML
report.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.timeout(60)

INI = """
[pytest]
asyncio_mode = strict
asyncio_default_fixture_loop_scope = function
asyncio_default_test_loop_scope = function
addopts = --strict-markers -p no:cacheprovider
filterwarnings = error
aqueue_leak_grace = 0.2
"""

CONFTEST = """
import pytest

pytest_plugins = ["aqueue.testing.plugin"]  # enabled twice (and -p): harmless


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
"""

CASES = """
import asyncio
import threading
import time

import anyio
import numpy as np
import pytest

import aqueue
from aqueue.testing import drain

never = threading.Event()  # never set: what leaked producers wait for


def blocked_forever():
    never.wait()


async def leak_a_thread(name):
    q = aqueue.FIFOQueue(4, np.int64, (), name=name)
    async with aqueue.Coordinator(stop_grace_period=0.05, ignore_live_threads=True) as coord:
        coord.start(aqueue.QueueRunner(q, [blocked_forever], name=name))
        await anyio.sleep(0.05)


async def clean_run():
    q = aqueue.FIFOQueue(4, np.int64, (), name="clean")
    async with aqueue.Coordinator() as coord:
        coord.start(aqueue.QueueRunner(q, [iter(range(10))]))
        got = await drain(q, timeout=30)
    assert [int(x) for x in got] == list(range(10))


# -- leaks --------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_leak_thread_asyncio(aqueue_leak_check):
    await leak_a_thread("leaky-asyncio")


@pytest.mark.anyio
async def test_leak_thread_anyio(aqueue_leak_check, anyio_backend):
    await leak_a_thread(f"leaky-{anyio_backend}")


def test_leak_coordinator(aqueue_leak_check):
    entered = threading.Event()

    async def main():
        q = aqueue.FIFOQueue(4, np.int64, (), name="left-running")
        async with aqueue.Coordinator() as coord:
            coord.start(aqueue.QueueRunner(q, [iter(range(100))], name="left-running"))
            entered.set()
            await anyio.sleep(3600)

    threading.Thread(target=anyio.run, args=(main,), daemon=True).start()
    assert entered.wait(10)


def test_leak_blocked_thread(aqueue_leak_check):
    q = aqueue.FIFOQueue(1, np.int64, (), name="full")
    q.enqueue_nowait(0)

    def put():
        try:
            q.blocking().enqueue(1)
        except aqueue.QueueClosedError as exc:
            released.append(exc)

    threading.Thread(target=put, name="blocked-producer", daemon=True).start()
    while q.statistics().tasks_waiting_enqueue == 0:
        time.sleep(0.005)


released = []  # what the blocked producer got when the leak check released it


def test_the_leaked_thread_was_released():
    deadline = time.monotonic() + 10
    while not released and time.monotonic() < deadline:
        time.sleep(0.005)
    assert [type(e) for e in released] == [aqueue.QueueClosedError]


# -- hangs --------------------------------------------------------------------------

@pytest.mark.aqueue_timeout(0.5)
@pytest.mark.asyncio
async def test_hang_asyncio():
    await aqueue.FIFOQueue(4, np.int64, (), name="stuck-asyncio").dequeue()


@pytest.mark.aqueue_timeout(0.5)
@pytest.mark.anyio
async def test_hang_anyio(anyio_backend):
    await aqueue.FIFOQueue(4, np.int64, (), name=f"stuck-{anyio_backend}").dequeue()


@pytest.mark.aqueue_timeout(0.5)
def test_hang_sync():
    aqueue.FIFOQueue(4, np.int64, (), name="stuck-sync").blocking().dequeue()


# -- clean --------------------------------------------------------------------------

@pytest.mark.aqueue_timeout(30)
@pytest.mark.asyncio
async def test_clean_asyncio(aqueue_leak_check):
    await clean_run()


@pytest.mark.aqueue_timeout(30)
@pytest.mark.anyio
async def test_clean_anyio(aqueue_leak_check, anyio_backend):
    await clean_run()


@pytest.mark.aqueue_timeout(30)
def test_clean_sync(aqueue_leak_check):
    q = aqueue.FIFOQueue(4, np.int64, (), name="clean-sync")
    q.blocking().enqueue(7)
    assert int(q.blocking().dequeue()) == 7
"""


def outcomes(xml: Path) -> dict[str, tuple[str, str]]:
    """``{test name: (outcome, message and text)}`` from a JUnit XML report; the outcome
    is "failed" (the call failed), "error" (setup or teardown failed) or "passed"."""
    result = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome, text = "passed", ""
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                outcome = "failed" if tag == "failure" else "error"
                text = f"{node.get('message', '')}\n{node.text or ''}"
        result[case.get("name", "")] = (outcome, text)
    return result


_cache: dict[str, dict[str, tuple[str, str]]] = {}


def run_cases(pytester: pytest.Pytester) -> dict[str, tuple[str, str]]:
    """Run CASES once per session in a subprocess (the registries of live queues and
    threads are per process) and return each test's outcome; later calls reuse it."""
    if "cases" not in _cache:
        pytester.makeini(INI)
        pytester.makeconftest(CONFTEST)
        pytester.makepyfile(test_cases=CASES)
        xml = pytester.path / "report.xml"
        result = pytester.runpytest_subprocess(
            "-p",
            "aqueue.testing.plugin",
            f"--junitxml={xml}",
            "-o",
            "junit_logging=no",
            timeout=60,  # hang protection only
        )
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
        _cache["cases"] = outcomes(xml)
    return _cache["cases"]


def test_leak_check_fails_a_test_that_leaves_a_producer_thread_running(
    pytester: pytest.Pytester,
) -> None:
    """Under pytest-asyncio strict and anyio on asyncio and trio: a producer thread
    abandoned by its coordinator fails the test at teardown, named."""
    got = run_cases(pytester)
    for name, queue in [
        ("test_leak_thread_asyncio", "leaky-asyncio"),
        ("test_leak_thread_anyio[asyncio]", "leaky-asyncio"),
        ("test_leak_thread_anyio[trio]", "leaky-trio"),
    ]:
        outcome, text = got[name]
        assert outcome == "error", (name, text)
        assert "aqueue_leak_check" in text
        assert "left running" in text
        assert f"producer thread 'QueueRunnerThread-{queue}-0 (blocked_forever)'" in text


def test_leak_check_names_a_thread_left_blocked_in_a_queue_call(
    pytester: pytest.Pytester,
) -> None:
    """A plain thread left blocked in ``q.blocking().enqueue`` on a full queue fails its
    test at teardown, named with the call and the queue; the check then releases it, so
    its QueueClosedError comes in that test (the next test sees it already there)."""
    got = run_cases(pytester)
    outcome, text = got["test_leak_blocked_thread"]
    assert outcome == "error", text
    assert "aqueue_leak_check" in text
    assert "thread 'blocked-producer' blocked in BlockingQueue.enqueue() on queue 'full'" in text
    assert "then released: queue 'full' closed with cancel_pending_enqueues=True" in text
    assert got["test_the_leaked_thread_was_released"][0] == "passed"


def test_leak_check_names_a_coordinator_left_running(pytester: pytest.Pytester) -> None:
    """A coordinator still running (in another thread's event loop) at the end of the
    test is named with its runners, as is its runner."""
    outcome, text = run_cases(pytester)["test_leak_coordinator"]
    assert outcome == "error", text
    assert re.search(r"<Coordinator running .*> \(its runners: 'left-running'\)", text), text
    assert "QueueRunner 'left-running': 1 of 1 producers alive" in text


def test_aqueue_timeout_fails_a_hanging_test_with_the_stall_report(
    pytester: pytest.Pytester,
) -> None:
    """A test stuck on an empty queue fails (in its call, with StallError) under
    pytest-asyncio strict, anyio on asyncio and trio, and as a plain test."""
    got = run_cases(pytester)
    for name, queue in [
        ("test_hang_asyncio", "stuck-asyncio"),
        ("test_hang_anyio[asyncio]", "stuck-asyncio"),
        ("test_hang_anyio[trio]", "stuck-trio"),
        ("test_hang_sync", "stuck-sync"),
    ]:
        outcome, text = got[name]
        assert outcome == "failed", (name, text)
        assert "StallError: stall_guard(0.5): no aqueue queue made progress for" in text
        assert (
            f"queue '{queue}' (FIFOQueue, size 0/4, open): 1 consumer blocked in dequeue "
            "on an empty queue" in text
        ), (name, text)


def test_clean_tests_pass_with_the_fixture_and_the_marker(pytester: pytest.Pytester) -> None:
    """Tests that end their coordinators and threads pass, in every runner."""
    got = run_cases(pytester)
    for name in [
        "test_clean_asyncio",
        "test_clean_anyio[asyncio]",
        "test_clean_anyio[trio]",
        "test_clean_sync",
    ]:
        assert got[name][0] == "passed", (name, got[name][1])
    assert len(got) == 14, sorted(got)


UNUSED = """
import threading

import anyio
import numpy as np
import pytest

import aqueue

started = threading.Event()
release = threading.Event()


@pytest.fixture(scope="module", autouse=True)
def end_the_threads():
    yield
    release.set()


def wait_then_end():
    started.set()
    release.wait()
    raise StopIteration


def test_leaves_a_thread_behind():
    async def main():
        q = aqueue.FIFOQueue(4, np.int64, (), name="unchecked")
        async with aqueue.Coordinator(stop_grace_period=0.05, ignore_live_threads=True) as c:
            c.start(aqueue.QueueRunner(q, [wait_then_end], name="unchecked"))
            await anyio.to_thread.run_sync(started.wait)

    anyio.run(main)


@pytest.mark.aqueue_timeout(1, 2)
def test_two_arguments():
    pass


@pytest.mark.aqueue_timeout(seconds=0)
def test_zero_seconds():
    pass
"""


@pytest.mark.parametrize("everywhere", [False, True])
def test_inert_unless_used_and_the_ini_option(pytester: pytest.Pytester, everywhere: bool) -> None:
    """Loaded, the plugin leaves a test that uses neither fixture nor marker alone;
    ``aqueue_leak_check = true`` applies the check to every test; a malformed marker
    fails its test with a message saying what it takes."""
    pytester.makeini(INI + ("aqueue_leak_check = true\n" if everywhere else ""))
    pytester.makepyfile(test_unused=UNUSED)
    result = pytester.runpytest_inprocess("-p", "aqueue.testing.plugin", "-rA")
    out = result.stdout.str()
    assert "@pytest.mark.aqueue_timeout takes one argument, seconds: got args=(1, 2)" in out
    assert "@pytest.mark.aqueue_timeout: seconds must be a number of seconds > 0, got 0" in out
    if everywhere:
        result.assert_outcomes(passed=1, failed=2, errors=1)
        assert "producer thread 'QueueRunnerThread-unchecked-0 (wait_then_end)'" in out
    else:
        result.assert_outcomes(passed=1, failed=2)


def test_the_entry_point_is_named_after_the_module() -> None:
    """pyproject registers the plugin under its module's name, so that enabling it again
    with ``-p aqueue.testing.plugin`` or ``pytest_plugins`` finds it registered (under
    another name pytest would refuse the second registration)."""
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11+)
    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    entry_points = tomllib.loads(pyproject.read_text())["project"]["entry-points"]
    assert entry_points["pytest11"] == {"aqueue.testing.plugin": "aqueue.testing.plugin"}
