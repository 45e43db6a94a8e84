"""One trial = one registered run, trained in this process in <workspace>/runs/<run id>.

A trial's attempt is the sweep worker's (execution/worker.execute_attempt): the run folder is
locked while it trains, a folder holding the run's summary is reused instead of trained again, a
checkpoint is resumed, and a heartbeat after every step lets a later `tune` (or `sweep`) recover
the hours of an attempt whose process was killed (sweep.recover). Pruning is one more way for it
to end: optuna.TrialPruned raised from the trial's on_step.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

import optuna
from sqlalchemy.orm import Session

from grpo_lab.execution import registry as reg
from grpo_lab.execution.sweep import start_step
from grpo_lab.execution.worker import OnStep, execute_attempt, finished_summary
from grpo_lab.spec.arm import arm_model
from grpo_lab.spec.config import RunConfig
from grpo_lab.rundir import RunDir, Summary

ENDS = {optuna.TrialPruned: "pruned"}  # a pruned attempt keeps its checkpoint: the run stays pending


@dataclass
class Outcome:
    status: str  # finished | stopped (an alarm's stop_on) | pruned | failed | reused
    summary: Summary | None  # None when pruned or failed
    gpu_hours: float  # this attempt's; 0 for a reused run
    error: str | None = None


def register_trial(session: Session, sweep: reg.Sweep, cfg: RunConfig, number: int, runs_dir: Path,
                   devices: int) -> reg.SweepRun:
    """Link the trial's run to the tune sweep (one cell per distinct run id, labelled tune#<n>)."""
    run = session.get(reg.Run, cfg.run_id())
    if run is None:
        run = reg.Run(run_id=cfg.run_id(), config_json=json.dumps(cfg.model_dump(mode="json")),
                      out_dir=str((runs_dir / cfg.run_id()).resolve()), devices=devices)
        session.add(run)
    cell = next((c for c in sweep.cells if c.run_id == run.run_id), None)
    if cell is None:
        cell = reg.SweepRun(run=run, position=number, model=arm_model(cfg.model, cfg.trainer), task="+".join(cfg.tasks),
                            tricks=f"tune#{number}", seed=cfg.seed)
        sweep.cells.append(cell)
    session.commit()
    return cell


def execute_trial(session: Session, run: reg.Run, cfg: RunConfig, on_step: OnStep) -> Outcome:
    """Train (or resume, or reuse) `run`, recording an attempt with its GPU-hours unless reused."""
    run_dir = Path(run.out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if run.status in reg.DONE and (summary := finished_summary(run_dir)):
        return Outcome("reused", summary, 0.0)
    attempt = reg.begin_attempt(session, run, "tune", socket.gethostname(), start_step(run_dir))
    out = train_in(run_dir, cfg, attempt.number, run.devices, on_step)
    # A pruned attempt leaves the run pending: whoever meets this config again resumes it.
    reg.end_attempt(session, attempt, out.status, out.gpu_hours, None if out.error is None else out.error[:4000])
    return out


def train_in(run_dir: Path, cfg: RunConfig, attempt: int, devices: int, on_step: OnStep) -> Outcome:
    """One attempt in `run_dir` by the worker's execute_attempt, which writes result-<attempt>.json
    (sweep.recover reads it if this process dies before the registry is told)."""
    RunDir(run_dir).write_config(cfg.model_dump(mode="json"))  # what the sweep driver writes before a worker starts
    result = execute_attempt(run_dir, attempt, devices, on_step=on_step, ends=ENDS)
    # a folder a killed trial finished is reused at no cost: recover() already charged its hours
    hours = 0.0 if result["reused"] else result["wall_seconds"] * devices / 3600
    return Outcome(result["status"], Summary.parse(result["summary"]), hours, result["error"])
