"""How far the plan's estimate is from what runs take, before and after calibration.

    python benchmarks/plan_calibration.py [--steps 4,16,48] [--seeds 2] [--workspace DIR]

Runs a sweep of the tiny model on math at several run lengths (each length its own matrix, so
cells differ in size: the fixed per-run cost and the per-step cost both show), then, for every
finished run, compares its measured device-hours with (a) the FLOPs estimate and (b) the
estimate calibrated from the *other* runs only (leave one out: a plan never sees the run it
prices). Prints one row per run and the median |log(estimate / measured)| of both, as a ratio.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from grpo_lab.execution import registry as reg
from grpo_lab.execution.calibration import measured
from grpo_lab.spec.budget import calibrate, fit_calibration
from grpo_lab.spec.model_cards import load_hardware

BASE = {"levels": 2, "checkpoint_every": 1000,
        "sampling": {"prompts_per_step": 16, "group_size": 8, "max_new_tokens": 6},
        "eval": {"every": 1000, "problems": 32, "samples": 4, "k": [1, 4]}}


def run_sweeps(workspace: Path, steps: list[int], seeds: int) -> None:
    for n in steps:
        spec = {"name": f"calib-{n}", "models": ["tiny"], "tasks": ["math"], "seeds": list(range(seeds)),
                "tricks": ["baseline", {"singles": ["ema_reference"]}], "base": {**BASE, "steps": n},
                "budget": {"hardware": "cpu"}}
        path = workspace / f"calib-{n}.yaml"
        path.write_text(yaml.safe_dump(spec))
        subprocess.run([sys.executable, "-m", "grpo_lab.cli", "sweep", str(path), "--workspace", str(workspace),
                        "--skip-preflight"], check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", default="4,16,48")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--workspace", type=Path, help="reuse (or keep) a workspace; default: a temporary one")
    args = ap.parse_args()
    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="plan-calibration-"))
    workspace.mkdir(parents=True, exist_ok=True)
    run_sweeps(workspace, [int(s) for s in args.steps.split(",")], args.seeds)
    hw = load_hardware("cpu")
    with reg.connect(reg.default_url(workspace))() as session:
        runs = [(r, m) for r in session.query(reg.Run).all() if (m := measured(r, hw)) is not None]
        rows = []
        for i, (run, got) in enumerate(runs):
            others = fit_calibration([m for j, (_, m) in enumerate(runs) if j != i])
            truth = sum(got.phases.values())
            raw, fixed = got.estimate.total, calibrate(got.estimate, others).total
            rows.append((run.run_id[:10], run_steps(run), truth, raw, fixed))
    print(f"{'run':<12}{'steps':>6}{'measured h':>12}{'FLOPs est':>12}{'calibrated':>12}{'FLOPs/meas':>12}{'calib/meas':>12}")
    for rid, steps, truth, raw, fixed in sorted(rows, key=lambda r: r[1]):
        print(f"{rid:<12}{steps:>6}{truth:>12.3g}{raw:>12.3g}{fixed:>12.3g}{raw / truth:>12.2f}{fixed / truth:>12.2f}")
    err = {name: statistics.median(abs(math.log(r[k] / r[2])) for r in rows) for name, k in (("raw", 3), ("cal", 4))}
    print(f"median error factor: FLOPs estimate {math.exp(err['raw']):.2f}x, calibrated {math.exp(err['cal']):.2f}x "
          f"({len(rows)} runs, leave one out)")


def run_steps(run: reg.Run) -> int:
    return json.loads(run.config_json)["steps"]


if __name__ == "__main__":
    main()
