"""Small statistics kernels for comparing trick sets over seeds: t intervals, Welch degrees of
freedom, multiple-comparison corrections, sample-size planning, logit. All vectorised numpy."""

from __future__ import annotations

import numpy as np
from scipy import stats

LOGIT_EPS = 1e-3  # pass rates are clipped to [eps, 1 - eps]: logit(0) would be -inf
GRID = 256  # seeds_needed is exact up to this many seeds
POWER = 0.8  # the power that "enough seeds to call it additive" refers to


def t_interval(est, se, df, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ci_low, ci_high, two-sided p) of H0: effect = 0 for estimates with standard error `se`
    on `df` degrees of freedom: est ± t_{1-α/2, df}·se,  p = 2·P(T_df > |est / se|).
    NaN where se or df is not positive and finite."""
    est, se, df = (np.asarray(a, dtype=float) for a in (est, se, df))
    ok = np.isfinite(se) & (se > 0) & np.isfinite(df) & (df > 0)
    safe_se, safe_df = np.where(ok, se, 1.0), np.where(ok, df, 1.0)
    half = stats.t.ppf(1 - alpha / 2, safe_df) * safe_se
    p = 2 * stats.t.sf(np.abs(est) / safe_se, safe_df)
    nan = np.full_like(est, np.nan)
    return np.where(ok, est - half, nan), np.where(ok, est + half, nan), np.where(ok, p, nan)


def welch_df(c, var, n) -> float:
    """Welch–Satterthwaite degrees of freedom of Σ c_j·mean_j over independent groups j with
    sample variances var_j and sizes n_j:  (Σ w_j)² / Σ w_j² / (n_j − 1),  w_j = c_j² var_j / n_j."""
    c, var, n = (np.asarray(a, dtype=float) for a in (c, var, n))
    w = c**2 * var / n
    denom = np.sum(w**2 / (n - 1))
    return float(np.sum(w) ** 2 / denom) if denom > 0 else np.nan


def _adjust(p, scale) -> np.ndarray:
    """Apply `scale(sorted finite p-values, m)` and put the results back in place; NaN stays NaN."""
    p = np.asarray(p, dtype=float)
    out = np.full_like(p, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    if idx.size:
        order = idx[np.argsort(p[idx])]
        out[order] = scale(p[order], order.size)
    return out


def bh(p) -> np.ndarray:
    """Benjamini–Hochberg q-values: q_(i) = min_{j ≥ i} p_(j)·m / j over the m finite p-values
    (sorted ascending); NaN stays NaN and does not count in m."""
    def scale(ps, m):
        return np.minimum(np.minimum.accumulate((ps * m / np.arange(1, m + 1))[::-1])[::-1], 1.0)
    return _adjust(p, scale)


def holm(p) -> np.ndarray:
    """Holm step-down adjusted p-values: p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)) over the m
    finite p-values (sorted ascending); controls the family-wise error rate. NaN stays NaN."""
    def scale(ps, m):
        return np.maximum.accumulate(np.minimum(ps * (m - np.arange(m)), 1.0))
    return _adjust(p, scale)


def seeds_needed(sd_unit, delta, df_per_seed, alpha: float = 0.05, most: int = 10_000) -> np.ndarray:
    """Smallest seed count n with a 95% CI half-width below delta at the observed variance:
    t_{1-α/2, df(n)}·sd_unit/√n < delta,  df(n) = df_per_seed·(n − 1). `sd_unit` is the standard
    deviation of the contrast with one seed per set. Exact up to GRID seeds; above, n solves it
    with the t quantile taken at the normal-approximation size. NaN when unknown or above `most`."""
    sd_unit, delta, df_per_seed = (np.atleast_1d(np.asarray(a, dtype=float)) for a in (sd_unit, delta, df_per_seed))
    ok = np.isfinite(sd_unit) & np.isfinite(delta) & (delta > 0) & np.isfinite(df_per_seed) & (df_per_seed > 0)
    sd, d, k = np.where(ok, sd_unit, 0.0), np.where(ok, delta, 1.0), np.where(ok, df_per_seed, 1.0)
    n = np.arange(2, GRID + 1, dtype=float)
    fits = stats.t.ppf(1 - alpha / 2, k[:, None] * (n - 1)) * sd[:, None] / np.sqrt(n) < d[:, None]
    small = np.where(fits.any(axis=1), n[np.argmax(fits, axis=1)], np.nan)
    n_z = np.maximum((stats.norm.ppf(1 - alpha / 2) * sd / d) ** 2, GRID)
    large = np.floor((stats.t.ppf(1 - alpha / 2, k * (n_z - 1)) * sd / d) ** 2) + 1
    out = np.where(np.isnan(small), large, small)
    return np.where(ok & (out <= most), out, np.nan)


def detectable_se(delta, alpha: float = 0.05, power: float = POWER) -> np.ndarray:
    """Largest standard error at which a true effect of size delta is detected with `power`
    (two-sided test at level α, normal approximation): delta / (z_{1-α/2} + z_power)."""
    return np.asarray(delta, dtype=float) / (stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))


def logit(p, eps: float = LOGIT_EPS) -> np.ndarray:
    """log(p / (1 − p)) of p clipped to [eps, 1 − eps]."""
    p = np.clip(np.asarray(p, dtype=float), eps, 1 - eps)
    return np.log(p / (1 - p))
