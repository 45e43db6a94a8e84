"""The report's figures: matplotlib drawings (PNG bytes) of report/figure_data.py's series, and
their captions. What is drawn is aggregated by trick set, so a 10,000-run sweep renders as fast
as a 30-run one. Figures are built with `matplotlib.figure.Figure` and rendered by Agg directly: no
pyplot, so no global figure registry to leak memory across a thousand figures and no GUI backend
to pick.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass

import matplotlib
import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from grpo_lab.report.figure_data import (
    EventPoints,
    FigureLimits,
    Grid,
    bands,
    event_points,
    interaction_grid,
    pick_trick_sets,
)
from grpo_lab.report.inputs import BASELINE, KEYS, ReportData
from grpo_lab.report.render import Image, short


DPI = 100
_PALETTE = list(matplotlib.colormaps["tab10"].colors)
_MARKERS = "o^sDvP*Xh<>"
_MAX_ANNOTATED_CELLS = 600


@dataclass(frozen=True)
class Line:
    label: str
    x: np.ndarray
    y: np.ndarray
    spread: np.ndarray | None = None  # band is y ± spread; nan where a single seed
    baseline: bool = False


@dataclass(frozen=True)
class Panel:
    title: str
    ylabel: str
    lines: list[Line]
    markers: bool = False  # sparse series (eval points) read better as dots


def to_png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    # No "Software" chunk: it carries matplotlib's URL, and the report must hold none.
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _colours(row: list[Panel]) -> dict[str, tuple[float, float, float]]:
    """One colour per trick set across a row, so reward and pass@1 panels agree."""
    labels: list[str] = []
    for panel in row:
        labels += [ln.label for ln in panel.lines if not ln.baseline and ln.label not in labels]
    return {label: _PALETTE[i % len(_PALETTE)] for i, label in enumerate(labels)}


def _draw_panel(ax: Axes, panel: Panel, colours: dict[str, tuple[float, float, float]]) -> None:
    ax.set_title(panel.title, fontsize=10)
    ax.set_ylabel(panel.ylabel, fontsize=9)
    ax.set_xlabel("step", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    if not panel.lines:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes,
                color="grey")
        return
    for line in panel.lines:
        colour = "black" if line.baseline else colours[line.label]
        ax.plot(line.x, line.y, label=short(line.label), color=colour,
                linestyle="--" if line.baseline else "-", linewidth=2.0 if line.baseline else 1.3,
                marker="o" if panel.markers else None, markersize=3, zorder=3 if line.baseline else 2)
        if line.spread is not None:
            ax.fill_between(line.x, line.y - line.spread, line.y + line.spread, color=colour,
                            alpha=0.12, linewidth=0)


def _row_legend(ax: Axes, axes: list[Axes]) -> None:
    seen: dict[str, object] = {}
    for other in axes:
        for handle, label in zip(*other.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        ax.legend(list(seen.values()), list(seen), loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  fontsize=7, frameon=False)


def band_grid_png(grid: list[list[Panel]], title: str) -> bytes:
    """Rows of line panels with seed bands; one legend per row, right of its last panel."""
    ncols = max(len(row) for row in grid)
    fig = Figure(figsize=(4.6 * ncols + 2.8, 2.9 * len(grid) + 0.7), layout="constrained")
    axes = fig.subplots(len(grid), ncols, squeeze=False)
    for r, row in enumerate(grid):
        colours = _colours(row)
        for c, panel in enumerate(row):
            _draw_panel(axes[r][c], panel, colours)
        for c in range(len(row), ncols):
            axes[r][c].set_visible(False)
        _row_legend(axes[r][len(row) - 1], list(axes[r][: len(row)]))
    fig.suptitle(title, fontsize=12)
    return to_png(fig)


def timeline_png(events: EventPoints, last_step: int | None, title: str) -> bytes:
    """Alarm events over steps, one row per trick set, marker per kind, size by count.
    The x axis spans the whole training (to last_step) so an alarm's timing reads at a glance."""
    kinds = sorted(events.points["kind"].unique().to_list())
    fig = Figure(figsize=(12, max(2.8, 1.4 + 0.3 * len(events.labels))), layout="constrained")
    ax = fig.subplots()
    row_at = {label: i for i, label in enumerate(events.labels)}
    top = max(int(events.points["count"].max() or 1), 1)  # type: ignore[arg-type]
    for k, kind in enumerate(kinds):
        sub = events.points.filter(pl.col("kind") == kind)
        # Kinds sit side by side in a row so a reward cliff and a KL spike at one step both show.
        y = sub["label"].replace_strict(row_at).to_numpy() + (k - (len(kinds) - 1) / 2) * 0.18
        size = 14 + 70 * np.sqrt(sub["count"].to_numpy() / top)
        ax.scatter(sub["step"].to_numpy(), y, s=size, marker=_MARKERS[k % len(_MARKERS)],
                   color=_PALETTE[k % len(_PALETTE)], alpha=0.8, linewidths=0, label=kind)
    ax.set_yticks(range(len(events.labels)), [short(lb, 64) for lb in events.labels], fontsize=8)
    ax.set_ylim(len(events.labels) - 0.5, -0.5)
    right = max(last_step or 0, int(events.points["step"].max() or 0))  # type: ignore[arg-type]
    ax.set_xlim(0, right + 1)
    ax.set_xlabel("step", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="alarm",
              frameon=False)
    ax.set_title(title, fontsize=12)
    return to_png(fig)


def _cell_text(value: float, decimals: int) -> str:
    text = f"{value:+.{decimals}f}"
    return "0" if float(text) == 0 else text  # not "-0.000" for a value that rounds away


def _annotate(ax: Axes, grid: Grid, limit: float) -> None:
    # Fixed decimals from the colour scale (2 significant digits at its end), so no cell reads
    # as 1.9e-05 next to -0.06.
    decimals = max(0, 1 - math.floor(math.log10(limit)))
    for (i, j), value in np.ndenumerate(grid.values):
        if grid.flagged[i, j]:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black",
                                   linewidth=2.2))
        if np.isnan(value) or grid.values.size > _MAX_ANNOTATED_CELLS:
            continue
        text = _cell_text(value, decimals) + (" !" if grid.flagged[i, j] else "")
        ax.text(j, i, text, ha="center", va="center", fontsize=8,
                color="white" if abs(value) > 0.6 * limit else "black",
                fontweight="bold" if grid.flagged[i, j] else "normal")


def heatmap_png(grid: Grid, title: str, colour_label: str) -> bytes:
    """Interaction per trick set and task on a diverging scale centred at 0 (red = negative)."""
    nrows, ncols = grid.values.shape
    fig = Figure(figsize=(max(6.5, 1.3 * ncols + 5.0), max(2.8, 0.36 * nrows + 1.8)),
                 layout="constrained")
    ax = fig.subplots()
    finite = np.abs(grid.values[np.isfinite(grid.values)])
    limit = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="#e4e4e4")
    image = ax.imshow(np.ma.masked_invalid(grid.values), cmap=cmap, vmin=-limit, vmax=limit,
                      aspect="auto", interpolation="nearest")
    ax.set_xticks(range(ncols), grid.cols, fontsize=9, rotation=30 if ncols > 4 else 0,
                  ha="right" if ncols > 4 else "center")
    ax.set_yticks(range(nrows), [short(r, 64) for r in grid.rows], fontsize=8)
    _annotate(ax, grid, limit)
    fig.colorbar(image, ax=ax, label=colour_label, shrink=0.85)
    ax.set_title(title, fontsize=12)
    return to_png(fig)


# --- the report's figures, captioned ---

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
    evals = bands(data.runs, data.eval_steps(), chosen, "eval/pass@1", limits.max_points)
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
        caption = (f"Task {task}. Line: mean over seeds; band: ± one standard deviation; eval points at "
                   "the steps trained before them, the base model's at 0. " + _shown_note(data, chosen))
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
    if grid is None or len(grid.rows) < 2:  # one combination reads better as its table row
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
