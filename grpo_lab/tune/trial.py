"""One trial = one registered run, trained in this process in <workspace>/runs/<run id>.

As a sweep's worker does (runners/worker.py): the run folder is locked while it trains, a folder
holding the run's summary is reused instead of trained again, a checkpoint is resumed, and a
heartbeat after every step lets a later `tune` (or `sweep`) recover the hours of an attempt whose
process was killed (sweep.recover).
"""

from __future__ import annotations

import json
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import optuna
from sqlalchemy.orm import Session

from grpo_lab.execution import registry as reg
from grpo_lab.execution.sweep import start_step
from grpo_lab.execution.worker import finished_summary, locked
from grpo_lab.spec.config import RunConfig
from grpo_lab.rundir import RunDir

OnStep = Callable[[int, dict], None]  # may raise optuna.TrialPruned


@dataclass
class Outcome:
    status: str  # finished | stopped (an alarm's stop_on) | pruned | failed | reused
    summary: dict | None  # None when pruned or failed
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
        cell = reg.SweepRun(run=run, position=number, model=cfg.model, task="+".join(cfg.tasks),
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
    """One attempt in `run_dir`; writes result-<attempt>.json as the worker does (sweep.recover
    reads it if this process dies before the registry is told)."""
    from grpo_lab.trainer.grpo import train

    t0, host = time.time(), socket.gethostname()
    beat = {"attempt": attempt, "started": t0, "host": host, "steps": cfg.steps}

    def step_hook(step: int, metrics: dict) -> None:
        RunDir(run_dir).write_heartbeat({**beat, "updated": time.time(), "step": step + 1,
                                         "reward": metrics.get("reward/mean")})
        on_step(step, metrics)

    summary, error = None, None
    with locked(run_dir):
        try:
            summary = finished_summary(run_dir) or train(cfg, run_dir, on_step=step_hook)
            status = "stopped" if summary.get("stopped") else "finished"
        except optuna.TrialPruned as exc:
            status, error = "pruned", str(exc)
        except Exception as exc:  # noqa: BLE001 - a failed trial is recorded; the tune goes on
            status, error = "failed", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
        wall = time.time() - t0
        RunDir(run_dir).write_result(attempt, {"attempt": attempt, "host": host, "status": status,
                                                "error": error, "summary": summary, "wall_seconds": wall})
    return Outcome(status, summary, wall * devices / 3600, error)
