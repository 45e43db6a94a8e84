"""MLflow copy of a tune: the parent run tune-<name>, a child per completed or pruned trial.

Like a sweep's tracking, it copies what the registry and run folders hold, so a tracking
failure is a warning and the tune goes on.
"""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from grpo_lab.execution import registry as reg
from grpo_lab.execution.mirror import attempt_info, start_parent
from grpo_lab.execution.sweep import totals
from grpo_lab.execution.tracking import default_tracking_uri, guarded

LOGGED = (TrialState.COMPLETE, TrialState.PRUNED)


class TuneTracker:
    def __init__(self, uri: str | None, workspace: Path, sweep: reg.Sweep, target: Path, space: Path,
                 metric: str, direction: str) -> None:
        self.logged: set[int] = set()
        tags = {"kind": "tune", "tune.metric": metric, "tune.direction": direction, "tune.space": str(space)}
        self.tracker, self.parent = start_parent(uri or default_tracking_uri(Path(workspace)), sweep,
                                                 Path(target), tags)

    def log(self, trial: FrozenTrial, cell: reg.SweepRun) -> None:
        """A child run for a completed or pruned trial, from its run folder (idempotent)."""
        if self.parent is None or trial.state not in LOGGED:
            return
        ended = [a for a in cell.run.attempts if a.status != "running"]
        labels = {**cell.labels(), "tricks": f"tune#{trial.number}", "trial": trial.number,
                  "tune.state": trial.state.name, "tune.value": trial.value,
                  **{f"param.{k}": v for k, v in trial.params.items()}}
        status = {"pruned": "pruned", "stopped": "stopped"}.get(trial.user_attrs.get("status", ""), "finished")
        guarded(lambda: self.tracker.log_run(self.parent, labels, Path(cell.run.out_dir), status,
                                             attempt_info(ended[-1]) if ended else None),
                f"MLflow logging of trial {trial.number}")
        self.logged.add(trial.number)

    def finish(self, study: optuna.Study, sweep: reg.Sweep) -> None:
        """Log the trials an earlier (killed) tune ended but never logged; close the parent run."""
        if self.parent is None:
            return
        cells = {c.run_id: c for c in sweep.cells}
        for trial in study.get_trials(deepcopy=False, states=LOGGED):
            if trial.number not in self.logged and trial.user_attrs.get("run_id") in cells:
                self.log(trial, cells[trial.user_attrs["run_id"]])
        counts = {f"trials_{s.name.lower()}": len(study.get_trials(deepcopy=False, states=(s,)))
                  for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
        best = {"best_value": study.best_value} if counts["trials_complete"] else {}
        guarded(lambda: self.tracker.end_sweep(self.parent, "finished", totals(sweep) | counts | best),
                "MLflow tune totals")
