"""Matplotlib drawings of the report, each returned as PNG bytes.

Figures are built with `matplotlib.figure.Figure` and rendered by Agg directly: no pyplot, so no
global figure registry to leak memory across a thousand figures and no GUI backend to pick.
Inputs are already aggregated by trick set (see series.py); nothing here loops over runs.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import matplotlib
import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from grpo_lab.report.fmt import short
from grpo_lab.report.series import EventPoints, Grid

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
