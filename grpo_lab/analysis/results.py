"""Results frames: one row per run (model, task, tricks, seed + metric columns), built from run
folders or read from a CSV / Parquet table. The input of analysis.interactions and the report."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from grpo_lab.analysis.run_metrics import run_rows, summary_fields
from grpo_lab.util.yamlio import ConfigError, suggest
from grpo_lab.spec.arm import arm_label

LABELS = ("model", "task", "tricks", "seed")
READERS = {".csv": pl.read_csv, ".parquet": pl.read_parquet, ".pq": pl.read_parquet}


def _label(value) -> str | int:
    """A registry label as the frame spells it: lists '+'-joined, an empty trick list 'baseline'."""
    return "+".join(value) if isinstance(value, (list, tuple)) else value


def frame_from_run_dirs(rows: list[tuple[dict, Path]], steps: pl.DataFrame | None = None,
                        events: pl.DataFrame | None = None) -> pl.DataFrame:
    """The results frame of finished run folders. Each item is (labels, folder); the labels
    (model, task, tricks, seed, run_id, as the registry knows them) override what the folder's
    config says, so a sweep's names win over resolved paths. `steps` / `events`: the runs'
    steps_frame / events_frame keyed by the same run ids, if already read (see run_rows)."""
    ids = {labels.get("run_id") or summary_fields(folder)["run_id"]: (labels, Path(folder)) for labels, folder in rows}
    frame = run_rows({run_id: folder for run_id, (_, folder) in ids.items()}, steps, events)
    for key in LABELS:
        given = {run_id: _label(labels[key]) for run_id, (labels, _) in ids.items() if key in labels}
        if key == "tricks":
            given = {run_id: arm_label(value) for run_id, value in given.items()}
        if given:
            frame = frame.with_columns(pl.col("run_id").replace_strict(given, default=pl.col(key),
                                                                        return_dtype=frame.schema[key]).alias(key))
    return frame


def load_results(path: Path) -> pl.DataFrame:
    """A results table (CSV or Parquet) with columns model, task, tricks, seed and metric columns.
    tricks: '+'-joined names; empty or 'baseline' for the baseline."""
    path = Path(path)
    if path.suffix.lower() not in READERS:
        raise ConfigError(f"{path}: unknown results format '{path.suffix}'{suggest(path.suffix, READERS)}; "
                          f"use a .csv or .parquet table")
    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    df = READERS[path.suffix.lower()](path)
    for col in LABELS:
        if col not in df.columns:
            raise ConfigError(f"{path}: results table lacks column '{col}'{suggest(col, df.columns)}; "
                              f"it needs {', '.join(LABELS)} and one column per metric (has {', '.join(df.columns)})")
    return df.with_columns(pl.col("model", "task").cast(pl.String),
                           pl.col("tricks").cast(pl.String).fill_null("").replace("", "baseline"))
