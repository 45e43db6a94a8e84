"""The t-mixture confidence sequence: its e-value is the mixture it claims, it holds at every look
whatever the variance, it is within 1.5x a fixed-n interval at 32 seeds, and ties do not make it a
point; its mixing variance exists even where few seeds and a large family leave no n reachable."""

import numpy as np
import pytest
from scipy import integrate, stats

from grpo_lab.analysis import tmix


def e_value(x: np.ndarray, m: float, tau2: float) -> float:
    n = x.size
    r = (x - m).sum() ** 2 / (n * ((x - m) ** 2).sum())
    rho = n * tau2 / (1 + n * tau2)
    return (1 + n * tau2) ** -0.5 * (1 - rho * r) ** (-n / 2)


def test_the_closed_form_is_the_scale_invariant_mixture():
    """∫∫ N(x | θ, σ²) N(θ | 0, τ²σ²) dθ dσ/σ over ∫ N(x | 0, σ²) dσ/σ, by quadrature."""
    x, tau2 = np.array([0.4, -0.2, 1.1, 0.3, 0.8]), 0.7
    lik = lambda mu, s: np.prod(stats.norm.pdf(x, mu, s))  # noqa: E731
    num = integrate.dblquad(lambda th, s: lik(th, s) * stats.norm.pdf(th, 0, np.sqrt(tau2) * s) / s,
                            0.05, 20, -10, 10)[0]
    den = integrate.quad(lambda s: lik(0, s) / s, 0.05, 20)[0]
    assert e_value(x, 0.0, tau2) == pytest.approx(num / den, rel=1e-4)


def test_the_interval_is_where_the_e_value_stays_below_one_over_alpha():
    rng = np.random.default_rng(3)
    x, alpha = rng.normal(0.3, 0.05, 20), 0.01
    lo, hi = tmix.bounds(x, -1.0, 1.0, alpha, 20, min_sd=0.0)
    tau2 = tmix.mixing(alpha, 20)
    assert e_value(x, lo + 1e-6, tau2) < 1 / alpha < e_value(x, lo - 1e-4, tau2)
    assert e_value(x, hi - 1e-6, tau2) < 1 / alpha < e_value(x, hi + 1e-4, tau2)


@pytest.mark.parametrize("sd", [0.002, 0.05, 0.3])
def test_it_holds_at_every_look_for_any_variance(sd):
    """400 Gaussian paths, 60 looks each: the truth leaves the sequence in at most α of the paths,
    where a fixed 95% t interval at every look misses far more often."""
    rng = np.random.default_rng(int(sd * 1000))
    alpha, looks = 0.1, 60
    miss_cs = miss_t = 0
    for path in rng.normal(0.0, sd, (400, looks)):
        ever_cs = ever_t = False
        for n in range(2, looks + 1):
            lo, hi = tmix.bounds(path[:n], -1.0, 1.0, alpha, looks, min_sd=0.0)
            ever_cs |= not lo <= 0.0 <= hi
            half = stats.t.ppf(0.975, n - 1) * path[:n].std(ddof=1) / np.sqrt(n)
            ever_t |= abs(path[:n].mean()) > half
        miss_cs += ever_cs
        miss_t += ever_t
    assert miss_cs / 400 <= alpha + 2 * np.sqrt(alpha * (1 - alpha) / 400)
    assert miss_t > 2 * miss_cs


def test_width_is_close_to_a_fixed_interval_at_the_target():
    a, n = 0.05 / 45, 32
    fixed = stats.t.ppf(1 - a / 2, n - 1) / np.sqrt(n)
    ratio = tmix.radius(n, 1.0, 0.0, -100.0, 100.0, a, n) / fixed
    assert 1.0 < ratio < 1.5, ratio
    assert tmix.radius(2, 1.0, 0.0, -1.0, 1.0, a, n) == 2.0  # two seeds: nothing known yet


def test_mixing_survives_a_large_family_with_a_small_seed_cap():
    for alpha, target in [(0.05 / 200, 12), (0.05 / 200, 13), (1e-9, 4)]:
        tau2 = tmix.mixing(alpha, target)
        assert np.isfinite(tau2) and tau2 > 0
        assert tmix.bounds(np.random.default_rng(0).normal(0, 0.02, 64), -1, 1, alpha, target)[1] < 1.0


def test_identical_runs_do_not_make_the_interval_a_point():
    lo, hi = tmix.bounds(np.zeros(24), -1.0, 1.0, 0.05 / 45, 32)
    assert lo < -0.002 and hi > 0.002 and hi - lo < 0.04
