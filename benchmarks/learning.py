"""Does GRPO learn? Runs the shipped tiny configs for several seeds and prints base vs final.

    python benchmarks/learning.py [--tasks math,code,logic] [--seeds 0,1,2] [--parallel 2]

Each run is `grpo-lab run experiments/configs/tiny-<task>.yaml --set seed=S` in its own process
(one CPU thread each, as the tiny model card asks). The score is test pass@1 for math and logic
and the mean unit-test pass rate (eval/reward_mean) for code.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
METRIC = {"math": "eval/pass@1", "code": "eval/reward_mean", "logic": "eval/pass@1"}


def one(task: str, seed: int, out: Path) -> dict:
    cmd = [sys.executable, "-m", "grpo_lab.cli", "run", str(ROOT / f"experiments/configs/tiny-{task}.yaml"),
           "--set", f"seed={seed}", "--out", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    s = json.loads((out / "summary.json").read_text())
    key = METRIC[task]
    return {"task": task, "seed": seed, "metric": key, "base": s["base"][key], "final": s["final"][key],
            "pass@1 base": s["base"]["eval/pass@1"], "pass@1 final": s["final"]["eval/pass@1"],
            "wall": s["wall_seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="math,code,logic")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = Path(args.out or tempfile.mkdtemp(prefix="grpo-learning-"))
    jobs = [(t, int(s)) for t in args.tasks.split(",") for s in args.seeds.split(",")]
    with ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda j: one(j[0], j[1], root / f"{j[0]}-{j[1]}"), jobs))
    table = Table(title="GRPO on the tiny model: held-out test score before and after training")
    for col in ("task", "seed", "metric", "base", "final", "gain (points)", "test pass@1 base -> final", "wall s"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(r["task"], str(r["seed"]), r["metric"], f"{r['base']:.3f}", f"{r['final']:.3f}",
                      f"{100 * (r['final'] - r['base']):+.1f}", f"{r['pass@1 base']:.3f} -> {r['pass@1 final']:.3f}",
                      f"{r['wall']:.0f}")
    Console().print(table)
    (root / "learning.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
