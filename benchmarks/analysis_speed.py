"""How fast the analysis behind a report runs on a large sweep (target: all phases under 30 s).

    python benchmarks/analysis_speed.py [--runs 10000 --steps 200 --read 300]

Synthesises a sweep: 24 (model, task) cells, each with the baseline, 10 single tricks, their 45
pairs and 27 triples (83 trick sets) over as many seeds as it takes to reach --runs; a long step
frame of --steps steps per run (reward, length, loss, advantage std, entropy, KL, diversity,
pass@1 / pass@k every 25 steps) and a few alarm events. Then times each analysis phase, and
reading --read real-sized run folders from disk (metrics.jsonl lines as the trainer writes them),
scaled to --runs: a report built from run folders pays that too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table

from grpo_lab.analysis.interactions import effects, interactions
from grpo_lab.analysis.run_metrics import event_metrics, series_metrics, steps_frame

TRICKS = [f"trick{i}" for i in range(10)]
SETS = ([""] + TRICKS + ["+".join(p) for p in itertools.combinations(TRICKS, 2)]
        + ["+".join(t) for t in itertools.combinations(TRICKS, 3)][:27])
CELLS = [(f"model{m}", task) for m in range(8) for task in ("math", "code", "logic")]


def sweep_runs(n_runs: int) -> pl.DataFrame:
    """One row per run: model, task, tricks, seed, run_id."""
    seeds = math.ceil(n_runs / (len(CELLS) * len(SETS)))
    rows = [(m, t, s, seed) for (m, t), s, seed in itertools.product(CELLS, SETS, range(seeds))][:n_runs]
    runs = pl.DataFrame(rows, schema=["model", "task", "tricks", "seed"], orient="row")
    return runs.with_columns(pl.format("run{}", pl.int_range(pl.len())).alias("run_id"))


def step_frame(runs: pl.DataFrame, steps: int, rng: np.random.Generator) -> pl.DataFrame:
    """Long frame runs x steps of noisy learning curves."""
    R = runs.height
    t = np.tile(np.arange(steps), R)
    gain = np.repeat(rng.uniform(0.1, 0.6, R), steps)
    reward = 0.2 + gain * (1 - np.exp(-t / 40)) + 0.05 * rng.normal(size=R * steps)
    evals = np.where((t + 1) % 25 == 0, reward + 0.03 * rng.normal(size=R * steps), np.nan)
    return pl.DataFrame({
        "run_id": np.repeat(runs["run_id"].to_numpy(), steps), "step": t,
        "reward/mean": reward, "length/mean": 50 + 0.1 * t + rng.normal(size=R * steps),
        "loss/total": 0.01 * rng.normal(size=R * steps), "loss/policy": np.full(R * steps, np.nan),
        "adv/std": 0.8 + 0.05 * rng.random(R * steps), "entropy/mean": 1.0 - 0.002 * t,
        "kl/mean": 0.001 * t, "diversity/unique_answer_ratio": rng.uniform(0.5, 1.0, R * steps),
        "eval/pass@1": evals, "eval/pass@k": np.minimum(evals + 0.2, 1.0),
    }).with_columns(pl.col("eval/pass@1", "eval/pass@k", "loss/policy").fill_nan(None))


def events(runs: pl.DataFrame, rng: np.random.Generator) -> pl.DataFrame:
    """An alarm in about 5% of the runs."""
    hit = runs.filter(pl.Series(rng.random(runs.height) < 0.05))
    kinds = rng.choice(["reward_cliff", "loss_spike", "entropy_collapse"], hit.height)
    return pl.DataFrame({"run_id": hit["run_id"], "step": rng.integers(0, 200, hit.height), "kind": kinds})


def write_folders(root: Path, n: int, steps: int) -> dict[str, Path]:
    """n run folders with a config.json and a metrics.jsonl of ~45 keys per step, like a real run."""
    line = {"reward/mean": 0.5, **{f"metric/{i}": 0.123456789 for i in range(40)}, "length/mean": 20.0,
            "entropy/mean": 1.0, "kl/mean": 0.01, "adv/std": 0.8, "loss/total": 0.01}
    dirs = {}
    for r in range(n):
        folder = root / f"run{r}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"task": ["math"], "eval": {"k": [1, 8]}}))
        evals = {"eval/pass@1": 0.3, "eval/pass@8": 0.6, "eval/math/pass@1": 0.3}
        (folder / "metrics.jsonl").write_text("".join(
            json.dumps({"step": t, **line, **(evals if (t + 1) % 25 == 0 else {})}) + "\n" for t in range(steps)))
        dirs[f"run{r}"] = folder
    return dirs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--read", type=int, default=300, help="run folders to write and read back (0: skip)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    times: dict[str, float] = {}

    t0 = time.perf_counter()
    runs = sweep_runs(args.runs)
    steps, alarms = step_frame(runs, args.steps, rng), events(runs, rng)
    times["synthesise frames (not part of a report)"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    metrics = series_metrics(steps).join(event_metrics(alarms), on="run_id", how="left")
    results = runs.join(metrics, on="run_id").with_columns(pl.col("collapsed").fill_null(False))
    times["run metrics (series + events)"] = time.perf_counter() - t0
    for name, fn in (("effects", effects), ("interactions", interactions)):
        t0 = time.perf_counter()
        out = fn(results, "pass@1")
        times[f"{name} ({out.height} rows)"] = time.perf_counter() - t0

    if args.read:
        with tempfile.TemporaryDirectory() as tmp:
            dirs = write_folders(Path(tmp), args.read, args.steps)
            t0 = time.perf_counter()
            steps_frame(dirs)
            times[f"read run folders (scaled from {args.read})"] = (time.perf_counter() - t0) * args.runs / args.read

    table = Table(title=f"analysis of {runs.height:,} runs x {args.steps} steps ({steps.height:,} step rows)")
    table.add_column("phase")
    table.add_column("seconds", justify="right")
    for name, sec in times.items():
        table.add_row(name, f"{sec:.2f}")
    frames = sum(v for k, v in times.items() if not k.startswith(("synthesise", "read")))
    table.add_row("[bold]analysis of the frames[/]", f"[bold]{frames:.2f}[/]")
    if args.read:
        reading = next(v for k, v in times.items() if k.startswith("read"))
        table.add_row("[bold]... plus reading the run folders[/]", f"[bold]{frames + reading:.2f}[/]")
    Console().print(table)


if __name__ == "__main__":
    main()
