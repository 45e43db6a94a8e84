"""Compute curves: a run's held-out pass@1 against the compute it had spent, fitted to the
saturating form of ScaleRL ("The Art of Scaling Reinforcement Learning Compute for LLMs", 2025):

    R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)

A the ceiling (R as C → ∞), B the efficiency exponent (how sharply the gain arrives), C_mid the
compute at half the gain, R0 the pass@1 before training (the run's base eval, at C = 0: measured,
so fixed, not fitted). C is device-hours spent on everything but evals (steps where a run has no
timings), so an eval schedule does not move a curve.

A run's fit (`fit_run`):
    transient  points before TRANSIENT of the run's last compute are dropped (the first steps
               of RL move the format, not the skill; ScaleRL drops its first ~1.5k GPU-h), keeping
               at least MIN_POINTS of the latest
    loss       soft-L1 on the residuals with scale LOSS_SCALE (about one eval's sampling sd), so one
               bad eval point cannot drag the fit the way a square would
    bounds     A ∈ [0, 1], B ∈ [B_MIN, B_MAX], C_mid ∈ [C_first/20, 50·C_last]; a fit at a bound
               says so (`at_bound`): its parameter is not identified by the points it had
    starts     a grid of (B, C_mid) starts, the lowest loss kept
    flat       with at least FORM_POINTS points, the saturating fit is kept only where it beats a
               flat line through them by AICc (least-squares refits; 4 parameters with the noise
               variance against 2); with fewer the form is not chosen (the saturating fit stands,
               and the verdicts call its ceiling and speed unidentified). A run on a noisy plateau
               otherwise gets any A with a C_mid beyond its points, and its extrapolation is
               arbitrary (measured on real tiny-model runs: errors up to 0.44 at 4x the fit
               window). A flat run's A is its level over the window, C_mid is pinned at its lower
               bound (no speed to read), `flat` says so, and its collapse is judged on its last
               MIN_POINTS evals, not on the window's mean.
A run collapsed on its curve when analysis/collapse.py's rule calls the fitted level at its last
compute, R(C_last), collapsed against R0: the same rule the verdict engine counts, read through
the fit instead of one noisy eval.

An arm (`arm_curve`) pools its runs that did not collapse (the healthy estimand of
analysis/rule.py; the collapsed ones are counted beside it): A, B and log C_mid each as a mean
over seeds with a t interval (n − 1 degrees of freedom), and `predict(arm, C)` the arm's pass@1 at
any compute: the mean of its runs' fitted R_i(C) with a confidence interval for the arm's mean
and a prediction interval for one more seed, mean ± t·sd·√(1 + 1/n). Beyond a run's points each
interval is the hull of two forms' intervals: the curve's, and the drift form's (the fitted end
continued at the points' log-linear slope, RunFit.drift_at). Why: the seeds' fits share their bias
(real tiny-model runs jump, then drift up for hundreds of steps; every seed's fit bends at the same
place), so an interval over seeds alone is narrow where the form is wrong; on those runs the curve
form's own 90% interval covered 39-83% of the finals, the hull 61-100% (docs/results.md). The
intervals' coverage is measured by simulation (tests/analysis/test_analysis_curves.py) and on real
runs (benchmarks/curve_prediction.py), not assumed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy import stats as sps

from grpo_lab.analysis import collapse

TRANSIENT = 0.1  # share of the run's last compute whose points are dropped
MIN_POINTS = 3  # points a fit keeps at least (the latest)
FORM_POINTS = 6  # points below which flat and saturating cannot be told apart (AICc's pole at 4 + 1)
LOSS_SCALE = 0.02  # soft-L1 scale: residuals beyond it count linearly
B_MIN, B_MAX = 0.2, 8.0
WALL, CPU = "timing/", "cpu/"  # the metrics rows' phase seconds: wall clock, and the process's CPU time


def saturating(C, R0: float, A: float, B: float, C_mid: float) -> np.ndarray:
    """R(C) of the module docstring; R(0) = R0. C: array of compute (≥ 0)."""
    C = np.asarray(C, float)
    with np.errstate(divide="ignore", over="ignore"):
        ratio = np.where(C > 0, (C_mid / np.where(C > 0, C, 1.0)) ** B, np.inf)
    return R0 + (A - R0) / (1.0 + ratio)


def is_timed(rows: list[dict], clock: str = WALL) -> bool:
    """Whether a run's metrics rows carry phase seconds of `clock` (else its compute axis is steps)."""
    return any(k.startswith(clock) for r in rows for k in r)


def series(rows: list[dict], devices: int = 1, metric: str = "eval/pass@1",
           clock: str = WALL) -> tuple[np.ndarray, np.ndarray]:
    """(C, R) of a run's metrics.jsonl rows: at each row with `metric`, the hours its non-eval
    phases had taken up to that step on `clock` (WALL seconds times the devices held, or CPU
    seconds of the training process), or the step itself when rows carry no such seconds."""
    spent, C, R = 0.0, [], []
    timed = is_timed(rows, clock)
    for r in sorted(rows, key=lambda r: r["step"]):
        spent += sum(v for k, v in r.items() if k.startswith(clock) and k != f"{clock}eval") if timed else 0.0
        if metric in r and r[metric] is not None and math.isfinite(r[metric]):
            C.append(spent * devices / 3600 if timed else r["step"] + 1.0)
            R.append(float(r[metric]))
    return np.array(C), np.array(R)


@dataclass(frozen=True)
class RunFit:
    R0: float
    A: float
    B: float
    C_mid: float
    C_last: float  # the run's last compute point
    points: int  # points fitted (after the transient)
    rmse: float  # of the fitted points
    at_bound: tuple[str, ...]  # parameters the fit pinned to a bound
    collapsed: bool  # collapse.is_collapsed(R0, R(C_last))
    flat: bool = False  # a flat line fitted the points better (AICc): A is the level, no speed
    # least-squares slope of R on ln C over the fitted points (the drift form); a flat fit keeps
    # its points' slope too: the flat choice says no bend is visible, not that nothing drifts
    slope: float = 0.0

    def at(self, C) -> np.ndarray:
        return saturating(C, self.R0, self.A, self.B, self.C_mid)

    def drift_at(self, C) -> np.ndarray:
        """The drift form: the fit within its points, and beyond C_last the fitted end continued
        at the points' log-linear slope, R(C_last) + slope·ln(C / C_last), kept in [0, 1]."""
        C = np.asarray(C, float)
        beyond = np.log(np.maximum(C, self.C_last) / self.C_last)
        return np.clip(self.at(np.minimum(C, self.C_last)) + self.slope * beyond, 0.0, 1.0)


def fit_run(C, R, R0: float, form: str = "auto") -> RunFit:
    """The robust fit of one run's (C, R) points with its base pass@1 R0 (module docstring).
    form "saturating" skips the flat choice (analysis/screening.py reads both)."""
    C, R = np.asarray(C, float), np.asarray(R, float)
    keep = C > 0
    C, R = C[keep], R[keep]
    if C.size < 2:
        raise ValueError(f"a curve needs at least 2 eval points after step 0, got {C.size}: evaluate more often "
                         "(eval.every)")
    late = C >= TRANSIENT * C.max()
    if late.sum() < MIN_POINTS:
        late = np.zeros_like(late)
        late[np.argsort(C)[-min(MIN_POINTS, C.size):]] = True
    C, R = C[late], R[late]
    lo = np.array([0.0, B_MIN, math.log(C.min() / 20)])
    hi = np.array([1.0, B_MAX, math.log(C.max() * 50)])

    def resid(x):
        return saturating(C, R0, x[0], x[1], math.exp(x[2])) - R

    best = None
    for B in (0.7, 1.5, 3.5):
        for c in (np.median(C), C.max(), 4 * C.max()):
            x0 = np.clip([float(R[-1]), B, math.log(c)], lo + 1e-9, hi - 1e-9)
            got = optimize.least_squares(resid, x0, bounds=(lo, hi), loss="soft_l1", f_scale=LOSS_SCALE)
            if best is None or got.cost < best.cost:
                best = got
    # the form is chosen on least-squares fits, so the flat line is not favoured by the soft loss
    polished = optimize.least_squares(resid, best.x, bounds=(lo, hi))
    A, B, logc = best.x
    names = ("A", "B", "C_mid")
    pinned = tuple(n for n, v, a, b in zip(names, best.x, lo, hi) if min(v - a, b - v) < 1e-6 * max(1.0, abs(b - a)))
    level = float(np.mean(R))
    slope = float(np.polyfit(np.log(C), R, 1)[0])
    late_level = float(np.mean(R[np.argsort(C)[-MIN_POINTS:]]))
    if form == "auto" and C.size >= FORM_POINTS and _aicc(float(np.sum((R - level) ** 2)), C.size, 2) <= \
            _aicc(float(np.sum(resid(polished.x) ** 2)), C.size, 4):
        return RunFit(float(R0), level, B_MAX, float(C.min() / 20), float(C.max()), int(C.size),
                      float(np.std(R)), ("C_mid",), collapse.is_collapsed(R0, late_level), True, slope)
    end = float(saturating(C.max(), R0, A, B, math.exp(logc)))
    return RunFit(float(R0), float(A), float(B), float(math.exp(logc)), float(C.max()), int(C.size),
                  float(np.sqrt(np.mean(resid(best.x) ** 2))), pinned, collapse.is_collapsed(R0, end), False, slope)


def _aicc(rss: float, n: int, k: int) -> float:
    """Akaike's criterion with the small-sample correction for a least-squares fit of k
    parameters (the noise variance counted) to n points; infinite where n ≤ k + 1."""
    if n <= k + 1:
        return math.inf
    return n * math.log(max(rss, 1e-12) / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1)


@dataclass(frozen=True)
class Interval:
    est: float
    lower: float
    upper: float
    n: int  # seeds it rests on


def t_interval(x, level: float = 0.9, new: bool = False) -> Interval:
    """Mean of x over seeds with its t interval (n − 1 df); new=True: for one more seed's value,
    ±t·sd·√(1 + 1/n). Fewer than two seeds: unbounded."""
    x = np.asarray(x, float)
    n = x.size
    if n == 0:
        return Interval(math.nan, -math.inf, math.inf, 0)
    m = float(x.mean())
    if n < 2:
        return Interval(m, -math.inf, math.inf, 1)
    half = float(sps.t.ppf(0.5 + level / 2, n - 1) * x.std(ddof=1) * math.sqrt((1 if new else 0) + 1 / n))
    return Interval(m, m - half, m + half, n)


@dataclass(frozen=True)
class ArmCurve:
    runs: tuple[RunFit, ...]  # the runs that did not collapse (on their curve or by collapse.py's rule)
    collapsed: int  # runs that did
    A: Interval  # ceiling (a flat run's level)
    B: Interval  # efficiency exponent, over the runs that are not flat
    C_mid: Interval  # compute to half the gain (geometric mean; interval from log C_mid), runs not flat
    level: float


def arm_curve(fits: list[RunFit], level: float = 0.9) -> ArmCurve:
    """An arm's curve over its seeds' fits (module docstring)."""
    healthy = tuple(f for f in fits if not f.collapsed)
    shaped = [f for f in healthy if not f.flat]  # a flat run's B and C_mid are placeholders, not estimates
    logc = t_interval([math.log(f.C_mid) for f in shaped], level)
    return ArmCurve(healthy, len(fits) - len(healthy), _hull([t_interval([f.A for f in healthy], level)]),  # A ∈ [0, 1]
                    t_interval([f.B for f in shaped], level),
                    Interval(math.exp(logc.est) if logc.n else math.nan, math.exp(logc.lower), math.exp(logc.upper),
                             logc.n), level)


@dataclass(frozen=True)
class Prediction:
    C: float
    mean: Interval  # the arm's mean pass@1 at C (confidence interval)
    seed: Interval  # one more seed's pass@1 at C (prediction interval)


def predict(arm: ArmCurve, C: float) -> Prediction:
    """The arm's pass@1 at compute C, within what was run or beyond it: the estimate is the
    curve form's (its seeds' mean R_i(C)), each interval the hull of the curve form's and the
    drift form's t intervals over the seeds (RunFit.drift_at; the two agree within a run's points),
    cut to [0, 1]: a pass rate's."""
    curve, drift = [float(f.at(C)) for f in arm.runs], [float(f.drift_at(C)) for f in arm.runs]
    mean = _hull([t_interval(curve, arm.level), t_interval(drift, arm.level)])
    seed = _hull([t_interval(curve, arm.level, new=True), t_interval(drift, arm.level, new=True)])
    return Prediction(float(C), mean, seed)


def _hull(intervals: list[Interval]) -> Interval:
    """The first interval's estimate with the bounds of all of them, within [0, 1]; an interval
    on fewer than two seeds stays unbounded (nothing to cut: t_interval could not bound it)."""
    if intervals[0].n < 2:
        return intervals[0]
    return Interval(intervals[0].est, max(0.0, min(i.lower for i in intervals)),
                    min(1.0, max(i.upper for i in intervals)), intervals[0].n)


@dataclass(frozen=True)
class ArmFits:
    """One (model, task, trick set) of a sweep: its arm curve and the runs that could not be fitted."""

    model: str
    task: str
    tricks: str  # arm label
    curve: ArmCurve
    unfitted: tuple[str, ...]  # "run_id: why"
    unit: str  # of C: "device-hours", or "steps" where runs logged no timings


def run_series(rows: list[dict], summary, devices: int,
               metric: str = "eval/pass@1") -> tuple[np.ndarray, np.ndarray, str]:
    """(C, R, unit of C) of a run: `series` on its compute axis, a one-device CPU run's CPU time
    where it logged it (wall time on a shared box counts its neighbours' load), else wall time
    times its devices, else steps."""
    if devices == 1 and str(summary.device or "").startswith("cpu") and is_timed(rows, CPU):
        return *series(rows, 1, metric, CPU), "core-hours (CPU time)"
    return *series(rows, devices, metric, WALL), "device-hours" if is_timed(rows, WALL) else "steps"


def from_run_dirs(runs: list[tuple[dict, Path, int]], metric: str = "eval/pass@1",
                  level: float = 0.9) -> list[ArmFits]:
    """Per arm, the fits of its runs' folders: (labels {model, task, tricks, run_id}, folder,
    devices) each, as api.sweep_results labels them."""
    from grpo_lab.rundir import RunDir
    from grpo_lab.spec.arm import arm_key

    groups: dict[tuple[str, str, str], list[tuple[dict, Path, int]]] = {}
    for labels, folder, devices in runs:
        groups.setdefault((labels["model"], labels["task"], arm_key(labels["tricks"])), []).append(
            (labels, folder, devices))
    out = []
    for (model, task, _), members in sorted(groups.items()):
        fits, unfitted, units = [], [], set()
        for labels, folder, devices in members:
            run = RunDir(folder)
            summary, rows = run.summary(), run.metrics()
            base = (summary.base or {}).get(metric) if summary else None
            try:
                if base is None:
                    raise ValueError("no base eval in its summary")
                C, R, unit = run_series(rows, summary, devices, metric)
                fit = fit_run(C, R, base)
                # one collapse rule: a run the verdict engine counts as collapsed is collapsed here too
                fits.append(dataclasses.replace(fit, collapsed=True) if collapse.from_summary(summary, metric) else fit)
                units.add(unit)
            except ValueError as exc:
                unfitted.append(f"{labels['run_id']}: {exc}")
        out.append(ArmFits(model, task, members[0][0]["tricks"], arm_curve(fits, level), tuple(unfitted),
                           "/".join(sorted(units)) or "-"))
    return out
