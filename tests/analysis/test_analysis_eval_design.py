"""analysis/eval_design.py on hand-computed inputs: the eval's sampling variance of one run, the part
of a comparison's variance it makes, what a re-eval costs, and the multiplier `choose` picks from
wave-0 verdicts that decide.decide computes as the real loop would (and `choose_after_wave0`, the
loop's own call)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from grpo_lab.analysis import decide
from grpo_lab.analysis import eval_design as ed
from grpo_lab.analysis.contrast import contrasts
from grpo_lab.analysis.decide import Outcome
from grpo_lab.analysis.rule import DecisionRule

ARMS = ["baseline", "a", "b", "a+b"]
CELL = ("m", "t")
ALPHA, DELTA = 0.05, 0.02
CHEAP = ed.ArmCost(train=1.0, eval=0.01, setup=0.005)
DEAR = ed.ArmCost(train=1.0, eval=1.0, setup=0.5)  # an eval as costly as training
# three seeds per arm; each effect's paired difference D = s·(1, 0, −1) up to order (sd s), the
# interaction's s·(0, −2, 2) (sd 2s)
PATTERN = {"baseline": [0, 0, 0], "a": [1, 0, -1], "b": [0, 1, -1], "a+b": [1, -1, 0]}


def rule(most: int = 64, **over) -> DecisionRule:
    return DecisionRule(alpha=ALPHA, delta=DELTA, most_seeds=most, method="paired", **over)


def wave0(s: float, most: int = 64) -> tuple[list, list, dict]:
    """(comparisons, decide.decide's verdicts, seeds per arm) after a wave of three seeds per arm."""
    comps = contrasts({CELL: ARMS})
    scores = {CELL: {k: [0.5 + s * v for v in PATTERN[k]] for k in ARMS}}
    verdicts = decide.decide(rule(most), comps, scores)
    sigma = {v.name.split("/")[-1]: v.sigma for v in verdicts}
    assert sigma == pytest.approx({"effect:a": s, "effect:b": s, "effect:a+b": s, "interaction:a+b": 2 * s})
    assert all(v.label == "open" and v.seeds == 3 for v in verdicts)
    return comps, verdicts, {(*CELL, k): 3 for k in ARMS}


def choose(s: float, share: float, cost: ed.ArmCost, most: int = 64) -> dict:
    """The design of the cell whose runs have sampling variance β = share·s² each."""
    comps, verdicts, n = wave0(s, most)
    beta = {arm: share * s**2 for arm in n}
    return ed.choose(rule(most), comps, verdicts, n, dict.fromkeys(n, cost), beta)[CELL]


# -- sampling_var -------------------------------------------------------------------------------

def test_sampling_var_of_two_problems_by_hand():
    rows = [{"samples": 4, "passes": 2}, {"samples": 4, "passes": 4}]
    assert ed.sampling_var(rows) == pytest.approx((0.5 * 0.5 / 3 + 0.0) / 4)


def test_sampling_var_of_three_problems_with_their_own_k():
    rows = [{"samples": 2, "passes": 1}, {"samples": 5, "passes": 1}, {"samples": 3, "passes": 0}]
    assert ed.sampling_var(rows) == pytest.approx((0.5 * 0.5 / 1 + 0.2 * 0.8 / 4 + 0.0) / 9)


def test_sampling_var_is_zero_without_two_completions_or_rows():
    assert ed.sampling_var([{"samples": 1, "passes": 1}, {"samples": 1, "passes": 0}]) == 0.0
    assert ed.sampling_var([{"samples": 4, "passes": 2}, {"samples": 1, "passes": 0}]) == 0.0
    assert ed.sampling_var([]) == 0.0


@pytest.mark.parametrize("k, p", [(2, 0.3), (4, 0.5), (8, 0.9)])
def test_sampling_var_is_unbiased_for_one_problem(k, p):
    """E[p̂(1 − p̂)/(k − 1)] = p(1 − p)/k exactly: the expectation over the binomial's pmf."""
    mean = sum(stats.binom.pmf(c, k, p) * ed.sampling_var([{"samples": k, "passes": c}]) for c in range(k + 1))
    assert mean == pytest.approx(p * (1 - p) / k)


# -- comparison_sampling -------------------------------------------------------------------------

BETA = {("m", "t", "baseline"): 1e-4, ("m", "t", "a"): 2e-4, ("m", "t", "b"): 3e-4, ("m", "t", "c"): 4e-4,
        ("m", "t", "a+b+c"): 5e-4}


def by_name(comps):
    return {c.name.split("/")[-1]: c for c in comps}


def test_paired_sampling_sums_squared_coefficients():
    comps = by_name(contrasts({CELL: ["baseline", "a", "b", "c", "a+b+c"]}))
    assert ed.comparison_sampling(comps["effect:a"], BETA, 1.0, "paired") == pytest.approx(2e-4 + 1e-4)
    # interaction of a three-trick stack: coefficients 1, −1, −1, −1 and 2 on the baseline
    inter = comps["interaction:a+b+c"]
    assert dict(inter.coefs)["baseline"] == 2.0
    assert ed.comparison_sampling(inter, BETA, 1.0, "paired") == pytest.approx(5e-4 + 2e-4 + 3e-4 + 4e-4 + 4 * 1e-4)


def test_unpaired_sampling_is_the_noisiest_arms():
    comps = by_name(contrasts({CELL: ["baseline", "a", "b", "c", "a+b+c"]}))
    assert ed.comparison_sampling(comps["effect:a"], BETA, 1.0, "unpaired") == pytest.approx(2e-4)
    assert ed.comparison_sampling(comps["interaction:a+b+c"], BETA, 1.0, "unpaired") == pytest.approx(5e-4)


def test_sampling_is_capped_at_a_share_of_the_comparisons_variance():
    comps = by_name(contrasts({CELL: ["baseline", "a", "b", "c", "a+b+c"]}))
    sigma = 0.01  # σ² = 1e-4 < the paired sum 3e-4
    assert ed.comparison_sampling(comps["effect:a"], BETA, sigma, "paired") == pytest.approx(ed.CAP_SHARE * 1e-4)
    assert ed.comparison_sampling(comps["effect:a"], BETA, sigma, "unpaired") == pytest.approx(ed.CAP_SHARE * 1e-4)
    assert ed.comparison_sampling(comps["effect:a"], {}, sigma, "paired") == 0.0  # no β known: none planned on


# -- ArmCost --------------------------------------------------------------------------------------

def test_reeval_costs_nothing_at_one_and_setup_plus_m_evals_above():
    cost = ed.ArmCost(train=1.0, eval=0.03, setup=0.2)
    assert cost.reeval(1) == 0.0
    assert cost.reeval(4) == pytest.approx(0.2 + 4 * 0.03)
    assert cost.reeval(16) == pytest.approx(0.2 + 16 * 0.03)
    # a seed added later evaluates in its own training process: no setup
    assert cost.new_seed(1) == 1.0 and cost.new_seed(4) == pytest.approx(1.0 + 4 * 0.03)


# -- choose ---------------------------------------------------------------------------------------

def test_without_sampling_noise_the_design_keeps_one_and_re_evals_only_add_cost():
    d = choose(0.01, 0.0, CHEAP)
    assert d["multiplier"] == 1
    table = d["by_multiplier"]
    assert set(table) == set(ed.MULTIPLIERS)
    h1, c1 = table[1]
    assert c1 == 4 and h1 > 0
    # σ(m) = σ at every m, so every arm needs the same N seeds: H(m) = H(1) + 4 arms · (the 3
    # seeds it has evaluated again + the N − 3 new ones evaluating at m in their own attempts)
    need = 3 + h1 / 4
    for m in ed.MULTIPLIERS[1:]:
        extra = 3 * CHEAP.reeval(m) + (need - 3) * m * CHEAP.eval
        assert table[m] == (pytest.approx(h1 + 4 * extra), 4)


def test_sampling_dominated_noise_and_a_cheap_eval_pick_more_completions():
    # β = 0.45·s² per arm: an effect's paired sampling 2β = 0.9 σ² (the cap), the interaction's 4β = 0.45 σ²
    d = choose(0.01, 0.45, CHEAP)
    table = d["by_multiplier"]
    assert d["multiplier"] > 1
    assert table[d["multiplier"]][0] < table[1][0] and table[d["multiplier"]][1] >= table[1][1]


def test_an_eval_as_costly_as_training_keeps_one():
    d = choose(0.01, 0.45, DEAR)
    assert d["multiplier"] == 1
    assert all(d["by_multiplier"][m][0] > d["by_multiplier"][1][0] for m in ed.MULTIPLIERS[1:])


@pytest.mark.parametrize("s, share, most", [(0.01, 0.45, 64), (0.01, 0.45, 8), (0.02, 0.6, 8), (0.02, 0.6, 64)])
def test_closable_comparisons_never_fall_as_m_grows(s, share, most):
    table = choose(s, share, CHEAP, most)["by_multiplier"]
    closable = [table[m][1] for m in ed.MULTIPLIERS]
    assert closable == sorted(closable), table
    assert all(isinstance(h, float) and h >= 0 for h, _ in table.values())


def test_a_comparison_closable_only_at_more_completions_gets_them():
    """At an 8-seed cap none closes at m = 1; at m = 16 some do, so the design takes m > 1
    even though every re-eval costs (an eval that costs as much as training included)."""
    for cost in (CHEAP, DEAR):
        d = choose(0.02, 0.45, cost, most=8)
        table = d["by_multiplier"]
        assert table[1][1] == 0 and table[16][1] > 0, table
        assert d["multiplier"] > 1


def test_the_choice_reads_no_effect():
    """Shifting two arms by a large effect (so wave 0 already calls them significant) moves no
    variance, and must not move m: the design plans every comparison, decided or not."""
    comps = contrasts({CELL: ARMS})
    n = {(*CELL, k): 9 for k in ARMS}
    beta = {arm: 0.45 * 0.01**2 for arm in n}

    def design(shift: float) -> tuple[dict, list]:
        scores = {CELL: {k: [0.5 + 0.01 * v + (shift if "a" in k else 0.0) for v in PATTERN[k] * 3] for k in ARMS}}
        verdicts = decide.decide(rule(), comps, scores)
        return ed.choose(rule(), comps, verdicts, n, dict.fromkeys(n, CHEAP), beta)[CELL], verdicts

    plain, verdicts = design(0.0)
    moved, shifted = design(0.3)
    assert decide.counts(shifted)["significant"] > decide.counts(verdicts)["significant"]
    assert moved == plain


def test_an_arm_without_a_finished_run_takes_the_cells_mean_cost():
    comps, verdicts, n = wave0(0.01)
    beta = {arm: 0.45 * 0.01**2 for arm in n}
    costs = {arm: CHEAP for arm in n if arm[2] != "a+b"}  # both wave-0 seeds of a+b failed
    d = ed.choose(rule(), comps, verdicts, n, costs, beta)[CELL]
    assert d == choose(0.01, 0.45, CHEAP)


def test_no_multiplier_whose_re_evals_exceed_the_budget_left():
    comps, verdicts, n = wave0(0.03)
    beta = {arm: 0.6 * 0.03**2 for arm in n}
    free = ed.choose(rule(), comps, verdicts, n, dict.fromkeys(n, CHEAP), beta)[CELL]
    assert free["multiplier"] > 1
    tight = 12 * CHEAP.reeval(2)  # 4 arms x 3 seeds evaluated again at m = 2, nothing more
    d = ed.choose(rule(), comps, verdicts, n, dict.fromkeys(n, CHEAP), beta, budget_left=tight)[CELL]
    assert d["multiplier"] in (1, 2)


def test_a_noisy_sampling_dominated_cell_gets_more_completions():
    """s = 0.03: the interaction's D has sd 0.06, se 0.035 > δ at three seeds, 60% of it sampling.
    Showing it ±δ-equivalent (the docstring's N_c) needs fewer seeds as m grows."""
    d = choose(0.03, 0.6, CHEAP)
    assert d["multiplier"] > 1, d["by_multiplier"]


# -- choose_after_wave0: the loop's call ----------------------------------------------------------

def wave0_outcomes(s: float, collapsed_a: bool) -> dict:
    """Four seeds per arm on PATTERN (a fourth index at the mean); with `collapsed_a`, a's run at
    index 3 collapsed to 0."""
    arms = {k: {i: Outcome(0.5 + s * v) for i, v in enumerate(PATTERN[k] + [0])} for k in ARMS}
    if collapsed_a:
        arms["a"][3] = Outcome(0.0, collapsed=True)
    return {CELL: arms}


def test_after_wave0_the_design_is_choose_on_the_loops_own_verdicts_seeds_and_run_variances():
    outcomes = wave0_outcomes(0.01, collapsed_a=False)
    comps = contrasts({CELL: ARMS})
    n = {(*CELL, k): 4 for k in ARMS}
    beta = {arm: 0.45 * 0.01**2 for arm in n}
    costs = dict.fromkeys(n, CHEAP)
    scores = {(*CELL, k): [o.score for o in v.values()] for k, v in outcomes[CELL].items()}
    run_var = {arm: float(np.var(ys, ddof=1)) for arm, ys in scores.items()}
    by_hand = ed.choose(rule(), comps, decide.decide(rule(), comps, outcomes), n, costs, beta, run_var=run_var)
    assert ed.choose_after_wave0(rule(), comps, outcomes, costs, beta) == by_hand


def test_the_healthy_design_does_not_plan_on_a_collapsed_runs_noise():
    """One collapsed run (a pass@1 of 0 among 0.5s) makes the mean estimand's σ̂ of every
    comparison with a ≈ 0.25: none closes within the cap. The healthy estimand plans on the runs
    that did not collapse, as without it."""
    comps = contrasts({CELL: ARMS})
    n = {(*CELL, k): 4 for k in ARMS}
    beta = {arm: 0.45 * 0.01**2 for arm in n}
    costs = dict.fromkeys(n, CHEAP)
    outcomes = wave0_outcomes(0.01, collapsed_a=True)
    healthy = ed.choose_after_wave0(rule(), comps, outcomes, costs, beta)[CELL]
    mean = ed.choose_after_wave0(rule(estimand="mean"), comps, outcomes, costs, beta)[CELL]
    clean = ed.choose_after_wave0(rule(), comps, wave0_outcomes(0.01, collapsed_a=False), costs, beta)[CELL]
    assert healthy["by_multiplier"][1][1] == clean["by_multiplier"][1][1] == 4
    assert healthy["multiplier"] == clean["multiplier"] > 1
    assert mean["by_multiplier"][1][1] < 4
