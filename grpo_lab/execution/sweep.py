"""A sweep: register a matrix's cells, run the pending ones on a runner, record every attempt.

Idempotent and restartable by construction:
- a cell is a run id; runs already finished (by this sweep or any other) are skipped;
- attempts left `running` by a killed driver are closed as `interrupted` on restart, keeping the
  GPU-hours their heartbeat shows, and the run resumes from its checkpoint as a new attempt;
  those whose scheduler job (Slurm) is still queued or running are adopted instead;
- a preempted attempt (it checkpointed on a signal) is resubmitted and not counted as a try;
- the worker refuses to re-train a folder that already holds its summary (worker.py).
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from grpo_lab.execution import calibration, final_evals
from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.base import Job, Outcome, Runner, retryable
from grpo_lab.rundir import RunDir
from grpo_lab.spec.arm import Arm, arm_label
from grpo_lab.spec.config import comparable
from grpo_lab.spec.matrix import load_matrix
from grpo_lab.spec.model_cards import load_card
from grpo_lab.spec.plan import Plan, check_data, make_plan, plan_hardware, sweep_name
from grpo_lab.util.yamlio import ConfigError


@dataclass
class SweepOptions:
    workspace: Path = reg.WORKSPACE
    db_url: str | None = None
    retries: int = 1  # extra attempts per run in this invocation after a failure
    allow_over_budget: bool = False
    name: str | None = None  # default: the matrix's name, else its file stem
    on_change: str = "refuse"  # an existing sweep whose matrix gained cells: refuse | extend | replace


@dataclass
class SweepResult:
    name: str
    counts: dict[str, int]
    executed: list[str] = field(default_factory=list)  # run ids trained (attempts started) in this call
    skipped: int = 0  # runs done without training in this call (before it, or by a job no driver watched)
    blocked: dict[str, str] = field(default_factory=dict)  # run id -> why it is not retried (sweep.blocked)


def plan_for(matrix: Path, opts: SweepOptions) -> Plan:
    """The matrix's plan, its estimates calibrated by the registry's finished runs, its data files
    read, checked against its budget."""
    spec = load_matrix(matrix)
    measured = calibration.from_registry(opts.db_url, opts.workspace, plan_hardware(spec))
    plan = make_plan(spec, name=spec.name or matrix.stem, calibrations=measured)
    check_data(plan)
    if opts.name:  # --name wins over the matrix's own name
        plan = dataclasses.replace(plan, name=sweep_name(opts.name))
    if plan.fits is False and not opts.allow_over_budget:
        spent, pending = spent_and_pending(plan, done_hours(opts, plan))
        if pending and spent + pending > plan.limit:
            unit = plan.hardware.unit
            so_far = f" after the {spent:.3g} {unit} its finished runs spent" if spent else ""
            raise ConfigError(f"{matrix}: the plan's pending cells need {pending:.3g} {unit}{so_far}, over its "
                              f"budget of {plan.limit:.3g}: cut cells or steps, raise budget, or pass --allow-over-budget")
    return plan


def spent_and_pending(plan: Plan, done: dict[str, float]) -> tuple[float, float]:
    """(device-hours the plan's finished runs spent, the estimate of its cells still to run), from
    ``done``: run id -> hours of every finished run. What a budget is held against: a sweep that
    has nothing left to run is never refused, and a restart is priced by what it has learnt."""
    spent = sum(done.get(c.run_id, 0.0) for c in plan.cells if c.run_id in done)
    pending = sum(e.total for c, e in zip(plan.cells, plan.estimates) if c.run_id not in done)
    return spent, pending


def done_hours(opts: SweepOptions, plan: Plan) -> dict[str, float]:
    """run id -> device-hours, for the plan's runs the registry holds as done ({} before any)."""
    url = opts.db_url or reg.default_url(opts.workspace)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return {}
    wanted = list(dict.fromkeys(c.run_id for c in plan.cells))
    done: dict[str, float] = {}
    with reg.connect(url)() as session:
        for i in range(0, len(wanted), 500):  # SQLite caps the variables of one statement
            runs = session.scalars(select(reg.Run).where(reg.Run.run_id.in_(wanted[i:i + 500]))).all()
            done.update({r.run_id: r.gpu_hours for r in runs if r.status in reg.DONE})
    return done


def open_sweep(session: Session, plan: Plan, matrix: Path, opts: SweepOptions, env: dict,
               check: Callable[[], None] | None = None) -> reg.Sweep:
    """Get or create the sweep row and link every cell of the plan to it. `check` (the preflight)
    runs once the plan is known to fit the sweep and before anything is written: a sweep it stops
    leaves no cells behind to refuse the fixed matrix as a changed one."""
    sweep = reg.get_sweep(session, plan.name)
    if sweep is not None:
        reconcile(sweep, plan, opts.on_change)
    if check is not None:
        check()
    if sweep is None:
        sweep = reg.Sweep(name=plan.name, matrix_path=str(matrix.resolve()), hardware=plan.hardware.name,
                          unit=plan.hardware.unit, price_per_gpu_hour=plan.price, budget_gpu_hours=plan.limit,
                          planned_gpu_hours=plan.total, env_json=json.dumps(env))
        session.add(sweep)
        session.flush()
    devices = {c.model: load_card(c.shared.model).gpus for c in plan.cells}  # keyed by the arm's model label
    reg.register_cells(session, sweep, plan.cells, plan.estimates, Path(opts.workspace) / "runs", devices)
    return sweep


def _without_seed(config: dict) -> str:
    return json.dumps({k: v for k, v in comparable(config).items() if k != "seed"}, sort_keys=True)


def mixed_arms(arms: list[tuple[tuple, str]]) -> list[str]:
    """Arms (model, task, trick set) given more than one config (seed aside), from (arm, config
    without seed) pairs: averaging such an arm mixes two experiments."""
    configs: dict[tuple, set[str]] = {}
    for arm, config in arms:
        configs.setdefault(arm, set()).add(config)
    return [" / ".join(map(str, arm)) + f" ({len(v)} configs)" for arm, v in configs.items() if len(v) > 1]


def cell_arms(cells: list[reg.SweepRun]) -> list[tuple[tuple, str]]:
    return [((c.model, c.task, arm_label(c.tricks)), _without_seed(json.loads(c.run.config_json))) for c in cells]


def reconcile(sweep: reg.Sweep, plan: Plan, mode: str) -> None:
    """An existing sweep and a plan with cells it lacks: the matrix was edited under the same name.
    Merging silently would put two configs in one arm (steps changed: two different "baseline,
    seed 0" runs averaged), so it is refused unless the user says what they mean: `extend` adds
    the new cells when every arm keeps one config (new seeds, new tricks), `replace` makes the
    sweep exactly the new matrix (old cells are unlinked; their runs stay registered and are
    reused if a matrix asks for them again). Cells the sweep has beyond the plan (seeds --decide
    added, cells dropped from the matrix) are kept."""
    linked = {c.run_id for c in sweep.cells}
    new = [c for c in plan.cells if c.run_id not in linked]
    if not new or not linked:
        return
    if mode == "replace":
        wanted = {c.run_id for c in plan.cells}
        sweep.cells[:] = [c for c in sweep.cells if c.run_id in wanted]
        return
    shared = {id(c.shared): _without_seed(c.shared.model_dump(mode="json")) for c in new}  # once per arm
    arms = [((c.model, c.task, arm_label(c.tricks)), shared[id(c.shared)]) for c in new]
    mixed = mixed_arms(cell_arms(sweep.cells) + arms)
    if mode == "extend" and not mixed:
        return
    example = f"{Arm.from_label(new[0].model, new[0].task, new[0].tricks)} / seed {new[0].seed}"
    why = (f"Extending would mix configs within an arm: {'; '.join(mixed[:3])}{' ...' if len(mixed) > 3 else ''}. "
           if mixed else "")
    raise ConfigError(
        f"sweep '{sweep.name}' exists with {len(linked)} cells and this matrix has {len(new)} it lacks (e.g. {example}): "
        f"the matrix changed under the same name ({sweep.matrix_path}). {why}Give it a new `name:` (or --name), "
        f"or pass --replace to make the sweep exactly this matrix (old cells unlinked, their runs kept)"
        + ("" if mixed else ", or --extend to add the new cells to it"))


def recover(session: Session, sweep: reg.Sweep) -> int:
    """Close attempts a killed driver left open; returns how many. Their GPU-hours come from the
    run's heartbeat (last step written by that attempt), so interrupted compute is not lost.
    Attempts with a scheduler job id are left to execute_sweep, which adopts the live ones."""
    n = 0
    for cell in sweep.cells:
        for attempt in cell.run.attempts:
            if attempt.status == "running" and not attempt.job_id:
                close_open(session, attempt)
                n += 1
    return n


def close_open(session: Session, attempt: reg.Attempt) -> None:
    """End an attempt a stopped driver left open: by its own result when it wrote one after the
    driver died, else as interrupted with its heartbeat's hours."""
    result = RunDir(attempt.run.out_dir).result(attempt.number)
    if result:
        hours = result.get("wall_seconds", 0.0) * attempt.run.devices / 3600
        attempt.start_step = result.get("start_step", attempt.start_step)
        reg.end_attempt(session, attempt, result["status"], hours, result.get("error"))
    else:
        hours, attempt.start_step = heartbeat_hours(attempt)
        reg.end_attempt(session, attempt, "interrupted", hours, "the sweep driver stopped during this attempt")


def adopt(session: Session, cells: list[reg.SweepRun], runner: Runner) -> dict[str, reg.Attempt]:
    """Attempts a killed driver left open among `cells`: those whose scheduler job is still queued
    or running are taken over by `runner` (not submitted again); the others are closed."""
    adopted = {}
    for cell in cells:
        for attempt in [a for a in cell.run.attempts if a.status == "running"]:
            job = Job(cell.run_id, prepare_dir(cell.run), attempt.number, cell.run.devices)
            if attempt.job_id and attempt.runner == runner.name and runner.adopt(job, attempt.job_id):
                adopted[cell.run_id] = attempt
            else:
                close_open(session, attempt)
    return adopted


def record_job_ids(session: Session, running: dict[str, reg.Attempt], runner: Runner) -> None:
    """Keep each submitted attempt's scheduler job id in the registry, for a restarted driver to adopt."""
    new = {rid: job_id for rid, a in running.items() if a.job_id is None and (job_id := runner.job_id(rid))}
    for rid, job_id in new.items():
        running[rid].job_id = job_id
    if new:
        session.commit()


def settle(session: Session, attempt: reg.Attempt, out: Outcome, may_retry: bool) -> bool:
    """Record an ended attempt; returns whether to submit its run again now: always after a
    preemption (nothing was lost, it is not a try), after a failure or a vanished attempt while
    `may_retry`. A vanished attempt's hours are its heartbeat's: it had no time to report them."""
    if out.start_step is not None:
        attempt.start_step = out.start_step
    hours = out.wall_seconds * attempt.run.devices / 3600
    if out.status == "interrupted":
        hours, attempt.start_step = heartbeat_hours(attempt)
    again = out.status == "preempted" or (out.status in ("failed", "interrupted") and retryable(out.error)
                                          and may_retry)
    reg.end_attempt(session, attempt, out.status, hours, out.error, retry=again)
    return again


def heartbeat_hours(attempt: reg.Attempt) -> tuple[float, int | None]:
    """(device-hours, start step) of an attempt that ended without a result, from the run's
    heartbeat when this attempt wrote it last; (0, its provisional start step) otherwise."""
    beat = RunDir(attempt.run.out_dir).heartbeat() or {}
    if beat.get("attempt") != attempt.number:
        return 0.0, attempt.start_step
    secs = max(beat.get("updated", 0) - beat.get("started", 0), 0)
    return secs * attempt.run.devices / 3600, beat.get("start_step", attempt.start_step)


def start_step(run_dir: Path) -> int:
    """Where the next attempt will likely resume: a provisional value, replaced by the step the
    attempt reports it resumed from (its checkpoint's) when it ends; the heartbeat may be past it."""
    beat = RunDir(run_dir).heartbeat()
    return int(beat["step"]) if beat else 0


def blocked(run: reg.Run) -> str | None:
    """Why a failed run must not be tried again yet: its last attempt failed in a way a retry
    repeats (runners.base.NON_RETRYABLE) and the file it names is still there. None: try it."""
    last = run.attempts[-1] if run.attempts else None
    if run.status != "failed" or last is None or retryable(last.error):
        return None
    if not RunDir(run.out_dir).has_checkpoint():
        return None  # the user removed the damaged checkpoint: the run starts over
    return (last.error or "").splitlines()[0]


def sweep_status(counts: dict[str, int]) -> str:
    """finished when every cell is done, failed when the rest failed, else pending (more to run)."""
    left = sum(n for s, n in counts.items() if s not in reg.DONE)
    return "finished" if left == 0 else "failed" if left == counts.get("failed", 0) else "pending"


def prepare_dir(run: reg.Run) -> Path:
    folder = RunDir(run.out_dir)
    if folder.config() is None:
        folder.write_config(json.loads(run.config_json))
    return folder.path


def execute_sweep(session: Session, sweep: reg.Sweep, runner: Runner, opts: SweepOptions,
                  on_event: Callable[[str, reg.SweepRun, Outcome | None], None] | None = None,
                  design: final_evals.Design | None = None, skip: frozenset[str] = frozenset()) -> SweepResult:
    """Run every pending cell of `sweep` on `runner` until each is done or out of retries.
    `on_event(kind, cell, outcome)` is told of "start" and "end" (for progress and tracking).
    `design` (--decide's eval design): its runs also make their final eval at the design's K.
    `skip`: run ids not to run now (--screen: cells already at the rung, arms it dropped); a
    paused attempt (at its screening rung) is not submitted again in this call."""
    cells = sorted(sweep.cells, key=lambda c: c.position)
    by_run = {c.run_id: c for c in cells}
    result = SweepResult(sweep.name, {})
    pending = [c for c in cells if c.run.status not in reg.DONE and c.run_id not in skip]
    left_open = {c.run_id for c in pending if any(a.status == "running" for a in c.run.attempts)}
    # adoption first: a job that ended after its driver was killed closes its attempt by its own
    # result here (finished, or failed in a way that may block a retry)
    running = adopt(session, pending, runner)
    result.blocked = {c.run_id: why for c in pending if c.run_id not in running and (why := blocked(c.run))}
    todo = [c for c in pending if c.run_id not in running and c.run.status not in reg.DONE
            and c.run_id not in result.blocked]
    result.skipped = sum(c.run.status in reg.DONE for c in cells)
    tries = {rid: int(rid in left_open) for rid in by_run}  # an adopted or adoption-closed attempt was a try
    host = socket.gethostname()
    notify = on_event or (lambda *a: None)
    for rid in running:
        notify("start", by_run[rid], None)
    try:
        while todo or running:
            while todo and len(running) < runner.slots:
                cell = todo.pop(0)
                run_dir = prepare_dir(cell.run)
                attempt = reg.begin_attempt(session, cell.run, runner.name, host, start_step(run_dir))
                running[cell.run_id] = attempt
                tries[cell.run_id] += 1
                result.executed.append(cell.run_id)
                runner.submit(Job(cell.run_id, run_dir, attempt.number, cell.run.devices,
                                  eval_samples=(design or {}).get((cell.model, cell.task))))
                notify("start", cell, None)
            record_job_ids(session, running, runner)
            for out in runner.poll(timeout=1.0):
                attempt = running.pop(out.job.run_id)
                cell = by_run[out.job.run_id]
                if out.status == "preempted":
                    tries[cell.run_id] -= 1  # the scheduler took it away: not a try against --retries
                if settle(session, attempt, out, tries[cell.run_id] <= opts.retries):
                    todo.append(cell)  # resumes from its checkpoint as the next attempt
                notify("end", cell, out)
            record_job_ids(session, running, runner)
            if not running and not todo:
                break
            notify("tick", None, None)
    finally:
        if running:  # Ctrl-C or an error in the driver: close what is open, keep the hours
            runner.close()
            for attempt in running.values():
                hours, attempt.start_step = heartbeat_hours(attempt)
                reg.end_attempt(session, attempt, "interrupted", hours, "the sweep was interrupted")
    result.counts = reg.counts(session, sweep)
    sweep.status = sweep_status(result.counts)
    session.commit()
    return result


def totals(sweep: reg.Sweep, design: final_evals.Design | None = None) -> dict:
    """Sweep-level accounting: hours by attempt outcome (with the eval-only attempts `design`,
    --decide's eval design, asked for), and the cells by status."""
    runs = [c.run for c in sweep.cells]
    evals = final_evals.hours(sweep.cells, design or {})
    used = sum(r.gpu_hours for r in runs) + evals
    wasted = sum(r.wasted_gpu_hours for r in runs)
    return {"gpu_hours": used, "wasted_gpu_hours": wasted, "useful_gpu_hours": used - wasted,
            "final_eval_gpu_hours": evals,
            "cost": used * sweep.price_per_gpu_hour, "unit": sweep.unit,
            "attempts": sum(len(r.attempts) for r in runs),
            **{f"cells_{s}": sum(r.status == s for r in runs) for s in reg.STATUSES}}


def preflight_pairs(plan: Plan, done: set[str]) -> list:
    """One baseline config per (model, task) of the plan that still has runs to do, `done` the
    run ids the registry holds as done (preflight's targets)."""
    from grpo_lab.preflight.targets import baseline_configs

    todo = {(c.model, c.task) for c in plan.cells if c.run_id not in done}
    return baseline_configs(plan.cells, keep=lambda model, task: (model, task) in todo)
