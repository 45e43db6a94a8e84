"""Fixed designs vs `sweep --decide` on a simulator with known truths (issue 14, item 5).

    python benchmarks/decide.py [--reps 100 --wave 8 --delta 0.02]

The simulated sweep is ten_tricks: 3 tasks x (baseline, 10 singles, the six-trick stack, the
orthogonal four) = 36 effect and 6 interaction comparisons. A run's final pass@1 is its arm's true
mean plus Gaussian noise with the task's per-run sd, seed and eval noise together, as measured on
the real ten_tricks runs (reports/ten_tricks, pooled seed-to-seed sd from the CI half-widths:
code 0.0217, math 0.0121, logic 0.0050). Runs cost what they cost there, in baseline-run units
(G16 1.5x, the six-trick stack 1.35x, the rest 1x).

Scenarios:
  planted  single effects = the ten_tricks estimates; combos = their additive sum plus planted
           interactions (code six-stack -0.16, code orthogonal four -0.12, math six-stack -0.03)
  null     every effect and interaction 0

Designs, all at family-wise α = 0.05 over the 42 comparisons (Bonferroni):
  fixed n  n seeds per arm, pooled-σ t intervals; significant when the 1−α/K interval excludes 0,
           equivalent when the TOST (1−2α/K) interval lies inside ±δ
  decide   2 seeds per arm, then waves of --wave runs chosen by analysis.decide.allocate, verdicts
           by its confidence sequences, until none is open or --caps seeds per arm on average are spent

Columns: runs and cost (mean per replicate, cost in baseline runs); recall = share of the
comparisons with |θ| ≥ δ called significant with the right sign; equiv = share of θ = 0
comparisons shown equivalent; false flags = share of replicates with at least one significant
verdict on a θ = 0 comparison or with the wrong sign (the family-wise rate); false equiv = share
of replicates calling a |θ| ≥ δ comparison equivalent.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy import stats

from grpo_lab.analysis import decide as dec

SD = {"code": 0.0217, "math": 0.0121, "logic": 0.0050}
SINGLES = ["group_size_16", "kl_anneal", "dynamic_temperature", "quantile_norm_clip", "length_penalty_piecewise",
           "ema_reference", "adaptive_curriculum", "code_token_mask", "lr_warmup", "advantage_clip_3"]
SIX = "+".join(sorted(["group_size_16", "dynamic_temperature", "ema_reference", "adaptive_curriculum", "kl_anneal",
                       "advantage_clip_3"]))
FOUR = "+".join(sorted(["ema_reference", "code_token_mask", "quantile_norm_clip", "length_penalty_piecewise"]))
MEASURED = {  # reports/ten_tricks: effect on pass@1 vs baseline, two seeds
    "code": [0.103, 0.00875, -0.0175, 0.0338, 0.0706, 0.0413, 0.0631, 0.0, 0.0181, 0.0],
    "math": [0.0488, -0.000625, -0.00312, 0.0112, -0.00875, -0.01, -0.00562, 0.0, -0.0075, 0.0],
    "logic": [-0.0025, -0.005, -0.015, 0.00312, -0.00188, 0.00625, 0.0112, 0.0, 0.0, 0.0],
}
PLANTED = {("code", SIX): -0.16, ("code", FOUR): -0.12, ("math", SIX): -0.03}
COST = {"group_size_16": 1.5, SIX: 1.35}
ALPHA = 0.05


def truths(planted: bool) -> dict[tuple[str, str], dict[str, float]]:
    """(model, task) -> arm key -> true mean pass@1 (baseline 0.3)."""
    out = {}
    for task in SD:
        eff = dict(zip(SINGLES, MEASURED[task])) if planted else dict.fromkeys(SINGLES, 0.0)
        mu = {"baseline": 0.3, **{s: 0.3 + e for s, e in eff.items()}}
        for combo in (SIX, FOUR):
            mu[combo] = 0.3 + sum(eff[s] for s in combo.split("+")) + (PLANTED.get((task, combo), 0.0) if planted else 0.0)
        out[("sim", task)] = mu
    return out


def true_values(comps, mu) -> np.ndarray:
    exact = [sum(w * mu[(c.model, c.task)][k] for k, w in c.coefs) for c in comps]
    return np.round(exact, 12)  # 0.3 - 6 x 0.3 + 5 x 0.3 is 1e-16 in floats: a null is exactly 0


def score(comps, verdicts: list[str], signs: np.ndarray, theta: np.ndarray, delta: float) -> dict:
    v = np.array(verdicts)
    real, null = np.abs(theta) >= delta, theta == 0
    sig = v == "significant"
    wrong = sig & (null | (np.sign(signs) != np.sign(theta)))
    return {"recall": float((sig & real & (np.sign(signs) == np.sign(theta))).sum() / max(real.sum(), 1)),
            "equiv": float(((v == "equivalent") & null).sum() / max(null.sum(), 1)),
            "false_flag": float(wrong.any()), "false_equiv": float(((v == "equivalent") & real).any())}


def fixed(comps, mu, n: int, delta: float, rng) -> tuple[dict, float, int]:
    """Verdicts of a fixed design with n seeds per arm: (scores, cost, runs)."""
    K = len(comps)
    y = {cell: {k: mu[cell][k] + rng.normal(0, SD[cell[1]], n) for k in arms} for cell, arms in mu.items()}
    df = sum(len(a) for a in mu.values()) // len(mu) * (n - 1)  # σ pooled over the cell's arms
    sig_q, eq_q = stats.t.ppf(1 - ALPHA / (2 * K), df), stats.t.ppf(1 - ALPHA / K, df)
    verdicts, ests = [], []
    for c in comps:
        arms = y[(c.model, c.task)]
        sigma = np.sqrt(np.mean([a.var(ddof=1) for a in arms.values()]))
        est = sum(w * arms[k].mean() for k, w in c.coefs)
        se = sigma * np.sqrt(sum(w**2 / n for _, w in c.coefs))
        verdicts.append("significant" if abs(est) > sig_q * se else
                        "equivalent" if abs(est) + eq_q * se < delta else "open")
        ests.append(est)
    runs = n * sum(len(a) for a in mu.values())
    cost = n * sum(COST.get(k, 1.0) for a in mu.values() for k in a)
    return (verdicts, np.array(ests)), cost, runs


def sequential(comps, mu, wave: int, delta: float, rng, mean_cap: float = 16,
               alpha: float = ALPHA) -> tuple[tuple, float, int]:
    """The --decide loop on simulated runs: (verdicts, estimates), cost, runs."""
    y = {cell: {k: list(mu[cell][k] + rng.normal(0, SD[cell[1]], 2)) for k in arms} for cell, arms in mu.items()}
    n_arms = sum(len(a) for a in mu.values())
    cost = {(m, t, k): COST.get(k, 1.0) for (m, t), arms in mu.items() for k in arms}
    previous = None
    while True:
        rows, m = dec.decide(comps, y, alpha=alpha, delta=delta, previous=previous)
        previous = {r["name"]: r for r in rows}
        runs = sum(len(v) for a in y.values() for v in a.values())
        if m["open"] == 0 or runs >= mean_cap * n_arms:
            break
        n = {(mo, t, k): len(v) for (mo, t), a in y.items() for k, v in a.items()}
        added, _ = dec.allocate(comps, rows, n, cost, wave, alpha=alpha, delta=delta)
        if not added:
            break
        for (mo, t, k), extra in added.items():
            y[(mo, t)][k] += list(mu[(mo, t)][k] + rng.normal(0, SD[t], extra))
    spent = sum(cost[(mo, t, k)] * len(v) for (mo, t), a in y.items() for k, v in a.items())
    return ([r["verdict"] for r in rows], np.array([r["est"] for r in rows])), spent, runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--wave", type=int, default=8)
    ap.add_argument("--delta", type=float, default=0.02)
    ap.add_argument("--fixed", type=int, nargs="*", default=[2, 4, 8, 16, 32])
    ap.add_argument("--caps", type=float, nargs="+", default=[8, 16],
                    help="--decide budgets: mean seeds per arm it may spend")
    ap.add_argument("--decide-alpha", type=float, nargs="+", default=[ALPHA],
                    help="nominal α of --decide; above 0.05 matches the fixed designs' realised false-flag rate")
    args = ap.parse_args()
    table = Table(title=f"fixed vs --decide, {args.reps} replicates, δ = {args.delta}, FWER α = {ALPHA}")
    for col in ("scenario", "design", "runs", "cost", "recall", "equiv", "false flags", "false equiv", "s"):
        table.add_column(col, justify="left" if col in ("scenario", "design") else "right", no_wrap=True)
    for scenario in ("planted", "null"):
        mu = truths(scenario == "planted")
        comps = dec.comparisons({cell: list(arms) for cell, arms in mu.items()})
        theta = true_values(comps, mu)
        designs = [(f"fixed n={n}", lambda rng, n=n: fixed(comps, mu, n, args.delta, rng)) for n in args.fixed]
        designs += [(f"decide ≤{cap:g}/arm α={a:g}",
                     lambda rng, cap=cap, a=a: sequential(comps, mu, args.wave, args.delta, rng, cap, a))
                    for a in args.decide_alpha for cap in args.caps]
        for label, design in designs:
            rng, t0, acc = np.random.default_rng(0), time.perf_counter(), []
            for _ in range(args.reps):
                (verdicts, ests), cost, runs = design(rng)
                acc.append({**score(comps, verdicts, ests, theta, args.delta), "cost": cost, "runs": runs})
            mean = {k: np.mean([a[k] for a in acc]) for k in acc[0]}
            row = [scenario, label, f"{mean['runs']:.0f}", f"{mean['cost']:.0f}", f"{mean['recall']:.1%}",
                   f"{mean['equiv']:.1%}", f"{mean['false_flag']:.1%}", f"{mean['false_equiv']:.1%}",
                   f"{time.perf_counter() - t0:.0f}"]
            print(*row, sep="\t", flush=True)  # a long run shows its rows as they come
            table.add_row(*row)
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
