"""The trajectory tables' argument checks: bad settings and bad steps raise
ElementSpecError naming what was expected and what was given, and a refused step
writes nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from traj_model import Items

from aqueue import ElementSpecError, Prioritized, Uniform
from aqueue._replay._checks import PriorityLimit
from aqueue._replay._trajectory._checks import StepArgs, step_settings
from aqueue._replay._trajectory._steps import StepStore

OWNER = "TrajectoryTable 't'"


def settings(max_steps: Any = 100, length: Any = 4, stride: Any = 1, **kw: Any) -> Any:
    return step_settings(
        OWNER,
        max_steps,
        kw.pop("dtypes", (np.uint8, np.float32)),
        kw.pop("shapes", ((4, 4), ())),
        kw.pop("names", ("obs", "reward")),
        length=length,
        stride=stride,
        **kw,
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"length": 0}, "length must be >= 1, got 0"),
        ({"stride": 0}, "stride must be >= 1, got 0"),
        ({"stride": -3}, "stride must be >= 1, got -3"),
        ({"length": 2.0}, "length must be an int, got float"),
        ({"stride": True}, "stride must be an int, got bool"),
        ({"max_steps": 0}, "max_steps must be >= 1, got 0"),
        ({"max_steps": 4, "length": 5}, r"length must be <= max_steps = 4 .* got 5"),
        ({"max_size": 0}, "max_size must be >= 1, got 0"),
        ({"shapes": None}, "shapes must be declared and fully defined .* got none"),
        ({"shapes": ((4, None), ())}, r"shapes must be .* fully defined .* got \(4, \?\), \(\)"),
        ({"dtypes": (object, np.float32)}, "field 0 has dtype object"),
        ({"names": ("obs",)}, "names"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs: dict[str, Any], match: str) -> None:
    """Each bad setting raises ElementSpecError naming the table and the argument."""
    with pytest.raises(ElementSpecError, match=f"^{OWNER}: {match}"):
        settings(**kwargs)


@pytest.mark.parametrize(
    ("max_steps", "length", "stride", "max_size", "capacity"),
    [
        (100, 4, 1, None, 100),  # a window per step
        (100, 80, 40, None, 2),  # R2D2: each window owns 40 new steps
        (100, 2, 5, None, 50),  # gaps are never stored: 2 steps per window
        (100, 4, 1, 10, 10),  # the item cap
        (100, 80, 40, 10, 2),  # a cap the ring never reaches
        (7, 7, 1, None, 7),
    ],
)
def test_capacity_is_the_most_windows_the_steps_can_hold(
    max_steps: int, length: int, stride: int, max_size: int | None, capacity: int
) -> None:
    """capacity = min(max_size, max_steps // min(stride, length))."""
    s = settings(max_steps, length, stride, max_size=max_size)
    assert (s.capacity, s.length, s.stride, s.max_size) == (capacity, length, stride, max_size)


def store_and_args(prioritized: bool = False) -> tuple[StepStore, StepArgs, Items]:
    s = settings(8, 2, 1)
    items = Items(None, "fifo")
    store = StepStore(
        s.max_steps, s.spec.dtypes, s.shapes, length=s.length, stride=s.stride, items=items
    )
    items.steps = store
    selector = Prioritized(1.0) if prioritized else Uniform()
    return store, StepArgs(s, PriorityLimit(s.capacity, (selector,))), items


def step(v: int) -> dict[str, Any]:
    return {"obs": np.full((4, 4), v, np.uint8), "reward": float(v)}


def state(store: StepStore) -> tuple[Any, ...]:
    r = store.ring
    arrays = (*r.data, r.sid, r.ref, r.owner, r.succ, r.free, store.first_key)
    return (store.statistics(), *(a.copy() for a in arrays))


def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """(bytes compared: rows never written may hold NaNs)"""
    return a[0] == b[0] and all(x.tobytes() == y.tobytes() for x, y in zip(a[1:], b[1:]))


def append_step(store: StepStore, args: StepArgs, wid: int, value: Any, priority: Any) -> None:
    """What a writer's append does: check and convert, then append."""
    comps, prio = args.step(value, priority)
    store.append(wid, comps, 1, prio)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (
            {"obs": np.zeros((4, 3), np.uint8), "reward": 0.0},
            r"expected shape \(4, 4\), got \(4, 3\)",
        ),
        (
            {"obs": np.zeros((4, 4), np.float64), "reward": 0.0},
            "expected dtype uint8 .* got float64",
        ),
        ({"obs": np.zeros((4, 4), np.uint8)}, r"keys must be exactly \['obs', 'reward'\]"),
        ((np.zeros((4, 4), np.uint8), 0.0), "must be a dict with keys"),
    ],
)
def test_a_bad_step_is_refused_and_writes_nothing(bad: Any, match: str) -> None:
    """A step of the wrong shape, dtype or form: refused by name, nothing written."""
    store, args, _ = store_and_args()
    wid = store.open_writer()
    append_step(store, args, wid, step(1), None)
    before = state(store)
    with pytest.raises(ElementSpecError, match=f"^{OWNER}: .*{match}"):
        append_step(store, args, wid, bad, None)
    assert same(state(store), before)


@pytest.mark.parametrize(
    ("priorities", "match"),
    [
        ([1.0, 2.0], r"priorities must be a 1-d sequence of 3 numbers, got shape \(2,\)"),
        ([1.0, -1.0, 0.0], r"priorities\[1\] is -1.0 \(negative\)"),
        ([1.0, float("nan"), 0.0], r"priorities\[1\] is nan \(NaN\)"),
    ],
)
def test_a_bad_batch_is_refused_and_writes_nothing(priorities: Any, match: str) -> None:
    """Bad priorities, or fields that disagree on the batch size: nothing written."""
    store, args, _ = store_and_args()
    store.open_writer()
    batch = {"obs": np.zeros((3, 4, 4), np.uint8), "reward": np.zeros(3, np.float32)}
    before = state(store)
    with pytest.raises(ElementSpecError, match=f"^{OWNER}: {match}"):
        args.steps(batch, priorities)
    ragged = {"obs": np.zeros((3, 4, 4), np.uint8), "reward": np.zeros(2, np.float32)}
    with pytest.raises(ElementSpecError, match="disagree on batch size"):
        args.steps(ragged, None)
    assert same(state(store), before)


def test_good_steps_become_windows_with_their_priorities() -> None:
    """A step and a batch, converted: the windows carry the values and priorities given
    with their last steps."""
    store, args, items = store_and_args(prioritized=True)
    wid = store.open_writer()
    append_step(store, args, wid, step(1), 0.5)
    batch = {"obs": np.stack([step(v)["obs"] for v in (2, 3)]), "reward": [2.0, 3.0]}
    comps, k, prios = args.steps(batch, [2.0, 3.0])
    store.append(wid, comps, k, prios)
    _, rows = items.held_arrays()
    obs, reward = store.gather(rows)
    assert reward.tolist() == [[1.0, 2.0], [2.0, 3.0]]
    assert obs[:, :, 0, 0].tolist() == [[1, 2], [2, 3]]
    assert items.priority == {0: 2.0, 1: 3.0}
