"""The tune loop: an Optuna study in the registry's database, one registered run per trial.

Trials run one after another in this process (TPE sampler, median pruner on the eval metric).
The study and the registry share one SQL database; both survive a kill: on the next `tune`
with the same name, attempts left open are closed with their heartbeat's hours (sweep.recover),
trials left RUNNING are failed and their params enqueued again, so the new trial resumes the
same run folder from its checkpoint. Finished trials are never repeated.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.orm import Session

from grpo_lab.execution import registry as reg
from grpo_lab.execution.lease import Lease
from grpo_lab.util.environment import env_snapshot
from grpo_lab.execution.sweep import recover, totals
from grpo_lab.rundir import Summary
from grpo_lab.spec.config import RunConfig
from grpo_lab.spec.matrix import DEFAULT_HARDWARE
from grpo_lab.spec.model_cards import Hardware, load_card, load_hardware
from grpo_lab.spec.plan import sweep_name
from grpo_lab.tune.base import Base, load_base
from grpo_lab.tune.output import write_override
from grpo_lab.tune.space import SearchSpace, load_space
from grpo_lab.tune.track import TuneTracker
from grpo_lab.tune.trial import OnStep, execute_trial, register_trial
from grpo_lab.util.yamlio import ConfigError, suggest

COUNTED = (TrialState.COMPLETE, TrialState.PRUNED)  # what --trials counts
MAX_FAILURES = 3  # consecutive failed trials that end a tune (a broken base, not an unlucky point)
# The pruner needs the metric at eval steps; delta_pass@1 = pass@1 - the base eval's pass@1, and
# the base eval is the same for every trial of one model and eval config, so pass@1 ranks alike.
INTERMEDIATE = {"delta_pass@1": "eval/pass@1"}


@dataclass
class TuneOptions:
    trials: int  # COMPLETE + PRUNED trials the study should hold in total
    name: str | None = None  # default: <config stem>-<space stem>; the study and sweep are tune-<name>
    metric: str = "eval/pass@1"  # a final eval metric of the run's summary, or delta_pass@1
    direction: str = "maximize"
    seed: int = 0
    budget: float | None = None  # stop proposing trials once the tune's attempts used this many hours
    prune_warmup: float = 0.25  # no pruning in the first fraction of the steps (early evals are noisy)
    workspace: Path = reg.WORKSPACE
    db_url: str | None = None
    tracking_uri: str | None = None
    hardware: str | None = None  # profile for the sweep's unit and price (default: the matrix's, else cpu)
    out: Path | None = None  # the tuned override file (default experiments/tuned/<name>.yaml)
    sets: list[str] = field(default_factory=list)


@dataclass
class TuneResult:
    name: str  # tune-<name>: the Optuna study and the registry sweep
    study: optuna.Study
    unit: str
    stopped_by: str  # trials | budget | failures
    gpu_hours: float  # all attempts of the tune's runs
    out: Path | None  # the override file; None while no trial completed


def tune(target: Path, space_path: Path, opts: TuneOptions,
         on_trial: Callable[[FrozenTrial], None] | None = None) -> TuneResult:
    """Run (or continue) the study until it holds opts.trials completed or pruned trials."""
    metric = check_metric(opts.metric)
    base = load_base(target, opts.sets)
    space = load_space(space_path, base.data, base.source)
    stem = opts.name or f"{Path(target).stem}-{Path(space_path).stem}"
    name = sweep_name(f"{reg.TUNE_PREFIX}{stem}")
    hw = load_hardware(opts.hardware or base.hardware or DEFAULT_HARDWARE)
    url = opts.db_url or reg.default_url(opts.workspace)
    Session = reg.connect(url)
    # Trials may share runs with sweeps (a tuned config can equal a cell), and a starting tune treats
    # RUNNING trials as dead: both need this tune to be the registry's only driver.
    with Lease(Session, name):
        study = open_study(url, name, metric, opts, base.config().steps)
        with Session() as session:
            sweep = open_sweep(session, name, target, hw, opts.budget)
            recover(session, sweep)
            tracker = TuneTracker(opts.tracking_uri, opts.workspace, sweep, target, space_path, metric, opts.direction)
            session.commit()
            stopped_by = Tuning(study, session, sweep, base, space, metric, opts, tracker).run(on_trial)
            spent = totals(sweep)["gpu_hours"]
            tracker.finish(study, sweep)
    out = None
    if study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        out = write_override(opts.out or Path("experiments/tuned") / f"{stem}.yaml", base, study, metric,
                             space.source)
    return TuneResult(name, study, hw.unit, stopped_by, spent, out)


def check_metric(metric: str) -> str:
    """The summary key to optimise; 'pass@1' is read as 'eval/pass@1' (as --metric of `report`)."""
    if metric in INTERMEDIATE or metric.startswith("eval/"):
        return metric
    if "/" not in metric:
        return f"eval/{metric}"
    raise ConfigError(f"--metric {metric}: use a final eval metric of the run summary (eval/pass@1, "
                      f"eval/pass@8, eval/reward_mean, eval/<task>/pass@1, ...) or delta_pass@1")


def open_study(url: str, name: str, metric: str, opts: TuneOptions, steps: int) -> optuna.Study:
    """Create or load the study; fail its trials a killed tune left RUNNING and enqueue their params."""
    url = reg.engine_url(url)
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=int(steps * opts.prune_warmup))
    study = optuna.create_study(storage=optuna.storages.RDBStorage(url, engine_kwargs=engine), study_name=name,
                                load_if_exists=True, direction=opts.direction, pruner=pruner)
    if study.direction.name.lower() != opts.direction:
        raise ConfigError(f"study {name} was started to {study.direction.name.lower()}: pass --direction "
                          f"{study.direction.name.lower()}, or give another --name")
    started = study.user_attrs.get("metric", metric)
    if started != metric and study.get_trials(deepcopy=False, states=COUNTED):
        raise ConfigError(f"study {name} optimises {started}: pass --metric {started}, or give another --name")
    study.set_user_attr("metric", metric)
    for stale in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(stale.number, state=TrialState.FAIL)
        if stale.params:
            study.enqueue_trial(stale.params, user_attrs={"resumes": stale.number})
    # Seeded by the history too: a resumed tune seeded as a fresh one would replay the first
    # proposals (TPE starts with seeded random ones) and "complete" them by reusing their runs.
    study.sampler = optuna.samplers.TPESampler(seed=opts.seed + len(study.trials))
    return study


def open_sweep(session: Session, name: str, target: Path, hw: Hardware, budget: float | None) -> reg.Sweep:
    sweep = reg.get_sweep(session, name)
    if sweep is None:
        sweep = reg.Sweep(name=name, matrix_path=str(Path(target).resolve()), hardware=hw.name, unit=hw.unit,
                          price_per_gpu_hour=hw.price_per_gpu_hour, env_json=json.dumps(env_snapshot()))
        session.add(sweep)
    sweep.budget_gpu_hours = budget if budget is not None else sweep.budget_gpu_hours
    session.commit()
    return sweep


@dataclass
class Tuning:
    """A tune in progress: the study, the registry sweep its runs belong to, and what trials need."""

    study: optuna.Study
    session: Session
    sweep: reg.Sweep
    base: Base
    space: SearchSpace
    metric: str
    opts: TuneOptions
    tracker: TuneTracker

    def run(self, on_trial: Callable[[FrozenTrial], None] | None = None) -> str:
        """Ask, train, tell until the study holds opts.trials counted trials; returns why it stopped."""
        failures = 0
        while len(self.study.get_trials(deepcopy=False, states=COUNTED)) < self.opts.trials:
            if self.opts.budget is not None and totals(self.sweep)["gpu_hours"] >= self.opts.budget:
                return "budget"
            frozen, cell = self.trial(self.study.ask(self.space.distributions))
            self.tracker.log(frozen, cell)
            if on_trial:
                on_trial(frozen)
            failures = failures + 1 if frozen.state == TrialState.FAIL else 0
            if failures >= MAX_FAILURES:
                return "failures"
        return "trials"

    def trial(self, trial: optuna.Trial) -> tuple[FrozenTrial, reg.SweepRun]:
        """One trial: resolve its config, register and execute its run, tell the study the outcome."""
        study = self.study
        try:
            cfg = self.base.config(trial.params)
        except ConfigError:  # a combination of values the config rejects (each alone was checked)
            study.tell(trial, state=TrialState.FAIL)
            raise
        cell = register_trial(self.session, self.sweep, cfg, trial.number, Path(self.opts.workspace) / "runs",
                              load_card(cfg.model).gpus)
        trial.set_user_attr("run_id", cfg.run_id())
        out = execute_trial(self.session, cell.run, cfg, pruning_hook(trial, self.metric, cfg))
        trial.set_user_attr("status", out.status)
        trial.set_user_attr("gpu_hours", out.gpu_hours)
        if out.status == "pruned":
            return study.tell(trial, state=TrialState.PRUNED), cell
        if out.summary is None:
            trial.set_user_attr("error", (out.error or "")[-1000:])
            return study.tell(trial, state=TrialState.FAIL), cell
        try:
            value = objective(out.summary, self.metric)
        except ConfigError:
            study.tell(trial, state=TrialState.FAIL)
            raise
        return study.tell(trial, value), cell


def pruning_hook(trial: optuna.Trial, metric: str, cfg: RunConfig) -> OnStep:
    """Report the metric at each eval step; prune (raise) when the median pruner says so. Never
    at the last step: its checkpoint and summary are written after this hook, and it is complete."""
    key = INTERMEDIATE.get(metric, metric)

    def on_step(step: int, metrics: dict) -> None:
        if key not in metrics:
            return
        trial.report(float(metrics[key]), step)
        if step + 1 < cfg.steps and trial.should_prune():
            raise optuna.TrialPruned(f"pruned at step {step + 1}: {key} = {metrics[key]:.4g}")

    return on_step


def objective(summary: Summary, metric: str) -> float:
    """The trial's value: a final eval metric, or a top-level one such as delta_pass@1."""
    final = summary.final
    # --metric names a key of summary.json, so a top-level one is looked up in its JSON form
    value = final.get(metric, summary.model_dump(mode="json").get(metric) if metric in INTERMEDIATE else None)
    if not isinstance(value, (int, float)):
        known = sorted(final) + list(INTERMEDIATE)
        raise ConfigError(f"--metric {metric} is not in the run summary{suggest(metric, known)}; "
                          f"known: {', '.join(known)}")
    return float(value)
