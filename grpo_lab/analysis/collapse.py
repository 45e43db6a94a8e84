"""Collapse as an outcome of its own: which runs collapsed (defined from each run's own trajectory,
before any comparison), how often an arm collapses, and whether a trick changes that rate.

A run collapsed when any of:

    it was stopped by an alarm (`alarms.stop_on`: the trainer gave up on it),
    its loss or rewards went NaN (the "nan" alarm),
    its final pass@1 fell below (1 − DROP_SHARE) of its own base pass@1, by at least DROP_MIN.

The trainer's other alarms (entropy or diversity collapse, KL spikes) fire on healthy tiny-model
runs too, so they are reported but do not make a run collapsed. The rule reads one run only, so
which seeds count as collapsed cannot depend on how a comparison comes out.

Rates, with y_{a,i} = 1 when arm a's run at seed index i collapsed (i.i.d. over seed indices):

    arm rate      p_a = E[y_a],            a 95% confidence sequence from the counts (Jeffreys mixture)
    comparison    Σ_a c_a·p_a,             a betting sequence on the paired Σ_a c_a·y_{a,i} over the
                                           seed indices every arm ran, at the rule's collapse α

Both are valid at any stopping time; betting (analysis/betting.py) for any bounded outcome, the
contrast's paired indicators included; the mixture for one arm's rate, from its counts alone
(0 of 32 seeds: p ≤ 15%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize
from scipy.special import betaln

from grpo_lab.analysis import betting

DROP_SHARE = 0.5  # a final pass@1 below half the run's own base pass@1 ...
DROP_MIN = 0.02  # ... and at least this far below it (two points: eval noise on a low base is not collapse)
STOP_ALARMS = frozenset({"nan"})
RATE_ALPHA = 0.05  # each arm's collapse-rate bound is a 95% confidence sequence


def is_collapsed(base: float | None, final: float | None, stopped: bool = False,
                 alarms: dict[str, int] | None = None) -> bool:
    """The run-level rule of the module docstring, from the run's base and final eval pass@1,
    whether an alarm stopped it, and its alarm counts."""
    if stopped or any((alarms or {}).get(k) for k in STOP_ALARMS):
        return True
    if base is None or final is None or not (np.isfinite(base) and np.isfinite(final)):
        return final is not None and not np.isfinite(final)
    return final < (1 - DROP_SHARE) * base and base - final >= DROP_MIN


def from_summary(summary, metric: str = "eval/pass@1") -> bool:
    """is_collapsed of a run's summary.json (rundir.Summary)."""
    base = (summary.base or {}).get(metric)
    return is_collapsed(base, summary.final.get(metric), summary.stopped, summary.alarms)


def rate_bounds(k: int, n: int, alpha: float = RATE_ALPHA) -> tuple[float, float]:
    """(lower, upper) of an arm's collapse rate from k collapsed runs of n, anytime-valid: the
    rates p where the Jeffreys mixture of Bernoulli likelihood ratios stays below 1/α,

        M_n(p) = B(k + ½, n − k + ½) / (B(½, ½) · p^k · (1 − p)^(n−k)) < 1/α,

    a martingale under p (Robbins' mixture), so by Ville's inequality every n's bounds hold at
    once with probability ≥ 1 − α. It reads the counts only, so any report can recompute it."""
    if n <= 0:
        return 0.0, 1.0
    top = math.log(1 / alpha)
    mix = betaln(k + 0.5, n - k + 0.5) - betaln(0.5, 0.5)

    def log_m(p: float) -> float:
        return mix - k * math.log(p) - (n - k) * math.log1p(-p)

    mode = min(max(k / n, 1e-12), 1 - 1e-12)
    lo = 0.0 if k == 0 or log_m(1e-12) < top else optimize.brentq(lambda p: log_m(p) - top, 1e-12, mode)
    hi = 1.0 if k == n or log_m(1 - 1e-12) < top else optimize.brentq(lambda p: log_m(p) - top, mode, 1 - 1e-12)
    return float(lo), float(hi)


@dataclass(frozen=True)
class CollapseVerdict:
    """A comparison's collapse-rate contrast Σ_a c_a·p_a: "more" (lower > 0), "fewer" (upper < 0) or
    "open", with the counts of every arm it involves."""

    counts: tuple[tuple[str, int, int], ...]  # (arm key, collapsed runs, runs)
    est: float
    lower: float
    upper: float
    seeds: int  # seed indices every arm of the comparison ran
    label: str

    def as_dict(self) -> dict:
        return {"counts": [list(c) for c in self.counts], "est": self.est, "lower": self.lower,
                "upper": self.upper, "seeds": self.seeds, "label": self.label}

    @classmethod
    def from_dict(cls, d: dict) -> CollapseVerdict:
        return cls(tuple((str(k), int(x), int(n)) for k, x, n in d["counts"]), float(d["est"]), float(d["lower"]),
                   float(d["upper"]), int(d["seeds"]), str(d["label"]))


@lru_cache(maxsize=4096)
def _none_collapsed(n: int, span: tuple[float, float], alpha: float, target: float) -> tuple[float, float]:
    """betting.bounds of n seed indices where no run collapsed: the commonest case, the same for
    every comparison with that n, span and α."""
    return betting.bounds(np.zeros(n), *span, alpha, target)


def compare(coefs, flags: dict[str, dict[int, bool]], span: tuple[float, float], alpha: float,
            target: float) -> CollapseVerdict:
    """The collapse verdict of a comparison with coefficients `coefs` ((arm key, c_a) pairs) from
    each arm's {seed index: collapsed}."""
    counts = tuple((k, int(sum(flags.get(k, {}).values())), len(flags.get(k, {}))) for k, _ in coefs)
    seeds = [set(flags.get(k, {})) for k, _ in coefs]
    shared = sorted(set.intersection(*seeds)) if seeds else []
    x = np.array([sum(c * float(flags[k][s]) for k, c in coefs) for s in shared], float)
    if x.size == 0:
        return CollapseVerdict(counts, float("nan"), span[0], span[1], 0, "open")
    lo, hi = _none_collapsed(x.size, span, alpha, target) if not x.any() else betting.bounds(x, *span, alpha, target)
    label = "more" if lo > 0 else "fewer" if hi < 0 else "open"
    return CollapseVerdict(counts, float(x.mean()), float(lo), float(hi), int(x.size), label)
