"""A simulated ten_tricks sweep with known truths, driven through the real `--decide` step: what the
validity suite (tests/analysis/test_analysis_decide_validity.py) and benchmarks/decide.py measure.

The sweep: 3 tasks (code, math, logic) x 14 arms (baseline, 11 singles, the six-trick stack, the
orthogonal four) on one model, so contrast.contrasts gives K = 45 (13 effects and 2 interactions
per task). Run i of arm a on a task:

    collapsed  z_{a,i} ~ Bernoulli(p_a), drawn apart from everything below; its score ~ U(0, 0.02)
    healthy    y_{a,i} = μ_a + s_i + e_{a,i} + (u_i + v_{a,i})/√m, clipped to [μ_a − w_a, μ_a + w_a],
               w_a = min(μ_a, 1 − μ_a)

s_i, u_i are shared by every arm at seed index i (common random numbers: SHARED of a run's
variance), e the arm's own training part, u + v the final eval's sampling noise (SAMPLING of a
run's variance at the runs' own completions; m the eval design's multiplier, which redraws it at
sd/√m). The training parts are Gaussian or t3 (scaled to unit variance), all symmetric about 0, and
the clip is symmetric about μ_a, so E[y_a] = μ_a exactly. The truths are then the distributions'
own, never the method's:

    healthy   θ   = Σ c_a·μ_a                   (collapse is independent of y: the mean over the
                                                 seeds where no arm collapsed)
    mean      θ_m = Σ c_a·((1 − p_a)·μ_a + p_a·COLLAPSED)
    collapse  θ_c = Σ c_a·p_a

`run_sweep` drives the loop exactly as execution/waves.run_decide does: wave 0 (2 seeds per arm)
at the runs' own eval, `eval_design.choose_after_wave0` once with each arm's β estimated from a
simulated per-problem eval (never the true β), every run re-evaluated at m (charged setup + m·eval),
then `decide.step` wave after wave, revealing the seeds it adds, until nothing is open, nothing is
added or the budget is spent. Costs in core-hours: a baseline run is HOURS_PER_RUN (the ten_tricks
--decide sweep's mean), other arms COST times that; a final eval EVAL, an eval-only attempt's
setup SETUP of a run (the ten_tricks runs' phases).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grpo_lab.analysis import decide as dec
from grpo_lab.analysis.contrast import Contrast, contrasts
from grpo_lab.analysis import eval_design as ed
from grpo_lab.analysis.rule import DecisionRule
from grpo_lab.analysis.verdict import Verdict

MODEL = "sim"
TASKS = ("code", "math", "logic")
BASE = {"code": 0.218, "math": 0.471, "logic": 0.321}  # baseline pass@1, reports/ten_tricks
SD = {"code": 0.0217, "math": 0.0121, "logic": 0.0050}  # per-run sd, first ten_tricks runs
SHARED = {"code": 0.05, "math": 0.21, "logic": 0.50}  # share of a run's variance common to its seed index
SAMPLING = {"code": 0.05, "math": 0.23, "logic": 0.60}  # share that is the final eval's sampling noise
EVAL = {"code": 0.0275, "math": 0.0075, "logic": 0.0075}  # a final eval at the runs' own k, in runs
SETUP = {"code": 0.054, "math": 0.151, "logic": 0.137}  # an eval-only attempt's setup, in runs
HOURS_PER_RUN = 3.99 / 474
PROBLEMS, SAMPLES = 200, 4  # the final eval β is estimated from (ten_tricks: 200 problems, k = 4)
COLLAPSED = 0.01  # mean score of a collapsed run, U(0, 0.02)

SINGLES = ("group_size_16", "group_size_2", "kl_anneal", "dynamic_temperature", "quantile_norm_clip",
           "length_penalty_piecewise", "ema_reference", "adaptive_curriculum", "code_token_mask", "lr_warmup",
           "advantage_clip_3")
SIX = "+".join(sorted(("group_size_16", "dynamic_temperature", "ema_reference", "adaptive_curriculum", "kl_anneal",
                       "advantage_clip_3")))
FOUR = "+".join(sorted(("ema_reference", "code_token_mask", "quantile_norm_clip", "length_penalty_piecewise")))
ARMS = ("baseline", *SINGLES, SIX, FOUR)
COST = {"group_size_16": 1.5, "group_size_2": 0.7, SIX: 1.35}  # a run's core-h over a baseline run's
# reports/ten_tricks: single effects on pass@1 (two seeds; group_size_2 from its --decide rows)
MEASURED = {
    "code": dict(zip(SINGLES, (0.103, -0.0396, 0.00875, -0.0175, 0.0338, 0.0706, 0.0413, 0.0631, 0.0, 0.0181, 0.0))),
    "math": dict(zip(SINGLES, (0.0488, -0.119, -0.000625, -0.00312, 0.0112, -0.00875, -0.01, -0.00562, 0.0, -0.0075,
                               0.0))),
    "logic": dict(zip(SINGLES, (-0.0025, -0.0359, -0.005, -0.015, 0.00312, -0.00188, 0.00625, 0.0112, 0.0, 0.0,
                                0.0))),
}
PLANTED = {("code", SIX): -0.16, ("code", FOUR): -0.12, ("math", SIX): -0.03}  # interactions
NOISY = "dynamic_temperature"  # hetero's 9x arm and harm's collapsing trick
MIXED_SKEWED = ("kl_anneal", "lr_warmup", "adaptive_curriculum")  # the mixed truth's skewed arms (p = 10%)

CASES = ("gaussian", "t3", "hetero", "near0", "near1", "collapse", "tost", "skew5", "skew10", "skew20", "harm",
         "mixed")


@dataclass(frozen=True)
class ArmLaw:
    mu: float  # mean of a healthy run's score
    p: float = 0.0  # collapse share
    noise: float = 1.0  # sd multiplier of the arm's own training part


def _additive(task: str, effects: dict[str, float]) -> dict[str, float]:
    """Arm means from single effects: combinations additive."""
    mu = {"baseline": BASE[task], **{s: BASE[task] + effects.get(s, 0.0) for s in SINGLES}}
    for combo in (SIX, FOUR):
        mu[combo] = BASE[task] + sum(effects.get(s, 0.0) for s in combo.split("+"))
    return mu


def _skewed(mean: float, p: float) -> ArmLaw:
    """An arm whose overall mean is `mean`, collapsing in a share p: its healthy runs sit higher."""
    return ArmLaw((mean - p * COLLAPSED) / (1 - p), p)


def laws(case: str, task: str) -> dict[str, ArmLaw]:
    """arm -> its law under `case` (CASES) on `task`."""
    null = {a: ArmLaw(BASE[task]) for a in ARMS}
    if case in ("gaussian", "t3"):
        return null
    if case == "hetero":  # the arm's own training part 3x the sd: 9x its variance
        return {**null, NOISY: ArmLaw(BASE[task], noise=3.0)}
    if case in ("near0", "near1"):
        return {a: ArmLaw(0.02 if case == "near0" else 0.98) for a in ARMS}
    if case == "collapse":  # 10% of seeds collapse in every arm
        return {a: ArmLaw(BASE[task], 0.1) for a in ARMS}
    if case == "tost":  # four singles exactly +δ, four exactly −δ (δ = 0.02), combinations additive
        up, down = SINGLES[:4], SINGLES[4:8]
        mu = _additive(task, {**dict.fromkeys(up, 0.02), **dict.fromkeys(down, -0.02)})
        return {a: ArmLaw(m) for a, m in mu.items()}
    if case.startswith("skew"):  # every single collapses in a share p, same overall mean
        p = int(case[4:]) / 100
        return {**null, **{s: _skewed(BASE[task], p) for s in SINGLES}}
    if case == "harm":  # collapses 10% of seeds, otherwise unchanged
        return {**null, NOISY: ArmLaw(BASE[task], 0.1)}
    if case == "mixed":  # measured effects, planted interactions, three skewed singles at their measured mean
        mu = _additive(task, MEASURED[task])
        for combo in (SIX, FOUR):
            mu[combo] += PLANTED.get((task, combo), 0.0)
        return {a: _skewed(m, 0.1) if a in MIXED_SKEWED else ArmLaw(m) for a, m in mu.items()}
    raise ValueError(f"unknown case {case!r}; cases: {', '.join(CASES)}")


@dataclass(frozen=True)
class Truth:
    """Per comparison name: θ of each estimand, θ_c of the collapse rates, and the real effects
    (|θ| ≥ δ on arms that never collapse, where every estimand agrees: what recall counts)."""

    healthy: dict[str, float]
    mean: dict[str, float]
    collapse: dict[str, float]
    real: dict[str, float]

    def of(self, estimand: str) -> dict[str, float]:
        return self.healthy if estimand == "healthy" else self.mean


def truths(comps: list[Contrast], law: dict[tuple[str, str], dict[str, ArmLaw]], delta: float) -> Truth:
    """The estimands' θ from the arms' laws (module docstring), rounded to 12 digits."""
    out: dict[str, dict[str, float]] = {"healthy": {}, "mean": {}, "collapse": {}, "real": {}}
    for c in comps:
        arms = [(law[(c.model, c.task)][k], w) for k, w in c.coefs]
        h = round(sum(w * a.mu for a, w in arms), 12)
        out["healthy"][c.name] = h
        out["mean"][c.name] = round(sum(w * ((1 - a.p) * a.mu + a.p * COLLAPSED) for a, w in arms), 12)
        out["collapse"][c.name] = round(sum(w * a.p for a, w in arms), 12)
        if abs(h) >= delta - 1e-12 and all(a.p == 0 for a, _ in arms):
            out["real"][c.name] = h
    return Truth(**out)


@dataclass
class World:
    """One replicate's runs, seeds 0..most−1 of every arm of one task, rows in ARMS order."""

    law: dict[str, ArmLaw]
    train: np.ndarray  # (A, most) μ_a + training parts
    samp_shared: np.ndarray  # (most,) standard normal: the seed index's share of the eval noise
    samp_own: np.ndarray  # (A, most) standard normal: the run's own
    sd_samp: tuple[float, float]  # sd of the shared and own sampling parts at m = 1
    collapsed: np.ndarray  # (A, most) bool
    floor: np.ndarray  # (A, most) a collapsed run's score
    beta: float  # a run's true sampling variance at m = 1

    def scores(self, m: int) -> np.ndarray:
        """(A, most) scores at multiplier m (the same draw whatever m: a re-eval at m redraws)."""
        mu = np.array([self.law[a].mu for a in ARMS])[:, None]
        w = np.minimum(mu, 1 - mu)
        noise = (self.sd_samp[0] * self.samp_shared[None, :] + self.sd_samp[1] * self.samp_own) / np.sqrt(m)
        y = np.clip(self.train + noise, mu - w, mu + w)
        return np.where(self.collapsed, self.floor, y)


def draw(case: str, task: str, scale: float, most: int, rng: np.random.Generator) -> World:
    """One task's runs under `case`, per-run sd SD[task]·scale (near0/1: shrunk by the binomial
    sd there, √(p(1−p)) over the baseline's)."""
    law = laws(case, task)
    sd = SD[task] * scale
    if case in ("near0", "near1"):
        sd *= np.sqrt(0.02 * 0.98 / (BASE[task] * (1 - BASE[task])))
    share, samp = SHARED[task], SAMPLING[task]
    unit = (lambda size: rng.standard_t(3, size) / np.sqrt(3)) if case == "t3" else rng.standard_normal
    mu = np.array([law[a].mu for a in ARMS])[:, None]
    own = np.array([law[a].noise for a in ARMS])[:, None]
    train = (mu + sd * np.sqrt(share * (1 - samp)) * unit(most)[None, :]
             + sd * np.sqrt((1 - share) * (1 - samp)) * own * unit((len(ARMS), most)))
    p = np.array([law[a].p for a in ARMS])[:, None]
    return World(law, train, rng.standard_normal(most), rng.standard_normal((len(ARMS), most)),
                 (sd * np.sqrt(share * samp), sd * np.sqrt((1 - share) * samp)),
                 rng.random((len(ARMS), most)) < p, rng.uniform(0.0, 2 * COLLAPSED, (len(ARMS), most)),
                 samp * sd**2)


def beta_estimate(beta: float, mu: float, rng: np.random.Generator, runs: int) -> float:
    """An arm's β as waves.py reads it: the mean of eval_design.sampling_var over its `runs` runs'
    per-problem rows, PROBLEMS problems at SAMPLES completions each, the problems' pass rates
    Beta-distributed about μ with the spread that makes E[sampling_var] = β (capped where β is
    beyond what PROBLEMS·SAMPLES completions can show: concentration κ/(κ+1) ≤ 0.99)."""
    r = min(beta * PROBLEMS * SAMPLES / (mu * (1 - mu)), 0.99)
    kappa = r / (1 - r)
    rates = rng.beta(mu * kappa, (1 - mu) * kappa, (runs, PROBLEMS))
    passes = rng.binomial(SAMPLES, rates)
    return float(np.mean([ed.sampling_var([{"samples": SAMPLES, "passes": c} for c in row]) for row in passes]))


def arm_cost(task: str, arm: str) -> ed.ArmCost:
    run = COST.get(arm, 1.0) * HOURS_PER_RUN
    return ed.ArmCost(train=run, eval=EVAL[task] * HOURS_PER_RUN, setup=SETUP[task] * HOURS_PER_RUN)


@dataclass(frozen=True)
class Sweep:
    verdicts: list[Verdict]
    hours: float  # core-hours spent, re-evals included
    truth: Truth
    design: dict[str, int]  # task -> the eval design's multiplier
    waves: int  # steps taken after wave 0
    runs: int  # training runs
    outcomes: dict  # the last step's (model, task) -> arm -> {seed: Outcome}


def _outcomes(worlds: dict[str, World], scores: dict[str, np.ndarray], n: dict) -> dict:
    """(model, task) -> arm -> {seed: Outcome} of the first n[arm] seeds of every arm."""
    out = {}
    for task, world in worlds.items():
        y, z = scores[task], world.collapsed
        out[(MODEL, task)] = {a: {s: dec.Outcome(float(y[i, s]), bool(z[i, s])) for s in range(n[(MODEL, task, a)])}
                              for i, a in enumerate(ARMS)}
    return out


def run_sweep(rule: DecisionRule, case: str, rng: np.random.Generator, budget: float = 6.0, wave: int = 16,
              scale: float = 1.0, start: int = 2, design: bool = True) -> Sweep:
    """One simulated `--decide` sweep under `case` (waves.run_decide's loop, module docstring)."""
    worlds = {t: draw(case, t, scale, rule.most_seeds, rng) for t in TASKS}
    comps = contrasts({(MODEL, t): list(ARMS) for t in TASKS})
    truth = truths(comps, {(MODEL, t): w.law for t, w in worlds.items()}, rule.delta)
    costs = {(MODEL, t, a): arm_cost(t, a) for t in TASKS for a in ARMS}
    n = dict.fromkeys(costs, start)
    ran = {arm: [c.train] * start for arm, c in costs.items()}  # each finished run's core-h
    hours = sum(sum(v) for v in ran.values())
    m = dict.fromkeys(TASKS, 1)
    if design:
        first = _outcomes(worlds, {t: w.scores(1) for t, w in worlds.items()}, n)
        beta = {(MODEL, t, a): beta_estimate(w.beta, w.law[a].mu, rng, start) for t, w in worlds.items()
                for a in ARMS}
        choice = ed.choose_after_wave0(rule, comps, first, costs, beta, budget - hours)
        m = {t: int(choice[(MODEL, t)]["multiplier"]) for t in TASKS}
        hours += sum(n[arm] * c.reeval(m[arm[1]]) for arm, c in costs.items())
    scores = {t: w.scores(m[t]) for t, w in worlds.items()}
    previous: dict[str, Verdict] = {}
    steps = 0
    while True:
        outcomes = _outcomes(worlds, scores, n)
        cost = {arm: float(np.mean(v)) for arm, v in ran.items()}
        left = budget - hours
        slots = min(wave, int(left / (sum(cost.values()) / len(cost))))
        result = dec.step(rule, comps, outcomes, previous, n, cost, max(slots, 0), left)
        steps += 1
        previous = {v.name: v for v in result.verdicts}
        if all(v.decided for v in result.verdicts) or not result.added:
            break
        for arm, k in result.added.items():
            n[arm] += k
            ran[arm] += [costs[arm].new_seed(m[arm[1]])] * k
            hours += k * costs[arm].new_seed(m[arm[1]])
    return Sweep(result.verdicts, hours, truth, m, steps, sum(n.values()), outcomes)


@dataclass(frozen=True)
class Errors:
    false_sig: bool  # a θ = 0 comparison called significant, or a wrong sign
    false_equiv: bool  # a |θ| ≥ δ comparison called equivalent
    false_collapse: bool  # a collapse label "more"/"fewer" where θ_c = 0 or of the other sign
    decided: float  # share of comparisons with a pass@1 label
    recall: float  # share of the real effects (Truth.real) called significant with their sign (NaN: none)


def errors(verdicts: list[Verdict], truth: Truth, delta: float) -> Errors:
    """One sweep's family-wise errors, each label judged against its own estimand's θ."""
    false_sig = false_equiv = false_collapse = False
    found = 0
    for v in verdicts:
        theta = truth.of(v.estimand)[v.name]
        if v.label == "significant":
            false_sig |= abs(theta) < 1e-12 or np.sign(theta) != v.direction
            found += v.name in truth.real and np.sign(truth.real[v.name]) == v.direction
        false_equiv |= v.label == "equivalent" and abs(theta) >= delta - 1e-12
        if v.collapse.label in ("more", "fewer"):
            tc = truth.collapse[v.name]
            false_collapse |= abs(tc) < 1e-12 or np.sign(tc) != (1 if v.collapse.label == "more" else -1)
    return Errors(bool(false_sig), bool(false_equiv), bool(false_collapse),
                  float(np.mean([v.decided for v in verdicts])), found / len(truth.real) if truth.real else math.nan)
