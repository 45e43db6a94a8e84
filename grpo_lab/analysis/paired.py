"""Contrasts paired over seeds and test problems, from the per-problem eval records.

Every arm of a (model, task) evaluates the same test problems (trainer/setup.py: EVAL_SEED), so
a run's score is a row Y_a[s, :] of pass rates over one shared list of problems. The model, per
arm a, seed s, problem p:

    Y_a[s, p] = μ_a + u_p + v_ap + w_as + e_asp

u_p is a problem's difficulty (shared by all arms: it cancels in any contrast Σ c_a = 0), v_ap
how the arm fares on that problem beyond its mean (the arm-by-problem effect: what a different
test set would change), w_as the run's training randomness, e_asp the seed-by-problem residual
(finite eval samples included). For θ = Σ_a c_a μ_a, the estimate θ̂ = Σ_a c_a Ȳ_a has

    Var(θ̂) = Σ_a c_a² (σ²_w,a + σ²_e,a / P) / n_a   (seeds: training randomness, given the test set)
            + Var_p(Σ_a c_a v_ap) / P                  (problems: the finite eval set)

estimated by the method of moments: the seed part from the spread of each arm's seed means
m_as = mean_p Y_a[s, p]; the problem part from the spread over problems of the contrast of
column means d_p = Σ_a c_a Ȳ_a[·, p], less the residual it also carries (Σ_a c_a² σ̂²_e,a / n_a),
floored at 0. When every arm ran the same seed indices, the seed part is taken from the per-seed
contrasts Σ_a c_a m_as instead: arms of one seed index share prompt order and sampling streams
(common random numbers), and pairing keeps whatever correlation that leaves. Degrees of freedom:
Welch–Satterthwaite over the parts. `population=False` drops the problem part (the verdict is
then about this test set, as the seed-only analysis in interactions.py is).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from grpo_lab.analysis.interactions import set_key
from grpo_lab.rundir import RunDir
from grpo_lab.spec.arm import arm_label


@dataclass(frozen=True)
class Estimate:
    est: float
    se: float
    df: float
    var_seed: float  # seed part of Var(est)
    var_problem: float  # problem part of Var(est)
    n: int  # seeds behind it (the smallest arm)


def two_way(Y: np.ndarray) -> tuple[float, float]:
    """(variance of one seed's problem-mean, seed-by-problem residual variance) of one arm's
    seeds x problems matrix: var_s(m_s) and Σ r² / ((n−1)(P−1)), r the two-way residual."""
    n, P = Y.shape
    if n < 2:
        return np.nan, np.nan
    r = Y - Y.mean(1, keepdims=True) - Y.mean(0, keepdims=True) + Y.mean()
    return float(Y.mean(1).var(ddof=1)), float((r**2).sum() / ((n - 1) * max(P - 1, 1)))


def _seed_part(arms: list[np.ndarray], seeds: list[tuple], c: np.ndarray) -> tuple[float, float]:
    """(variance, df) of the seed part: paired over seed indices when all arms share them."""
    n = np.array([len(Y) for Y in arms], float)
    if len(set(seeds)) == 1 and n[0] >= 2:
        d = c @ np.stack([Y.mean(1) for Y in arms])
        return float(d.var(ddof=1) / n[0]), n[0] - 1
    w = np.array([c_a**2 * two_way(Y)[0] / len(Y) for c_a, Y in zip(c, arms)])
    if not np.all(np.isfinite(w)):
        return np.nan, 0.0
    denom = float(np.sum(w**2 / (n - 1)))
    return float(w.sum()), float(w.sum() ** 2 / denom) if denom > 0 else np.inf


def contrast(arms: list[np.ndarray], coefs, seeds: list[tuple] | None = None,
             population: bool = True) -> Estimate:
    """θ̂ = Σ_a c_a Ȳ_a over arms' seeds x problems matrices (same problem columns), with its
    standard error and degrees of freedom (see the module docstring)."""
    c = np.asarray(coefs, float)
    seeds = seeds or [tuple(range(len(Y))) for Y in arms]
    est = float(sum(c_a * Y.mean() for c_a, Y in zip(c, arms)))
    var_s, df_s = _seed_part(arms, seeds, c)
    var_p, df_p = 0.0, np.inf
    P = arms[0].shape[1]
    if population and P >= 2:
        d = sum(c_a * Y.mean(0) for c_a, Y in zip(c, arms))
        resid = sum(c_a**2 * two_way(Y)[1] / len(Y) for c_a, Y in zip(c, arms) if len(Y) >= 2)
        var_p, df_p = max(float(d.var(ddof=1)) - resid, 0.0) / P, P - 1.0
    var = var_s + var_p
    parts = [(v, f) for v, f in ((var_s, df_s), (var_p, df_p)) if v > 0]
    df = var**2 / sum(v**2 / f for v, f in parts) if parts else np.nan
    return Estimate(est, float(np.sqrt(var)), float(df), var_s, var_p, int(min(len(Y) for Y in arms)))


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
