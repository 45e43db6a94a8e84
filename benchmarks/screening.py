"""`sweep --screen` against the fixed design and `--decide`, side by side on the same simulated worlds.

    python benchmarks/screening.py [--reps 10 --cases mixed spread skew20 --budget 6 --wave 16]

The worlds and the four designs are grpo_lab/analysis/screen_sim.py's: simulate.py's ten_tricks
sweep (3 tasks x 14 arms, K = 45, δ = 0.02, α = 0.05) with each run's eval curve (240 steps, an
eval every 10, the curve form of analysis/curves.py, some arms slower or faster to the same final
law); screening on rungs 1/4 and 1/2 with analysis/screening.screen (what `sweep --screen` calls)
at 4 seeds an arm, α = 0.05 for its drops; the fixed design and --decide from 2 seeds, α = 0.05 for
their labels; a dropped arm's comparisons stay open. Every design sees the same world in a replicate.

Columns: wrong drop = share of replicates dropping an arm within δ of its task's best (healthy:
its pass@1 over runs that do not collapse, the rule's estimand; mean: over all runs); false sig /
false equiv as benchmarks/decide.py (family-wise, against each label's estimand); drops = arms
dropped (of 42); decided = share of the 45 with a pass@1 label; recall = share of the real effects
found with their sign; core-h = mean spent; decided/core-h and recall/core-h = mean decided
comparisons (recalled effects) over mean core-h; vs decide = decided/core-h over --decide's.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from grpo_lab.analysis import screen_sim as ss
from grpo_lab.analysis import screening as scr
from grpo_lab.analysis import simulate as sim
from grpo_lab.analysis.contrast import contrasts
from grpo_lab.analysis.rule import DecisionRule

CASES = ("mixed", "spread", "skew20", "collapse", "gaussian")


def rows(case: str, got: dict[str, list], reps: int) -> list[list[str]]:
    """One row per design from its replicates [(Outcome, Errors)]."""
    base = None
    out = []
    for design in ss.DESIGNS:
        runs = got[design]
        hours = float(np.mean([o.hours for o, _ in runs]))
        decided = float(np.mean([e.decided for _, e in runs])) * 45
        found = [e.recall for _, e in runs if not np.isnan(e.recall)]
        recall = float(np.mean(found)) if found else float("nan")
        per_h = decided / hours
        base = per_h if design == "decide" else base
        out.append([case, design, f"{np.mean([o.wrong_drop for o, _ in runs]):.1%}",
                    f"{np.mean([o.wrong_drop_mean for o, _ in runs]):.1%}",
                    f"{np.mean([e.false_sig for _, e in runs]):.1%}", f"{np.mean([e.false_equiv for _, e in runs]):.1%}",
                    f"{np.mean([len(o.drops) for o, _ in runs]):.1f}", f"{decided / 45:.1%}",
                    "-" if np.isnan(recall) else f"{recall:.1%}", f"{hours:.2f}", f"{per_h:.1f}",
                    "-" if np.isnan(recall) else f"{recall / hours:.2f}", per_h])
    for r in out:  # from the unrounded rates: --decide's own row reads 1.00x
        r[-1] = f"{r[-1] / base:.2f}x" if base else "-"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--cases", nargs="+", default=["mixed", "spread", "skew20"], choices=CASES)
    ap.add_argument("--budget", type=float, default=6.0)
    ap.add_argument("--wave", type=int, default=16)
    ap.add_argument("--screen-seeds", type=int, default=ss.SCREEN_START)
    ap.add_argument("--inflate", type=float, default=scr.INFLATE)
    ap.add_argument("--no-observed", action="store_true", help="drop on the predicted gap alone")
    args = ap.parse_args()
    rule, screen = DecisionRule(), scr.ScreenRule(inflate=args.inflate, observed=not args.no_observed)
    comps = contrasts({(sim.MODEL, t): list(sim.ARMS) for t in sim.TASKS})
    table = Table(title=f"--screen vs --decide vs fixed: {args.reps} replicates, rungs 1/4, 1/2, {args.screen_seeds} "
                        f"screened seeds, inflate {args.inflate:g}, observed gap {'on' if screen.observed else 'off'}, "
                        f"{args.budget:g} core-h, waves of {args.wave}")
    cols = ("case", "design", "wrong drop", "wrong drop (mean)", "false sig", "false equiv", "drops", "decided",
            "recall", "core-h", "decided/core-h", "recall/core-h", "vs decide")
    for col in cols:
        table.add_column(col, justify="left" if col in ("case", "design") else "right", no_wrap=True)
    for case in args.cases:
        t0, got = time.perf_counter(), {d: [] for d in ss.DESIGNS}
        for rep in range(args.reps):
            out, worlds = ss.replicate(case, rule, screen, np.random.default_rng([rep, CASES.index(case)]),
                                       budget=args.budget, wave=args.wave, screen_seeds=args.screen_seeds)
            truth = sim.truths(comps, {(sim.MODEL, t): w.law for t, w in worlds.items()}, rule.delta)
            for d, o in out.items():
                got[d].append((o, sim.errors(o.verdicts, truth, rule.delta)))
            print(f"# {case} replicate {rep + 1}: {time.perf_counter() - t0:.0f} s", flush=True)
        for cells in rows(case, got, args.reps):
            print(*cells, sep="\t", flush=True)
            table.add_row(*cells)
        table.add_section()
    Console(width=220).print(table)


if __name__ == "__main__":
    main()
