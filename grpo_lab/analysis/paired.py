"""The per-problem eval records of a sweep as seeds x problems matrices per arm, and the two-way
split of one arm's matrix that analysis/variance.py builds its variance budget from.

Every arm of a (model, task) evaluates the same test problems (trainer/setup.py: EVAL_SEED), so
a run's score is a row Y_a[s, :] of pass rates over one shared list of problems. The model, per
arm a, seed s, problem p:

    Y_a[s, p] = μ_a + u_p + v_ap + w_as + e_asp

u_p is a problem's difficulty (shared by all arms: it cancels in any contrast Σ c_a = 0), v_ap
how the arm fares on that problem beyond its mean (the arm-by-problem effect: what a different
test set would change), w_as the run's training randomness, e_asp the seed-by-problem residual
(finite eval samples included).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from grpo_lab.analysis.interactions import set_key
from grpo_lab.rundir import RunDir
from grpo_lab.spec.arm import arm_label


def two_way(Y: np.ndarray) -> tuple[float, float]:
    """(variance of one seed's problem-mean, seed-by-problem residual variance) of one arm's
    seeds x problems matrix: var_s(m_s) and Σ r² / ((n−1)(P−1)), r the two-way residual."""
    n, P = Y.shape
    if n < 2:
        return np.nan, np.nan
    r = Y - Y.mean(1, keepdims=True) - Y.mean(0, keepdims=True) + Y.mean()
    return float(Y.mean(1).var(ddof=1)), float((r**2).sum() / ((n - 1) * max(P - 1, 1)))


def read_records(folder: Path) -> list[dict]:
    """The per-problem rows of a run's final eval ([] before one)."""
    return (RunDir(folder).problems() or {}).get("rows", [])


def problem_frame(runs: list[tuple[dict, Path]]) -> pl.DataFrame:
    """One row per (run, test problem): model, task, key, seed, uid, y = passes / samples. Each item
    is (labels with model, task, tricks, seed; run folder). Runs without records are left out."""
    rows = [{"model": lab["model"], "task": lab["task"], "tricks": arm_label(lab["tricks"]),
             "seed": int(lab["seed"]), "uid": r["uid"], "y": r["passes"] / r["samples"]}
            for lab, folder in runs for r in read_records(folder)]
    if not rows:
        return pl.DataFrame(schema={"model": pl.String, "task": pl.String, "key": pl.String, "seed": pl.Int64,
                                    "uid": pl.String, "y": pl.Float64})
    df = pl.DataFrame(rows)
    return df.select("model", "task", set_key(pl.col("tricks")).alias("key"), "seed", "uid", "y")


def cell_matrices(frame: pl.DataFrame) -> dict[tuple[str, str], dict[str, tuple[tuple, np.ndarray]]]:
    """(model, task) -> arm key -> (seeds, seeds x problems matrix) over the problems every run of
    the cell evaluated, in one column order."""
    out = {}
    for (model, task), part in frame.partition_by("model", "task", as_dict=True, maintain_order=True).items():
        runs = part.partition_by("key", "seed", as_dict=True)
        uids = sorted(set.intersection(*(set(sub["uid"].to_list()) for sub in runs.values())))
        arms = {}
        for key in sorted({key for key, _ in runs}):
            sub = part.filter(pl.col("key") == key, pl.col("uid").is_in(uids))
            wide = sub.pivot(on="uid", index="seed", values="y", aggregate_function="mean").sort("seed")
            arms[key] = (tuple(wide["seed"].to_list()), wide.select(uids).to_numpy())
        out[(model, task)] = arms
    return out
