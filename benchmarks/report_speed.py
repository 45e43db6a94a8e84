"""How fast the comparison report builds from a large sweep (target: under 30 s in total).

    python benchmarks/report_speed.py [--runs 10000] [--steps 200] [--out /tmp/report-speed]

Synthetic frames shaped like the analysis output: 2 models x 3 tasks x 56 trick sets (baseline,
10 singles, 45 pairs) x as many seeds as it takes to reach --runs, each run logging --steps steps.
Only the report is timed (the analysis has its own benchmark); frame generation is not.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from pathlib import Path

import numpy as np
import polars as pl

from grpo_lab.report import write_files
from grpo_lab.report.figures import (
    FigureLimits,
    choose_sets,
    curve_images,
    heatmap_images,
    length_images,
    stability_images,
)
from grpo_lab.report.inputs import ReportData
from grpo_lab.report.sections import Parts, TableLimits, build_document
from grpo_lab.report.verdicts import VerdictPolicy, run_stats, verdict_table

MODELS, TASKS = ["qwen-7b", "llama-8b"], ["math", "code", "logic"]
SINGLES = [f"trick{i}" for i in range(10)]
SETS = ["baseline", *SINGLES, *("+".join(p) for p in itertools.combinations(SINGLES, 2))]


def make_runs(n_runs: int, rng: np.random.Generator) -> pl.DataFrame:
    cells = list(itertools.product(MODELS, TASKS, SETS))
    seeds = math.ceil(n_runs / len(cells))
    rows = [(m, t, s, seed) for m, t, s in cells for seed in range(seeds)][:n_runs]
    n = len(rows)
    model, task, tricks, seed = (list(c) for c in zip(*rows))
    return pl.DataFrame({
        "model": model, "task": task, "tricks": tricks, "seed": seed,
        "run_id": [f"r{i:06d}" for i in range(n)], "status": ["finished"] * n,
        "pass@1": rng.uniform(0.3, 0.7, n), "pass@1_best": rng.uniform(0.3, 0.7, n),
        "pass@k": rng.uniform(0.5, 0.9, n), "delta_pass@1": rng.normal(0, 0.02, n),
        "reward_final": rng.uniform(0.2, 0.8, n), "reward_auc": rng.uniform(0.2, 0.8, n),
        "steps_to_90": rng.uniform(50, 150, n), "oscillation": rng.uniform(0, 0.1, n),
        "length_slope": rng.normal(0.2, 0.1, n), "length_ratio": rng.uniform(0.8, 3.0, n),
        "alarms": rng.poisson(0.1, n), "alarm_kinds": [""] * n, "collapsed": rng.random(n) < 0.01,
        "gpu_hours": rng.uniform(1.0, 2.0, n), "cost_per_effective_sample": rng.uniform(1e-6, 3e-6, n),
        "effective_samples": rng.uniform(1e5, 2e5, n), "sampling_share": rng.uniform(0.4, 0.7, n),
    })


def make_steps(run_ids: list[str], n_steps: int, rng: np.random.Generator) -> pl.DataFrame:
    n = len(run_ids) * n_steps
    step = np.tile(np.arange(n_steps), len(run_ids))
    reward = 0.2 + 0.5 * (1 - np.exp(-step / 60)) + rng.normal(0, 0.03, n)
    evals = np.where(step % 20 == 0, reward * 0.8, np.nan)
    return pl.DataFrame({
        "run_id": np.repeat(np.array(run_ids), n_steps), "step": step, "reward/mean": reward,
        "eval/pass@1": evals, "length/mean": 200 + step * rng.uniform(0, 2, n),
        "entropy/mean": rng.uniform(0.5, 2, n), "kl/mean": rng.uniform(0, 0.1, n),
        "diversity/unique_answer_ratio": rng.uniform(0.5, 1, n),
    }).with_columns(pl.col("eval/pass@1").fill_nan(None))


def make_analysis(runs: pl.DataFrame, rng: np.random.Generator) -> tuple[pl.DataFrame, pl.DataFrame]:
    keys = ["model", "task", "tricks"]
    sets = runs.select(keys).unique().sort(keys).filter(pl.col("tricks") != "baseline")
    n = sets.height
    effect = rng.normal(0.01, 0.02, n)
    effects = sets.with_columns(n=pl.lit(30), effect=effect, ci_low=effect - 0.01,
                                ci_high=effect + 0.01, p_value=rng.uniform(0, 1, n))
    pairs = sets.filter(pl.col("tricks").str.contains("+", literal=True))
    m = pairs.height
    inter = rng.normal(0, 0.02, m)
    verdict = np.where(inter < -0.03, "negative_interaction",
                       np.where(inter > 0.03, "synergy", "additive"))
    interactions = pairs.with_columns(
        n_tricks=pl.lit(2), n_seeds=pl.lit(30), expected=rng.normal(0.02, 0.01, m),
        observed=rng.normal(0.02, 0.02, m), interaction=inter, ci_low=inter - 0.01,
        ci_high=inter + 0.01, p_value=rng.uniform(0, 1, m), q_value=rng.uniform(0, 1, m),
        p_holm=rng.uniform(0, 1, m), best_single=pl.col("tricks").str.split("+").list.first(),
        best_single_effect=rng.normal(0.01, 0.01, m), verdict=verdict,
        seeds_needed=pl.lit(12), warnings=pl.lit(""))
    return effects, interactions


def make_data(n_runs: int, n_steps: int) -> ReportData:
    rng = np.random.default_rng(0)
    runs = make_runs(n_runs, rng)
    steps = make_steps(runs["run_id"].to_list(), n_steps, rng)
    effects, interactions = make_analysis(runs, rng)
    hit = np.tile(runs.sample(fraction=0.05, seed=0)["run_id"].to_numpy(), 2)  # 2 events each
    events = pl.DataFrame({"run_id": hit, "step": rng.integers(0, n_steps, len(hit)),
                           "kind": rng.choice(["reward_cliff", "kl_spike", "repetition"], len(hit)),
                           "value": rng.normal(0, 1, len(hit))})
    costs = {"unit": "gpu-hours", "by_phase": {"sampling": 9000.0, "training": 5000.0, "eval": 1000.0},
             "total": 15000.0, "wasted": 700.0, "price_per_gpu_hour": 2.0,
             "split": {"main matrix": 9000.0, "search and reruns": 2200.0, "sampling and eval": 3800.0},
             "cost_per_effective_sample": 2e-6}
    meta = {"sweep": "report-speed", "metric": "pass@1", "commands": ["grpo-lab sweep x.yaml"]}
    return ReportData(runs, steps, effects, interactions, events, costs, {"python": "3"}, meta)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", type=Path, default=Path("/tmp/report-speed"))
    args = ap.parse_args()
    raw = make_data(args.runs, args.steps)
    print(f"{raw.runs.height:,} runs, {raw.steps.height:,} step rows, "
          f"{raw.effects.height} effects, {raw.interactions.height} interactions, "
          f"{raw.events.height} events")
    timings: list[tuple[str, float, float]] = []

    def timed(name, fn, *a):  # type: ignore[no-untyped-def]
        # CPU time beside wall time: on a shared box the wall clock also counts the neighbours.
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn(*a)
        timings.append((name, time.perf_counter() - t0, time.process_time() - c0))
        return result

    limits = FigureLimits()
    data = timed("conform inputs", ReportData, raw.runs, raw.steps, raw.effects, raw.interactions,
                 raw.events, raw.costs, raw.env, raw.meta)
    stats = timed("run stats", run_stats, data.runs)
    chosen = timed("choose trick sets", choose_sets, data, limits)
    verdicts = timed("verdicts", verdict_table, stats, data.effects, data.interactions, VerdictPolicy())
    figures = {
        "curves": timed("plot: reward + pass@1 curves", curve_images, data, chosen, limits),
        "length": timed("plot: length trend", length_images, data, chosen, limits),
        "stability": timed("plot: stability timeline", stability_images, data, limits),
        "interactions": timed("plot: interaction heatmap", heatmap_images, data, limits),
    }
    parts = Parts(data, stats, chosen, verdicts, figures, VerdictPolicy(), TableLimits())
    doc = timed("tables + sections", build_document, parts)
    html_path, _ = timed("render HTML + Markdown, write", write_files, doc, args.out)
    total = sum(t for _, t, _ in timings)
    width = max(len(name) for name, _, _ in timings)
    print(f"{'phase':<{width}}  {'wall s':>7}  {'cpu s':>7}")
    for name, wall, cpu in timings + [("total", total, sum(c for _, _, c in timings))]:
        print(f"{name:<{width}}  {wall:7.2f}  {cpu:7.2f}")
    print(f"index.html {html_path.stat().st_size / 1e6:.1f} MB in {args.out}")
    print("target: report under 30 s:", "met" if total < 30 else "NOT met")


if __name__ == "__main__":
    main()
