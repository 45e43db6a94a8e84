"""Two CPU runs side by side: each on every core (torch's default) or on its share of them (what the
local runner now sets through OMP_NUM_THREADS), printed as a table.

    python benchmarks/cpu_threads.py [--model smollm2-135m] [--rounds 2] [--passes 4] [--workers 2]

Each side starts `--workers` processes at once (as `grpo-lab sweep` starts its workers), each
loading the model and timing `--passes` training passes (forward + backward of 8 sequences of 160
tokens, about one GRPO micro-batch of the SmolLM2 config) after a warm-up; the sides alternate A B A
B over `--rounds`. A process's time is the median of its passes; the table gives the median over
the processes of a side and the throughput (passes a second over all processes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

WORKER = """
import json, statistics, sys, time, torch
from grpo_lab.models import load_card, load_model
torch.manual_seed(0)
model, _ = load_model(load_card(sys.argv[1]), [], torch.device("cpu"), torch.float32)
ids = torch.randint(0, 1000, (8, 160))
times = []
for i in range(int(sys.argv[2]) + 1):
    t = time.perf_counter()
    model(input_ids=ids).logits.float().mean().backward()
    times.append(time.perf_counter() - t)
print(json.dumps({"threads": torch.get_num_threads(), "pass_s": statistics.median(times[1:])}))
"""


def side(model: str, passes: int, workers: int, threads: int | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, model, str(passes)], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(workers)]
    out = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    return {"threads": out[0]["threads"], "pass_s": statistics.median(o["pass_s"] for o in out),
            "wall_s": time.perf_counter() - start, "rate": sum(1 / o["pass_s"] for o in out)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    share = max(1, (os.cpu_count() or 1) // a.workers)
    sides = {"every core each (torch default)": None, f"{share} thread(s) each (the runner's share)": share}
    table = Table(title=f"{a.workers} {a.model} training processes at once on {os.cpu_count()} cores")
    for col in ("round", "side", "threads", "s a pass (median)", "passes/s, all processes"):
        table.add_column(col)
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(a.rounds):
        for name, threads in sides.items():
            got = side(a.model, a.passes, a.workers, threads)
            rates[name].append(got["rate"])
            table.add_row(str(r + 1), name, str(got["threads"]), f"{got['pass_s']:.2f}", f"{got['rate']:.3f}")
    Console().print(table)
    default, shared = (statistics.median(v) for v in rates.values())
    Console().print(f"the runner's share: {shared / default:.2f}x the passes a second of torch's default")


if __name__ == "__main__":
    main()
