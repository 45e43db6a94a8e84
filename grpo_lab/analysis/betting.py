"""Anytime-valid confidence sequences for the mean of bounded observations, by betting
(Waudby-Smith & Ramdas 2023, "Estimating means of bounded random variables by betting", JRSS-B
86(1); the hedged-capital construction of their §4, two one-sided capitals at α/2 each).

Observations x_1, x_2, ... in a known range [lo, hi] with E[x_i | x_<i] = μ, rescaled to
z = (x − lo)/(hi − lo) ∈ [0, 1]. For a candidate mean m ∈ [0, 1] the two capitals

    K⁺_t(m) = Π_{i≤t} (1 + λ⁺_i(m)(z_i − m)),   λ⁺_i(m) = min(λ̇_i, c / m)
    K⁻_t(m) = Π_{i≤t} (1 − λ⁻_i(m)(z_i − m)),   λ⁻_i(m) = min(λ̇_i, c / (1 − m))

bet on "the mean is above / below m" with predictable stakes λ̇_i (functions of z_<i only); the
truncation keeps every factor ≥ 1 − c > 0. At m = μ each is a nonnegative martingale with mean 1,
so Ville's inequality gives P(∃t: K⁺_t(μ) ≥ 2/α) ≤ α/2, and likewise for K⁻. Hence

    L_t = inf{m : K⁺_t(m) < 2/α},   U_t = sup{m : K⁻_t(m) < 2/α}

is a (1 − α) confidence sequence: μ ∈ [L_t, U_t] at every t at once, for every distribution on
[lo, hi] (no normality, no variance assumed, any stopping rule). Each factor of K⁺ is
nonincreasing in m, so K⁺_t is, and L_t is found by a bracketing search on a grid (reported at
the grid point below the first candidate kept: conservative); U_t is L_t of 1 − z.

Stakes: the predictable plug-in of WSR eq. (26), tuned to a target time n*:
λ̇_i = √(2 log(2/α) / (n* σ̂²_{i−1})), σ̂²_{i−1} = (1/4 + Σ_{j<i} (z_j − z̄_{j−1})²) / i and
z̄_j = (1/2 + Σ_{k≤j} z_k)/(j + 1). Any predictable choice is valid; this one is tightest near n*.

What it costs: with no noise at all a bound moves by at most a factor (1 + c·d/m) per observation,
so showing the mean is d (rescaled) away from m needs t ≥ log(2/α) / log(1 + c·d/m): the price of
holding for every bounded distribution, including one that puts a small mass at the far end of
the range that no finite sample has seen yet. `min_samples` gives that floor.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

C = 0.9  # stake cap: a factor never falls below 1 − C, so a bet against the truth cannot ruin
GRID = 33  # points per stage of the bracketing search; 3 stages resolve 1/32³ of the range
STAGES = 3


def stakes(z: np.ndarray, alpha: float, target: float) -> np.ndarray:
    """λ̇_i for rescaled observations z (shape (t,)), each from z_<i only (module docstring)."""
    t = len(z)
    csum = np.concatenate([[0.0], np.cumsum(z)])
    zbar = (0.5 + csum[1:]) / (np.arange(1, t + 1) + 1)  # z̄_j, j = 1..t
    prev = np.concatenate([[0.5], zbar[:-1]])  # z̄_{j−1}
    ss = np.concatenate([[0.0], np.cumsum((z - prev) ** 2)])[:-1]  # Σ_{j<i}
    var = (0.25 + ss) / np.arange(1, t + 1)
    return np.sqrt(2 * np.log(2 / alpha) / (max(target, 1.0) * var))


def _log_capital_up(z: np.ndarray, lam: np.ndarray, m: np.ndarray) -> np.ndarray:
    """log K⁺_t(m) for candidates m (shape (k,)): Σ_i log(1 + min(λ̇_i, C/m)(z_i − m))."""
    bet = np.minimum(lam[None, :], C / np.maximum(m[:, None], 1e-300))
    return np.log1p(bet * (z[None, :] - m[:, None])).sum(axis=1)


def _lower(z: np.ndarray, lam: np.ndarray, alpha: float) -> float:
    """L_t in rescaled units: the grid point below the first candidate with K⁺ < 2/α."""
    threshold = np.log(2 / alpha)
    a, b = 0.0, 1.0
    for _ in range(STAGES):
        m = np.linspace(a, b, GRID)
        kept = np.flatnonzero(_log_capital_up(z, lam, m) < threshold)
        if kept.size == 0:
            return b  # K⁺ is nonincreasing in m: nothing up to b is kept
        first = kept[0]
        if first == 0:
            return a
        a, b = m[first - 1], m[first]
    return float(a)


def bounds(x, lo: float, hi: float, alpha: float, target: float) -> tuple[float, float]:
    """(L_t, U_t) of the (1 − α) betting confidence sequence for the mean of x_1..x_t ∈ [lo, hi],
    in x's units; (lo, hi) with no observation."""
    x = np.asarray(x, float)
    if x.size == 0:
        return float(lo), float(hi)
    width = hi - lo
    z = np.clip((x - lo) / width, 0.0, 1.0)
    lam = stakes(z, alpha, target)
    low = _lower(z, lam, alpha)
    high = 1.0 - _lower(1.0 - z, lam, alpha)
    return float(lo + width * low), float(lo + width * high)


def min_samples(gap: float, lo: float, hi: float, centre: float, alpha: float) -> float:
    """The noise-free floor: observations before both bounds can be within `gap` of `centre`.
    Each factor is at most 1 + C·d/m, d = gap/(hi − lo) and m the rescaled distance from the
    candidate to the range's end it bets against, so
    t ≥ log(2/α) / log(1 + C·d / max(c − d, 1 − c − d)), c = (centre − lo)/(hi − lo)."""
    d = gap / (hi - lo)
    c = (centre - lo) / (hi - lo)
    return float(np.log(2 / alpha) / np.log1p(C * d / max(c - d, 1 - c - d, 1e-12)))


@lru_cache(maxsize=65536)
def _radius_cached(t: int, sd: float, centre: float, lo: float, hi: float, alpha: float, target: float) -> float:
    x = np.full(t, centre)
    x[0::2] += sd
    x[1::2] -= sd
    low, high = bounds(np.clip(x, lo, hi), lo, hi, alpha, target)
    return max(centre - low, high - centre)


def radius(t: int, sd: float, centre: float, lo: float, hi: float, alpha: float, target: float) -> float:
    """The half-width the sequence reaches after t observations of a typical path with mean
    `centre` and standard deviation `sd` (alternating centre ± sd): what planning assumes.
    Arguments are rounded to 3 significant digits so repeated planning reuses results."""
    r = lambda v: float(f"{v:.3g}")  # noqa: E731 (one rounding, named)
    return _radius_cached(int(t), r(sd), r(centre), float(lo), float(hi), float(alpha), float(target))
