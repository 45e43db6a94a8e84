"""What the report is built from: the analysis frames and the sweep's dicts in one dataclass
(ReportData); execution/report_inputs.py makes one from a registered sweep.

Frames are conformed to the column contracts below on construction: a missing column becomes a
typed all-null column, so every later step can select columns without asking whether they exist
(an empty `events` frame, or an older analysis without a new metric, still renders).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from grpo_lab.analysis.curves import ArmFits
from grpo_lab.report.screening import Screening
from grpo_lab.spec.arm import BASELINE  # noqa: F401  (the report modules read it from here)

KEYS = ["model", "task", "tricks"]

_S, _F, _I, _B = pl.Utf8, pl.Float64, pl.Int64, pl.Boolean

RUNS_SCHEMA: dict[str, Any] = {
    "model": _S, "task": _S, "tricks": _S, "seed": _I, "run_id": _S, "status": _S,
    "pass@1": _F, "pass@1_best": _F, "pass@k": _F, "delta_pass@1": _F, "reward_final": _F,
    "reward_auc": _F, "steps_to_90": _F, "oscillation": _F, "length_slope": _F,
    "length_ratio": _F, "alarms": _I, "alarm_kinds": _S, "collapsed": _B, "gpu_hours": _F,
    "cost_per_effective_sample": _F, "effective_samples": _F, "sampling_share": _F,
    "base_pass@1": _F,  # the eval before training (summary.json "base")
    "planned_hours": _F,  # the plan's estimate when the cell was registered
    "loop_seconds": _F,  # wall seconds in training steps (analysis/run_metrics.loop_seconds)
    "diagnosis": _S,  # why the run taught nothing (analysis/run_diagnosis.py), None when it learnt
    "folder": _S,  # the run folder (absolute): the runs table links it
    "mlflow_run": _S,  # the run's name in MLflow (execution/tracking.child_run_name)
}
STEPS_SCHEMA: dict[str, Any] = {
    "run_id": _S, "step": _I, "reward/mean": _F, "eval/pass@1": _F, "length/mean": _F,
    "entropy/mean": _F, "kl/mean": _F, "diversity/unique_answer_ratio": _F,
}
EFFECTS_SCHEMA: dict[str, Any] = {
    "model": _S, "task": _S, "tricks": _S, "n": _I, "effect": _F, "ci_low": _F, "ci_high": _F,
    "p_value": _F,
}
INTERACTIONS_SCHEMA: dict[str, Any] = {
    "model": _S, "task": _S, "tricks": _S, "n_tricks": _I, "n_seeds": _I, "expected": _F,
    "observed": _F, "interaction": _F, "ci_low": _F, "ci_high": _F, "p_value": _F,
    "q_value": _F, "p_holm": _F, "best_single": _S, "best_single_effect": _F, "verdict": _S,
    "flagged": _B,  # the detector's flag; null reads it from the verdict (report/verdicts.py flag_expr)
    "seeds_needed": _I, "warnings": _S,
}
EVENTS_SCHEMA: dict[str, Any] = {"run_id": _S, "step": _I, "kind": _S, "value": _F}


def conform(frame: pl.DataFrame, schema: dict[str, Any]) -> pl.DataFrame:
    """Add missing contract columns as nulls and cast present ones; extra columns are kept."""
    present = [pl.col(name).cast(dtype, strict=False) for name, dtype in schema.items()
               if name in frame.columns]
    missing = [pl.lit(None, dtype=dtype).alias(name) for name, dtype in schema.items()
               if name not in frame.columns]
    frame = frame.with_columns(present + missing)
    # NaN compares above every number in polars: an undefined CI must be null, never "significant"
    frame = frame.with_columns(pl.col(pl.Float64).fill_nan(None))
    # A null key would silently drop out of every join; name it instead.
    keys = [pl.col(k).fill_null("unknown") for k in KEYS if k in schema]
    return frame.with_columns(keys) if keys else frame


@dataclass
class ReportData:
    """runs: one row per run (RUNS_SCHEMA); steps: long frame run_id x step (STEPS_SCHEMA);
    effects: trick set vs baseline on `meta["metric"]`; interactions: one row per combination;
    events: alarm events (may be empty); costs: unit, by_phase, total, wasted, split,
    price_per_gpu_hour, cost_per_effective_sample; env: environment snapshot; meta: sweep (or
    name), matrix (or matrix_path), metric, created (or created_at), commands (list[str]);
    variance and decisions: the "decisions" section, shown when either is given (decisions:
    waves, verdicts (analysis/verdict.py Verdict, rendered as they are) and the --decide
    options, execution/waves.py report_rows); curves: each arm's compute-curve fits, the
    "Compute curves" section; samples: eval completions side by side (report/samples.py);
    screening: what a --screen sweep's rungs dropped, the "Screening" section (None: not screened)."""

    runs: pl.DataFrame
    steps: pl.DataFrame
    effects: pl.DataFrame
    interactions: pl.DataFrame
    events: pl.DataFrame = field(default_factory=pl.DataFrame)
    costs: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    variance: pl.DataFrame = field(default_factory=pl.DataFrame)  # analysis.variance.budget_frame
    decisions: dict[str, Any] = field(default_factory=dict)
    curves: list[ArmFits] = field(default_factory=list)  # analysis/curves.py, per arm
    samples: pl.DataFrame = field(default_factory=pl.DataFrame)  # report/samples.py SCHEMA
    screening: Screening | None = None  # report/screening.py

    def __post_init__(self) -> None:
        self.runs = conform(self.runs, RUNS_SCHEMA)
        self.steps = conform(self.steps, STEPS_SCHEMA)
        self.effects = conform(self.effects, EFFECTS_SCHEMA)
        self.interactions = conform(self.interactions, INTERACTIONS_SCHEMA)
        self.events = conform(self.events, EVENTS_SCHEMA)

    @property
    def metric(self) -> str:
        return str(self.meta.get("metric") or "pass@1")

    @property
    def hours_unit(self) -> str:
        return str(self.costs.get("unit") or "gpu-hours")

    def eval_steps(self) -> pl.DataFrame:
        """run_id, step, eval/pass@1 by steps trained: the base eval at 0, then each logged eval at
        its step index + 1 (the trainer evaluates after a step), so an eval point and the reward of
        the rollouts sampled after as many steps share an x."""
        logged = (self.steps.select("run_id", "step", "eval/pass@1").drop_nulls()
                  .with_columns(pl.col("step") + 1))
        base = (self.runs.select("run_id", pl.lit(0, dtype=pl.Int64).alias("step"),
                                 pl.col("base_pass@1").alias("eval/pass@1")).drop_nulls())
        return pl.concat([base, logged]).sort("run_id", "step")
