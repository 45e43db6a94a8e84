import math

from grpo_lab.rewards.shaping import (
    decayed_coef,
    information_length,
    length_shaping,
    overlong_penalty,
    piecewise_length_penalty,
)
from grpo_lab.spec.config import LengthConfig


def test_piecewise_penalty_is_zero_inside_band_and_linear_above():
    assert piecewise_length_penalty(10, upper=64, coef=0.01) == 0.0
    assert piecewise_length_penalty(64, upper=64, coef=0.01) == 0.0
    assert math.isclose(piecewise_length_penalty(74, upper=64, coef=0.01), -0.1)


def test_coefficient_decays_linearly_over_training():
    assert decayed_coef(0.1, 0.2, 0.0) == 0.1
    assert math.isclose(decayed_coef(0.1, 0.2, 0.5), 0.06)
    assert math.isclose(decayed_coef(0.1, 0.2, 1.0), 0.02)
    cfg = LengthConfig(kind="piecewise", upper=2, coef=0.1, coef_final_frac=0.2)
    assert math.isclose(length_shaping(cfg, "x" * 5, 5, 16, 1.0), -0.02 * 3)


def test_dapo_overlong_penalty():
    assert overlong_penalty(10, max_tokens=16, buffer=4) == 0.0
    assert overlong_penalty(12, max_tokens=16, buffer=4) == 0.0
    assert math.isclose(overlong_penalty(14, max_tokens=16, buffer=4), -0.5)
    assert overlong_penalty(16, max_tokens=16, buffer=4) == -1.0


def test_information_length_counts_a_repeated_fragment_once():
    a = "First we add the two numbers. Then we check the sum."
    repeated = a + " First we add the two numbers. First we add the two numbers."
    assert information_length(repeated) == information_length(a)
    assert information_length("ok. ok. ok.") == 3 * len("ok.")  # short fragments always count
    cfg = LengthConfig(kind="info", upper=10, coef=1.0)
    n = len(repeated)  # one token per character
    assert length_shaping(cfg, repeated, n, 999, 0.0) > piecewise_length_penalty(n, 10, 1.0)
