"""Verdicts on the ceiling and on the efficiency of a trick, from its arm's compute curves
(analysis/curves.py) against its cell's baseline.

Per comparison (a trick set vs the baseline of its model and task), over each arm's runs that
did not collapse on their curve (the healthy estimand; collapsed runs are counted beside):

    ceiling   ΔA = mean A_trick − mean A_base
    speed     log r, r = gmean C_mid_trick / gmean C_mid_base   (r < 1: half the gain sooner)

each with a Welch t interval (each arm its own variance: a trick may make seeds noisier). Every
interval of the report is at level 1 − α/m, m = 2 × the comparisons (Bonferroni over both
families), so with probability ≥ 1 − α every interval holds its truth at once, and no label
below is wrong unless an interval missed, the truth being the mean of the fitted parameter over
an arm's healthy seeds (a fit biased differently in two arms breaks this; the validity test
measures it on simulated curves). Fixed-sample intervals: not for a --decide sweep, whose seeds
were added where pass@1 comparisons stayed open.

    ceiling   "raises the ceiling"  ΔA's interval > 0      "lowers the ceiling"  < 0
              "same ceiling (±δ)"   inside (−δ, δ)          else "undecided"
    speed     "≥ x× less compute to half the gain" when r's interval lies below 1, x = 1 / its
              upper end (the guaranteed part, not the point estimate), "≥ x× more" above 1;
              "same speed (within ×s)" inside (1/s, s); else "undecided"

A ceiling is an extrapolation unless the runs went past half their gain, so the ceiling is
"undecided" (said why) when any run of either arm ended before its own C_mid or had A pinned at
a fit bound; a flat run's ceiling is its level. The speed is "undecided" when a run had C_mid
pinned or was flat (curves.fit_run). Fewer than two
healthy runs in an arm: undecided. δ defaults to ScaleRL's ±0.02 band on A.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grpo_lab.analysis import collapse, stats
from grpo_lab.analysis.curves import FORM_POINTS, ArmFits, Interval, RunFit
from grpo_lab.spec.arm import BASELINE, arm_key

DELTA = 0.02  # ScaleRL's significance band on the ceiling A
SPEED_MARGIN = 1.25  # "same speed": C_mid within this factor either way
UNDECIDED = "undecided"


@dataclass(frozen=True)
class CurveVerdict:
    """One trick set against its cell's baseline, on the ceiling and on the speed."""

    model: str
    task: str
    tricks: str
    runs: tuple[int, int]  # healthy runs (baseline, trick)
    collapsed: tuple[int, int]  # runs that collapsed on their curve (baseline, trick)
    ceiling: Interval  # ΔA (trick − baseline), interval at the family level
    speed: Interval  # r = C_mid ratio (trick / baseline), interval at the family level
    ceiling_label: str
    speed_label: str
    why: str  # why a label is undecided ("" when both are decided)
    level: float  # each interval's coverage (1 − α/m)
    alpha: float  # the family's error rate: all labels hold together with probability ≥ 1 − alpha


def welch(a, b, level: float) -> Interval:
    """mean(b) − mean(a) with its Welch t interval at `level`; unbounded with < 2 runs a side."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = min(a.size, b.size)
    if n < 2:
        est = float(b.mean() - a.mean()) if n else math.nan
        return Interval(est, -math.inf, math.inf, n)
    var, size = np.array([a.var(ddof=1), b.var(ddof=1)]), np.array([a.size, b.size], float)
    est, se = float(b.mean() - a.mean()), float(np.sqrt((var / size).sum()))
    if se == 0:  # identical values (every run at 0 on a hard task): no spread to bound a difference with
        return Interval(est, -math.inf, math.inf, n)
    lo, hi, _ = stats.t_interval(est, se, stats.welch_df([-1, 1], var, size), 1 - level)
    return Interval(est, float(lo), float(hi), n)


def _label(i: Interval, margin: float, up: str, down: str, same: str) -> str:
    if i.lower > 0:
        return up
    if i.upper < 0:
        return down
    if -margin < i.lower and i.upper < margin:
        return same
    return UNDECIDED


def _unidentified(fits: tuple[RunFit, ...], ceiling: bool) -> str:
    """Why an arm's runs cannot carry a ceiling (or a speed) label, or ''."""
    if len(fits) < 2:
        return f"{len(fits)} healthy run(s)"
    if few := sum(f.points < FORM_POINTS for f in fits):
        return f"{few} run(s) with fewer than {FORM_POINTS} eval points past the transient: the curve form is unidentified"
    if flat := sum(f.flat for f in fits):
        return f"{flat} run(s) flat within their noise: " + ("a level over the runs, not a ceiling" if ceiling
                                                              else "no speed to read")
    if pinned := sorted({p for f in fits for p in f.at_bound if p == ("A" if ceiling else "C_mid")}):
        return f"{pinned[0]} at a fit bound in {sum(pinned[0] in f.at_bound for f in fits)} run(s)"
    if ceiling and (short := sum(f.C_last < f.C_mid for f in fits)):
        return f"{short} run(s) ended before half their gain (C_last < C_mid): the ceiling is an extrapolation"
    return ""


def _why(base: str, b: tuple[RunFit, ...], trick: str, t: tuple[RunFit, ...], ceiling: bool) -> str:
    return ", ".join(f"{arm} {w}" for arm, w in ((base, _unidentified(b, ceiling)), (trick, _unidentified(t, ceiling)))
                     if w)


def _ratio_text(i: Interval) -> str:
    """The guaranteed part of a decided speed difference: the interval's end nearest to 1."""
    if i.upper < 1:
        return f"≥ {1 / i.upper:.2g}x less compute to half the gain"
    return f"≥ {i.lower:.2g}x more compute to half the gain"


def compare(base: ArmFits, trick: ArmFits, level: float, delta: float = DELTA,
            speed_margin: float = SPEED_MARGIN, alpha: float = 0.05) -> CurveVerdict:
    """One comparison's intervals at `level` and its two labels (module docstring)."""
    b, t = base.curve.runs, trick.curve.runs
    ceiling = welch([f.A for f in b], [f.A for f in t], level)
    log_r = welch([math.log(f.C_mid) for f in b], [math.log(f.C_mid) for f in t], level)
    speed = Interval(math.exp(log_r.est) if math.isfinite(log_r.est) else math.nan,
                     math.exp(log_r.lower), math.exp(log_r.upper), log_r.n)
    why_c, why_s = (_why(base.tricks, b, trick.tricks, t, ceiling) for ceiling in (True, False))
    c_label = UNDECIDED if why_c else _label(ceiling, delta, "raises the ceiling", "lowers the ceiling",
                                              f"same ceiling (±{delta:g})")
    s_label = UNDECIDED if why_s else _label(log_r, math.log(speed_margin), _ratio_text(speed),
                                              _ratio_text(speed), f"same speed (within x{speed_margin:g})")
    wide = f"interval too wide at {len(b)} and {len(t)} healthy runs: add seeds"
    why = "; ".join(f"{what}: {w or wide}" for what, w, label in (("ceiling", why_c, c_label), ("speed", why_s, s_label))
                    if label == UNDECIDED)
    return CurveVerdict(trick.model, trick.task, trick.tricks, (len(b), len(t)),
                        (base.curve.collapsed, trick.curve.collapsed), ceiling, speed, c_label, s_label, why, level,
                        alpha)


def verdicts(arms: list[ArmFits], alpha: float = 0.05, delta: float = DELTA,
             speed_margin: float = SPEED_MARGIN) -> list[CurveVerdict]:
    """Every trick set against its cell's baseline, each interval at 1 − α/(2K) for K comparisons."""
    bases = {(a.model, a.task): a for a in arms if arm_key(a.tricks) == BASELINE}
    pairs = [(bases[a.model, a.task], a) for a in arms
             if arm_key(a.tricks) != BASELINE and (a.model, a.task) in bases]
    level = 1 - alpha / (2 * len(pairs)) if pairs else 1 - alpha
    return [compare(b, t, level, delta, speed_margin, alpha) for b, t in pairs]


def collapsed_text(runs: int, collapsed: int) -> str:
    """'collapsed k of n (≤ U%)' with the verdict engine's anytime bound on the arm's rate."""
    n = runs + collapsed
    return f"collapsed {collapsed} of {n} (≤ {collapse.rate_bounds(collapsed, n)[1]:.0%})" if n else "-"
