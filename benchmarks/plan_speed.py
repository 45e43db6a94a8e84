"""How fast a large matrix plans: expand + estimate ~100k cells (target: under 2 s).

    python benchmarks/plan_speed.py [--cells 100000]

The spec is generated: the tiny model on three tasks, the baseline, every catalog trick alone and
every pair of twelve of them, and as many seeds as it takes to reach --cells. Expansion resolves
each (model, task, trick set) once and copies it per seed, so seeds are nearly free.
"""

from __future__ import annotations

import argparse
import math
import time

from grpo_lab.spec.matrix import expand, parse_matrix
from grpo_lab.spec.model_cards import load_hardware
from grpo_lab.spec.plan import make_plan
from grpo_lab.spec.tricks import load_catalog


def big_spec(cells: int) -> dict:
    names = list(load_catalog())
    tricks = ["baseline", {"singles": names}, {"pairs": names[:12]}]
    sets = 1 + len(names) + 12 * 11 // 2
    return {"name": "plan-speed", "models": ["tiny"], "tasks": ["math", "code", "logic"],
            "seeds": list(range(math.ceil(cells / (3 * sets)))), "tricks": tricks}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=100_000)
    args = ap.parse_args()
    load_hardware("cpu")  # file reads and imports are not what is measured
    data = big_spec(args.cells)
    t0 = time.perf_counter()
    spec = parse_matrix(data)
    t1 = time.perf_counter()
    cells = expand(spec)
    t2 = time.perf_counter()
    plan = make_plan(spec)  # expands again, then estimates and collects warnings
    t3 = time.perf_counter()
    groups = len(spec.trick_sets()) * len(spec.tasks)
    print(f"{len(cells):,} cells ({groups} distinct configs x {len(spec.seeds)} seeds)")
    print(f"parse {t1 - t0:.2f}s  expand {t2 - t1:.2f}s  plan (expand + estimate + warnings) {t3 - t2:.2f}s")
    print(f"total {plan.total:,.1f} {plan.hardware.unit}; {len(plan.warnings)} trick sets with same-dimension pairs")
    print("target: plan under 2 s:", "met" if t3 - t2 < 2 else "NOT met")


if __name__ == "__main__":
    main()
