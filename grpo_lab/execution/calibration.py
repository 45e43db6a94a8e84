"""What finished runs measured, read from the registry, as calibrations of the FLOPs estimate.

A run's measured device-hours are the registry's (every attempt's worker time: what a budget
pays), split into the estimate's phases by the run's own phase timing (summary.json):

    sampling  = rollout + reward        training = train + advantage
    reference = reference               eval     = eval
    fixed     = registry hours - the four above (process start, model load and warm start,
                checkpoints, logging: what a run costs whatever its size)

Only runs that finished in one attempt count: a resumed run's hours include work redone.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from grpo_lab.execution import registry as reg
from grpo_lab.rundir import RunDir
from grpo_lab.spec.arm import split_arm_model
from grpo_lab.spec.budget import Calibration, Measured, calibration_key, estimate, fit_calibration
from grpo_lab.spec.config import RunConfig
from grpo_lab.spec.model_cards import Hardware, load_card

MEASURED_PHASES = {"sampling": ("rollout", "reward"), "reference": ("reference",),
                   "training": ("train", "advantage"), "eval": ("eval",)}


def measured(run: reg.Run, hardware: Hardware) -> Measured | None:
    """The run's estimate and measured phases; None if it did not finish in one attempt or left
    no summary."""
    if run.status not in reg.DONE or len(run.attempts) != 1:
        return None
    summary = RunDir(run.out_dir).summary()
    if summary is None:
        return None
    by_phase = summary.device_hours_by_phase
    cfg = RunConfig.model_validate(json.loads(run.config_json))
    phases = {p: sum(by_phase.get(k, 0.0) for k in keys) for p, keys in MEASURED_PHASES.items()}
    phases["fixed"] = max(run.gpu_hours - sum(phases.values()), 0.0)
    return Measured(estimate(cfg, load_card(cfg.model), hardware), phases)


def from_registry(db_url: str | None, workspace: Path, hardware: Hardware) -> dict[str, Calibration]:
    """Calibrations from the registry a sweep of this workspace uses; {} while it has none."""
    url = db_url or reg.default_url(workspace)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return {}
    with reg.connect(url)() as session:
        return calibrations(session, hardware)


def calibrations(session: Session, hardware: Hardware) -> dict[str, Calibration]:
    """calibration_key(model, trainer) -> Calibration from every finished run of sweeps on
    ``hardware`` in this registry."""
    rows = session.scalars(select(reg.SweepRun).join(reg.Sweep).where(reg.Sweep.hardware == hardware.name)).all()
    by_model: dict[str, list[Measured]] = defaultdict(list)
    seen: set[str] = set()
    for cell in rows:
        if cell.run_id in seen:
            continue
        seen.add(cell.run_id)
        got = measured(cell.run, hardware)
        if got is not None:
            trainer = json.loads(cell.run.config_json).get("trainer", "grpo-lab")
            by_model[calibration_key(split_arm_model(cell.model)[0], trainer)].append(got)
    return {model: cal for model, runs in by_model.items() if (cal := fit_calibration(runs)) is not None}
