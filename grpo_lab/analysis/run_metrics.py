"""Per-run metrics from a run's step series: convergence, oscillation, pass@k, length trend,
stability (docs/study.md "How the study spends and measures": four metrics read together).

The kernels are pure numpy over the last axis, so one call scores one run (shape (T,)) or R runs
of equal length at once (shape (R, T)); `series_metrics` batches the runs of a long step frame
by length, which keeps 10k runs well under a second. `run_rows` / `run_row` read run folders.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl

from grpo_lab.analysis import collapse
from grpo_lab.rundir import CONFIG, METRICS, SUMMARY, RunDir
from grpo_lab.spec.arm import DEFAULT_TRAINER, arm_label, arm_model

STEP_COLUMNS = ("reward/mean", "reward/std", "reward/group_std", "reward/zero_std_frac",
                "diversity/unique_answer_ratio", "length/mean", "entropy/mean", "kl/mean", "loss/total",
                "loss/policy", "adv/std", "train/grad_norm", "eval/pass@1", "eval/pass@k")
SPIKE_Z = 5.0  # robust z-score above which a step's loss counts as a spike
END_FRAC = 0.1  # share of the run averaged for "initial" and "final" length


def default_window(T: int) -> int:
    """Smoothing window for a T-step run: a tenth of the run, odd, at least 3 (1 when T < 3)."""
    return 1 if T < 3 else max(3, T // 10) | 1


def smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average along the last axis, shrinking at the ends:
    s_t = mean(y[max(0, t−h) : min(T, t+h+1)]),  h = window // 2.  Shape as y."""
    T, h = y.shape[-1], window // 2
    c = np.concatenate([np.zeros(y.shape[:-1] + (1,)), np.cumsum(y, axis=-1)], axis=-1)
    t = np.arange(T)
    lo, hi = np.maximum(t - h, 0), np.minimum(t + h + 1, T)
    return (c[..., hi] - c[..., lo]) / (hi - lo)


def steps_to_fraction(steps: np.ndarray, y: np.ndarray, frac: float = 0.9, window: int | None = None) -> np.ndarray:
    """Steps until the smoothed curve s first reaches s_0 + frac·(s_T − s_0), counted from the
    first step. Measured on the gain, not on frac·s_T: a model that starts at 0.9 of its final
    reward would otherwise have "converged" at step 0. NaN when the run did not gain (s_T ≤ s_0).
    steps, y: (..., T) -> (...)."""
    s = smooth(y, window or default_window(y.shape[-1]))
    s0, sT = s[..., 0], s[..., -1]
    reached = s >= (s0 + frac * (sT - s0))[..., None]
    idx = np.argmax(reached, axis=-1)
    elapsed = np.take_along_axis(steps, idx[..., None], axis=-1)[..., 0] - steps[..., 0]
    return np.where(sT > s0, elapsed, np.nan)


def reward_auc(steps: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Area under the curve over the steps it spans, i.e. the curve's mean level:
    ∫ y dstep / (step_T − step_0) by trapezoids; y_0 for a single step. (..., T) -> (...)."""
    if y.shape[-1] < 2:
        return y[..., 0].astype(float)
    return np.trapezoid(y, steps, axis=-1) / (steps[..., -1] - steps[..., 0])


def final_level(y: np.ndarray, window: int | None = None) -> np.ndarray:
    """Last value of the smoothed curve (the mean of the last window//2 + 1 steps). (..., T) -> (...)."""
    return smooth(y, window or default_window(y.shape[-1]))[..., -1]


def oscillation(y: np.ndarray, window: int | None = None) -> np.ndarray:
    """Std of the curve around its centred moving average, std_t(y_t − s_t), over the steps where
    the whole window fits (h ≤ t < T − h). Detrending by the smoothed curve rather than a line
    keeps the concave rise of a learning curve out of it, and a straight line scores 0: what
    remains is swing faster than the window. NaN when no step has a full window. (..., T) -> (...)."""
    window = window or default_window(y.shape[-1])
    h, T = window // 2, y.shape[-1]
    if T - 2 * h <= 0:
        return np.full(y.shape[:-1], np.nan)
    return np.std((y - smooth(y, window))[..., h : T - h], axis=-1)


def slope(steps: np.ndarray, y: np.ndarray, per: float = 100.0) -> np.ndarray:
    """Least-squares slope of y on step, per `per` steps: per·Σ(x−x̄)(y−ȳ) / Σ(x−x̄)².
    (..., T) -> (...)."""
    x = steps - steps.mean(axis=-1, keepdims=True)
    sxx = (x**2).sum(axis=-1)
    sxy = (x * (y - y.mean(axis=-1, keepdims=True))).sum(axis=-1)
    return per * np.divide(sxy, sxx, out=np.full(sxx.shape, np.nan), where=sxx > 0)


def end_ratio(y: np.ndarray, frac: float = END_FRAC) -> np.ndarray:
    """mean(last n) / mean(first n), n = max(1, ⌈frac·T⌉): how much the quantity grew. (..., T) -> (...)."""
    n = max(1, math.ceil(frac * y.shape[-1]))
    first, last = y[..., :n].mean(axis=-1), y[..., -n:].mean(axis=-1)
    return np.divide(last, first, out=np.full(first.shape, np.nan), where=first != 0)


def spikes(y: np.ndarray, z: float = SPIKE_Z) -> np.ndarray:
    """Steps whose robust z-score |y − median| / (1.4826·MAD) exceeds z; 0 when MAD is 0 (a
    series that is mostly constant has no scale to call anything a spike). (..., T) -> (...)."""
    med = np.median(y, axis=-1, keepdims=True)
    scale = 1.4826 * np.median(np.abs(y - med), axis=-1, keepdims=True)
    big = np.abs(y - med) > z * scale
    return np.where(scale[..., 0] > 0, big.sum(axis=-1), 0)


def explosion(y: np.ndarray) -> np.ndarray:
    """max / median: how far the worst step stood above the typical one (advantage std: an
    explosion). NaN when the median is not positive. (..., T) -> (...)."""
    med = np.median(y, axis=-1)
    return np.divide(y.max(axis=-1), med, out=np.full(med.shape, np.nan), where=med > 0)


# name -> (step-series column, kernel of (steps, values) -> one value per run)
CURVE_METRICS = {
    "reward_final": ("reward/mean", lambda x, y: final_level(y)),
    "reward_auc": ("reward/mean", reward_auc),
    "steps_to_90": ("reward/mean", steps_to_fraction),
    "oscillation": ("reward/mean", lambda x, y: oscillation(y)),
    "length_slope": ("length/mean", slope),
    "length_ratio": ("length/mean", lambda x, y: end_ratio(y)),
    "loss_spikes": ("loss", lambda x, y: spikes(y)),
    "adv_explosion": ("adv/std", lambda x, y: explosion(y)),
}


def with_step_columns(steps: pl.DataFrame) -> pl.DataFrame:
    """The frame with every STEP_COLUMNS column, all-null where it was not logged."""
    return steps.with_columns(pl.lit(None, pl.Float64).alias(c) for c in STEP_COLUMNS if c not in steps.columns)


def _by_length(codes: np.ndarray, x: np.ndarray, y: np.ndarray):
    """Yield (run codes, steps (R, T), values (R, T)) over the finite values of y, runs batched by
    their number of such steps so the kernels see rectangular arrays. `codes` (run index per
    row) and x must be sorted by run, then step."""
    ok = np.isfinite(y)
    codes, x, y = codes[ok], x[ok], y[ok]
    starts = np.flatnonzero(np.diff(codes, prepend=-1))
    counts = np.diff(np.append(starts, codes.size))
    row_len = np.repeat(counts, counts)
    for T in np.unique(counts):
        rows = row_len == T
        yield codes[starts[counts == T]], x[rows].reshape(-1, T), y[rows].reshape(-1, T)


def _last_and_max(codes: np.ndarray, y: np.ndarray, n_runs: int) -> tuple[np.ndarray, np.ndarray]:
    """Per run: its last finite value and its largest (NaN if none); rows sorted by run, then step."""
    ok = np.isfinite(y)
    codes, y = codes[ok], y[ok]
    last, best = np.full(n_runs, np.nan), np.full(n_runs, np.nan)
    if y.size:
        starts = np.flatnonzero(np.diff(codes, prepend=-1))
        ends = np.append(starts[1:], y.size) - 1
        last[codes[starts]] = y[ends]
        best[codes[starts]] = np.maximum.reduceat(y, starts)
    return last, best


def series_metrics(steps: pl.DataFrame) -> pl.DataFrame:
    """One row per run_id of a long step frame (see `steps_frame`): the CURVE_METRICS and the
    final / best pass@1 and pass@k over its evaluations; null where undefined (no such series, no
    gain for steps_to_90). Vectorised: numpy over runs batched by length, no loop over runs."""
    # Integer run codes (dense rank = sorted order of run_id): sorting ints is ~5x faster than strings.
    steps = with_step_columns(steps).select("run_id", "step", (pl.col("run_id").rank("dense") - 1).alias("_run"),
                         pl.coalesce("loss/total", "loss/policy").alias("loss"),
                         *sorted({col for col, _ in CURVE_METRICS.values()} - {"loss"}), "eval/pass@1", "eval/pass@k",
                         ).sort("_run", "step")
    codes, x = steps["_run"].to_numpy(), steps["step"].to_numpy().astype(float)
    run_ids = steps["run_id"].unique().sort()
    columns: dict = {"run_id": run_ids, **{name: np.full(len(run_ids), np.nan) for name in CURVE_METRICS}}
    for col in dict.fromkeys(col for col, _ in CURVE_METRICS.values()):
        y = steps[col].cast(pl.Float64).fill_null(np.nan).to_numpy()
        for runs, xs, ys in _by_length(codes, x, y):
            for name, (of, kernel) in CURVE_METRICS.items():
                if of == col:
                    columns[name][runs] = kernel(xs, ys)
    for k in ("1", "k"):
        y = steps[f"eval/pass@{k}"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        columns[f"pass@{k}"], columns[f"pass@{k}_best"] = _last_and_max(codes, y, len(run_ids))
    return pl.DataFrame(columns).with_columns(pl.col(pl.Float64).fill_nan(None)).with_columns(
        pl.col("loss_spikes").cast(pl.Int64))


def event_metrics(events: pl.DataFrame) -> pl.DataFrame:
    """One row per run_id of a long event frame (run_id, step, kind, ...): alarm count and the
    kinds ('+'-joined, sorted). Whether a run collapsed is analysis/collapse.py's rule, read from
    its summary (summary_fields): alarms also fire on healthy runs."""
    return events.group_by("run_id").agg(
        pl.len().cast(pl.Int64).alias("alarms"),
        pl.col("kind").unique().sort().str.join("+").alias("alarm_kinds"))


def _schema(folder: Path) -> dict:
    """The metrics.jsonl keys to read for a run: STEP_COLUMNS, eval/pass@<largest k> and
    eval/<task>/pass@1 for the k and tasks its config.json names (k = 1, no tasks without one)."""
    cfg = RunDir(folder).config() or {}
    tasks = cfg.get("task") or []
    k = max((cfg.get("eval") or {}).get("k") or [1])
    keys = [c for c in STEP_COLUMNS if c != "eval/pass@k"] + [f"eval/pass@{k}"]
    keys += [f"eval/{t}/pass@1" for t in ([tasks] if isinstance(tasks, str) else tasks)]
    return {"step": pl.Int64, **dict.fromkeys(keys, pl.Float64)}


def _read_metrics(paths: list[Path], schema: dict) -> pl.DataFrame:
    """metrics.jsonl files, only the schema's keys, with a `_path` column. One parallel read; a
    file with a NaN metric (Python's json writes NaN, polars' reader rejects it) makes the
    group go file by file, through the json module where needed."""
    try:
        return pl.read_ndjson(paths, schema=schema, include_file_paths="_path")
    except pl.exceptions.PolarsError:
        parts = []
        for path in paths:
            try:
                df = pl.read_ndjson(path, schema=schema)
            except pl.exceptions.PolarsError:
                rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
                df = pl.from_dicts(rows, schema=schema)
            parts.append(df.with_columns(pl.lit(str(path)).alias("_path")))
        return pl.concat(parts)


def steps_frame(run_dirs: dict[str, Path]) -> pl.DataFrame:
    """Long frame of the step series of runs {run_id: folder}: run_id, step, STEP_COLUMNS (null
    where a run did not log one; eval/pass@k is its largest k), eval/<task>/pass@1. For curves
    and for `series_metrics`. Runs with the same keys are read together."""
    groups: dict[tuple, list[tuple[str, str]]] = {}  # schema -> (path, run_id); a folder may serve two ids
    for run_id, folder in run_dirs.items():
        path = RunDir(folder) / METRICS
        if not path.exists():
            raise FileNotFoundError(f"{path}: no {METRICS}; is {folder} a finished run folder?")
        groups.setdefault(tuple(_schema(folder).items()), []).append((str(path), run_id))
    parts = []
    for schema, ids in groups.items():
        k_col = [c for c, _ in schema if c.startswith("eval/pass@")][-1]
        df = _read_metrics([Path(p) for p in dict.fromkeys(p for p, _ in ids)], dict(schema))
        owners = pl.DataFrame(ids, schema=["_path", "run_id"], orient="row")
        parts.append(df.join(owners, on="_path", maintain_order="left")
                     .with_columns(pl.col(k_col).alias("eval/pass@k")).drop("_path"))
    empty = pl.DataFrame(schema={"run_id": pl.String, "step": pl.Int64})
    frame = with_step_columns(pl.concat(parts, how="diagonal_relaxed") if parts else empty)
    return frame.select("run_id", "step", pl.exclude("run_id", "step"))


def events_frame(run_dirs: dict[str, Path]) -> pl.DataFrame:
    """Long frame of the alarm events of runs {run_id: folder}: run_id, step, kind, value
    (events.jsonl is optional: a run without one contributes no rows)."""
    rows = []
    for run_id, folder in run_dirs.items():
        rows += [{"run_id": run_id, "step": e.get("step"), "kind": e.get("kind"), "value": _num(e.get("value"))}
                 for e in RunDir(folder).events()]
    return pl.DataFrame(rows, schema={"run_id": pl.String, "step": pl.Int64, "kind": pl.String, "value": pl.Float64})


def _num(value) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


OUTSIDE_LOOP = ("setup", "eval", "checkpoint", "final_eval")  # phases a run pays once or per eval, not per step


def loop_seconds(wall: float, phase_seconds: dict[str, float]) -> float:
    """The seconds a run spent in its training steps: its wall time less set-up, evals and
    checkpoints, so two trainers' speeds compare per step and not by how they start (TRL's set-up
    took a tenth of grpo-lab's on the tiny model). NaN without a wall time."""
    return wall - sum(phase_seconds.get(p, 0.0) for p in OUTSIDE_LOOP)


def summary_fields(folder: Path) -> dict:
    """Labels and cost figures of one run folder (config.json, summary.json). Cost keys
    (device_hours, sampling_share, ...) are NaN / None when the summary predates them."""
    run = RunDir(folder)
    cfg, summ = run.config(), run.summary()
    for name, data in ((CONFIG, cfg), (SUMMARY, summ)):
        if data is None:
            raise FileNotFoundError(f"{run / name}: missing; is {folder} a finished run folder?")
    task = cfg.get("task", summ.task)
    hours, effective = _num(summ.device_hours), _num(summ.effective_samples)
    cost = _num(summ.cost_per_effective_sample_hours)
    if math.isnan(cost) and effective > 0:
        cost = hours / effective
    share = _num(summ.sampling_share)
    if math.isnan(share):  # summaries before cost accounting: sampling = rollout + reward seconds
        phases, wall = summ.phase_seconds, _num(summ.wall_seconds)
        share = (phases.get("rollout", 0.0) + phases.get("reward", 0.0)) / wall if wall > 0 else math.nan
    return {
        "run_id": summ.run_id or folder.name,
        # the arm's model label: runs of one model under two trainers are two arms, never compared
        "model": arm_model(cfg.get("model", summ.model), cfg.get("trainer") or DEFAULT_TRAINER),
        "task": "+".join(task) if isinstance(task, list) else task,
        "tricks": arm_label(cfg.get("tricks")), "seed": cfg.get("seed", summ.seed),
        "k": max((cfg.get("eval") or {}).get("k") or [1]),
        "delta_pass@1": _num(summ.delta_pass_at_1), "gpu_hours": hours, "unit": summ.unit,
        "cost_per_effective_sample": cost, "effective_samples": effective, "sampling_share": share,
        "loop_seconds": loop_seconds(_num(summ.wall_seconds), summ.phase_seconds),
        "stopped": summ.stopped, "stop_reason": summ.stop_reason, "collapsed": collapse.from_summary(summ),
    }


def run_rows(run_dirs: dict[str, Path], steps: pl.DataFrame | None = None,
             events: pl.DataFrame | None = None) -> pl.DataFrame:
    """One flat row per run {run_id: folder}: summary_fields, series_metrics and event_metrics
    (alarms 0 when a run logged no events); null where a figure is undefined or
    not logged. run_id is the dict key. Pass `steps` / `events` (steps_frame / events_frame of
    the same runs) when you hold them already: reading metrics.jsonl is most of the cost."""
    labels = pl.DataFrame([{**summary_fields(folder), "run_id": run_id} for run_id, folder in run_dirs.items()],
                          infer_schema_length=None)
    steps = steps_frame(run_dirs) if steps is None else steps
    events = events_frame(run_dirs) if events is None else events
    return (labels.join(series_metrics(steps), on="run_id", how="left")
            .join(event_metrics(events), on="run_id", how="left")
            .with_columns(pl.col("alarms").fill_null(0), pl.col("alarm_kinds").fill_null(""),
                          pl.col(pl.Float64).fill_nan(None)))


def run_row(run_dir: Path) -> dict:
    """The flat metrics row of one finished run folder (see run_rows)."""
    return run_rows({summary_fields(run_dir)["run_id"]: Path(run_dir)}).row(0, named=True)
