"""How well a compute curve fitted on the start of a run predicts its end, on a real sweep.

    python benchmarks/curve_prediction.py SWEEP [--workspace .grpo-lab] [--shares 0.25 0.5] [--axis hours|steps]
                                                [--seeds 3 4 5]

For every finished run of SWEEP (matrices/long_runs.yaml is made for this: 960 steps, an eval
every 20; --seeds keeps only those seeds' runs, a held-out check), the run's eval series is cut at
`share` of its compute and fitted (analysis/curves.py, the code `grpo-lab predict` runs); per arm,
the cut fits predict pass@1 at each run's last compute.
One row per (task, arm, share):

  PI cover    share of the arm's runs whose final eval lies in the 90% prediction interval for one
              more seed (curves.predict on the arm's cut fits, all its seeds)
  PI width    its median width
  form cover  the same for the curve form's own t interval (without the drift form's hull)
  |err| med   median over runs of |own cut fit at C_last − final eval|
  seed sd     sd over the arm's seeds of the final eval (the noise a prediction competes with)
  |ΔA| med    median over runs of |A of the cut fit − A of the run's own full fit|
  A sd        sd over the arm's seeds of the full fits' A

Goals (issue 33): PI cover ≥ 85% overall, |err| med ≤ seed sd, |ΔA| med ≤ A sd. The last row
pools every arm. Runs whose cut has too few evals to fit are counted as "unfit".
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from grpo_lab.analysis import curves
from grpo_lab.api import finished_runs
from grpo_lab.rundir import RunDir


def _runs(sweep: str, workspace: Path, axis: str,
          seeds: list[int] | None = None) -> dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray, float]]]:
    """(task, arm) -> [(C, R, R0)] of the finished runs with a base eval (of `seeds` only, when
    given), on `grpo-lab predict`'s compute axis (a CPU run's CPU time); axis "steps" reads the rows
    without their timings (compute = steps trained)."""
    out: dict[tuple[str, str], list] = {}
    for labels, folder, devices in finished_runs(sweep, workspace, None):
        if seeds is not None and labels["seed"] not in seeds:
            continue
        run = RunDir(folder)
        summary, rows = run.summary(), run.metrics()
        base = (summary.base or {}).get("eval/pass@1") if summary else None
        if base is None:
            continue
        if axis == "steps":
            rows = [{k: v for k, v in r.items() if not k.startswith((curves.WALL, curves.CPU))} for r in rows]
        C, R, _ = curves.run_series(rows, summary, devices)
        if C.size >= 4:
            out.setdefault((labels["task"], labels["tricks"]), []).append((C, R, float(base)))
    return out


def _row(runs, share: float) -> dict:
    cut, full, finals = [], [], []
    for C, R, R0 in runs:
        keep = C <= share * C.max()
        try:
            cut.append((curves.fit_run(C[keep], R[keep], R0), C.max(), R[-1]))
            full.append(curves.fit_run(C, R, R0))
        except ValueError:
            continue
        finals.append(R[-1])
    if len(cut) < 2:
        return {"runs": len(runs), "unfit": len(runs) - len(cut)}
    arm = curves.arm_curve([f for f, _, _ in cut])
    preds = [(curves.predict(arm, c_end).seed, curves.t_interval([g.at(c_end) for g in arm.runs], new=True), y)
             for _, c_end, y in cut]
    return {"runs": len(runs), "unfit": len(runs) - len(cut),
            "cover": [p.lower <= y <= p.upper for p, _, y in preds], "width": [p.upper - p.lower for p, _, _ in preds],
            "form": [f.lower <= y <= f.upper for _, f, y in preds],
            "err": [abs(float(f.at(c_end)) - y) for f, c_end, y in cut],
            "seed_sd": statistics.stdev(finals), "dA": [abs(f.A - g.A) for (f, _, _), g in zip(cut, full)],
            "A_sd": statistics.stdev(g.A for g in full)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("--workspace", type=Path, default=Path(".grpo-lab"))
    ap.add_argument("--shares", type=float, nargs="+", default=[0.25, 0.5])
    ap.add_argument("--axis", choices=["hours", "steps"], default="hours",
                    help="compute axis: device-hours (what `grpo-lab predict` uses) or steps")
    ap.add_argument("--seeds", type=int, nargs="+", help="only these seeds' runs (default: all)")
    args = ap.parse_args()
    arms = _runs(args.sweep, args.workspace, args.axis, args.seeds)
    table = Table(title=f"{args.sweep}: fit on the first share of each run ({args.axis}), predict its end"
                  + (f"; seeds {' '.join(map(str, args.seeds))}" if args.seeds else ""))
    for col in ("task", "arm", "share", "runs", "unfit", "PI cover", "PI width", "form cover", "|err| med", "seed sd",
                "|ΔA| med", "A sd"):
        table.add_column(col)
    for share in args.shares:
        pooled: dict[str, list] = {k: [] for k in ("cover", "width", "form", "err", "dA", "seed_sd", "A_sd")}
        for (task, arm), runs in sorted(arms.items()):
            r = _row(runs, share)
            if "cover" not in r:
                table.add_row(task, arm, f"{share:g}", str(r["runs"]), str(r["unfit"]), *["-"] * 7)
                continue
            for k in pooled:
                pooled[k] += r[k] if isinstance(r[k], list) else [r[k]]
            table.add_row(task, arm, f"{share:g}", str(r["runs"]), str(r["unfit"]), f"{np.mean(r['cover']):.0%}",
                          f"{np.median(r['width']):.3f}", f"{np.mean(r['form']):.0%}", f"{np.median(r['err']):.3f}",
                          f"{r['seed_sd']:.3f}", f"{np.median(r['dA']):.3f}", f"{r['A_sd']:.3f}")
        if pooled["cover"]:
            table.add_row("all", "all", f"{share:g}", str(len(pooled["cover"])), "", f"{np.mean(pooled['cover']):.0%}",
                          f"{np.median(pooled['width']):.3f}", f"{np.mean(pooled['form']):.0%}",
                          f"{np.median(pooled['err']):.3f}", f"{np.median(pooled['seed_sd']):.3f} (median)",
                          f"{np.median(pooled['dA']):.3f}", f"{np.median(pooled['A_sd']):.3f} (median)")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
