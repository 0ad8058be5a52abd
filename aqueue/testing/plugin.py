"""aqueue's pytest plugin: the ``aqueue_leak_check`` fixture and the
``@pytest.mark.aqueue_timeout(seconds)`` marker.

Enabling it. Installing aqueue registers it under the entry point ``pytest11`` with
the name ``aqueue.testing.plugin`` (the module's own name, so enabling it again with
``-p aqueue.testing.plugin`` or ``pytest_plugins = ["aqueue.testing.plugin"]`` in a
root conftest.py is harmless, and ``-p no:aqueue.testing.plugin`` disables it). Where
plugins are not autoloaded (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``) or aqueue is not
installed, use one of those two lines.

Loaded, it does nothing to a test that uses neither the fixture nor the marker: it
registers the marker (for ``--strict-markers``), defines the fixture and two ini
options, and looks for the marker on each test. Opting in:

- ``def test_x(aqueue_leak_check): ...`` fails the test (an error at teardown) when it
  leaves a Coordinator entered, a QueueRunner with producers alive, a producer thread
  running, or any thread blocked in a blocking call of a queue's thread view (a plain
  thread in ``q.blocking().enqueue(x)`` on a full queue), naming each (see
  ``aqueue/testing/_leaks.py``); the blocked calls are then released (their queue is
  closed with ``cancel_pending_enqueues=True``), so the thread ends in this test rather
  than hanging the run or failing a later one. What runs when the fixture is set up
  (an earlier test's leftovers, a module-scoped coordinator) is not blamed. A thread
  gets ``aqueue_leak_grace`` seconds (ini, default 1.0) to end first.
- ``aqueue_leak_check = true`` in the ini file applies the fixture to every test.
- ``@pytest.mark.aqueue_timeout(seconds)`` runs the test function inside
  ``stall_guard(seconds)``: the async form for a coroutine test (under pytest-asyncio,
  strict or auto, and under anyio's plugin on asyncio and trio), the sync form for a
  plain one. The guard covers the test function, not its fixtures.

The marker works by wrapping the test function for the duration of its call (the
``pytest_runtest_call`` hook, around the runner that pytest-asyncio or anyio
installs), so it needs no cooperation from those plugins. A Hypothesis test is a
plain function to pytest: it gets the sync form.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

import pytest

from ._leaks import Running, release_blocked, wait_for_leaks
from ._stall import StallGuard, seconds_arg

__all__ = [
    "aqueue_leak_check",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_call",
]

_MARKER = "aqueue_timeout"
_FIXTURE = "aqueue_leak_check"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        _FIXTURE,
        type="bool",
        default=False,
        help="aqueue: apply the aqueue_leak_check fixture to every test",
    )
    parser.addini(
        "aqueue_leak_grace",
        default="1.0",
        help="aqueue: seconds aqueue_leak_check waits for producer threads to end (1.0)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(seconds): fail the test with aqueue.testing.StallError, naming the "
        "stuck queues, once no aqueue queue has made progress for `seconds`",
    )
    if config.getini(_FIXTURE):
        config.pluginmanager.register(_EveryTest(), "aqueue.testing.plugin: every test")


class _EveryTest:
    """Registered when ``aqueue_leak_check = true``: applies the fixture to every test
    (as an autouse fixture, which pytest sets up before the test's other function-scoped
    fixtures and after the wider-scoped ones)."""

    @pytest.fixture(autouse=True)
    def _aqueue_leak_check_every_test(self, aqueue_leak_check: None) -> None:
        pass


@pytest.fixture
def aqueue_leak_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test if it leaves an aqueue Coordinator, QueueRunner or producer thread
    running, or a thread blocked in a queue's blocking call (an error at teardown naming
    each; blocked calls are released)."""
    raw = request.config.getini("aqueue_leak_grace")
    try:
        grace = float(raw)
    except ValueError:
        grace = math.nan
    if not 0 <= grace < math.inf:
        pytest.fail(f"aqueue_leak_grace must be a number of seconds >= 0, got {raw!r}", False)
    before = Running.now()
    yield
    leaked = wait_for_leaks(before, grace)
    if leaked:
        released = release_blocked(before)
        then = "".join(f"\nthen released: {line}" for line in released)
        pytest.fail(
            f"aqueue_leak_check: {request.node.name} left running (after {grace:g} s of "
            "grace):\n" + "\n".join(leaked) + then,
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    marker = item.get_closest_marker(_MARKER)
    if marker is None or not isinstance(item, pytest.Function):
        return (yield)
    seconds = _marker_seconds(marker.args, marker.kwargs)
    original = item.obj
    item.obj = _guarded(original, seconds)
    try:
        return (yield)
    finally:
        item.obj = original


def _marker_seconds(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> float:
    if len(args) + len(kwargs) != 1 or set(kwargs) - {"seconds"}:
        pytest.fail(
            f"@pytest.mark.{_MARKER} takes one argument, seconds: got args={args!r} "
            f"kwargs={kwargs!r}",
            pytrace=False,
        )
    value = args[0] if args else kwargs["seconds"]
    try:
        return seconds_arg(value, f"@pytest.mark.{_MARKER}: seconds")
    except ValueError as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)  # (outside the except: no chained traceback)


def _guarded(fn: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """``fn`` run inside ``stall_guard(seconds)`` (async form for a coroutine function)."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def guarded_async(*args: Any, **kwargs: Any) -> Any:
            async with StallGuard(seconds):
                return await fn(*args, **kwargs)

        return guarded_async

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        with StallGuard(seconds):
            return fn(*args, **kwargs)

    return guarded
