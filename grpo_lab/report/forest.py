"""The report's first figure: a forest plot of every trick set's effect against its baseline, with
its CI, one panel per (model, task), coloured by its verdict, so the sweep reads at a glance.

Rows are shared across a model's tasks (one row per trick set, in one order), so a trick's effect
on each task reads along its row; a trick set a task did not measure leaves its row empty there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from grpo_lab.report.figures import to_png
from grpo_lab.report.render import Image, Tone, short
from grpo_lab.report.verdicts import TONES

TONE_COLOURS: dict[Tone, str] = {"good": "#1e8a3c", "warn": "#d98c00", "bad": "#c62d20",
                                 "neutral": "#7b8594"}
# Labels that share a tone keep apart by their marker.
_MARKERS = "osDv^XPh"
MAX_ROWS = 40  # trick sets per model
MAX_TASKS = 6  # panels per model


@dataclass(frozen=True)
class ForestRow:
    """One model's panels: its trick sets top to bottom, its tasks left to right, and per task
    the rows it measured (KEYS + effect, ci_low, ci_high, verdict, tone)."""

    model: str
    sets: list[str]
    tasks: list[str]
    rows: pl.DataFrame
    total_sets: int


def forest_rows(verdicts: pl.DataFrame, max_rows: int = MAX_ROWS,
                max_tasks: int = MAX_TASKS) -> list[ForestRow]:
    """Per model, the trick sets to draw: those with a decided label (good or bad tone) first,
    then the largest |effect| on any task; drawn by mean effect over tasks, best on top."""
    measured = verdicts.filter(pl.col("effect").is_not_null())
    tone = pl.col("tone")
    out = []
    for model in sorted(measured["model"].unique().to_list()):
        part = measured.filter(pl.col("model") == model)
        tasks = sorted(part["task"].unique().to_list())[:max_tasks]
        part = part.filter(pl.col("task").is_in(tasks))
        ranked = (part.group_by("tricks")
                  .agg(tone.is_in(["good", "bad"]).any().alias("_decided"),
                       pl.col("effect").abs().max().alias("_size"),
                       pl.col("effect").mean().alias("_mean"))
                  .sort(["_decided", "_size", "tricks"], descending=[True, True, False]))
        kept = ranked.head(max_rows).sort(["_mean", "tricks"], descending=[True, False])
        sets = kept["tricks"].to_list()
        out.append(ForestRow(model, sets, tasks, part.filter(pl.col("tricks").is_in(sets)),
                             ranked.height))
    return out


def _legend(rows: list[ForestRow]) -> list[tuple[str, str]]:
    """(label, tone) of every label drawn, in the vocabulary's order (report/verdicts.py TONES, a
    qualified label at its base label's place): the legend's order, and each label's marker by its
    place, the same in every panel."""
    pairs = {(str(v), str(t)) for row in rows for v, t in row.rows.select("verdict", "tone").iter_rows()}
    vocab = list(TONES)

    def rank(label: str) -> int:
        bases = [b for b in vocab if label.startswith(b)]
        return vocab.index(max(bases, key=len)) if bases else len(vocab)
    return sorted(pairs, key=lambda p: (rank(p[0]), p[0], p[1]))


def _legend_columns(labels: list[str], width: float) -> int:
    """Legend entries per row that fit the figure's width (inches) at font size 8."""
    per_entry = (max(len(label) for label in labels) + 6) * 0.07
    return max(1, min(len(labels), int(width // per_entry)))


def _draw(ax: Axes, row: ForestRow, task: str, legend: list[tuple[str, str]]) -> None:
    at = {name: i for i, name in enumerate(row.sets)}
    ax.axvline(0.0, color="black", linewidth=0.8, zorder=1)
    part = row.rows.filter(pl.col("task") == task)
    for (verdict, tone), group in part.partition_by(["verdict", "tone"], as_dict=True, maintain_order=True).items():
        y = np.array([at[t] for t in group["tricks"]], dtype=float)
        x = group["effect"].to_numpy()
        low = np.nan_to_num(x - group["ci_low"].fill_null(float("nan")).to_numpy())
        high = np.nan_to_num(group["ci_high"].fill_null(float("nan")).to_numpy() - x)
        colour = TONE_COLOURS.get(tone, TONE_COLOURS["neutral"])
        marker = _MARKERS[legend.index((str(verdict), str(tone))) % len(_MARKERS)]
        ax.errorbar(x, y, xerr=[low, high], fmt=marker, color=colour, ecolor=colour,
                    markersize=5, elinewidth=1.4, capsize=2, label=str(verdict), zorder=2)
    ax.set_title(f"{row.model} · {task}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(labelsize=8)


def forest_png(rows: list[ForestRow], metric: str) -> bytes:
    ncols = max(len(r.tasks) for r in rows)
    heights = [len(r.sets) + 2 for r in rows]
    width = 3.4 * ncols + 4.2
    fig = Figure(figsize=(width, 0.24 * sum(heights) + 1.2), layout="constrained")
    grid = fig.add_gridspec(len(rows), ncols, height_ratios=heights)
    legend = _legend(rows)
    seen: dict[str, object] = {}
    for r, row in enumerate(rows):
        first = None
        for c in range(ncols):
            if c >= len(row.tasks):
                continue
            ax = fig.add_subplot(grid[r, c], sharex=first, sharey=first)
            first = ax if first is None else first
            _draw(ax, row, row.tasks[c], legend)
            ax.set_xlabel(f"effect on {metric}", fontsize=9)
            for handle, label in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(label, handle)
            if c:
                ax.tick_params(labelleft=False)
        first.set_yticks(range(len(row.sets)), [short(s, 56) for s in row.sets])
        first.set_ylim(len(row.sets) - 0.5, -0.5)
    order = [label for label, _ in legend if label in seen]
    fig.legend([seen[k] for k in order], order, loc="outside lower center", ncols=_legend_columns(order, width),
               fontsize=8, frameon=False, title="verdict", title_fontsize=8)
    fig.suptitle(f"Effect of each trick set against its baseline on {metric}", fontsize=12)
    return to_png(fig)


def forest_images(verdicts: pl.DataFrame, metric: str, decided: bool = False) -> list[Image]:
    """decided: the rows carry --decide's estimates and confidence sequences (report/verdicts.py)."""
    rows = forest_rows(verdicts)
    if not rows:
        return []
    shown = sum(len(r.sets) for r in rows)
    total = sum(r.total_sets for r in rows)
    bar = ("the anytime-valid confidence sequence its label rests on (family-wise over every label; none "
           "drawn while it is unbounded), on the estimand the label names" if decided else "its 95% CI, uncorrected")
    caption = (f"Marker: the trick set's effect on {metric} against the baseline of its model and "
               f"task; bar: {bar}; colour: the tone of its verdict in the table "
               "below (green good, red bad, amber undecided, grey neutral; the legend names them). "
               f"Showing {shown} of {total} trick sets: those with a green or red verdict first, "
               "then the largest effects; best on top.")
    return [Image("forest", "Forest plot of effects per trick set and task", caption,
                  forest_png(rows, metric))]
