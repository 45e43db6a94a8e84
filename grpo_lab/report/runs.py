"""The drill-down under the verdicts: every run of every arm, with its folder, its eval samples
(completions.jsonl), its per-step metrics and its MLflow run's name, so a verdict row leads to the
runs it rests on. Each verdict row's trick set links to its arm's first row here."""

from __future__ import annotations

import polars as pl

from grpo_lab.rundir import COMPLETIONS, METRICS
from grpo_lab.report.render import MISSING, Block, Link, Paragraph, Table, TableCell, anchor, num, signed, text


def arm_anchor(model: str, task: str, tricks: str) -> str:
    """The id of an arm's first row in the runs table."""
    return anchor("arm", model, task, tricks)


def arm_link(row: dict) -> Link:
    """A trick-set cell that leads to its runs."""
    return Link(text(row["tricks"]), "#" + arm_anchor(row["model"], row["task"], row["tricks"]))


def _file(folder: str | None, name: str) -> TableCell:
    return Link(name, f"{folder}/{name}") if folder else MISSING


def runs_blocks(runs: pl.DataFrame) -> list[Block]:
    """One row per run, grouped by arm (model, task, trick set), seeds in order; `runs` is
    ReportData.runs (every RUNS_SCHEMA column present)."""
    if runs.is_empty():
        return [Paragraph("No runs yet.")]
    ordered = runs.sort(["model", "task", "tricks", "seed"])
    rows: list[list[TableCell]] = []
    ids: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for r in ordered.iter_rows(named=True):
        arm = (r["model"], r["task"], r["tricks"])
        ids.append("" if arm in seen else arm_anchor(*arm))
        seen.add(arm)
        folder = r["folder"]  # ReportData conforms runs to RUNS_SCHEMA: the column is always there
        rows.append([
            text(r["model"]), text(r["task"]), text(r["tricks"]), text(r["seed"]), text(r.get("status")),
            num(r.get("pass@1")), signed(r.get("delta_pass@1")),
            "yes" if r.get("collapsed") else "no", text(r.get("diagnosis")),
            Link(text(r.get("run_id")), folder) if folder else text(r.get("run_id")),
            _file(folder, COMPLETIONS), _file(folder, METRICS), text(r.get("mlflow_run"))])
    return [Paragraph("Every run of every arm: its final pass@1, its gain over the base eval, whether it "
                      "collapsed and, when it learnt nothing, why; its folder, eval samples and step metrics "
                      "(links to this machine's files), and its run's name in MLflow (`grpo-lab ui`)."),
            Table(["model", "task", "trick set", "seed", "status", "pass@1", "Δ pass@1", "collapsed",
                   "taught nothing?", "run", "samples", "metrics", "MLflow run"], rows, row_ids=ids)]
