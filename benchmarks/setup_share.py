"""A quick-start run's fixed costs against its steps: process start-up (interpreter and imports),
setup (model, tasks, engine), the base eval, the steps, the final eval, each in wall seconds.

Runs the quick start's first cells (tiny model, math, 60 steps) the way a sweep's worker does, as
one `grpo-lab run` process each, on a warm model cache (the warm start is a one-off per machine,
measured apart by the progress lines of its first use), and prints a row per run:

    python benchmarks/setup_share.py [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
STEP_PHASES = ("rollout", "reward", "reference", "advantage", "train", "sync", "checkpoint", "idle")


def quickstart_configs(n: int) -> list[dict]:
    from grpo_lab.spec.matrix import expand, load_matrix

    cells = expand(load_matrix(ROOT / "matrices" / "quickstart.yaml"))[:n]
    return [c.config.model_dump(mode="json") for c in cells]


def measure(config: dict, folder: Path) -> dict[str, float]:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grpo_lab.cli", "run", str(path), "--out", str(folder / "run")],
                   check=True, capture_output=True, cwd=ROOT)
    process = time.perf_counter() - start
    summary = json.loads((folder / "run" / "summary.json").read_text())
    phases = summary["phase_seconds"]
    steps = sum(phases.get(p, 0.0) for p in STEP_PHASES)
    return {"process": process, "start-up": process - summary["wall_seconds"], "setup": phases.get("setup", 0.0),
            "eval": phases.get("eval", 0.0), "steps": steps, "setup / steps": phases.get("setup", 0.0) / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    configs = quickstart_configs(args.runs)
    rows = []
    for i, config in enumerate(configs):
        with tempfile.TemporaryDirectory() as tmp:
            rows.append((f"{'+'.join(config['tricks']) or 'baseline'} s{config['seed']}", measure(config, Path(tmp))))
            print(f"run {i + 1}/{len(configs)} done", file=sys.stderr, flush=True)
    keys = list(rows[0][1])
    print("| run | " + " | ".join(f"{k} (s)" if k != "setup / steps" else k for k in keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for name, m in rows:
        print(f"| {name} | " + " | ".join(f"{m[k]:.2f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
