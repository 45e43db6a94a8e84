"""What the report's figures show: the data series behind them (polars), aggregated by trick set
(model, task, tricks) with steps binned, so their size depends on the number of trick sets shown,
never on the number of runs or steps. FigureLimits caps lines, rows, tasks and step points.
report/figures.py draws them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from grpo_lab.report.inputs import BASELINE, KEYS
from grpo_lab.report.verdicts import flag_expr


@dataclass(frozen=True)
class FigureLimits:
    max_sets: int = 8            # lines per panel, baseline included
    max_models: int = 6          # panel rows per figure
    max_tasks: int = 12          # figures per section
    max_points: int = 300        # step bins per line
    max_timeline_rows: int = 30
    max_heatmap_rows: int = 40


# --- series: what a figure draws ---

def pick_trick_sets(runs: pl.DataFrame, effects: pl.DataFrame, interactions: pl.DataFrame,
                    max_sets: int, max_flagged: int = 3) -> pl.DataFrame:
    """The trick sets worth a line per (model, task): the baseline, the worst flagged
    combinations, then the largest effects. Returns KEYS + rank (0 = baseline when present)."""
    effect = effects.select(KEYS + ["effect"]).unique(KEYS)
    flag = (interactions.filter(flag_expr(interactions.columns))
            .group_by(KEYS).agg(pl.col("interaction").min().alias("_flag")))
    priority = (pl.when(pl.col("tricks") == BASELINE).then(0)
                .when(pl.col("_flag_rank") <= max_flagged).then(1).otherwise(2))
    return (runs.select(KEYS).unique()
            .join(effect, on=KEYS, how="left").join(flag, on=KEYS, how="left")
            .with_columns(pl.col("_flag").rank("ordinal").over(["model", "task"]).alias("_flag_rank"))
            .with_columns(priority.alias("_prio"))
            .sort(["model", "task", "_prio", "_flag", "effect", "tricks"],
                  descending=[False, False, False, False, True, False], nulls_last=True)
            .with_columns(pl.int_range(pl.len()).over(["model", "task"]).alias("rank"))
            .filter(pl.col("rank") < max_sets)
            .select(KEYS + ["rank"]))


def _bin_width(max_step: int | None, max_points: int) -> int:
    if max_step is None or max_step < max_points:
        return 1
    return -(-(max_step + 1) // max_points)


def bands(runs: pl.DataFrame, steps: pl.DataFrame, chosen: pl.DataFrame, column: str,
          max_points: int) -> pl.DataFrame:
    """Mean and std over seeds of one step metric, per chosen trick set and step bin."""
    keyed = runs.select(KEYS + ["run_id"]).join(chosen.select(KEYS), on=KEYS, how="semi")
    values = (steps.select("run_id", "step", column).drop_nulls()
              .join(keyed, on="run_id", how="inner"))
    width = _bin_width(values["step"].max(), max_points)  # type: ignore[arg-type]
    if width > 1:
        # Average within a run first so every seed weighs the same in its bin.
        values = (values.with_columns(pl.col("step") // width * width)
                  .group_by(KEYS + ["run_id", "step"]).agg(pl.col(column).mean()))
    return (values.group_by(KEYS + ["step"])
            .agg(pl.col(column).mean().alias("mean"), pl.col(column).std().alias("std"))
            .sort(KEYS + ["step"]))


def set_label(with_model: bool) -> pl.Expr:
    parts = (["model"] if with_model else []) + ["task", "tricks"]
    return pl.concat_str([pl.col(p) for p in parts], separator=" · ")


@dataclass(frozen=True)
class EventPoints:
    labels: list[str]       # timeline rows, top to bottom
    points: pl.DataFrame    # label, kind, step (binned), count
    total_labels: int       # trick sets with any event, before the cap


def event_points(runs: pl.DataFrame, events: pl.DataFrame, max_rows: int,
                 max_points: int) -> EventPoints | None:
    """Alarm events per trick set and step bin, for the trick sets with the most events."""
    keyed = events.drop_nulls(["run_id", "step", "kind"]).join(
        runs.select(["run_id"] + KEYS), on="run_id", how="inner")
    if keyed.is_empty():
        return None
    keyed = keyed.with_columns(set_label(runs["model"].n_unique() > 1).alias("label"))
    totals = keyed.group_by("label").agg(pl.len().alias("total")).sort(
        ["total", "label"], descending=[True, False])
    labels = sorted(totals.head(max_rows)["label"].to_list())
    width = _bin_width(keyed["step"].max(), max_points)  # type: ignore[arg-type]
    points = (keyed.filter(pl.col("label").is_in(labels))
              .with_columns(pl.col("step") // width * width)
              .group_by(["label", "kind", "step"]).agg(pl.len().alias("count"))
              .sort(["label", "kind", "step"]))
    return EventPoints(labels, points, totals.height)


@dataclass(frozen=True)
class Grid:
    rows: list[str]
    cols: list[str]
    values: np.ndarray      # interaction per (row, col); nan where not measured
    flagged: np.ndarray     # bool, the detector's flag (report/verdicts.py flag_expr)
    total_rows: int


def interaction_grid(interactions: pl.DataFrame, max_rows: int) -> Grid | None:
    """Trick sets x (model ·) task matrix of interactions, flagged and most negative rows first."""
    if interactions.is_empty():
        return None
    with_model = interactions["model"].n_unique() > 1
    column = (pl.concat_str([pl.col("model"), pl.col("task")], separator=" · ")
              if with_model else pl.col("task"))
    frame = interactions.with_columns(column.alias("_col"),
                                      flag_expr(interactions.columns).alias("_flag"))
    order = (frame.group_by("tricks")
             .agg(pl.col("_flag").any(), pl.col("interaction").min())
             .sort(["_flag", "interaction", "tricks"], descending=[True, False, False],
                   nulls_last=True))
    rows = order.head(max_rows)["tricks"].to_list()
    cols = sorted(frame["_col"].unique().to_list())
    row_at = {r: i for i, r in enumerate(rows)}
    col_at = {c: j for j, c in enumerate(cols)}
    values = np.full((len(rows), len(cols)), np.nan)
    flagged = np.zeros((len(rows), len(cols)), dtype=bool)
    cells = frame.filter(pl.col("tricks").is_in(rows)).select("tricks", "_col", "interaction", "_flag")
    for tricks, col, value, flag in cells.iter_rows():
        i, j = row_at[tricks], col_at[col]
        values[i, j] = np.nan if value is None else value
        flagged[i, j] = bool(flag)
    return Grid(rows, cols, values, flagged, order.height)
