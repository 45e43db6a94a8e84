"""The family-wise error of `--decide` verdicts, measured on a simulator with known truth.

Each replicate is a sweep of one (model, task) with six arms (baseline, a, b, c, d, a+b: five
effects and one interaction), driven through analysis/decide.py's real loop: 2 seeds per arm, then
waves of 12 runs placed by `allocate`, verdicts after every wave (optional stopping), until nothing
is open or nothing can close within the 64-seed cap. A replicate errs "significant" when a
θ = 0 comparison is called significant or a θ ≠ 0 one gets the wrong sign, and "equivalent" when
a |θ| ≥ δ comparison is called equivalent. Each rate must stay ≤ α + 2 Monte Carlo standard
errors, under noise models the normal-mixture method assumed away: heavy tails, collapsed seeds,
one arm 9x noisier, pass rates near 0 and 1, and a true effect exactly at the TOST margin; for
both sequences (the t mixture also where seeds are as noisy as the margin), and for betting also
under a skewed null (one arm collapses 10% of seeds and sits higher on the rest), which the t
mixture does not survive. The t mixture also keeps it with `--decide`'s eval design in the loop
(analysis/eval_design.py: after wave 0 it picks m from the noise, then every seed's eval sampling
noise, 60% of a run's variance, is redrawn at sd/√m) at the hard case (0.02, 0.02), under the
global null with gaussian, t3, collapsed and 9x-variance seeds and at the TOST margin, paired and
unpaired, the design taking m > 1 in a good share of replicates (fewer where collapses dominate).

A pooled-σ normal-mixture sequence (Howard et al. 2021), which assumes one noise level per cell,
stays here as a reference: the same loop shows it failing the 9x case, so the suite can tell a
method that breaks.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from grpo_lab.analysis import decide, eval_design

ARMS = ["baseline", "a", "b", "c", "d", "a+b"]
ALPHA, DELTA, CAP, START, WAVE = 0.05, 0.2, 64, 2, 12
SD = 0.05


def simulate(model: str, rng: np.random.Generator, sd: float = SD, delta: float = DELTA
             ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """(arm -> per-seed scores for seeds 0..CAP−1, arm -> true mean) under one noise model.
    Scores are clipped to [0, 1]; around a mean of 0.5 symmetric noise keeps the mean there."""
    shape = (len(ARMS), CAP)
    mu = dict.fromkeys(ARMS, 0.5)
    if model == "gaussian":
        y = 0.5 + rng.normal(0, sd, shape) + rng.normal(0, sd, (1, CAP))  # a shared seed part: pairing cancels it
    elif model == "t3":
        y = 0.5 + sd * rng.standard_t(3, shape) / np.sqrt(3)
    elif model == "collapse":  # 10% of seeds end near 0 in every arm
        y = np.where(rng.random(shape) < 0.1, 0.02 + rng.normal(0, 0.01, shape), 0.5 + rng.normal(0, sd, shape))
        mu = dict.fromkeys(ARMS, 0.9 * 0.5 + 0.1 * 0.02)
    elif model == "hetero":  # arm a's seeds are 3x noisier (9x the variance)
        y = 0.5 + rng.normal(0, sd, shape) * np.where(np.array(ARMS) == "a", 3.0, 1.0)[:, None]
    elif model in ("near0", "near1"):
        p = 0.02 if model == "near0" else 0.98
        y = rng.binomial(200, p, shape) / 200
        mu = dict.fromkeys(ARMS, p)
    elif model == "tost":  # a exactly +δ, b exactly −δ, a+b additive
        mu = {**mu, "a": 0.5 + delta, "b": 0.5 - delta}
        y = np.array([mu[k] for k in ARMS])[:, None] + rng.normal(0, sd, shape)  # 4 sd from the clip
    elif model == "skew":  # arm a: 10% of seeds collapse to 0.02, the others sit higher; same mean
        y = 0.5 + rng.normal(0, sd, shape)
        y[1] = np.where(rng.random(CAP) < 0.1, 0.02, (0.5 - 0.1 * 0.02) / 0.9 + rng.normal(0, sd, CAP))
    else:
        raise ValueError(model)
    return dict(zip(ARMS, np.clip(y, 0.0, 1.0))), mu


def truths(comps, mu) -> np.ndarray:
    return np.round([sum(w * mu[k] for k, w in c.coefs) for c in comps], 12)


def run_new(comps, y, method: str, sequence: str, delta: float = DELTA, previous: dict | None = None) -> list[dict]:
    """The real loop: decide, allocate, reveal the allocated seeds, until closed (`previous`: the
    rows of waves already decided, as decide.decide takes them)."""
    n = dict.fromkeys(ARMS, START)
    while True:
        scores = {("m", "t"): {k: {i: y[k][i] for i in range(n[k])} for k in ARMS}}
        rows, m = decide.decide(comps, scores, alpha=ALPHA, delta=delta, previous=previous, method=method,
                                target=CAP, sequence=sequence)
        previous = {r["name"]: r for r in rows}
        if m["open"] == 0:
            return rows
        added, _ = decide.allocate(comps, rows, {("m", "t", k): v for k, v in n.items()}, {}, WAVE,
                                   alpha=ALPHA, delta=delta, most=CAP, method=method, sequence=sequence)
        if not added:
            return rows
        for (_, _, k), extra in added.items():
            n[k] += extra


# the eval design in the loop: a run's score is a training part plus the final eval's sampling
# noise, SAMPLING of the arm's own variance; re-evals are cheap next to training
SAMPLING = 0.6
DESIGN_COST = eval_design.ArmCost(train=1.0, eval=0.01, setup=0.005)


def run_design(comps, train: dict[str, np.ndarray], sd_s: float, rng, method: str, delta: float
               ) -> tuple[list[dict], int]:
    """The loop with `--decide`'s eval design: wave 0 (START seeds per arm) scored at m = 1,
    decided, eval_design.choose from its rows and the known sampling variance sd_s²; at m > 1 the
    sampling noise of every seed, those of wave 0 included, is drawn afresh at sd_s/√m, and the
    loop goes on from wave 0 on those scores. (rows, m)."""
    y = {k: np.clip(v + rng.normal(0, sd_s, v.size), 0.0, 1.0) for k, v in train.items()}
    scores = {("m", "t"): {k: {i: y[k][i] for i in range(START)} for k in ARMS}}
    rows, _ = decide.decide(comps, scores, alpha=ALPHA, delta=delta, method=method, target=CAP, sequence="t")
    n = {("m", "t", k): START for k in ARMS}
    run_var = {("m", "t", k): float(np.var(y[k][:START], ddof=1)) for k in ARMS}
    design = eval_design.choose(comps, rows, n, dict.fromkeys(n, DESIGN_COST), dict.fromkeys(n, sd_s**2),
                                alpha=ALPHA, delta=delta, most=CAP, method=method, sequence="t", run_var=run_var)
    m = design[("m", "t")]["multiplier"]
    if m > 1:
        y = {k: np.clip(v + rng.normal(0, sd_s / np.sqrt(m), v.size), 0.0, 1.0) for k, v in train.items()}
    # as in the --decide loop, wave 0's rows were planning only: the recorded verdicts start on the
    # scores at m
    return run_new(comps, y, method, "t", delta), m


def design_error_rates(model: str, method: str, reps: int, sd: float, delta: float, seed: int = 0
                       ) -> tuple[float, float, float, float]:
    """(false significant, false equivalent, α + 2 SE, share of replicates at m > 1) over `reps`
    sweeps whose runs have variance sd², SAMPLING of it the eval's (the arm's own part, for gaussian)."""
    rng = np.random.default_rng(seed)
    comps = decide.comparisons({("m", "t"): ARMS})
    acc, ms = [], []
    for _ in range(reps):
        train, mu = simulate(model, rng, sd * np.sqrt(1 - SAMPLING), delta)
        rows, m = run_design(comps, train, sd * np.sqrt(SAMPLING), rng, method, delta)
        acc.append(errors(rows, truths(comps, mu), delta))
        ms.append(m)
    fs, fe = np.mean(acc, axis=0)
    return float(fs), float(fe), ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / reps), float(np.mean(np.array(ms) > 1))


def reference_radius(t, sigma, alpha):
    """The pooled-σ normal mixture (Howard et al. 2021 eq. 14), Student-corrected σ̂."""
    L = 2 * np.log(1 / alpha)
    r = 4.0 / (L + np.log(1 + L))
    return sigma * np.sqrt((t + r) * (np.log1p(t / r) + L)) / t


def run_reference(comps, y) -> list[dict]:
    """The reference method under the same optional stopping: every open comparison's arms grow by
    one seed per wave."""
    a = ALPHA / len(comps)
    verdicts = {c.name: "open" for c in comps}
    signs = dict.fromkeys(verdicts, 0.0)
    for n in range(START, CAP + 1):
        Y = np.array([y[k][:n] for k in ARMS])
        df = len(ARMS) * (n - 1)
        sigma = np.sqrt(Y.var(axis=1, ddof=1).mean()) * stats.t.ppf(1 - a / 2, df) / stats.norm.ppf(1 - a / 2)
        means = dict(zip(ARMS, Y.mean(axis=1)))
        for c in comps:
            if verdicts[c.name] != "open":
                continue
            est = sum(w * means[k] for k, w in c.coefs)
            rad = reference_radius(n / sum(w**2 for _, w in c.coefs), sigma, a)
            verdicts[c.name], signs[c.name] = decide.classify(est - rad, est + rad, DELTA), np.sign(est)
        if all(v != "open" for v in verdicts.values()):
            break
    return [{"name": c.name, "verdict": verdicts[c.name], "lower": signs[c.name]} for c in comps]


def errors(rows, theta, delta: float = DELTA) -> tuple[bool, bool]:
    """(a false significant, a false equivalent) in one sweep's verdicts; a significant
    verdict's sign is its interval's (lower > 0: positive)."""
    v = np.array([r["verdict"] for r in rows])
    sign = np.where(np.array([r["lower"] for r in rows], float) > 0, 1.0, -1.0)
    sig = v == "significant"
    false_sig = bool((sig & ((theta == 0) | (sign != np.sign(theta)))).any())
    false_eq = bool(((v == "equivalent") & (np.abs(theta) >= delta - 1e-12)).any())
    return false_sig, false_eq


def error_rates(model: str, runner, reps: int, seed: int = 0, sd: float = SD, delta: float = DELTA
                ) -> tuple[float, float, float]:
    """(false significant, false equivalent, Monte Carlo bound α + 2 SE) over `reps` sweeps."""
    rng = np.random.default_rng(seed)
    comps = decide.comparisons({("m", "t"): ARMS})
    acc = []
    for _ in range(reps):
        y, mu = simulate(model, rng, sd, delta)
        acc.append(errors(runner(comps, y), truths(comps, mu), delta))
    fs, fe = np.mean(acc, axis=0)
    return float(fs), float(fe), ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / reps)


MODELS = ["gaussian", "t3", "collapse", "hetero", "near0", "near1", "tost"]


@pytest.mark.parametrize("method", ["paired", "unpaired"])
@pytest.mark.parametrize("model", MODELS)
def test_betting_family_wise_error_holds_under_every_noise_model(model, method):
    fs, fe, bound = error_rates(model, lambda comps, y: run_new(comps, y, method, "betting"), reps=80)
    assert fs <= bound and fe <= bound, (model, method, fs, fe, bound)


def test_betting_holds_where_a_trick_collapses_some_seeds_and_lifts_the_rest():
    """The skewed null the t sequence is not built for (docs/results.md gives its error there):
    the distribution-free sequence keeps its guarantee."""
    for method in ("paired", "unpaired"):
        fs, fe, bound = error_rates("skew", lambda comps, y: run_new(comps, y, method, "betting"), reps=80)
        assert fs <= bound and fe <= bound, (method, fs, fe, bound)


@pytest.mark.parametrize("method", ["paired", "unpaired"])
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("sd, delta", [(SD, DELTA), (0.02, 0.02)])
def test_t_family_wise_error_holds_under_every_noise_model(model, method, sd, delta):
    """Where seeds are as noisy as the margin (0.02, 0.02) the loop runs many waves and decides
    most comparisons near the margin: the hard case for optional stopping."""
    fs, fe, bound = error_rates(model, lambda comps, y: run_new(comps, y, method, "t", delta), reps=200,
                                sd=sd, delta=delta)
    assert fs <= bound and fe <= bound, (model, method, sd, delta, fs, fe, bound)


@pytest.mark.parametrize("method", ["paired", "unpaired"])
@pytest.mark.parametrize("model", ["gaussian", "t3", "collapse", "hetero", "tost"])
def test_t_family_wise_error_holds_with_the_eval_design_in_the_loop(model, method):
    """The eval design chooses m from wave 0's noise, then every seed's sampling noise is redrawn at
    sd/√m: at the hard case (0.02, 0.02), under the global null (where only a false significant
    can happen) and where a and b sit exactly on the margin (tost: a false equivalent can). The
    design must take m > 1 in a good share of replicates, else this tests the plain loop again."""
    fs, fe, bound, share = design_error_rates(model, method, reps=250, sd=0.02, delta=0.02)
    assert fs <= bound and fe <= bound, (model, method, fs, fe, bound)
    # collapsed seeds make training the noise that dominates, so there m > 1 is rarer (~25%)
    assert share > 0.2, (model, method, share)


def test_t_decides_at_a_realistic_margin_where_betting_cannot():
    """At δ = sd = 0.02 the t sequence reaches verdicts within the 64-seed cap; betting, which
    holds for every bounded distribution, needs ~400 seeds for any of them."""
    rng = np.random.default_rng(1)
    comps = decide.comparisons({("m", "t"): ARMS})
    y, _ = simulate("gaussian", rng, 0.02, 0.02)
    decided = {seq: sum(r["verdict"] != "open" for r in run_new(comps, y, "paired", seq, 0.02)) for seq in SEQUENCES}
    assert decided["t"] >= len(comps) // 2 and decided["betting"] == 0, decided


SEQUENCES = ("t", "betting")


def test_the_suite_catches_the_pooled_normal_mixture_on_the_noisy_arm():
    fs, fe, bound = error_rates("hetero", run_reference, reps=300)
    assert fs > bound, (fs, bound)
    gauss, _, _ = error_rates("gaussian", run_reference, reps=300)
    assert gauss <= bound  # where its assumptions hold, it held
