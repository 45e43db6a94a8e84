"""The report's costs section: the sweep's hours by phase and against the study's budget split,
the cost basis (wall-clock device-hours) with the runs' CPU time beside it and a warning under
contention, and planned against measured hours per trick set."""

from __future__ import annotations

from typing import Any

import polars as pl

from grpo_lab.report.inputs import KEYS, ReportData
from grpo_lab.report.render import MISSING, Block, Paragraph, Table, TableCell, key_cells, num, plural, share

# The study's split of its budget (docs/study.md): main matrix 60%, search and reruns 15%, rest 25%.
STUDY_SPLIT = {"main matrix": 0.60, "search and reruns": 0.15, "sampling and eval": 0.25}


def _phase_table(costs: dict[str, Any], unit: str) -> Table:
    total = costs.get("total")
    rows: list[list[TableCell]] = [[str(phase), num(hours), share(hours, total)]
                                   for phase, hours in (costs.get("by_phase") or {}).items()]
    rows.append(["total", num(total), share(total, total)])
    return Table(["phase", unit, "share"], rows)


def _split_table(costs: dict[str, Any], unit: str) -> Table:
    split = costs.get("split") or {}
    spent = sum(v for v in split.values() if v is not None) or None
    names = list(STUDY_SPLIT) + [k for k in split if k not in STUDY_SPLIT]
    rows: list[list[TableCell]] = [
        [name, num(split.get(name)), share(split.get(name), spent),
         f"{STUDY_SPLIT[name]:.0%}" if name in STUDY_SPLIT else MISSING]
        for name in names]
    return Table(["bucket", unit, "share here", "share in the study"], rows)


# --- sections ---

def cost_blocks(data: ReportData, unit: str) -> list[Block]:
    c = data.costs
    if not c:
        return [Paragraph("No cost accounting was recorded for this sweep.")]
    total, wasted, per_sample = c.get("total"), c.get("wasted"), c.get("cost_per_effective_sample")
    lines = [
        (f"Total {num(total)} {unit}; wasted on failed or retried attempts {num(wasted)} "
         f"{unit} ({share(wasted, total)} of the total)."),
        (f"Cost per effective sample (a completion that contributed a gradient): {num(per_sample)} h = "
         f"{num(None if per_sample is None else per_sample * 3600)} s. G-fold sampling eats "
         "part of GRPO's savings: compare this, not curves alone."),
    ]
    lines += _basis(c, unit)
    price = c.get("price_per_gpu_hour")
    if price and total:
        lines.append(f"At {price:g} per {unit} the sweep cost {num(price * total)}.")
    return [*(Paragraph(line) for line in lines), _phase_table(c, unit),
            Paragraph("Where the hours went, against the split the source study reports:"),
            _split_table(c, unit), *_planned_blocks(data.runs, unit)]


CONTENTION = 1.5  # wall device-hours / CPU hours beyond this (either way): the hours are not the compute


def _basis(c: dict[str, Any], unit: str) -> list[str]:
    """The cost basis, and a warning when wall time and the runs' CPU time disagree."""
    lines = [f"Cost basis: wall-clock time × devices held ({unit}), from each run's own timers."]
    cpu, wall = c.get("cpu_hours"), c.get("cpu_runs_wall_hours")
    if cpu and wall:
        ratio = wall / cpu
        lines.append(f"CPU time of the {plural(c.get('cpu_runs') or 0, 'run')}' training processes: {num(cpu)} core-h "
                     f"against {num(wall)} {unit} of wall time ({ratio:.2f}x).")
        if ratio > CONTENTION:
            lines.append(f"Warning: wall time is {ratio:.1f}x the CPU time: the runs waited for cores (a shared or "
                         "oversubscribed machine), so hours measure load as much as compute; compare arms' costs "
                         "only where they ran at the same load.")
        elif ratio < 1 / CONTENTION:
            lines.append(f"Warning: CPU time is {1 / ratio:.1f}x the wall time: each run used several cores, so a "
                         f"{unit} undercounts the cores it held.")
    return lines


def _planned_blocks(runs: pl.DataFrame, unit: str) -> list[Block]:
    """Planned vs measured hours per run, per trick set: how far the plan was off (a plan made
    after runs finished is calibrated by them; see `grpo-lab plan`)."""
    if "planned_hours" not in runs.columns or runs["planned_hours"].is_null().all():
        return []
    rows = runs.group_by(KEYS).agg(pl.col("planned_hours").mean(), pl.col("gpu_hours").mean()).sort(KEYS)
    table = [[*key_cells(r), num(r["planned_hours"]), num(r["gpu_hours"]),
              "-" if not r["planned_hours"] else f"{r['gpu_hours'] / r['planned_hours']:.2f}x"]
             for r in rows.iter_rows(named=True)]
    return [Paragraph(f"Planned against measured {unit} per run (means over seeds):"),
            Table(["model", "task", "tricks", "planned", "measured", "measured / planned"], table)]
