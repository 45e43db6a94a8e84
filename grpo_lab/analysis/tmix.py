"""Anytime-valid confidence sequences for a mean under Gaussian noise of unknown variance: the
scale-invariant normal mixture (Lai 1976; the sequential t-test of Pérez-Ortiz, Lardy, de Heide &
Grünwald 2024, "E-statistics, group invariance and anytime-valid testing", Ann. Statist.).

Observations x_1..x_n i.i.d. N(μ, σ²), σ unknown. For a candidate mean m, mix the alternative
μ − m ~ N(0, τ²σ²) and put the right-Haar prior dσ/σ on σ under both hypotheses:

    E_n(m) = (1 + nτ²)^(−1/2) · (1 − ρ_n · r_n(m))^(−n/2),   ρ_n = nτ²/(1 + nτ²),
    r_n(m) = (Σ(x_i − m))² / (n Σ(x_i − m)²) ∈ [0, 1]

(E_1 = 1: one observation says nothing about a mean whose scale is unknown). E_n(m) is a
nonnegative martingale with mean 1 under μ = m for the data's scale-invariant filtration, for
every σ, so Ville gives P(∃n: E_n(μ) ≥ 1/α) ≤ α. Inverting the test at every m, with
SS = Σ(x_i − x̄)² and b_n = (α²/(1 + nτ²))^(1/n):

    CS_n = x̄ ± √(SS/n · r*/(1 − r*)),   r* = (1 − b_n)/ρ_n   (the whole line while r* ≥ 1)

About σ̂·√((2 log(1/α) + log(1 + nτ²))/n) for large n: at α = 0.05/45, 1.4-1.6x the width of a
fixed-n t-interval at the same α for 8-128 observations (the price of looking after every one),
where a confidence sequence for any bounded distribution (analysis/betting.py) pays for a range
that could hold mass anywhere. The price of this one is its assumption: it holds exactly for
Gaussian noise with any variance (per comparison, so one noisy arm widens only its own
comparisons), and tests/analysis/test_analysis_decide_validity.py measures it under heavy tails,
collapsed seeds, skew and pass rates near 0 and 1, where it is not exact.

Ties: evals score a finite set of problems, so two arms can give the same score on every seed and
SS = 0 would claim a mean known exactly. SS is floored at (n − 1)·min_sd², min_sd a resolution
below which no difference is claimed (widening only, so validity is kept).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

MIN_SD = 0.005  # half a point of pass@1: the finest noise level a sequence believes


def _ratio(n: int, alpha: float, tau2: float) -> float:
    """r*/(1 − r*) at n observations (inf while the sequence is still the whole line)."""
    if n < 2:
        return np.inf
    rho = n * tau2 / (1 + n * tau2)
    b = np.exp((2 * np.log(alpha) - np.log1p(n * tau2)) / n)
    r = (1 - b) / rho
    return r / (1 - r) if r < 1 else np.inf


@lru_cache(maxsize=4096)
def mixing(alpha: float, target: float) -> float:
    """τ² that keeps the sequence tight from target/4 to target observations: the smallest mean
    log half-width over that span (a grid over 10^−3..10^3). Tuned at `target` alone it would
    stay the whole line until ~target/3, where most verdicts of a sweep are reached."""
    ns = np.unique(np.geomspace(max(target / 4, 3), max(target, 3), 8).round().astype(int))
    grid = np.logspace(-3, 3, 121)
    logs = np.array([[np.log(_ratio(int(n), alpha, g)) for n in ns] for g in grid])  # (τ², n)
    # an n no τ² makes finite (tiny α, few seeds) says nothing about which τ² is better
    reachable = np.isfinite(logs).any(axis=0)
    if not reachable.any():
        return float(grid[-1])  # large τ² is the first to leave the whole line as n grows
    cost = logs[:, reachable].mean(axis=1)
    return float(grid[int(np.argmin(np.where(np.isfinite(cost), cost, np.inf)))])


def bounds(x, lo: float, hi: float, alpha: float, target: float, min_sd: float = MIN_SD) -> tuple[float, float]:
    """(L_n, U_n) of the (1 − α) sequence for the mean of x_1..x_n, clipped to the known range
    [lo, hi]; (lo, hi) before two observations."""
    x = np.asarray(x, float)
    n = x.size
    ratio = _ratio(n, alpha, mixing(alpha, target))
    if not np.isfinite(ratio):
        return float(lo), float(hi)
    ss = max(float(((x - x.mean()) ** 2).sum()), (n - 1) * min_sd**2)
    rad = float(np.sqrt(ss / n * ratio))
    return max(float(x.mean()) - rad, float(lo)), min(float(x.mean()) + rad, float(hi))


def radius(t: int, sd: float, centre: float, lo: float, hi: float, alpha: float, target: float,
           min_sd: float = MIN_SD) -> float:
    """The half-width after t observations whose sample standard deviation is `sd` (what
    planning assumes); `centre` is unused (the width does not depend on where the mean is)."""
    ratio = _ratio(int(t), alpha, mixing(alpha, target))
    if not np.isfinite(ratio):
        return float(hi - lo)
    return float(min(max(sd, min_sd) * np.sqrt((t - 1) / t * ratio), hi - lo))
