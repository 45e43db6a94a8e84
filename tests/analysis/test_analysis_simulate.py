"""The simulator's truths are what its distributions say, and its driver and error count do what the
validity suite relies on."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_lab.analysis.collapse import CollapseVerdict
from grpo_lab.analysis.contrast import contrasts
from grpo_lab.analysis import simulate as sim
from grpo_lab.analysis.rule import DecisionRule

COMPS = contrasts({(sim.MODEL, t): list(sim.ARMS) for t in sim.TASKS})


def truth(case: str) -> sim.Truth:
    return sim.truths(COMPS, {(sim.MODEL, t): sim.laws(case, t) for t in sim.TASKS}, 0.02)


@pytest.mark.parametrize("p", [0.05, 0.1, 0.2])
def test_a_skewed_null_keeps_the_mean_and_lifts_the_healthy_runs(p):
    t = truth(f"skew{round(100 * p)}")
    for task, mu in sim.BASE.items():
        name = f"{sim.MODEL}/{task}/effect:kl_anneal"
        assert t.mean[name] == pytest.approx(0.0, abs=1e-12)
        assert t.healthy[name] == pytest.approx(p * (mu - sim.COLLAPSED) / (1 - p))
        assert t.collapse[name] == pytest.approx(p)
    assert not t.real


def test_harm_by_collapse_lowers_the_mean_only():
    t = truth("harm")
    for task, mu in sim.BASE.items():
        name = f"{sim.MODEL}/{task}/effect:{sim.NOISY}"
        assert t.healthy[name] == pytest.approx(0.0, abs=1e-12)
        assert t.mean[name] == pytest.approx(-0.1 * (mu - sim.COLLAPSED))
        assert abs(t.mean[name]) >= 0.02  # a real loss on every task: 2.1-4.6 points


def test_the_mixed_truth_has_real_effects_and_skewed_arms():
    t = truth("mixed")
    assert t.real[f"{sim.MODEL}/math/effect:group_size_2"] == pytest.approx(-0.119)
    assert t.real[f"{sim.MODEL}/code/interaction:{sim.FOUR}"] == pytest.approx(-0.12)
    # the six-stack holds skewed singles: its interaction is not counted as a real effect
    assert f"{sim.MODEL}/code/interaction:{sim.SIX}" not in t.real
    skewed = f"{sim.MODEL}/logic/effect:{sim.MIXED_SKEWED[0]}"
    assert skewed not in t.real and t.collapse[skewed] == pytest.approx(0.1)


@pytest.mark.parametrize("case", ["skew10", "harm", "hetero", "t3", "near0", "mixed", "tost"])
@pytest.mark.parametrize("m", [1, 8])
def test_drawn_scores_have_the_means_the_truths_are_built_from(case, m):
    """Monte Carlo over 20000 seeds per arm: healthy runs' mean μ_a, all runs' mean
    (1 − p_a)·μ_a + p_a·COLLAPSED, collapse share p_a, within 5 standard errors."""
    rng = np.random.default_rng(3)
    for task in sim.TASKS:
        w = sim.draw(case, task, 2.6, 20_000, rng)
        y = w.scores(m)
        for i, arm in enumerate(sim.ARMS):
            law, z = w.law[arm], w.collapsed[i]
            healthy = y[i][~z]
            se = healthy.std() / np.sqrt(healthy.size) + 1e-9
            assert abs(healthy.mean() - law.mu) < 5 * se, (case, task, arm)
            overall = (1 - law.p) * law.mu + law.p * sim.COLLAPSED
            assert abs(y[i].mean() - overall) < 5 * (y[i].std() / np.sqrt(y.shape[1]) + 1e-9), (case, task, arm)
            assert abs(z.mean() - law.p) < 5 * np.sqrt(law.p * (1 - law.p) / z.size) + 1e-9, (case, task, arm)
            assert np.all((y[i] >= 0) & (y[i] <= 1))


def test_a_reeval_at_m_keeps_the_training_part_and_shrinks_the_sampling_noise():
    w = sim.draw("gaussian", "logic", 1.0, 20_000, np.random.default_rng(4))
    at1, at8 = w.scores(1), w.scores(8)
    var = lambda y: float(np.var(y[0]))  # noqa: E731
    beta = sim.SAMPLING["logic"] * sim.SD["logic"] ** 2
    assert var(at1) - var(at8) == pytest.approx(beta * (1 - 1 / 8), rel=0.1)
    assert np.corrcoef(at1[0], at8[0])[0, 1] > 0.2  # the same runs, re-scored


def test_the_estimated_sampling_variance_is_unbiased_and_noisy():
    rng = np.random.default_rng(5)
    beta = sim.SAMPLING["math"] * sim.SD["math"] ** 2
    draws = np.array([sim.beta_estimate(beta, sim.BASE["math"], rng, 2) for _ in range(400)])
    assert draws.mean() == pytest.approx(beta, rel=0.05)
    assert draws.std() > 0.05 * beta  # an estimate, not the true value


def test_a_sweep_spends_its_budget_and_decides_through_the_real_step():
    s = sim.run_sweep(DecisionRule(), "mixed", np.random.default_rng(6), budget=3.0, wave=64)
    assert len(s.verdicts) == 45 and s.waves >= 2
    per_run = max(sim.arm_cost(t, a).new_seed(16) for t in sim.TASKS for a in sim.ARMS)
    assert s.hours <= 3.0 + 64 * per_run
    assert s.runs > len(sim.ARMS) * len(sim.TASKS) * 2  # seeds were added after wave 0
    assert any(v.decided for v in s.verdicts)
    assert 0.0 <= sim.errors(s.verdicts, s.truth, 0.02).recall <= 1.0  # the mixed truth has real effects
    counted = {len(arms[a]) for arms in s.outcomes.values() for a in arms}
    assert max(counted) <= 32 and min(counted) >= 2


def test_errors_judge_each_label_against_its_own_estimand():
    s = sim.run_sweep(DecisionRule(), "skew10", np.random.default_rng(7), budget=1.0, wave=16)
    v = next(x for x in s.verdicts if x.name.endswith("/logic/effect:kl_anneal"))
    open_ = lambda x, label="open": CollapseVerdict(x.collapse.counts, 0.0, -1.0, 1.0, 9, label)  # noqa: E731
    others = [x.with_(label="open", collapse=open_(x)) for x in s.verdicts if x is not v]
    lifted = v.with_(label="significant", lower=0.01, upper=0.05, collapse=open_(v))
    assert not sim.errors([lifted, *others], s.truth, 0.02).false_sig  # healthy θ > 0: right
    assert np.isnan(sim.errors([lifted, *others], s.truth, 0.02).recall)  # no real effect to recall
    assert sim.errors([lifted.with_(estimand="mean"), *others], s.truth, 0.02).false_sig  # mean θ = 0
    assert sim.errors([lifted.with_(lower=-0.05, upper=-0.01), *others], s.truth, 0.02).false_sig  # wrong sign
    equiv = lifted.with_(label="equivalent", lower=-0.01, upper=0.01)
    assert sim.errors([equiv, *others], s.truth, 0.02).false_equiv  # healthy θ ≈ 0.034 ≥ δ
    assert sim.errors([lifted.with_(label="open", collapse=open_(v, "fewer")), *others], s.truth, 0.02).false_collapse
    assert not sim.errors([lifted.with_(label="open", collapse=open_(v, "more")), *others], s.truth,
                          0.02).false_collapse  # θ_c = +0.1
