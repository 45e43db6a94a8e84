"""Multi-fidelity screening (analysis/screening.py): its rungs, its reading of a seed's curve, and its
validity measured on simulated sweeps with known truth (analysis/screen_sim.py), driving
screening.screen, the function `sweep --screen` calls.

Validity: each replicate draws one task's runs (simulate.draw: the ten_tricks per-run noise, the
case's collapse law) with their eval curves (240 steps, an eval every 10; of ARMS, lr_warmup reaches
its level 3x slower and kl_anneal 2x faster than the others with the same final law, so an arm
behind at a rung may end level), screens SEEDS seeds an arm on rungs 1/4 and 1/2 at α = 0.05, and
errs when it drops an arm whose true pass@1 at the full length (healthy estimand) is within δ of the
best arm's. Cases, in turn: gaussian (every arm the same: every drop is wrong), collapse (10% of
every arm's seeds collapse, at a uniform point of the run), skew20 (every single collapses in 20%
of seeds with its healthy runs higher, so the singles tie above the baseline). The bound: rate ≤
α + 2·√(α(1 − α)/n) over the n = REPS replicates pooled over the cases (0.115 at 45: at most 5 may
err). Runtime: several minutes (each seed's curve is fitted at each rung; under 15 min on the 2-core box at load 5, where it passed).
The spread case checks that the rule drops arms far below the best (it is not vacuous).
"""

from __future__ import annotations

import math
import numpy as np
import pytest

from grpo_lab.analysis import curves
from grpo_lab.analysis import screen_sim as ss
from grpo_lab.analysis import screening as scr

REPS = 45
TASK = "math"  # the lowest per-run noise: the sharpest intervals, so the likeliest wrong drops
ARMS = ("baseline", "lr_warmup", "kl_anneal", "dynamic_temperature")
SEEDS = 3
CASES = ("gaussian", "collapse", "skew20")


def bound(reps: int, alpha: float = 0.05) -> float:
    return alpha + 2 * math.sqrt(alpha * (1 - alpha) / reps)


def screened(case: str, rep: int, rule: scr.ScreenRule, arms=ARMS) -> tuple[bool, int]:
    """(whether it dropped an arm within δ of the best, arms dropped) of one replicate of `case`."""
    rng = np.random.default_rng([rep, 33, len(case)])
    world = ss.draw_worlds(case, SEEDS, rng)[TASK]
    got = ss.run_screen(rule, {TASK: ss.draw_curves(world, TASK, rng)}, seeds=SEEDS, arms=arms)
    best = max(world.law[a].mu for a in arms)
    return any(world.law[d.arm[2]].mu > best - rule.delta + 1e-12 for d in got.drops), len(got.drops)


@pytest.mark.slow
def test_dropping_an_arm_within_delta_of_the_best_stays_within_alpha():
    rule = scr.ScreenRule(alpha=0.05)
    wrong = {case: 0 for case in CASES}
    for rep in range(REPS):
        case = CASES[rep % len(CASES)]
        wrong[case] += screened(case, rep, rule)[0]
    assert sum(wrong.values()) / REPS <= bound(REPS), f"wrong drops per case in {REPS} sweeps: {wrong}"


@pytest.mark.slow
def test_screening_drops_arms_far_below_the_best():
    """spread: the baseline and group_size_16 at the top, the others 0.11-0.18 below."""
    arms = ("baseline", "group_size_16", "adaptive_curriculum", "code_token_mask", "advantage_clip_3")
    got = [screened("spread", rep, scr.ScreenRule(alpha=0.05), arms) for rep in range(4)]
    assert not any(w for w, _ in got)
    assert sum(n for _, n in got) >= 2, f"spread: {[n for _, n in got]} arms dropped; the rule drops nothing"


def test_rung_steps_land_on_evals_or_say_which_does_not():
    assert scr.rung_steps(240, (0.25, 0.5), 10) == [60, 120, 240]
    with pytest.raises(ValueError, match=r"rung 0\.3 of 240 steps is step 72, not a multiple of eval\.every = 10"):
        scr.rung_steps(240, (0.3,), 10)
    with pytest.raises(ValueError, match="same step twice"):
        scr.rung_steps(40, (0.25, 0.25), 10)


def test_rule_refuses_rungs_that_are_not_increasing_fractions():
    for rungs in [(0.5, 0.25), (0.0,), (1.0,), ()]:
        with pytest.raises(ValueError):
            scr.ScreenRule(rungs=rungs)
    assert scr.ScreenRule(rungs=(0.5, 0.25 + 0.5)).alpha_each(10) == pytest.approx(0.05 / 20)


def _runs(levels, rng, points=6, base=0.1, sd=0.005):
    """Seeds of an arm rising to `levels` (one per seed) by step 60, evals every 10."""
    steps = tuple(range(10, 10 * points + 1, 10))
    return [scr.Series(steps, tuple(float(base + (lv - base) / (1 + (15 / s) ** 2) + sd * rng.standard_normal())
                                    for s in steps), base) for lv in levels]


def test_an_arm_far_below_is_dropped_and_one_with_too_few_evals_is_not():
    rng = np.random.default_rng(0)
    arms = {("m", "t", "baseline"): _runs([0.6, 0.61, 0.6, 0.59], rng),
            ("m", "t", "good"): _runs([0.62, 0.6, 0.61, 0.6], rng),
            ("m", "t", "bad"): _runs([0.3, 0.31, 0.29, 0.3], rng),
            ("m", "t", "short"): _runs([0.3, 0.3, 0.31, 0.29], rng, points=2)}
    got = scr.screen(scr.ScreenRule(), 0, 60, 240, arms, total_arms=4)
    assert [d.arm[2] for d in got.drops] == ["bad"]
    assert got.drops[0].below_baseline and got.drops[0].step == 60
    short = next(r for r in got.reads if r.arm[2] == "short")
    assert "evals" in short.why_not


def test_the_baseline_and_an_arm_within_delta_are_kept():
    rng = np.random.default_rng(1)
    arms = {("m", "t", "baseline"): _runs([0.3, 0.31, 0.29, 0.3], rng),
            ("m", "t", "best"): _runs([0.6, 0.61, 0.6, 0.59], rng),
            ("m", "t", "near"): _runs([0.595, 0.6, 0.59, 0.6], rng)}
    got = scr.screen(scr.ScreenRule(), 0, 60, 240, arms, total_arms=3)
    assert got.drops == []


def test_a_drop_needs_the_gap_on_the_observed_rung_values_too_by_default():
    """An arm whose predicted value is credibly δ below the best's while its observed rung values
    are not (a curve that extrapolates low): kept by default, dropped on the prediction alone."""
    best = scr.Read(("m", "t", "best"), 4, 0, (0.60, 0.57, 0.63), (0.50, 0.47, 0.53))
    slow = scr.Read(("m", "t", "slow"), 4, 0, (0.45, 0.42, 0.48), (0.49, 0.46, 0.52))
    assert not scr._below(slow, best, 0.02, observed=True)
    assert scr._below(slow, best, 0.02, observed=False)


def test_a_seed_whose_points_still_rise_is_read_high_at_its_drift():
    """A fit that bent early under points that keep rising (the tiny model's slow drift) would read
    the seed at its ceiling; its high reading is the drift continued to the full length, its low one
    the lower of its ceiling and its plateau."""
    C = np.arange(10.0, 70.0, 10.0)
    R = 0.30 + 0.05 * np.log(C / 35.0)
    fit = curves.RunFit(0.24, 0.30, curves.B_MAX, 0.5, 60.0, 6, 0.02, ("C_mid",), False, False, 0.05)
    high, low = scr.readings(fit, R, C, 240)
    assert high == pytest.approx(0.30 + 0.05 * math.log(4.0))
    assert low == pytest.approx(min(0.30, float(np.mean(R[-3:]))))
