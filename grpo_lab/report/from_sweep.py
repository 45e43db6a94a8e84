"""A sweep's report inputs: its finished run folders, analysed, plus the registry's accounting.

The study's compute split (docs/study.md, "How the study spends"): *sampling and eval* = the rollout,
reward and eval phases of the attempts that counted; *search and reruns* = attempts that did not
count (failed, interrupted: wasted compute); *main matrix* = everything else the counted
attempts spent (training, reference forwards, set-up). A tune's sweep (`tune-<name>`) is search, all of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from sqlalchemy.orm import object_session

from grpo_lab.analysis.interactions import effects, interactions
from grpo_lab.analysis.results import frame_from_run_dirs
from grpo_lab.analysis.run_metrics import events_frame, steps_frame
from grpo_lab.analysis.variance import budget_frame
from grpo_lab.execution import registry as reg
from grpo_lab.execution import (
    waves,  # its decide_* tables exist once a registry is opened after this import
)
from grpo_lab.execution.sweep import cell_arms, mixed_arms
from grpo_lab.report.inputs import ReportData

SAMPLING_PHASES = ("rollout", "reward", "eval")


def done_cells(sweep: reg.Sweep) -> list[reg.SweepRun]:
    return [c for c in sorted(sweep.cells, key=lambda c: c.position)
            if c.run.status in reg.DONE and (Path(c.run.out_dir) / "summary.json").exists()]


def phase_hours(cells: list[reg.SweepRun]) -> dict[str, float]:
    """Device-hours per phase over the runs' summaries (device_hours_by_phase when the run
    recorded it, else its phase seconds times the devices it held)."""
    total: dict[str, float] = {}
    for cell in cells:
        summary = json.loads((Path(cell.run.out_dir) / "summary.json").read_text())
        by_phase = summary.get("device_hours_by_phase") or {
            k: v * cell.run.devices / 3600 for k, v in (summary.get("phase_seconds") or {}).items()}
        for phase, hours in by_phase.items():
            total[phase] = total.get(phase, 0.0) + float(hours)
    return total


def costs(sweep: reg.Sweep, cells: list[reg.SweepRun], effective: float) -> dict:
    runs = [c.run for c in sweep.cells]
    used = sum(r.gpu_hours for r in runs)
    wasted = sum(r.wasted_gpu_hours for r in runs)
    by_phase = phase_hours(cells)
    sampling = sum(v for k, v in by_phase.items() if k in SAMPLING_PHASES)
    useful = used - wasted
    if sweep.name.startswith("tune-"):  # a tune's trials are search compute, all of them
        split = {"main matrix": 0.0, "search and reruns": used, "sampling and eval": 0.0}
    else:
        split = {"main matrix": max(useful - sampling, 0.0), "search and reruns": wasted,
                 "sampling and eval": sampling}
    return {
        "unit": sweep.unit, "by_phase": by_phase, "total": used, "wasted": wasted, "split": split,
        "price_per_gpu_hour": sweep.price_per_gpu_hour,
        "cost_per_effective_sample": used / effective if effective else None,
    }


def sweep_data(sweep: reg.Sweep, metric: str = "pass@1", logit: bool = False) -> ReportData:
    """Everything the report of `sweep` shows, from its finished (or stopped) runs."""
    cells = done_cells(sweep)
    if not cells:
        raise ValueError(f"sweep '{sweep.name}' has no finished run yet: run `grpo-lab sweep` first")
    if mixed := mixed_arms(cell_arms(cells)):
        raise ValueError(f"sweep '{sweep.name}' holds runs of different configs under one label: {'; '.join(mixed)}. "
                         f"It was merged from an edited matrix; run `grpo-lab sweep {sweep.matrix_path} --replace` "
                         f"(keeps one config per label) and report again")
    dirs = {c.run_id: Path(c.run.out_dir) for c in cells}
    steps, events = steps_frame(dirs), events_frame(dirs)  # read once, shared by the rows and the curves
    runs = frame_from_run_dirs([(c.labels(), Path(c.run.out_dir)) for c in cells], steps=steps, events=events)
    runs = runs.with_columns(pl.col("run_id").replace_strict({c.run_id: c.run.status for c in cells}).alias("status"))
    effective = float(runs["effective_samples"].fill_null(0).sum())
    matrix = sweep.matrix_path
    return ReportData(
        runs=runs, steps=steps, events=events,
        effects=effects(runs, metric, logit=logit), interactions=interactions(runs, metric, logit=logit),
        costs=costs(sweep, cells, effective), env=json.loads(sweep.env_json or "{}"),
        variance=budget_frame([(c.labels(), Path(c.run.out_dir)) for c in cells]),
        decisions=waves.report_rows(session, sweep) if (session := object_session(sweep)) else {},
        meta={"sweep": sweep.name, "matrix": matrix, "metric": metric, "created": sweep.created_at.isoformat(),
              "commands": [f"grpo-lab plan {matrix}", f"grpo-lab sweep {matrix}",
                           f"grpo-lab report {sweep.name} --metric {metric}"]},
    )
