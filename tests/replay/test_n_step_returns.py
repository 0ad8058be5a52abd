"""``aqueue.n_step_returns``: against a plain loop, against Acme's n-step adder
formula, on one window and on many, and its refusals of bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import aqueue


def loop(rewards: list[float], discounts: list[float], gamma: float) -> tuple[float, float]:
    """One window, step by step: the reward counts with the discount reached so far,
    then the discount moves on by gamma and the step's own discount."""
    ret, reach = 0.0, 1.0
    for r, d in zip(rewards, discounts):
        ret += reach * r
        reach *= gamma * d
    return ret, reach


def acme(rewards: list[float], discounts: list[float], gamma: float) -> tuple[float, float]:
    """Acme's NStepTransitionAdder quantities (its docstring's formulas): R the same,
    D = g^(n-1) * d[0] * ... * d[n-1] (its learners multiply by g once more)."""
    total = discounts[0]
    ret = rewards[0]
    for i in range(1, len(rewards)):
        total *= gamma
        ret += rewards[i] * total
        total *= discounts[i]
    return ret, total


windows = st.integers(0, 6).flatmap(
    lambda n: st.integers(1, 8).flatmap(
        lambda length: st.tuples(
            hnp.arrays(np.float64, (n, length), elements=st.floats(-10, 10)),
            hnp.arrays(
                np.float64,
                (n, length),
                elements=st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0, 1)),
            ),
        )
    )
)


@settings(max_examples=200, deadline=None)
@given(w=windows, gamma=st.one_of(st.sampled_from([0.0, 1.0, 0.99]), st.floats(0, 1)))
def test_returns_equal_the_step_by_step_loop(
    w: tuple[np.ndarray, np.ndarray], gamma: float
) -> None:
    """Each window's return and bootstrap discount are the loop's."""
    rewards, discounts = w
    ret, boot = aqueue.n_step_returns(rewards, discounts, gamma)
    assert ret.shape == boot.shape == (len(rewards),)
    for i in range(len(rewards)):
        want_r, want_d = loop(rewards[i].tolist(), discounts[i].tolist(), gamma)
        assert ret[i] == pytest.approx(want_r, rel=1e-12, abs=1e-12)
        assert boot[i] == pytest.approx(want_d, rel=1e-12, abs=1e-300)


def test_acme_keeps_the_same_return_and_one_gamma_less() -> None:
    """Against Acme's adder: the same return; its discount times gamma is ours."""
    rng = np.random.default_rng(0)
    rewards = rng.standard_normal((50, 4))
    discounts = (rng.random((50, 4)) > 0.2).astype(np.float64)
    ret, boot = aqueue.n_step_returns(rewards, discounts, 0.97)
    for i in range(50):
        want_r, want_d = acme(rewards[i].tolist(), discounts[i].tolist(), 0.97)
        assert ret[i] == pytest.approx(want_r, rel=1e-12)
        assert boot[i] == pytest.approx(0.97 * want_d, rel=1e-12)


def test_a_terminal_step_ends_the_sum_and_the_bootstrap() -> None:
    """discount 0 after step 1: rewards after it do not count, nothing to bootstrap."""
    ret, boot = aqueue.n_step_returns([[1.0, 2.0, 100.0, 100.0]], [[1, 0, 1, 1]], 0.5)
    assert ret.tolist() == [2.0]
    assert boot.tolist() == [0.0]
    ret, boot = aqueue.n_step_returns([[1.0, 2.0, 4.0]], [[1, 1, 1]], 0.5)
    assert ret.tolist() == [3.0]  # 1 + 0.5 * 2 + 0.25 * 4
    assert boot.tolist() == [0.125]


def test_one_window_gives_zero_dimensional_results() -> None:
    """A (length,) window gives 0-d arrays equal to its row in a batch."""
    ret, boot = aqueue.n_step_returns(np.array([1.0, 2.0]), np.array([1.0, 1.0]), 0.9)
    assert ret.shape == boot.shape == ()
    many = aqueue.n_step_returns(np.array([[1.0, 2.0]]), np.array([[1.0, 1.0]]), 0.9)
    assert (float(ret), float(boot)) == (float(many[0][0]), float(many[1][0]))


def test_dtypes_follow_the_inputs() -> None:
    """float32 stays float32; ints and float64 give float64."""
    f32 = np.ones((2, 3), np.float32)
    assert aqueue.n_step_returns(f32, f32, 0.9)[0].dtype == np.float32
    assert aqueue.n_step_returns(np.ones((2, 3), np.int64), f32, 0.9)[1].dtype == np.float64
    assert aqueue.n_step_returns([[1, 2]], [[1, 1]], 1)[0].tolist() == [3.0]


def test_empty_batches_and_windows() -> None:
    """No window: empty results; a window of no step: return 0, bootstrap 1."""
    ret, boot = aqueue.n_step_returns(np.empty((0, 4)), np.empty((0, 4)), 0.9)
    assert ret.shape == boot.shape == (0,)
    ret, boot = aqueue.n_step_returns(np.empty((3, 0)), np.empty((3, 0)), 0.9)
    assert ret.tolist() == [0.0] * 3
    assert boot.tolist() == [1.0] * 3


@pytest.mark.parametrize(
    ("rewards", "discounts", "gamma", "match"),
    [
        (
            np.ones((2, 3)),
            np.ones((2, 4)),
            0.9,
            r"rewards and discounts must have the same shape, got \(2, 3\) and \(2, 4\)",
        ),
        (np.ones((2, 3, 1)), np.ones((2, 3, 1)), 0.9, r"rewards must be shaped \(n, length\)"),
        (
            np.float64(1.0),
            np.float64(1.0),
            0.9,
            r"rewards must be .* or \(length,\) \(one window\), got shape \(\)",
        ),
        (np.array([["a"]]), np.ones((1, 1)), 0.9, "rewards must hold real numbers.*<U1"),
        (np.ones((1, 2)), np.ones((1, 2), complex), 0.9, "discounts must hold real.*complex"),
        (np.ones((1, 2)), np.ones((1, 2), bool), 0.9, "discounts must hold real.*bool"),
        ([[1.0], [1.0, 2.0]], np.ones((2, 1)), 0.9, "rewards could not be read as numbers"),
        (np.ones((1, 2)), np.ones((1, 2)), 1.5, r"gamma must be in \[0, 1\], got 1.5"),
        (np.ones((1, 2)), np.ones((1, 2)), -0.1, r"gamma must be in \[0, 1\], got -0.1"),
        (np.ones((1, 2)), np.ones((1, 2)), float("nan"), r"gamma must be in \[0, 1\], got nan"),
        (np.ones((1, 2)), np.ones((1, 2)), True, "gamma must be a number, got bool"),
        (np.ones((1, 2)), np.ones((1, 2)), "0.9", "gamma must be a number, got str"),
    ],
)
def test_bad_input_is_refused_by_name(
    rewards: object, discounts: object, gamma: object, match: str
) -> None:
    """Bad shapes, dtypes and gammas raise ElementSpecError naming what was expected."""
    with pytest.raises(aqueue.ElementSpecError, match=f"n_step_returns: {match}"):
        aqueue.n_step_returns(rewards, discounts, gamma)  # type: ignore[arg-type]
