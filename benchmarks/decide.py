"""`sweep --decide`'s decision rules on the simulated ten_tricks sweep: errors, decisions and recall.

    python benchmarks/decide.py [--reps 150 --noise 1 2.6 --wave 16 --budget 6 --cases ... --methods ...]

The sweep, its cases and their truths are grpo_lab/analysis/simulate.py's (3 tasks x 14 arms, K = 45,
δ = 0.02, α = 0.05, seed cap 32, the eval design after wave 0 with β estimated from a simulated
per-problem eval, `decide.step` wave after wave until the budget is spent). Each replicate draws one
world per case and runs every method on it (the same seeds, the same re-eval noise).

Methods:
  mean     DecisionRule(estimand="mean"): the contrast of mean pass@1 over all seeds (the default
           before issue 32)
  guard    REFERENCE ONLY, not a rule of grpo_lab: the mean rule's sweep, its final labels
           post-filtered by a collapse guard (issue 32). A "significant" label is kept only once
           (1 − p*)^t ≤ α/K, p* = |θ̂| / ȳ_hi the collapse share that would make a skewed null show
           the lift θ̂ (ȳ_hi the highest arm mean of the comparison, t its seeds); an "equivalent"
           one only once (1 − δ/ȳ_hi)^t ≤ α/K (a collapse mode that moves the mean by δ is
           excluded). Every other label becomes open. Its core-h are the mean rule's.
  healthy  DecisionRule(): the default, pass@1 on the seeds where no run of the comparison
           collapsed, joined to a collapse-rate verdict

Columns: false sig = share of sweeps with a θ = 0 comparison called significant or a wrong sign;
false equiv = a |θ| ≥ δ one called equivalent; false collapse = a collapse label "more"/"fewer"
where θ_c = 0 or of the other sign (family-wise, each label judged against its own estimand's θ;
95% Wilson intervals); decided = share of the 45 with a pass@1 label; recall = share of the real
effects (|θ| ≥ δ on arms that never collapse, where the estimands agree) found with their sign;
core-h = mean spent; m = the eval design's mean multiplier per task.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from grpo_lab.analysis import simulate as sim
from grpo_lab.analysis.rule import DecisionRule
from grpo_lab.analysis.verdict import Verdict

METHODS = ("mean", "guard", "healthy")


def guard(verdicts: list[Verdict], outcomes: dict, alpha: float, delta: float) -> list[Verdict]:
    """The reference guard of the module docstring over a mean-estimand sweep's final verdicts."""
    cut = alpha / len(verdicts)
    out = []
    for v in verdicts:
        arms = outcomes[(v.model, v.task)]
        keys = [k for k, _, _ in v.collapse.counts]
        high = max(np.mean([o.score for o in arms[k].values()]) for k in keys)
        share = min(abs(v.est) / high, 1.0) if v.label == "significant" else min(delta / high, 1.0)
        keep = not v.decided or (1 - share) ** v.seeds <= cut
        out.append(v if keep else v.with_(label="open"))
    return out


def wilson(k: float, n: int) -> tuple[float, float]:
    """95% Wilson interval of a proportion k/n."""
    z = 1.96
    p = k / n
    mid = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return max(mid - half, 0.0), min(mid + half, 1.0)


def replicate(case: str, rep: int, args) -> dict[str, tuple[sim.Errors, float, dict]]:
    """method -> (errors, core-h, design) of one replicate; every method sees the same draws."""
    out = {}
    runs = {"mean": DecisionRule(estimand="mean", delta=args.delta), "healthy": DecisionRule(delta=args.delta)}
    for name, rule in runs.items():
        if name not in args.methods and not (name == "mean" and "guard" in args.methods):
            continue
        s = sim.run_sweep(rule, case, np.random.default_rng([rep, sim.CASES.index(case)]), budget=args.budget,
                          wave=args.wave, scale=args.scale)
        out[name] = (sim.errors(s.verdicts, s.truth, args.delta), s.hours, s.design)
        if name == "mean":
            kept = guard(s.verdicts, s.outcomes, rule.alpha, args.delta)
            out["guard"] = (sim.errors(kept, s.truth, args.delta), s.hours, s.design)
    return out


def row(case: str, method: str, got: list, scale: float, seconds: float) -> list[str]:
    """One table row from a method's replicates [(errors, core-h, design)]."""
    n = len(got)

    def rate(key: str) -> str:
        k = sum(getattr(e, key) for e, _, _ in got)
        lo, hi = wilson(k, n)
        return f"{k / n:.1%} [{lo:.1%}, {hi:.1%}]"

    m = "/".join(f"{np.mean([d[t] for _, _, d in got]):.1f}" for t in sim.TASKS)
    found = [e.recall for e, _, _ in got if not np.isnan(e.recall)]
    recall = f"{np.mean(found):.1%}" if found else "-"  # a case with no real effect has nothing to recall
    return [case, f"{scale:g}", method, rate("false_sig"), rate("false_equiv"), rate("false_collapse"),
            f"{np.mean([e.decided for e, _, _ in got]):.1%}", recall,
            f"{np.mean([h for _, h, _ in got]):.2f}", m, f"{seconds:.0f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=150)
    ap.add_argument("--wave", type=int, default=16, help="runs per added wave")
    ap.add_argument("--budget", type=float, default=6.0, help="core-hours per sweep")
    ap.add_argument("--delta", type=float, default=0.02)
    ap.add_argument("--noise", type=float, nargs="+", default=[1.0], help="per-run sd multipliers")
    ap.add_argument("--cases", nargs="+", default=list(sim.CASES), choices=sim.CASES)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    args = ap.parse_args()
    table = Table(title=f"--decide rules on the simulated ten_tricks sweep: {args.reps} replicates, K = 45, "
                        f"δ = {args.delta}, α = 0.05, cap 32, {args.budget:g} core-h, waves of {args.wave}")
    cols = ("case", "noise", "method", "false sig", "false equiv", "false collapse", "decided", "recall", "core-h",
            "m code/math/logic", "s")
    for col in cols:
        table.add_column(col, justify="left" if col in ("case", "method") else "right", no_wrap=True)
    for scale in args.noise:
        args.scale = scale
        for case in args.cases:
            t0, got = time.perf_counter(), {m: [] for m in args.methods}
            for rep in range(args.reps):
                for method, result in replicate(case, rep, args).items():
                    if method in got:
                        got[method].append(result)
            for method in args.methods:
                cells = row(case, method, got[method], scale, time.perf_counter() - t0)
                print(*cells, sep="\t", flush=True)  # a long run shows its rows as they come
                table.add_row(*cells)
            table.add_section()
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
