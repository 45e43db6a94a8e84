"""The variance budget of a (model, task): where an arm's noise comes from, and the eval size and
seed count that decide a comparison for the fewest device-hours.

Components (paired.py's model, pooled over the cell's arms by their degrees of freedom):

    σ²_w   training randomness: the variance of a run's true test-set mean across seeds
           = var_s(m_s) − σ²_e / P   (the spread of seed means, less the eval noise it carries)
    σ²_e   seed-by-problem residual: finite eval samples and how a run fares on one problem
    σ²_v   arm-by-problem: from each arm's per-problem contrast to the baseline,
           (var_p(d_p) − resid) / 2, the variance of v_ap − v_bp halved

One arm with n seeds on P problems:  Var(ȳ) = σ²_w / n  (seeds)  +  σ²_e / (nP) + σ²_v / P  (eval).
A two-arm comparison:  V(n, P) = 2 (σ²_w + σ²_e / P) / n + 2 σ²_v / P.

It is decided (a δ effect found with power 1−β at level α, or ±δ equivalence shown) once
√V ≤ δ / (z_{1−α/2} + z_{1−β}). A run costs c(P) = c_train + c_eval·P device-hours (c_eval from
the eval phase's share of the runs' hours: eval cost grows with P, training does not). The best
design minimises the comparison's cost 2·n·c(P) over P, with n(P) the smallest seed count that
meets the bound; without the σ²_v term this is the classic P* = √(σ²_e c_train / (σ²_w c_eval)).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from scipy import stats

from grpo_lab.analysis import paired
from grpo_lab.analysis.interactions import BASELINE
from grpo_lab.analysis.paired import two_way
from grpo_lab.rundir import RunDir, Summary

POWER = 0.8
P_GRID = np.unique(np.round(np.geomspace(10, 20_000, 200)).astype(int))


def components(arms: dict[str, tuple[tuple, np.ndarray]]) -> dict[str, float]:
    """σ²_w, σ²_e, σ²_v (and the current P, mean seeds) of one cell's arms: key -> (seeds, Y)."""
    P = next(iter(arms.values()))[1].shape[1]
    seed_vars, resid, dfs = [], [], []
    for _, Y in arms.values():
        if len(Y) >= 2:
            s, e = two_way(Y)
            seed_vars.append(s), resid.append(e), dfs.append(len(Y) - 1)
    w = np.array(dfs, float)
    if not w.size:
        return {"sigma2_w": np.nan, "sigma2_e": np.nan, "sigma2_v": np.nan, "problems": P,
                "seeds": float(np.mean([len(Y) for _, Y in arms.values()]))}
    s2_e = float(np.average(resid, weights=w))
    s2_w = max(float(np.average(seed_vars, weights=w)) - s2_e / P, 0.0)
    vs = []
    if BASELINE in arms:
        base = arms[BASELINE][1]
        for key, (_, Y) in arms.items():
            if key != BASELINE:
                d = Y.mean(0) - base.mean(0)
                vs.append(max(float(d.var(ddof=1)) - s2_e / len(Y) - s2_e / len(base), 0.0) / 2)
    return {"sigma2_w": s2_w, "sigma2_e": s2_e, "sigma2_v": float(np.mean(vs)) if vs else 0.0, "problems": P,
            "seeds": float(np.mean([len(Y) for _, Y in arms.values()]))}


def seeds_for(c: dict, P, delta: float, alpha: float = 0.05, power: float = POWER) -> np.ndarray:
    """Smallest n ≥ 2 with √V(n, P) ≤ δ / (z_{1−α/2} + z_power); inf where no n is enough."""
    target = (delta / (stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))) ** 2
    P = np.asarray(P, float)
    room = target - 2 * c["sigma2_v"] / P
    n = np.where(room > 0, 2 * (c["sigma2_w"] + c["sigma2_e"] / P) / np.where(room > 0, room, 1.0), np.inf)
    return np.maximum(np.ceil(n), 2.0)


def budget(c: dict, hours_train: float, hours_eval: float, delta: float, alpha: float = 0.05) -> dict:
    """The cell's variance budget at its current design (shares of one arm's variance) and the
    design (P*, n*) that minimises device-hours per decided two-arm comparison.
    hours_train / hours_eval: a run's hours outside / inside eval at the current P."""
    P0, n0 = c["problems"], max(c["seeds"], 1.0)
    seed_part = c["sigma2_w"] / n0
    eval_part = c["sigma2_e"] / (n0 * P0) + c["sigma2_v"] / P0
    per_problem = hours_eval / P0
    cost = lambda P: hours_train + per_problem * np.asarray(P, float)  # noqa: E731 (one formula, named)
    n_now = float(seeds_for(c, P0, delta, alpha))
    n_grid = seeds_for(c, P_GRID, delta, alpha)
    total = 2 * n_grid * cost(P_GRID)
    best = int(np.argmin(total))
    return {
        "seeds": n0, "problems": P0, "sd_seed": float(np.sqrt(c["sigma2_w"])), "sd_resid": float(np.sqrt(c["sigma2_e"])),
        "sd_arm_problem": float(np.sqrt(c["sigma2_v"])),
        "share_seed": seed_part / (seed_part + eval_part) if seed_part + eval_part > 0 else np.nan,
        "share_eval": eval_part / (seed_part + eval_part) if seed_part + eval_part > 0 else np.nan,
        "seeds_needed_now": n_now, "hours_now": 2 * n_now * float(cost(P0)),
        "best_problems": int(P_GRID[best]), "best_seeds": float(n_grid[best]), "hours_best": float(total[best]),
        "delta": delta,
    }


def run_hours(folder: Path) -> tuple[float, float]:
    """(hours outside eval, hours in eval) of one finished run, from its summary."""
    summary = RunDir(folder).summary() or Summary()
    by_phase = summary.device_hours_by_phase
    total = summary.device_hours or sum(by_phase.values())
    return total - by_phase.get("eval", 0.0), by_phase.get("eval", 0.0)


def budget_frame(runs: list[tuple[dict, Path]], delta: float = 0.02) -> pl.DataFrame:
    """One `budget` row per (model, task) whose runs wrote per-problem records; each item of
    `runs` is (labels with model, task, tricks, seed; finished run folder)."""
    rows = []
    for (model, task), arms in paired.cell_matrices(paired.problem_frame(runs)).items():
        hours = np.mean([run_hours(f) for lab, f in runs if (lab["model"], lab["task"]) == (model, task)], axis=0)
        rows.append({"model": model, "task": task, **budget(components(arms), hours[0], hours[1], delta)})
    return pl.DataFrame(rows)
