"""`--decide`'s eval design: how many completions per problem the final eval of a (model, task)'s
runs gets, chosen once, after wave 0, from the noise of its finished runs and what seeds and
evals cost. Pure functions; execution/final_evals.py carries the choice out.

A run's score is its final pass@1, ȳ = (1/P) Σ_p p̂_p over P test problems, p̂_p the share of its k
completions on problem p that pass. Across seeds

    Var(ȳ) = σ²_run + β        β = (1/P²) Σ_p p_p(1 − p_p)/k   the eval's sampling noise
                               σ²_run                         the rest: training randomness

Evaluating the final checkpoint again with K = m·k fresh completions per problem keeps σ²_run and
divides β by m. A comparison whose sequence sees sd σ (paired: of D = Σ c_a y_a; unpaired: of its
noisiest arm) carries sampling noise b = ρ·Σ c_a² β_a, ρ = min(1, σ²/Σ c_a² V_a) the share of the
arms' run variances V_a that pairing leaves (paired; comparison_sampling says why), or max β_a
(unpaired), capped at CAP_SHARE·σ² so a noisy estimate never plans on a noise-free run; at m

    σ²(m) = σ² − b·(1 − 1/m)

Planning pools over the cell (`pooled`: wave 0 has a few seeds per arm); the sequences never do.

Costs per arm a: at m > 1 each seed it already has is evaluated again once by an eval-only
attempt, r_a(m) = s_a + m·e_a (starting it, plus m times the run's own final eval); a new seed
trains (t_a) and makes the eval at m at the end of its own attempt, t_a + m·e_a. With N_c(m) the seeds per arm c needs at σ(m) to show a null ±δ-equivalent
(its sequence's half-width at θ = 0 reaching δ: the design reads the noise, never an effect; a
real effect closes sooner either way), the cell costs

    H(m) = Σ_a n_a·r_a(m)·[m > 1] + max(N_a(m) − n_a, 0)·(t_a + m·e_a·[m > 1])
    N_a(m) = max N_c(m) over the comparisons c ∋ a that close within the seed cap

and m* minimises H(m) / C(m), C(m) those comparisons (ties: the smaller m). One m per (model,
task), fixed for the sweep, so every score a sequence sees is measured the same way. The choice
depends on variances and costs only, before any verdict: the validity suite
(tests/analysis/test_analysis_decide_validity.py) runs the loop with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_lab.analysis import decide as dec
from grpo_lab.analysis.contrast import ArmId, Contrast
from grpo_lab.analysis.rule import DecisionRule
from grpo_lab.analysis.verdict import Verdict

MULTIPLIERS = (1, 2, 4, 8, 16)
CAP_SHARE = 0.9


@dataclass(frozen=True)
class ArmCost:
    """Device-hours of one arm's run, split the way the design spends them."""

    train: float  # a whole run: training and the evals it makes itself
    eval: float  # one final eval at the run's own completions per problem
    setup: float  # starting an eval-only attempt (loading the model, building the engine)

    def reeval(self, m: int) -> float:
        """r_a(m): a finished run's final eval again with m times the completions, an eval-only
        attempt (0 at m = 1: none is made)."""
        return self.setup + m * self.eval if m > 1 else 0.0

    def new_seed(self, m: int) -> float:
        """A seed added after the choice: it trains, then makes the eval at m in its own process
        (no setup of its own)."""
        return self.train + (m * self.eval if m > 1 else 0.0)


def sampling_var(rows: list[dict]) -> float:
    """β of one run's eval from its per-problem rows (samples k, passes c): the unbiased
    (1/P²) Σ_p p̂(1 − p̂)/(k − 1), p̂ = c/k; 0 where k = 1 (nothing to estimate it from)."""
    if not rows:
        return 0.0
    total = 0.0
    for row in rows:
        k = int(row["samples"])
        if k < 2:
            return 0.0
        p = row["passes"] / k
        total += p * (1 - p) / (k - 1)
    return total / len(rows) ** 2


def comparison_sampling(c: Contrast, beta: dict[ArmId, float], sigma: float, method: str,
                        run_var: dict[ArmId, float] | None = None) -> float:
    """b: the part of σ² (the comparison's sd, squared) that the eval's sampling contributes.
    Paired, with the arms' run variances V_a: scaled by ρ = min(1, σ² / Σ c_a² V_a), the share of
    the noise pairing leaves, since arms sharing a seed index share the eval's sampling stream and
    so cancel part of its noise too (taking it as cancelled like the rest plans fewer completions,
    never more)."""
    arms = [(c.model, c.task, k) for k, _ in c.coefs]
    parts = [beta.get(arm, 0.0) for arm in arms]
    if method != "paired":
        return min(max(parts), CAP_SHARE * sigma**2)
    b = sum(w**2 * p for (_, w), p in zip(c.coefs, parts))
    unpaired = sum(w**2 * (run_var or {}).get(arm, np.nan) for (_, w), arm in zip(c.coefs, arms))
    if run_var is not None and np.isfinite(unpaired) and unpaired > 0:
        b *= min(1.0, sigma**2 / unpaired)
    return min(b, CAP_SHARE * sigma**2)


def cell_hours(comps: list[Contrast], sigma2: dict[str, float], n: dict[ArmId, int], costs: dict[ArmId, ArmCost],
               beta: dict[ArmId, float], run_var: dict[ArmId, float] | None, m: int, a: float,
               rule: DecisionRule) -> tuple[float, int]:
    """(H(m), C(m)) of one cell's open comparisons (module docstring); sigma2: comparison name ->
    the σ² planned with."""
    need: dict[ArmId, float] = {}
    closable = 0
    for c in comps:
        s2 = sigma2.get(c.name)
        if s2 is None or not np.isfinite(s2):
            continue
        b = comparison_sampling(c, beta, float(np.sqrt(s2)), rule.method, run_var)
        sigma = float(np.sqrt(max(s2 - b * (1 - 1 / m), 0.0)))
        seeds = dec.samples_to_close(lambda k: dec.half_width(c, sigma, k, a, rule, 0.0), rule.delta)
        if seeds > rule.most_seeds:
            continue
        closable += 1
        for k, _ in c.coefs:
            arm = (c.model, c.task, k)
            need[arm] = max(need.get(arm, 0.0), seeds)
    arms = {(c.model, c.task, k) for c in comps for k, _ in c.coefs}
    hours = 0.0
    for arm in arms:
        cost = costs[arm]
        hours += n.get(arm, 0) * cost.reeval(m) + max(need.get(arm, 0.0) - n.get(arm, 0), 0.0) * cost.new_seed(m)
    return hours, closable


def pooled(comps: list[Contrast], verdicts: dict[str, Verdict], method: str,
           run_var: dict[ArmId, float] | None) -> dict[str, float]:
    """The σ² each of one cell's comparisons is planned with: wave 0 leaves a handful of seeds per
    arm, too few for one comparison's variance, so planning pools (the sequences never do): paired,
    the mean σ̂² of the cell's comparisons of the same kind; unpaired, the mean run variance of the
    cell's arms (else their comparisons' mean)."""
    usable = [c for c in comps if np.isfinite(verdicts[c.name].sigma) and verdicts[c.name].seeds >= 2]
    by_kind: dict[str, list[float]] = {}
    for c in usable:
        by_kind.setdefault(c.kind, []).append(verdicts[c.name].sigma ** 2)
    arm_vars = [v for v in (run_var or {}).values() if np.isfinite(v)]
    out = {}
    for c in usable:
        if method != "paired" and arm_vars:
            out[c.name] = float(np.mean(arm_vars))
        else:
            out[c.name] = float(np.mean(by_kind[c.kind]))
    return out


def choose(rule: DecisionRule, comps: list[Contrast], verdicts: list[Verdict], n: dict[ArmId, int],
           costs: dict[ArmId, ArmCost], beta: dict[ArmId, float], *, multipliers=MULTIPLIERS,
           run_var: dict[ArmId, float] | None = None, budget_left: float | None = None) -> dict[tuple[str, str], dict]:
    """Per (model, task): {"multiplier": m*, "by_multiplier": {m: (H(m), C(m))}} from wave 0's
    verdicts (decide.decide's, for sigma and seeds; their labels are not read: every comparison of the
    cell is planned, so no effect can steer m), seeds per arm n, costs (an arm without any: the
    cell's mean), sampling variances β and the arms' run variances V_a (var of their scores; None:
    pairing taken to cancel no sampling noise). β and V are pooled over the cell's arms, σ² as
    `pooled` says. An m whose re-evals of the seeds there now cost more than `budget_left` (all
    cells' together) is not taken."""
    a = rule.alpha_each(dec.family_size(comps, rule.method))
    by_name = {v.name: v for v in verdicts}
    out = {}
    for cell in sorted({(c.model, c.task) for c in comps}):
        mine = [c for c in comps if (c.model, c.task) == cell]
        arms = {(c.model, c.task, k) for c in mine for k, _ in c.coefs}
        mean = lambda d: float(np.mean([d[x] for x in arms if x in d and np.isfinite(d[x])] or [np.nan]))  # noqa: E731
        b_bar = dict.fromkeys(arms, mean(beta) if any(x in beta for x in arms) else 0.0)
        v_bar = dict.fromkeys(arms, mean(run_var)) if run_var is not None else None
        known = [costs[x] for x in arms if x in costs]
        if not known:
            out[cell] = {"multiplier": 1, "by_multiplier": {}}
            continue
        fill = ArmCost(*np.mean([[c.train, c.eval, c.setup] for c in known], axis=0).tolist())
        cell_costs = {x: costs.get(x, fill) for x in arms}
        sigma2 = pooled(mine, by_name, rule.method, v_bar)
        table = {m: cell_hours(mine, sigma2, n, cell_costs, b_bar, v_bar, m, a, rule) for m in multipliers}
        affordable = {m for m in multipliers if budget_left is None
                      or sum(n.get(x, 0) * cell_costs[x].reeval(m) for x in arms) <= budget_left}
        per = {m: (h / c if c and m in affordable else np.inf) for m, (h, c) in table.items()}
        best = min(multipliers, key=lambda m: (per[m], m)) if any(np.isfinite(v) for v in per.values()) else 1
        out[cell] = {"multiplier": int(best), "by_multiplier": table}
    return out


def choose_after_wave0(rule: DecisionRule, comps: list[Contrast], outcomes: dict, costs: dict[ArmId, ArmCost],
                       beta: dict[ArmId, float], budget_left: float | None = None) -> dict[tuple[str, str], dict]:
    """`choose` on wave 0's outcomes ((model, task) -> arm key -> {seed: Outcome}), as the loop
    asks it: their verdicts for the noise, seeds per arm, and the arms' run variances over the runs
    the estimand keeps (healthy: those that did not collapse)."""
    verdicts = dec.decide(rule, comps, outcomes)
    cells = {cell: {k: dec.by_seed(v) for k, v in arms.items()} for cell, arms in outcomes.items()}
    n = {(m, t, k): len(v) for (m, t), arms in cells.items() for k, v in arms.items()}
    kept = {(m, t, k): [o.score for o in v.values() if not (rule.estimand == "healthy" and o.collapsed)]
            for (m, t), arms in cells.items() for k, v in arms.items()}
    run_var = {arm: float(np.var(ys, ddof=1)) for arm, ys in kept.items() if len(ys) > 1}
    return choose(rule, comps, verdicts, n, costs, beta, run_var=run_var, budget_left=budget_left)
