"""`sweep --decide` methods on a simulator with known truths: error rates and decisions per core-hour.

    python benchmarks/decide.py [--reps 20 --wave 16 --delta 0.02 --caps 32 128 --noise 1 2.6]

The simulated sweep is ten_tricks: 3 tasks x (baseline, 10 singles, the six-trick stack, the
orthogonal four) = 36 effect and 6 interaction comparisons. A run's final pass@1 is its arm's true
mean plus a seed part shared by every arm at that seed index (common random numbers) and an arm
part, clipped to [0, 1]. Per-run sd per task as measured on the first ten_tricks runs (code
0.0217, math 0.0121, logic 0.0050), times --noise (the later ten_tricks --decide runs were about
2.6x noisier); the shared part makes a paired contrast's variance 0.95x / 0.79x / 0.50x the
unpaired one, as measured there. Runs cost what they cost there, in baseline runs (G16 1.5x, the
six-trick stack 1.35x), and a baseline run is 3.99 / 474 core-hours (the --decide sweep's mean).

Each part (seed-shared and arm) is split into training and the final eval's sampling noise, drawn
separately: the sampling share of a run's variance is the eval's binomial variance
(1/P²) Σ p̂(1 − p̂)/(k − 1) over the per-run variance on the ten_tricks runs (code 0.05, math 0.23,
logic 0.60; logic's 0.60 and seed-shared 0.50 cannot both sit in separate parts, and the re-eval's
sampling stream is the sweep's, so each part holds both in the same proportion). A final eval at the
runs' own completions per problem costs 0.0275 of a run on code and 0.0075 on math and logic; an
eval-only attempt's setup 0.054 / 0.151 / 0.137 of a run (code / math / logic: the setup phase's
mean share of wall time over the 300 ten_tricks runs). A re-eval at m keeps a run's training part
and redraws its sampling noise at sd/√m. The noisy arm of hetero gets its extra variance in
training (the eval's binomial noise does not grow with it).

Scenarios:
  planted  single effects = the ten_tricks estimates; combos = their additive sum plus planted
           interactions (code six-stack -0.16, code orthogonal four -0.12, math six-stack -0.03)
  null     every effect and interaction 0
  hetero   null, and dynamic_temperature's seeds 3x noisier (9x the variance) on every task

Methods, each with its own allocator that stops spending once a comparison is decided:
  old       pooled-σ normal-mixture confidence sequences with a Student-corrected plug-in σ̂,
            Bonferroni: the reference, which assumes one noise level per (model, task)
  t-unpaired      analysis/decide.py, per-arm t-mixture sequences (analysis/tmix.py)
  t-paired        t-mixture sequences on seed-index paired contrasts (the default of --decide)
  betting-paired  betting sequences on paired contrasts (analysis/betting.py: any bounded noise)
  t-paired-design, t-unpaired-design
            t-paired / t-unpaired with the eval design (analysis/eval_design.py): after the first
            wave, m per task from its noise and the costs (β per arm the known sampling variance);
            at m > 1 every seed so far is evaluated again with m·k completions and every new seed
            is scored that way, each re-eval costing setup + m·eval in core-h
All start at 2 seeds per arm and add waves of --wave runs until nothing is open, nothing can close,
or the arms average --caps seeds.

Columns: runs, core-h (mean per replicate); decided = share of the 42 comparisons with a verdict;
per core-h = decided / core-h; at old's core-h = the share decided by the time the method had spent
what old spent on the same replicate (old must come first in --methods); recall = share of |θ| ≥ δ found with the right sign; false sig =
share of replicates with a θ = 0 comparison called significant or a wrong sign (family-wise);
false equiv = share of replicates calling a |θ| ≥ δ comparison equivalent; m code/math/logic =
the design's mean multiplier per task (1 without a design). runs counts training runs; core-h
includes the re-evals.

Measured (--reps 30 --noise 1 2.6 --caps 32 --methods old t-paired t-paired-design, 2026-12-02;
docs/results.md has the table): the design takes m ≈ 1 / 4.4-5.9 / 5.5-8 (code / math / logic) and
decides 0.5-4 points more than t-paired (null 2.6x: 33.1% vs 29.0%) at about its core-h (new seeds
make their eval at m in their own attempt; only wave 0's runs pay an eval-only model load); at the
old method's core-h t-paired decides 0.85-0.99x of what the old method does, the design 0.88-1.01x;
the design made no false equivalent and one false significant (null 2.6x, 1 of 30).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy import stats

from grpo_lab.analysis import decide as dec
from grpo_lab.analysis import eval_design as ed

SD = {"code": 0.0217, "math": 0.0121, "logic": 0.0050}
SHARED = {"code": 0.05, "math": 0.21, "logic": 0.50}  # share of a run's variance common to its seed index
# share of a run's variance that is the final eval's sampling noise, (1/P²) Σ p̂(1 − p̂)/(k − 1) over
# the per-run variance on the ten_tricks runs
SAMPLING = {"code": 0.05, "math": 0.23, "logic": 0.60}
EVAL = {"code": 0.0275, "math": 0.0075, "logic": 0.0075}  # a final eval at the runs' own k, in runs
# an eval-only attempt's setup (loading the model, building the engine), in runs: the setup phase's
# mean share of wall time over the 300 ten_tricks runs in /work/tt/ws/runs (summary.json phase_seconds)
SETUP = {"code": 0.054, "math": 0.151, "logic": 0.137}
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
NOISY = "dynamic_temperature"
HOURS_PER_RUN = 3.99 / 474
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


def draw(mu, scale: float, hetero: bool, most: int, rng) -> dict:
    """(model, task) -> arm -> {"train": training part of seeds 0..most−1, "sampling": (sd shared
    at the seed index, sd of the arm's own part) of the eval's sampling noise at the runs' own
    completions, "scores": the scores at m = 1}. Seed index i shares its seed part in both."""
    out = {}
    for cell, arms in mu.items():
        task = cell[1]
        sd, share, samp = SD[task] * scale, SHARED[task], SAMPLING[task]
        shared_train = rng.normal(0, sd * np.sqrt(share * (1 - samp)), most)
        shared_samp = rng.normal(0, sd * np.sqrt(share * samp), most)
        own_train, own_samp = sd * np.sqrt((1 - share) * (1 - samp)), sd * np.sqrt((1 - share) * samp)
        out[cell] = {}
        for k, m in arms.items():
            # the noisy arm: 9x the variance of the arm's own part at m = 1, all of it training
            f = np.sqrt((9 - samp) / (1 - samp)) if hetero and k == NOISY else 1.0
            train = m + shared_train + rng.normal(0, own_train * f, most)
            scores = np.clip(train + shared_samp + rng.normal(0, own_samp, most), 0, 1)
            out[cell][k] = {"train": train, "sampling": (sd * np.sqrt(share * samp), own_samp), "scores": scores}
    return out


def reevaluate(y: dict, design: dict, rng) -> dict:
    """Scores once every run of a cell at multiplier m > 1 is evaluated again with m·k fresh
    completions: the training part kept, the sampling noise redrawn at sd/√m (its seed-index part
    still shared: the re-eval's sampling stream is the sweep's, trainer/final_eval.py)."""
    out = {}
    for cell, arms in y.items():
        m = design.get(cell, 1)
        if m == 1:
            out[cell] = {k: v["scores"] for k, v in arms.items()}
            continue
        shared_sd, own_sd = next(iter(arms.values()))["sampling"]
        most = next(iter(arms.values()))["train"].size
        shared = rng.normal(0, shared_sd / np.sqrt(m), most)
        out[cell] = {k: np.clip(v["train"] + shared + rng.normal(0, v["sampling"][1] / np.sqrt(m), most), 0, 1)
                     for k, v in arms.items()}
    return out


def old_decide(comps, y, n, alpha, delta, previous):
    """Pooled-σ normal mixture (Howard et al. 2021 eq. 14) with the Student-corrected plug-in σ̂."""
    a = alpha / len(comps)
    L = 2 * np.log(1 / a)
    r = 4.0 / (L + np.log(1 + L))
    sig = {}
    for cell, arms in y.items():
        ss = sum(((arms[k][:n[(*cell, k)]] - arms[k][:n[(*cell, k)]].mean()) ** 2).sum() for k in arms)
        df = sum(n[(*cell, k)] - 1 for k in arms)
        sig[cell] = np.sqrt(ss / df) * stats.t.ppf(1 - a / 2, df) / stats.norm.ppf(1 - a / 2)
    rows = []
    for c in comps:
        if previous and previous[c.name]["verdict"] != "open":
            rows.append(previous[c.name])
            continue
        arms = y[(c.model, c.task)]
        est = sum(w * arms[k][:n[(c.model, c.task, k)]].mean() for k, w in c.coefs)
        t = 1 / sum(w**2 / n[(c.model, c.task, k)] for k, w in c.coefs)
        rad = sig[(c.model, c.task)] * np.sqrt((t + r) * (np.log1p(t / r) + L)) / t
        rows.append({"name": c.name, "est": est, "lower": est - rad, "upper": est + rad, "t": t,
                     "sigma": sig[(c.model, c.task)], "verdict": dec.classify(est - rad, est + rad, delta)})
    return rows


def old_allocate(comps, rows, n, cost, slots, alpha, delta):
    """Its allocator: the arm whose next seed closes the most open comparisons per hour, toward the
    effective seeds at which the estimate would close."""
    a = alpha / len(comps)
    L = 2 * np.log(1 / a)
    r = 4.0 / (L + np.log(1 + L))
    by = {row["name"]: row for row in rows}
    open_ = [c for c in comps if by[c.name]["verdict"] == "open"]
    ts = np.geomspace(0.1, 1e5, 400)
    need = {}
    for c in open_:
        row = by[c.name]
        gap = max(abs(row["est"]), delta - abs(row["est"]))
        fits = row["sigma"] * np.sqrt((ts + r) * (np.log1p(ts / r) + L)) / ts <= gap
        need[c.name] = ts[np.argmax(fits)] if fits.any() else np.inf
    planned, added = dict(n), {}
    for _ in range(slots):
        score = {}
        for c in open_:
            cur = {k: planned[(c.model, c.task, k)] for k, _ in c.coefs}
            t = 1 / sum(w**2 / cur[k] for k, w in c.coefs)
            for k, _ in c.coefs:
                t1 = 1 / sum(w**2 / (cur[j] + (j == k)) for j, w in c.coefs)
                gain = min((t1 - t) / max(need[c.name] - t, 1e-9), 1.0) if np.isfinite(need[c.name]) else 0.0
                arm = (c.model, c.task, k)
                score[arm] = score.get(arm, 0.0) + gain / cost[arm]
        score = {arm: s for arm, s in score.items() if s > 0}
        if not score:
            break
        best = max(sorted(score), key=score.get)
        planned[best] += 1
        added[best] = added.get(best, 0) + 1
    return added


def costs(y: dict) -> dict:
    """arm -> ArmCost in baseline runs: training as measured, the final eval and an eval-only
    attempt's setup per task (EVAL, SETUP)."""
    return {(m, t, k): ed.ArmCost(train=COST.get(k, 1.0), eval=EVAL[t], setup=SETUP[t])
            for (m, t), arms in y.items() for k in arms}


def sweep(comps, y, method: str, wave: int, delta: float, cap: float, most: int, rng
          ) -> tuple[list[dict], float, int, dict, list]:
    """One --decide run on simulated scores: (rows, core-hours, runs, the design's m per cell,
    [(core-h spent, share decided)] after each wave). `rng` draws the re-evals' sampling noise."""
    arm_cost = costs(y)
    cost = {arm: c.train for arm, c in arm_cost.items()}
    n = dict.fromkeys(cost, 2)
    first = dict(n)
    path: list[tuple[float, float]] = []  # (core-h spent, share decided) after every wave

    def spent(seeds: dict) -> float:
        """Core-h of `seeds` runs per arm: training, the first wave's eval-only re-evals, the
        later seeds' evals at m in their own attempts."""
        m = lambda arm: (design or {}).get(arm[:2], 1)  # noqa: E731
        return HOURS_PER_RUN * sum(c.train * seeds[arm] + first[arm] * c.reeval(m(arm))
                                   + (seeds[arm] - first[arm]) * (c.new_seed(m(arm)) - c.train)
                                   for arm, c in arm_cost.items())

    sequence, pairing, *rest = method.split("-") if method != "old" else ("old", "")
    design: dict | None = None if rest == ["design"] else {}
    scores_of = {cell: {k: v["scores"] for k, v in arms.items()} for cell, arms in y.items()}
    previous = None
    while True:
        if method == "old":
            rows = old_decide(comps, scores_of, n, ALPHA, delta, previous)
        else:
            scores = {cell: {k: dict(enumerate(v[:n[(*cell, k)]])) for k, v in arms.items()}
                      for cell, arms in scores_of.items()}
            rows, _ = dec.decide(comps, scores, alpha=ALPHA, delta=delta, previous=previous, method=pairing,
                                 target=most, sequence=sequence)
        previous = {r["name"]: r for r in rows}
        if design is None:
            # after wave 0, from its noise and the costs: m per cell, then every run there at m > 1
            # is evaluated again and the wave decided on those scores
            beta = {(mo, t, k): v["sampling"][0] ** 2 + v["sampling"][1] ** 2  # a run's binomial variance
                    for (mo, t), arms in y.items() for k, v in arms.items()}
            run_var = {(mo, t, k): float(np.var(v[:n[(mo, t, k)]], ddof=1))
                       for (mo, t), arms in scores_of.items() for k, v in arms.items()}
            chosen = ed.choose(comps, rows, n, arm_cost, beta, alpha=ALPHA, delta=delta, most=most,
                               method=pairing, sequence=sequence, run_var=run_var)
            design = {cell: d["multiplier"] for cell, d in chosen.items()}
            scores_of = reevaluate(y, design, rng)
            cost = {arm: c.new_seed(design.get(arm[:2], 1)) for arm, c in arm_cost.items()}
            previous = None  # as in --decide: wave 0's rows at m = 1 were planning only
            continue
        path.append((spent(n), float(np.mean([r["verdict"] != "open" for r in rows]))))
        runs = sum(n.values())
        slots = min(wave, int(cap * len(n)) - runs)
        if all(r["verdict"] != "open" for r in rows) or slots <= 0:
            break
        if method == "old":
            added = old_allocate(comps, rows, n, cost, slots, ALPHA, delta)
        else:
            added, _ = dec.allocate(comps, rows, n, cost, slots, alpha=ALPHA, delta=delta, most=most, method=pairing,
                                    sequence=sequence)
        added = {arm: k for arm, k in added.items() if n[arm] + k <= most}
        if not added:
            break
        for arm, k in added.items():
            n[arm] += k
    return rows, spent(n), runs, design, path


def score(rows, theta: np.ndarray, delta: float) -> dict:
    v = np.array([r["verdict"] for r in rows])
    sign = np.where(np.array([r["lower"] for r in rows], float) > 0, 1.0, -1.0)
    real, null, sig = np.abs(theta) >= delta, theta == 0, v == "significant"
    return {"decided": float((v != "open").mean()),
            "recall": float((sig & real & (sign == np.sign(theta))).sum() / max(real.sum(), 1)),
            "false_sig": float((sig & (null | (sign != np.sign(theta)))).any()),
            "false_equiv": float(((v == "equivalent") & real).any())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--wave", type=int, default=16)
    ap.add_argument("--delta", type=float, default=0.02)
    ap.add_argument("--caps", type=float, nargs="+", default=[32], help="mean seeds per arm the sweep may spend")
    ap.add_argument("--most", type=int, default=None, help="seed cap per arm (default: 2x the mean cap)")
    ap.add_argument("--noise", type=float, nargs="+", default=[1.0], help="per-run sd multipliers")
    ap.add_argument("--scenarios", nargs="+", default=["planted", "null", "hetero"])
    ap.add_argument("--methods", nargs="+", default=["old", "t-unpaired", "t-paired", "betting-paired"],
                    help="old, or SEQUENCE-PAIRING with SEQUENCE t|betting and PAIRING paired|unpaired")
    args = ap.parse_args()
    table = Table(title=f"--decide methods, {args.reps} replicates, δ = {args.delta}, FWER α = {ALPHA}")
    cols = ("scenario", "noise", "cap", "method", "runs", "core-h", "decided", "per core-h", "at old's core-h",
            "recall", "false sig", "false equiv", "m code/math/logic", "s")
    old_hours: dict = {}  # (scenario, noise, cap, replicate) -> core-h the old method spent there
    for col in cols:
        table.add_column(col, justify="left" if col in ("scenario", "method") else "right", no_wrap=True)
    for scenario in args.scenarios:
        mu = truths(scenario == "planted")
        comps = dec.comparisons({cell: list(arms) for cell, arms in mu.items()})
        theta = np.round([sum(w * mu[(c.model, c.task)][k] for k, w in c.coefs) for c in comps], 12)
        for scale in args.noise:
            for cap in args.caps:
                most = args.most or int(2 * cap)
                for method in args.methods:
                    rng, t0, acc = np.random.default_rng(0), time.perf_counter(), []
                    for rep in range(args.reps):
                        y = draw(mu, scale, scenario == "hetero", most, rng)
                        rows, hours, runs, design, path = sweep(comps, y, method, args.wave, args.delta, cap, most,
                                                                np.random.default_rng([1, rep]))
                        if method == "old":
                            old_hours[(scenario, scale, cap, rep)] = hours
                        at = old_hours.get((scenario, scale, cap, rep))
                        acc.append({**score(rows, theta, args.delta), "hours": hours, "runs": runs,
                                    "at_old": max([d for h, d in path if h <= at + 1e-9] or [0.0]) if at else np.nan,
                                    **{f"m_{t}": design.get(("sim", t), 1) for t in SD}})
                    m = {k: np.mean([a[k] for a in acc]) for k in acc[0]}
                    row = [scenario, f"{scale:g}", f"{cap:g}", method, f"{m['runs']:.0f}", f"{m['hours']:.2f}",
                           f"{m['decided']:.1%}", f"{m['decided'] / m['hours']:.1%}",
                           "-" if np.isnan(m["at_old"]) else f"{m['at_old']:.1%}", f"{m['recall']:.1%}",
                           f"{m['false_sig']:.1%}", f"{m['false_equiv']:.1%}",
                           "/".join(f"{m[f'm_{t}']:.1f}" for t in SD), f"{time.perf_counter() - t0:.0f}"]
                    print(*row, sep="\t", flush=True)  # a long run shows its rows as they come
                    table.add_row(*row)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
