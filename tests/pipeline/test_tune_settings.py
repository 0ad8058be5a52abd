"""What a user asks of the pipeline tuner: ``"auto"`` arguments, ranges, budgets.

Bad input gets an ElementSpecError naming what was expected and what was given; the
machine's share is read from text the tests supply (cgroup and /proc formats).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from aqueue import ElementSpecError
from aqueue._pipeline.tune._budget import (
    available_memory,
    cpu_cores,
    parse_cpu_max,
    parse_meminfo,
    resolve,
)
from aqueue._pipeline.tune._estimates import PerItem
from aqueue._pipeline.tune._knobs import KnobSpec
from aqueue._pipeline.tune._readings import Reading, StageReading, Window
from aqueue._pipeline.tune._settings import (
    Auto,
    Autotune,
    capacity_arg,
    concurrency_arg,
    concurrency_range,
)

OWNER = "Pipeline.map 'map(fetch)'"


@pytest.mark.parametrize("good", [1, 7, "auto", Auto(max=8)])
def test_concurrency_takes_a_number_or_auto(good: object) -> None:
    got = concurrency_arg(good, OWNER)
    assert got == (Auto() if good == "auto" else good)


@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        ("fast", "got 'fast'"),
        ("AUTO", "got 'AUTO'"),
        (2.5, "got float"),
        (True, "got bool"),
        (None, "got NoneType"),
    ],
)
def test_a_bad_concurrency_names_what_was_expected(bad: object, shown: str) -> None:
    with pytest.raises(ElementSpecError) as info:
        concurrency_arg(bad, OWNER)
    text = str(info.value)
    assert text.startswith(OWNER)
    assert "int >= 1, 'auto' or aqueue.Auto(...)" in text
    assert shown in text


def test_numpy_integers_are_numbers_and_arrays_are_refused() -> None:
    import numpy as np

    assert concurrency_arg(np.int64(3), OWNER) == 3
    with pytest.raises(ElementSpecError, match="got ndarray"):
        concurrency_arg(np.array([4]), OWNER)


@pytest.mark.parametrize("bad", [0, -3])
def test_a_concurrency_below_one_is_refused(bad: int) -> None:
    with pytest.raises(ElementSpecError, match=f"concurrency must be >= 1, got {bad}"):
        concurrency_arg(bad, OWNER)


def test_capacity_takes_none_a_number_or_auto() -> None:
    assert capacity_arg(None, OWNER) is None
    assert capacity_arg(16, OWNER) == 16
    assert capacity_arg("auto", OWNER) == Auto()
    with pytest.raises(ElementSpecError, match="capacity must be an int >= 1, 'auto'"):
        capacity_arg("big", OWNER)
    with pytest.raises(ElementSpecError, match="capacity must be >= 1, got 0"):
        capacity_arg(0, OWNER)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min": 0}, "min must be >= 1, got 0"),
        ({"max": 0}, "max must be >= 1, got 0"),
        ({"min": 4, "max": 2}, r"max \(2\) must be >= min \(4\)"),
        ({"min": 2, "max": 8, "start": 9}, r"start \(9\) must be within min \(2\) and max \(8\)"),
        ({"start": 0}, "start must be >= 1, got 0"),
        ({"max": "many"}, "max must be an int, got str"),
    ],
)
def test_a_bad_range_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ElementSpecError, match=message):
        Auto(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "fast"}, "mode must be 'act' or 'recommend', got 'fast'"),
        ({"cpu": -1}, "cpu must be a positive number, got -1"),
        ({"cpu": math.nan}, "cpu must be a positive number"),
        ({"cpu": "2"}, "cpu must be a number, got str"),
        ({"memory": 0}, "memory must be >= 1, got 0"),
        ({"memory_share": 0}, "memory_share must be a positive number, got 0"),
        ({"memory_share": 1.5}, "memory_share must be at most 1, got 1.5"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1, got 0"),
    ],
)
def test_bad_budgets_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ElementSpecError, match=message):
        Autotune(**kwargs)  # type: ignore[arg-type]


def test_default_ranges_per_executor() -> None:
    assert concurrency_range(Auto(), "task", 2.0, None) == (16, 1, 256)
    assert concurrency_range(Auto(), "thread", 2.0, None) == (2, 1, 256)
    assert concurrency_range(Auto(), "process", 2.0, None) == (1, 1, 2)
    assert concurrency_range(Auto(), "process", 8.5, None) == (7, 1, 8)
    # the run's cap lowers the default; the map's own max wins over the run's cap
    assert concurrency_range(Auto(), "task", 2.0, 8) == (8, 1, 8)
    assert concurrency_range(Auto(max=100), "task", 2.0, 8) == (16, 1, 100)
    assert concurrency_range(Auto(min=8), "thread", 2.0, None) == (8, 8, 256)
    assert concurrency_range(Auto(start=3, max=3), "task", 2.0, None) == (3, 1, 3)


def test_cgroup_and_meminfo_texts() -> None:
    assert parse_cpu_max("max 100000\n") is None
    assert parse_cpu_max("150000 100000\n") == 1.5
    assert parse_cpu_max("garbage") is None
    assert parse_cpu_max("0 100000") is None
    text = "MemTotal:       32000000 kB\nMemAvailable:   23970172 kB\n"
    assert parse_meminfo(text) == 23970172 * 1024
    assert parse_meminfo("MemTotal: 5 kB\n") is None


def test_the_machines_share_and_the_users_numbers() -> None:
    assert cpu_cores() >= 1.0
    assert available_memory() > 0
    mine = resolve(Autotune(cpu=3.0, memory=1 << 20))
    assert (mine.cpu, mine.memory) == (3.0, float(1 << 20))
    machine = resolve(Autotune(memory_share=0.25))
    assert machine.cpu == cpu_cores()
    assert 0 < machine.memory <= available_memory()


def test_knob_specs_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown setting"):
        KnobSpec(0, "speed", 1)
    with pytest.raises(ValueError, match="low <= start"):
        KnobSpec(0, "concurrency", 1, low=2, high=4)


def test_per_item_estimates_start_afresh_on_a_new_regime() -> None:
    est = PerItem(64)
    assert not est.known
    assert est.value == 0.0
    assert not est.add(0.006 * 32, 32, 1.5, 16)
    assert est.value == pytest.approx(0.006)
    assert not est.add(0.012 * 8, 8, 1.5, 16)  # too few items to call it a regime
    assert est.add(0.012 * 32, 32, 1.5, 16)  # twice as long, over enough items
    assert est.value == pytest.approx(0.012)
    for _ in range(10):
        est.add(0.010 * 60, 60, 1.5, 16)
    assert est.value == pytest.approx(0.010, rel=0.01)  # it forgets past its span


def _reading(t: float, items: int, taken: int) -> Reading:
    stage = StageReading(items, items, busy_s=t, starved_s=0.0, blocked_s=0.0, workers=1)
    return Reading(t=t, stages=(stage,), taken=taken, waited_s=t / 2)


def test_a_stage_whose_output_backs_up_does_not_limit() -> None:
    """Saturated: busy, fed, not blocked, and its output short. A stage whose queue is
    more than half full on average is ahead of what follows it."""

    def window(occupancy_s: float, blocked_s: float = 0.0) -> bool:
        a = StageReading(0, 0, busy_s=0.0, starved_s=0.0, blocked_s=0.0, workers=2)
        b = StageReading(
            40, 40, busy_s=1.8, starved_s=0.1, blocked_s=blocked_s, workers=2,
            occupancy_s=occupancy_s,
        )  # fmt: skip
        r0 = Reading(t=0.0, stages=(a,), taken=0, waited_s=0.0)
        r1 = Reading(t=1.0, stages=(b,), taken=0, waited_s=1.0)
        return Window.between(r0, r1).stages[0].saturated

    assert window(0.2)
    assert not window(0.6)
    assert not window(0.2, blocked_s=1.0)


def test_windows_refuse_readings_out_of_order() -> None:
    a, b = _reading(1.0, 10, 1), _reading(2.0, 30, 3)
    win = Window.between(a, b)
    assert (win.stages[0].items, win.taken, win.wait, win.stages[0].busy) == (20, 2, 0.5, 1.0)
    with pytest.raises(ValueError, match="out of order"):
        Window.between(b, a)
    with pytest.raises(ValueError, match="items_out went from 30 to 10"):
        Window.between(b, _reading(3.0, 10, 3))


def test_the_tuner_packages_docstring_maps_its_files() -> None:
    import aqueue._pipeline.tune as tune

    folder = Path(tune.__file__).parent
    files = sorted(p.name for p in folder.glob("_*.py") if p.name != "__init__.py")
    assert len(files) > 3
    assert [f for f in files if f"``{f}``" not in (tune.__doc__ or "")] == []
