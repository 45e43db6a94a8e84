"""Multi-fidelity screening (`grpo-lab sweep MATRIX --screen`): every arm's seeds run to a rung (a
step count, a pre-declared fraction of the matrix's steps), arms whose pass@1 at the full length is
credibly below the best arm's by more than δ are dropped, and the survivors' runs continue (the same
run, resumed from its checkpoint) to the next rung: successive halving over pre-declared rungs, with
the elimination a statement with an error bound instead of a keep-the-top-half rule.

At rung r < R (the last rung, the full length, decides nothing), per arm a (per (model, task)):

    value     μ_a = the arm's expected pass@1 at the full length over its runs that do not
              collapse (the healthy estimand of analysis/rule.py, --decide's default)
    predicted each healthy seed's curve (analysis/curves.fit_run on its eval points so far, on a
              steps axis) read at the full length, p_i; their mean ± t_df·s_a/√n at level
              1 − α_each, s_a = max(the arm's sd, the sd pooled over the (model, task)'s arms),
              df the pooled one (Σ_a (n_a − 1): a matrix's two seeds an arm give one df alone,
              where t is useless), α_each = α / ((R − 1)·A), A the sweep's arms: Bonferroni over the
              decision rungs and the arms, so with probability ≥ 1 − α every arm's interval holds
              at every rung at once, whenever the screening stops (anytime over the finite rung set)
    inflated  the half-width times `inflate` (default INFLATE)
    observed  (default on) the same interval on each healthy seed's last eval at the rung

An arm a is dropped at rung r when, against the best arm b* (the highest lower end):

    upper_pred(a) < lower_pred(b*) − δ   and   upper_obs(a) < lower_obs(b*) − δ

If every predicted interval holds, a dropped arm has μ_a ≤ upper_pred(a) < lower_pred(b*) − δ ≤
μ_b* − δ ≤ max μ − δ, so the probability of dropping an arm within δ of the best is ≤ α. The
observed condition only removes drops, so it keeps the bound; it guards against the case the bound
does not cover: THE GUARANTEE RESTS ON THE CURVE FORMS (one of a seed's readings being unbiased for
the arm's value at the full length). On real tiny-model runs the curve form's own 90% prediction
intervals covered 39-83% of the held-out final evals when fitted on a quarter or a half of the run
(docs/results.md: a slow drift after the first jump, which is why each seed is also read by its
drift), and a run that sits on a plateau for its first quarter and then rises is read by no form,
which is why the default asks the gap of the observed rung values and widens the intervals: a rise
that lifts a trailing arm later than the best is what would make a drop wrong. Measured on the simulator
(tests/analysis/test_screening.py, benchmarks/screening.py), where the saturating form holds.

An arm is never dropped where it cannot be read: a seed with fewer than FIT_POINTS evals after
step 0, a failed fit, or fewer than two healthy seeds; nor is the baseline (every comparison's
reference, kept whatever it reads). Only arms read in full (the baseline too) can be the best.

A dropped arm's effect against the baseline is also decided when its interval lies below the
baseline's (both conditions, without δ): "significant", below, on the same simultaneous event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

from grpo_lab.analysis import curves

DEFAULT_RUNGS = (0.25, 0.5)  # with the full length: successive halving, η = 2
INFLATE = 1.5  # prediction half-widths are widened by this (why: the module docstring)
FIT_POINTS = curves.MIN_POINTS  # evals after step 0 a seed needs to be read at a rung
BASELINE = "baseline"


@dataclass(frozen=True)
class ScreenRule:
    """Every statistical choice of a screening, fixed before the first rung (a restart keeps them)."""

    rungs: tuple[float, ...] = DEFAULT_RUNGS  # decision rungs, fractions of the full steps, increasing, < 1
    delta: float = 0.02
    alpha: float = 0.05
    inflate: float = INFLATE
    observed: bool = True  # also require the gap on the observed rung values

    def __post_init__(self) -> None:
        r = tuple(float(x) for x in self.rungs)
        if not r or any(not 0 < x < 1 for x in r) or list(r) != sorted(set(r)):
            raise ValueError(f"screen rungs {self.rungs!r}: increasing fractions strictly between 0 and 1")
        if not (0 < self.delta < 1 and 0 < self.alpha < 1 and self.inflate >= 1):
            raise ValueError("screen: delta and alpha in (0, 1), inflate >= 1")
        object.__setattr__(self, "rungs", r)

    def alpha_each(self, arms: int) -> float:
        """α / ((R − 1)·A): one two-sided interval per arm and decision rung."""
        return self.alpha / (len(self.rungs) * max(arms, 1))


def rung_steps(steps: int, fractions, every: int) -> list[int]:
    """The decision rungs as step counts, round(f·steps) each, then `steps`; ValueError naming the
    rung when one is not a whole multiple of the eval interval (a rung must end on an eval)."""
    out = []
    for f in fractions:
        at = f * steps
        if abs(at - round(at)) > 1e-9 or round(at) % every or round(at) <= 0:
            good = sorted({max(every, every * round(f * steps / every))})
            raise ValueError(f"rung {f:g} of {steps} steps is step {at:g}, not a multiple of eval.every = {every}: "
                             f"use a fraction that lands on an eval (e.g. {good[0] / steps:g}) or set eval.every to "
                             "a divisor of it")
        out.append(int(round(at)))
    if len(set(out)) != len(out):
        raise ValueError(f"rungs {list(fractions)} of {steps} steps give the same step twice")
    return [*out, steps]


@dataclass(frozen=True)
class Series:
    """One seed's evals up to the rung: steps trained at each eval (≥ 1) and pass@1; base = its
    pass@1 before training."""

    steps: tuple[int, ...]
    values: tuple[float, ...]
    base: float


@dataclass(frozen=True)
class Read:
    """One arm at one rung."""

    arm: tuple  # (model, task, key)
    seeds: int  # healthy seeds behind the intervals
    collapsed: int  # seeds that collapsed by the rung
    # at the full length: (mean of the high readings, lower end of the low ones, upper end of the high ones)
    pred: tuple[float, float, float]
    obs: tuple[float, float, float]  # the same of the last evals
    why_not: str = ""  # why it cannot be dropped ("" : it can)


@dataclass(frozen=True)
class Drop:
    arm: tuple
    rung: int  # index of the rung it was dropped at
    step: int  # that rung's step
    best: tuple  # the arm it is below
    why: str  # the two gaps, in words
    below_baseline: bool = False  # its interval lies below the baseline's too


@dataclass(frozen=True)
class RungResult:
    reads: list[Read]
    drops: list[Drop] = field(default_factory=list)


def _interval(x: list[float], sd: float, df: int, a: float, inflate: float) -> tuple[float, float, float]:
    """mean ± inflate·t_{1−a/2, df}·sd/√n; unbounded without a noise estimate."""
    m = float(np.mean(x)) if x else math.nan
    if len(x) < 2 or df < 1 or not math.isfinite(sd):
        return m, -math.inf, math.inf
    half = inflate * float(sps.t.ppf(1 - a / 2, df)) * sd / math.sqrt(len(x))
    return m, m - half, m + half


@dataclass(frozen=True)
class Seeds:
    """One arm's healthy seeds at a rung: each seed's high and low reading of its value at the full
    length (for being dropped, for being the best), and its last eval."""

    arm: tuple
    high: list[float]
    low: list[float]
    obs: list[float]
    collapsed: int
    why_not: str


def readings(fit: curves.RunFit, R: np.ndarray, C: np.ndarray, full: int) -> tuple[float, float]:
    """(high, low) of one seed at `full` steps: the largest and the smallest of its saturating
    curve's extrapolation, its drift form's (curves.RunFit.drift_at: the points' log-linear slope
    continued) and its plateau, the mean of its last MIN_POINTS evals. An arm is dropped on its
    seeds' high readings and compared with the best's low ones, so a drop stands if, for each of
    the two arms, one reading is right: a slow arm still rising is read by its curve, one drifting
    up past its fitted bend by its drift, a plateau the curve would overshoot by its level."""
    level = float(np.mean(R[np.argsort(C)[-curves.MIN_POINTS:]]))
    forms = (float(fit.at(float(full))), float(fit.drift_at(float(full))), level)
    return max(forms), min(forms)


def seeds_of(arm: tuple, runs: list[Series], full: int) -> Seeds:
    """Each seed's saturating curve (curves.fit_run) fitted on its evals so far and read at `full`
    steps; seeds that collapsed by the rung (curves.py's rule) left out; why_not says why the arm
    cannot be read."""
    high, low, obs, collapsed, why = [], [], [], 0, ""
    for s in runs:
        pts = [(c, v) for c, v in zip(s.steps, s.values) if c > 0 and math.isfinite(v)]
        if len(pts) < FIT_POINTS:
            why = why or f"a seed has {len(pts)} evals (< {FIT_POINTS}): its curve is not read"
            continue
        C, R = np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float)
        try:
            fit = curves.fit_run(C, R, s.base, form="saturating")
        except ValueError as exc:
            why = why or f"a seed's curve did not fit: {exc}"
            continue
        if fit.collapsed:
            collapsed += 1
            continue
        hi, lo = readings(fit, R, C, full)
        high.append(hi)
        low.append(lo)
        obs.append(float(R[np.argmax(C)]))
    if not why and len(high) < 2:
        why = f"{len(high)} healthy seeds (< 2)"
    return Seeds(arm, high, low, obs, collapsed, why)


def pooled_sd(values: list[list[float]]) -> tuple[float, int]:
    """(sd, df): the seed-to-seed sd pooled over arms, √(Σ_a Σ_i (x_ai − x̄_a)² / Σ_a (n_a − 1))."""
    groups = [np.asarray(v, float) for v in values if len(v) >= 2]
    df = sum(g.size - 1 for g in groups)
    if df < 1:
        return math.nan, 0
    return math.sqrt(sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df), df


def read_cell(cell: list[Seeds], a: float, rule: ScreenRule) -> list[Read]:
    """Intervals for the arms of one (model, task): each arm's own sd or the sd pooled over the
    cell's read arms, whichever is larger (one noisier arm is not judged by the others' noise),
    on the pooled degrees of freedom (two seeds an arm give an arm one df alone)."""
    read = [s for s in cell if not s.why_not]
    out = []
    for s in cell:
        ends = []
        for values, pool, inflate in ((s.high, [x.high for x in read], rule.inflate),
                                      (s.low, [x.low for x in read], rule.inflate),
                                      (s.obs, [x.obs for x in read], 1.0)):
            sd, df = pooled_sd(pool)
            own = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
            ends.append(_interval(values, float(np.fmax(own, sd)), df, a, inflate))
        (m, _, hi), (_, lo, _), obs = ends
        out.append(Read(s.arm, len(s.high), s.collapsed, (m, lo, hi), obs, s.why_not))
    return out


def screen(rule: ScreenRule, rung: int, rung_step: int, full: int, arms: dict[tuple, list[Series]],
           total_arms: int) -> RungResult:
    """The elimination at decision rung `rung` (index into rule.rungs) for the live arms
    {(model, task, key): their seeds' Series}; total_arms: A of the Bonferroni split (every arm
    the sweep started with, dropped ones included, so the split is fixed before any data)."""
    if not 0 <= rung < len(rule.rungs):
        raise ValueError(f"rung {rung}: the decision rungs are 0..{len(rule.rungs) - 1} (the last, full, decides nothing)")
    a = rule.alpha_each(total_arms)
    seeds = [seeds_of(arm, runs, full) for arm, runs in sorted(arms.items())]
    reads = [r for cell in sorted({s.arm[:2] for s in seeds})
             for r in read_cell([s for s in seeds if s.arm[:2] == cell], a, rule)]
    drops = []
    for cell in sorted({r.arm[:2] for r in reads}):
        # only arms read in full set the best: a missing seed's arm mean is not the arm's
        mine = [r for r in reads if r.arm[:2] == cell and not r.why_not]
        if not mine:
            continue
        best = max(mine, key=lambda r: r.pred[1])
        base = next((r for r in mine if r.arm[2] == BASELINE), None)
        for r in mine:
            if r is best or r is base or not _below(r, best, rule.delta, rule.observed):
                continue
            why = (f"predicted {r.pred[0]:.3f} at step {full} (≤ {r.pred[2]:.3f}) vs {best.arm[2]}'s "
                   f"{best.pred[0]:.3f} (≥ {best.pred[1]:.3f}); at step {rung_step} {r.obs[0]:.3f} vs {best.obs[0]:.3f}")
            drops.append(Drop(r.arm, rung, rung_step, best.arm, why,
                              base is not None and base is not r and _below(r, base, 0.0, rule.observed)))
    return RungResult(reads, drops)


def _below(r: Read, ref: Read, delta: float, observed: bool) -> bool:
    """r's upper ends below ref's lower ends by more than delta (predicted; and observed)."""
    pred = r.pred[2] < ref.pred[1] - delta
    return pred and (not observed or r.obs[2] < ref.obs[1] - delta)
