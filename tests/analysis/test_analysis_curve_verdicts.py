"""Ceiling and speed verdicts from compute curves: the Welch interval, each label's rule, the
honesty rules (extrapolated ceilings, pinned fits, too few runs), and validity by simulation
with known truth under skewed seeds, collapsing seeds and tricks that only change the speed,
driving fit_run -> arm_curve -> verdicts as `grpo-lab predict` and the report do."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as sps

from grpo_lab.analysis import curve_verdicts as cvd
from grpo_lab.analysis import curves as cv

C = np.linspace(0.05, 1.0, 10)  # eval points of one run (device-hours)
R0, A0, B0, CMID0 = 0.2, 0.6, 1.5, 0.2


def fit(A=0.6, C_mid=0.2, C_last=1.0, at_bound=()):
    return cv.RunFit(0.2, A, 1.5, C_mid, C_last, 10, 0.01, tuple(at_bound), False)


def arm(tricks, fits, collapsed=0):
    curve = cv.arm_curve(list(fits))
    curve = cv.ArmCurve(curve.runs, collapsed, curve.A, curve.B, curve.C_mid, curve.level)
    return cv.ArmFits("tiny", "math", tricks, curve, (), "device-hours")


def test_welch_matches_scipys_unequal_variance_interval():
    a, b = [0.50, 0.52, 0.49, 0.55], [0.60, 0.58, 0.66]
    got = cvd.welch(a, b, 0.95)
    want = sps.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert (got.lower, got.upper) == pytest.approx((want.low, want.high), rel=1e-9)
    assert got.est == pytest.approx(np.mean(b) - np.mean(a))
    assert cvd.welch([0.5], b, 0.95).upper == math.inf


def test_labels_follow_the_intervals():
    base = arm("baseline", [fit(0.50), fit(0.505), fit(0.495), fit(0.50)])
    up = cvd.compare(base, arm("a", [fit(0.60), fit(0.61), fit(0.59), fit(0.60)]), 0.99)
    assert up.ceiling_label == "raises the ceiling" and up.ceiling.lower > 0
    down = cvd.compare(base, arm("b", [fit(0.40), fit(0.41), fit(0.39), fit(0.40)]), 0.99)
    assert down.ceiling_label == "lowers the ceiling"
    same = cvd.compare(base, arm("c", [fit(0.501, 0.2), fit(0.50, 0.21), fit(0.499, 0.19), fit(0.50, 0.2)]), 0.99)
    assert same.ceiling_label == "same ceiling (±0.02)" and same.speed_label.startswith("same speed")
    fast = cvd.compare(base, arm("d", [fit(0.50, c) for c in (0.09, 0.1, 0.11, 0.1)]), 0.99)
    # the label gives the guaranteed part of the speed-up, not the point estimate (2x)
    assert fast.speed_label == f"≥ {1 / fast.speed.upper:.2g}x less compute to half the gain"
    assert 1 < 1 / fast.speed.upper < 2 and fast.speed.est == pytest.approx(0.5, rel=0.01)  # geometric mean 0.0998 / 0.2
    wide = cvd.compare(base, arm("e", [fit(0.40), fit(0.62), fit(0.50), fit(0.55)]), 0.99)
    assert wide.ceiling_label == cvd.UNDECIDED and "add seeds" in wide.why


def test_a_ceiling_the_runs_never_approached_is_not_labelled():
    base = arm("baseline", [fit(0.50), fit(0.51), fit(0.49)])
    short = cvd.compare(base, arm("a", [fit(0.9, C_mid=2.0), fit(0.91, C_mid=2.1), fit(0.9, C_mid=2.0)]), 0.99)
    assert short.ceiling_label == cvd.UNDECIDED and "extrapolation" in short.why
    assert short.speed_label != cvd.UNDECIDED  # C_mid itself is identified: 10x more compute to half the gain
    pinned = cvd.compare(base, arm("b", [fit(1.0, at_bound=("A",)), fit(0.9), fit(0.9)]), 0.99)
    assert pinned.ceiling_label == cvd.UNDECIDED and "A at a fit bound" in pinned.why
    lone = cvd.compare(base, arm("c", [fit(0.9)], collapsed=3), 0.99)
    assert lone.ceiling_label == lone.speed_label == cvd.UNDECIDED and lone.collapsed == (0, 3)
    flat = cvd.compare(base, arm("d", [dataclasses.replace(fit(0.9), flat=True)] * 3), 0.99)
    assert flat.ceiling_label == flat.speed_label == cvd.UNDECIDED and "not a ceiling" in flat.why
    few = cvd.compare(base, arm("e", [dataclasses.replace(fit(0.9), points=5)] * 3), 0.99)
    assert few.ceiling_label == cvd.UNDECIDED and "unidentified" in few.why
    zeros = cvd.compare(arm("baseline", [fit(0.0)] * 3), arm("f", [fit(0.0)] * 3), 0.99)
    assert zeros.ceiling_label == cvd.UNDECIDED  # no spread is no evidence of "same ceiling"


def test_the_family_level_is_bonferroni_over_both_labels_of_every_comparison():
    base = arm("baseline", [fit(0.50), fit(0.51), fit(0.49)])
    others = [arm(t, [fit(0.6), fit(0.61), fit(0.62)]) for t in ("a", "b", "c")]
    got = cvd.verdicts([others[0], base, *others[1:]], alpha=0.06)
    assert [v.tricks for v in got] == ["a", "b", "c"] and all(v.level == pytest.approx(0.99) for v in got)
    assert cvd.verdicts(others) == []  # no baseline in the cell: nothing to compare with


# --- validity by simulation -------------------------------------------------------------------

def run_fits(rng, n: int, kind: str) -> list[cv.RunFit]:
    """n runs of one arm type, each fitted on its own noisy curve (eval sd 0.015). A varies
    over seeds (sd 0.02; lognormal right-skewed with the same mean for 'skew'), B and C_mid
    lognormally; 'fast' divides C_mid by 3; 'collapse': 25% of seeds fall to A = 0.01;
    'raise': A + 0.15."""
    out = []
    for _ in range(n):
        dA = (rng.lognormal(0, 0.8) - math.exp(0.32)) * 0.02 if kind == "skew" else rng.normal(0, 0.02)
        A = A0 + dA + (0.15 if kind == "raise" else 0.0)
        cm = CMID0 / (3 if kind == "fast" else 1) * math.exp(rng.normal(0, 0.2))
        if kind == "collapse" and rng.random() < 0.25:
            A = 0.01
        y = cv.saturating(C, R0, A, B0 * math.exp(rng.normal(0, 0.15)), cm) + rng.normal(0, 0.015, C.size)
        out.append(cv.fit_run(C, y, R0))
    return out


POOL = 120  # fitted runs per arm type
TRUTH = {"skew": (0.0, 1.0), "fast": (0.0, 1 / 3), "collapse": (0.0, 1.0), "raise": (0.15, 1.0)}


def wrong(v: cvd.CurveVerdict, dA: float, ratio: float, delta: float = cvd.DELTA) -> bool:
    """Whether a label contradicts the truth (undecided is never wrong)."""
    bad_c = {"raises the ceiling": dA <= 0, "lowers the ceiling": dA >= 0,
             f"same ceiling (±{delta:g})": abs(dA) >= delta}.get(v.ceiling_label, False)
    if v.speed_label.startswith("same speed"):
        bad_s = not 1 / cvd.SPEED_MARGIN < ratio < cvd.SPEED_MARGIN
    elif v.speed_label != cvd.UNDECIDED:
        bad_s = ("less" in v.speed_label) != (ratio < 1) or ratio == 1
    else:
        bad_s = False
    return bad_c or bad_s


@pytest.mark.parametrize("kind", ["skew", "fast", "collapse", "raise"])
def test_no_label_is_wrong_more_often_than_alpha_under_skew_collapse_and_speed_only_tricks(kind):
    """Sweeps of a baseline and 4 tricks of one kind, 6 seeds each, α = 0.05: the share of sweeps
    with any wrong label stays ≤ α + 2 Monte Carlo SE. Runs are fitted once into pools of POOL
    per arm type and sweeps draw their seeds from the pools (fitting every sweep's runs anew
    would take minutes), so the rate is the pools' own."""
    rng = np.random.default_rng(["skew", "fast", "collapse", "raise"].index(kind) + 40)
    pool_b, pool_t = run_fits(rng, POOL, "base"), run_fits(rng, POOL, kind)
    dA, ratio = TRUTH[kind]
    reps, any_wrong, decided = 300, 0, 0
    for _ in range(reps):
        arms = [cv.ArmFits("tiny", "math", "baseline", cv.arm_curve([pool_b[i] for i in rng.choice(POOL, 6, False)]),
                           (), "device-hours")]
        arms += [cv.ArmFits("tiny", "math", f"t{j}", cv.arm_curve([pool_t[i] for i in rng.choice(POOL, 6, False)]),
                            (), "device-hours") for j in range(4)]
        got = cvd.verdicts(arms)
        any_wrong += any(wrong(v, dA, ratio) for v in got)
        decided += sum(v.ceiling_label != cvd.UNDECIDED for v in got)
    assert any_wrong / reps <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)
    if kind == "raise":
        assert decided / (4 * reps) >= 0.5  # a gain of 2.5 fitted-A sd is found in most
