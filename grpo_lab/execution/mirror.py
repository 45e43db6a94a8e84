"""The sweep's MLflow copy: a parent run per sweep, a child run per ended cell, totals at the end.

The registry is the source of truth; this copy is for browsing (mlflow ui). Every ended cell is
logged again from the registry when a sweep finishes (a logged attempt is not duplicated), so a
failed MLflow call loses nothing: every call is `tracking.guarded` (a TrackingWarning, and the
sweep goes on).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import object_session

from grpo_lab.execution import final_evals, tracking
from grpo_lab.execution import registry as reg
from grpo_lab.execution.sweep import totals
from grpo_lab.spec.tricks import load_catalog


def attempt_info(attempt: reg.Attempt) -> dict:
    return {"number": attempt.number, "runner": attempt.runner, "host": attempt.host or "",
            "started_at": attempt.started_at, "ended_at": attempt.ended_at, "gpu_hours": attempt.gpu_hours,
            "start_step": attempt.start_step, "error": (attempt.error or "")[:2000]}


def cell_labels(cell: reg.SweepRun, matrix: str) -> dict:
    catalog = load_catalog()
    dims = sorted({catalog[t].dimension for t in cell.tricks.split("+") if t in catalog})
    return {**cell.labels(), "dimensions": dims, "matrix": matrix}


def start_parent(uri: str, sweep: reg.Sweep, source: Path, tags: dict | None = None) -> tuple:
    """(Tracker, parent run id) of a sweep's MLflow copy, the id also stored on the sweep; (None,
    None) when MLflow fails, which `tracking.guarded` reports as a warning."""
    opened: list = []

    def start() -> None:
        tracker = tracking.Tracker(uri)
        parent = tracker.start_sweep(sweep.name, source, tags={"hardware": sweep.hardware, "unit": sweep.unit,
                                                                **(tags or {})})
        sweep.mlflow_parent_id = parent
        opened.extend((tracker, parent))

    tracking.guarded(start, "starting the MLflow parent run")
    return tuple(opened) if opened else (None, None)


class SweepTracker:
    """The sweep's MLflow copy: a parent run, a child per ended cell, the totals at the end.

    Every call is `tracking.guarded`: a failure is a TrackingWarning and the sweep goes on.
    """

    def __init__(self, uri: str, sweep: reg.Sweep, matrix: Path) -> None:
        self.sweep = sweep
        self.tracker, self.parent = start_parent(uri, sweep, matrix)

    def log(self, cell: reg.SweepRun) -> None:
        """Log a cell's latest ended attempt (idempotent: a logged attempt is not duplicated)."""
        ended = [a for a in cell.run.attempts if a.status != "running"]
        if self.parent is None or not ended:
            return
        labels = cell_labels(cell, self.sweep.matrix_path)
        tracking.guarded(lambda: self.tracker.log_run(self.parent, labels, Path(cell.run.out_dir), ended[-1].status,
                                                      attempt_info(ended[-1])), f"MLflow logging of {cell.run_id}")

    def finish(self, status: str) -> None:
        """Log the ended cells (a killed driver may have ended runs it never logged); close the parent."""
        for cell in self.sweep.cells:
            if cell.run.status in reg.DONE:
                self.log(cell)
        if self.parent is not None:
            session = object_session(self.sweep)
            design = final_evals.recorded(session, self.sweep) if session else {}
            tracking.guarded(lambda: self.tracker.end_sweep(self.parent, status, totals(self.sweep, design)),
                             "MLflow sweep totals")
