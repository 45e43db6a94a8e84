"""The report's "Compute curves" section: per task, every arm's fitted R(C) on a log-compute axis
with its band and its extrapolation, a table of the ceiling A, B and C_mid with intervals, the
predicted pass@1 at 10x the cell's longest run, and the ceiling and speed verdicts of
analysis/curve_verdicts.py (which it renders, never decides)."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from grpo_lab.analysis import curves
from grpo_lab.analysis.curve_verdicts import CurveVerdict, collapsed_text
from grpo_lab.report.figures import to_png
from grpo_lab.report.render import Block, Image, Paragraph, Table, TableCell, short

HORIZON = 10.0  # predictions at this multiple of the cell's longest run
MAX_LINES = 8  # arms drawn per panel: the baseline, then the highest predicted at the horizon
GRID = 60
PALETTE = list(matplotlib.colormaps["tab10"].colors)


def _span(i: curves.Interval, fmt: str = ".3g", rate: bool = False) -> str:
    """'est [lower, upper]'; a pass rate's interval clipped to [0, 1] (its coverage is unchanged)."""
    if i.n == 0 or not math.isfinite(i.est):
        return "-"
    if not (math.isfinite(i.lower) and math.isfinite(i.upper)):
        return f"{i.est:{fmt}}"
    lo, hi = (max(i.lower, 0.0), min(i.upper, 1.0)) if rate else (i.lower, i.upper)
    return f"{i.est:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def _longest(arms: list[curves.ArmFits]) -> float:
    return max((f.C_last for a in arms for f in a.curve.runs), default=0.0)


def _cells(arms: list[curves.ArmFits]) -> dict[tuple[str, str], list[curves.ArmFits]]:
    out: dict[tuple[str, str], list[curves.ArmFits]] = {}
    for arm in arms:
        out.setdefault((arm.model, arm.task), []).append(arm)
    return out


def _panel_png(model: str, task: str, arms: list[curves.ArmFits]) -> bytes:
    """Each arm's mean fitted curve (solid where its runs went, dashed beyond) and the 90%
    interval of the arm's mean, from 1% of the longest run to HORIZON times it."""
    longest = _longest(arms)
    fig = Figure(figsize=(7.6, 3.6), layout="constrained")
    ax = fig.subplots()
    grid = np.geomspace(longest / 100, longest * HORIZON, GRID)
    for i, arm in enumerate(arms):
        if len(arm.curve.runs) < 1:
            continue
        preds = [curves.predict(arm.curve, c) for c in grid]
        mean = np.array([p.mean.est for p in preds])
        lo, hi = (np.array([getattr(p.mean, side) for p in preds]) for side in ("lower", "upper"))
        colour = "black" if i == 0 else PALETTE[(i - 1) % len(PALETTE)]
        ran = grid <= _longest([arm])
        ax.plot(grid[ran], mean[ran], color=colour, linewidth=2.0 if i == 0 else 1.3, label=short(arm.tricks))
        ax.plot(grid[~ran], mean[~ran], color=colour, linewidth=1.0, linestyle="--")
        if np.isfinite(lo).all() and np.isfinite(hi).all():
            ax.fill_between(grid, lo, hi, color=colour, alpha=0.10, linewidth=0)
    ax.axvline(longest, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xscale("log")
    ax.set_xlabel(f"compute ({arms[0].unit})", fontsize=9)
    ax.set_ylabel("eval pass@1 (fitted)", fontsize=9)
    ax.set_title(f"{model} · {task}", fontsize=10)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, frameon=False)
    return to_png(fig)


def _drawn(arms: list[curves.ArmFits], at: float) -> list[curves.ArmFits]:
    """The baseline first, then the arms highest at `at`, MAX_LINES in all."""
    from grpo_lab.spec.arm import BASELINE, arm_key

    base = [a for a in arms if arm_key(a.tricks) == BASELINE]
    rest = sorted((a for a in arms if arm_key(a.tricks) != BASELINE and a.curve.runs),
                  key=lambda a: -curves.predict(a.curve, at).mean.est)
    return (base + rest)[:MAX_LINES]


def _row(arm: curves.ArmFits, at: float, verdict: CurveVerdict | None, labelled: bool) -> list[TableCell]:
    c = arm.curve
    # the curve form's estimate alone: its interval, the figure's band, spans the drift form too
    pred = f"{curves.predict(c, at).mean.est:.3g} at {at:.3g}" if c.runs else "-"
    labels = ([verdict.ceiling_label, verdict.speed_label] if verdict else ["(baseline)", "(baseline)"]) \
        if labelled else ["-", "-"]
    return [arm.model, arm.task, arm.tricks, collapsed_text(len(c.runs), c.collapsed), _span(c.A, rate=True),
            _span(c.B), _span(c.C_mid), pred, *labels]


def _intro(verdicts: list[CurveVerdict], decided: bool) -> Paragraph:
    if decided:
        rule = ("no ceiling or speed labels: this is a --decide sweep, whose seeds were added where pass@1 "
                "comparisons stayed open, and these labels rest on fixed-sample intervals")
    elif verdicts:
        v = verdicts[0]
        rule = (f"the labels rest on {v.level:.2%} intervals (Bonferroni over both labels of every comparison, so "
                f"all labels hold together with probability ≥ {1 - v.alpha:.0%}), about the runs that did not collapse")
    else:
        rule = "no labels: no cell has a baseline to compare with"
    return Paragraph(
        "Each run's eval pass@1 fitted against its compute to R(C) = R0 + (A − R0)/(1 + (C_mid/C)^B) "
        "(A the ceiling, C_mid the compute to half the gain, B how sharply it arrives), or as a flat level where "
        "a flat line fits as well; over the runs that did not collapse (collapsed runs counted beside). "
        f"Intervals over seeds: 90% for the arm's A, B and C_mid; {rule}. A ceiling is labelled only where every "
        "run went past half its gain, is not flat and its A is not at a fit bound. The pass@1 at "
        f"{HORIZON:g}x the longest run is where the curve form puts it; beyond the runs the band spans that form "
        "and its fitted points' log-linear slope continued, and a rise no point of the runs shows is in neither "
        "(coverage measured on real runs: docs/results.md).")


def curve_blocks(arms: list[curves.ArmFits], verdicts: list[CurveVerdict], decided: bool = False) -> list[Block]:
    """The section's blocks; a note when no run could be fitted. decided: the sweep ran --decide
    (its curves are shown without labels)."""
    fitted = [a for a in arms if a.curve.runs]
    if not fitted:
        why = "; ".join(w for a in arms for w in a.unfitted[:1])[:300]
        return [Paragraph("No run has an eval series a compute curve can be fitted to (at least 2 evals after "
                          f"step 0; evaluate more often with eval.every). {why}")]
    verdicts = [] if decided else verdicts
    by_arm = {(v.model, v.task, v.tricks): v for v in verdicts}
    blocks: list[Block] = [_intro(verdicts, decided)]
    rows: list[list[TableCell]] = []
    for i, ((model, task), cell) in enumerate(_cells(arms).items()):
        at = HORIZON * _longest(cell)
        if at > 0:
            blocks.append(Image(f"compute-curve-{i:02d}", f"Compute curves, {model} / {task}",
                                f"{model} / {task}: solid where runs went, dashed to {HORIZON:g}x the longest run "
                                "(dotted line); band: 90% interval of the arm's mean (beyond the runs, of the "
                                "curve form and the drift form together).",
                                _panel_png(model, task, _drawn(cell, at))))
        rows += [_row(a, at, by_arm.get((a.model, a.task, a.tricks)), not decided) for a in cell]
    headers = ["model", "task", "tricks", "collapsed", "ceiling A", "B", "C_mid", f"pass@1 at {HORIZON:g}x (curve form)",
               "ceiling (seeds that did not collapse)", "speed (seeds that did not collapse)"]
    blocks.append(Table(headers, rows))
    if undecided := [f"{v.tricks} ({v.task}): {v.why}" for v in verdicts if v.why]:
        blocks.append(Paragraph("Undecided, and why: " + "; ".join(undecided[:20])
                                + (f"; and {len(undecided) - 20} more" if len(undecided) > 20 else "")))
    return blocks
