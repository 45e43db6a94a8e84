"""The report's figures: aggregate (series.py), draw (plots.py), caption (here).

Limits cap what one figure draws so a 10,000-run sweep renders as fast as a 30-run one: lines are
trick sets, never runs, and rows, tasks and step points are bounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from grpo_lab.report.document import Image
from grpo_lab.report.inputs import BASELINE, KEYS, ReportData
from grpo_lab.report.plots import Line, Panel, band_grid_png, heatmap_png, timeline_png
from grpo_lab.report.series import (
    bands,
    event_points,
    interaction_grid,
    pick_trick_sets,
)


@dataclass(frozen=True)
class FigureLimits:
    max_sets: int = 8            # lines per panel, baseline included
    max_models: int = 6          # panel rows per figure
    max_tasks: int = 12          # figures per section
    max_points: int = 300        # step bins per line
    max_timeline_rows: int = 30
    max_heatmap_rows: int = 40


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "x"


def _lines(band: pl.DataFrame | None, chosen: pl.DataFrame) -> list[Line]:
    """One line per trick set of one (model, task), in the chosen order."""
    if band is None:
        return []
    ordered = band.join(chosen.select(KEYS + ["rank"]), on=KEYS).sort(["rank", "step"])
    lines = []
    for (tricks,), part in ordered.partition_by("tricks", as_dict=True, maintain_order=True).items():
        lines.append(Line(str(tricks), part["step"].to_numpy(), part["mean"].to_numpy(),
                          part["std"].fill_null(float("nan")).to_numpy(), tricks == BASELINE))
    return lines


def _layout(data: ReportData, limits: FigureLimits) -> list[tuple[str, list[str]]]:
    """(task, models) per figure, both capped."""
    pairs = data.runs.select("task", "model").unique().sort(["task", "model"])
    tasks = pairs["task"].unique(maintain_order=True).to_list()[: limits.max_tasks]
    return [(t, pairs.filter(pl.col("task") == t)["model"].to_list()[: limits.max_models])
            for t in tasks]


def _shown_note(data: ReportData, chosen: pl.DataFrame) -> str:
    total = data.runs.select(KEYS).unique().group_by(["model", "task"]).len()["len"].max() or 0
    shown = chosen.group_by(["model", "task"]).len()["len"].max() or 0
    return (f"Showing up to {shown} of {total} trick sets per model and task: the baseline "
            f"(black, dashed), flagged combinations, then the largest effects on {data.metric}.")


def curve_images(data: ReportData, chosen: pl.DataFrame, limits: FigureLimits) -> list[Image]:
    reward = bands(data.runs, data.steps, chosen, "reward/mean", limits.max_points)
    evals = bands(data.runs, data.steps, chosen, "eval/pass@1", limits.max_points)
    by_reward = reward.partition_by(["model", "task"], as_dict=True)
    by_eval = evals.partition_by(["model", "task"], as_dict=True)
    images = []
    for i, (task, models) in enumerate(_layout(data, limits)):
        grid = [[Panel(f"{m} · reward", "reward (mean per step)",
                       _lines(by_reward.get((m, task)), chosen)),
                 Panel(f"{m} · eval pass@1", "pass@1",
                       _lines(by_eval.get((m, task)), chosen), markers=True)]
                for m in models]
        png = band_grid_png(grid, f"Task {task}: training reward and eval pass@1")
        caption = (f"Task {task}. Line: mean over seeds; band: ± one standard deviation. "
                   + _shown_note(data, chosen))
        images.append(Image(f"curves-{i:02d}-{_slug(task)}", f"Reward and pass@1 curves, task {task}",
                            caption, png))
    return images


def length_images(data: ReportData, chosen: pl.DataFrame, limits: FigureLimits) -> list[Image]:
    length = bands(data.runs, data.steps, chosen, "length/mean", limits.max_points)
    by_set = length.partition_by(["model", "task"], as_dict=True)
    images = []
    for i, (task, models) in enumerate(_layout(data, limits)):
        grid = [[Panel(f"{m} · completion length", "mean length (tokens)",
                       _lines(by_set.get((m, task)), chosen))] for m in models]
        png = band_grid_png(grid, f"Task {task}: output length over training")
        caption = (f"Task {task}. Mean completion length, mean ± std over seeds; a line that keeps "
                   "climbing while reward is flat is length inflation. " + _shown_note(data, chosen))
        images.append(Image(f"length-{i:02d}-{_slug(task)}", f"Length trend, task {task}",
                            caption, png))
    return images


def stability_images(data: ReportData, limits: FigureLimits) -> list[Image]:
    events = event_points(data.runs, data.events, limits.max_timeline_rows, limits.max_points)
    if events is None:
        return []
    png = timeline_png(events, data.steps["step"].max(),  # type: ignore[arg-type]
                       "Alarm events per trick set (all seeds pooled)")
    caption = ("One row per trick set, a marker per alarm kind; a larger marker means more events "
               f"in that step bin. Showing {len(events.labels)} of {events.total_labels} trick sets "
               "with alarms, those with the most events.")
    return [Image("stability-timeline", "Timeline of alarm events per trick set", caption, png)]


def heatmap_images(data: ReportData, limits: FigureLimits) -> list[Image]:
    grid = interaction_grid(data.interactions, limits.max_heatmap_rows)
    if grid is None:
        return []
    png = heatmap_png(grid, "Interaction of each combination (observed − expected additive)",
                      f"interaction on {data.metric}")
    caption = (f"Interaction on {data.metric} = observed − expected additive effect; red is worse "
               "than the single tricks predict, blue better. Boxed cells marked ! are flagged "
               "(negative interaction, harmful, or collapsed only in combination); grey cells "
               f"were not measured. Showing {len(grid.rows)} of {grid.total_rows} combinations, "
               "flagged and most negative first.")
    return [Image("interaction-heatmap", "Interaction heatmap", caption, png)]


def choose_sets(data: ReportData, limits: FigureLimits) -> pl.DataFrame:
    """The trick sets drawn as lines (and listed under the curves), KEYS + rank."""
    return pick_trick_sets(data.runs, data.effects, data.interactions, limits.max_sets)


def make_figures(data: ReportData, chosen: pl.DataFrame,
                 limits: FigureLimits) -> dict[str, list[Image]]:
    """Figures keyed by the id of the section that shows them."""
    return {
        "curves": curve_images(data, chosen, limits),
        "length": length_images(data, chosen, limits),
        "stability": stability_images(data, limits),
        "interactions": heatmap_images(data, limits),
    }
