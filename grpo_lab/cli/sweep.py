"""Commands on matrices and sweeps: `plan`, `preset`, `sweep`, `status`, `ui`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from grpo_lab.cli.common import (
    app,
    check_runnable,
    console,
    fail,
    hold_lease,
    open_registry,
)
from grpo_lab.util.yamlio import ConfigError


@app.command()
def plan(
    matrix: Path = typer.Argument(..., help="matrix YAML (see matrices/)"),
    as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON to stdout (a line per cell)"),
    cells: bool = typer.Option(False, "--cells", help="print a tab-separated line per cell instead of a table per trick set"),
    hardware: Optional[str] = typer.Option(None, help="hardware profile (default: the matrix's budget.hardware, else cpu)"),
    decide_delta: Optional[float] = typer.Option(
        None, "--decide-delta", help="also print, per comparison, the seeds per arm `sweep --decide` needs at this δ even without noise"),
    workspace: Path = typer.Option(Path(".grpo-lab"), help="workspace whose registry's finished runs calibrate the estimates"),
    db: Optional[str] = typer.Option(None, help="registry SQLAlchemy URL (default sqlite in the workspace; env GRPO_LAB_DB)"),
) -> None:
    """Expand a matrix and price every cell before any compute is spent (exit 0 whether or not it fits).
    Estimates are corrected by what finished runs of the same model measured, where the registry has any."""
    import sys

    from rich.markup import escape

    from grpo_lab.execution.calibration import from_registry
    from grpo_lab.spec.matrix import load_matrix
    from grpo_lab.spec.plan import make_plan, plan_hardware
    from grpo_lab.views import plan_lines, show_plan

    try:
        spec = load_matrix(matrix)
        measured = from_registry(db, workspace, plan_hardware(spec, hardware))
        p = make_plan(spec, hardware, name=matrix.stem, calibrations=measured)
    except ConfigError as exc:
        fail(ConfigError(escape(str(exc))))  # '[a, b]' in a message is not markup
    if as_json or cells:  # streamed: a plan can have hundreds of thousands of cells
        sys.stdout.writelines(p.json_chunks() if as_json else plan_lines(p))
        return
    show_plan(console, p)
    if decide_delta is not None:  # imported only here: the decide stack pulls in scipy
        from grpo_lab.analysis import decide as dec
        from grpo_lab.execution.waves import DecideOptions, plan_arms, say_needs

        dopts = DecideOptions(delta=decide_delta)
        comps = dec.comparisons(plan_arms(p))
        say_needs(dec.prior_needs(comps, alpha=dopts.alpha, delta=decide_delta, most=dopts.most_seeds,
                                  method=dopts.method), dopts, lambda line: console.print(escape(line)))


@app.command()
def preset(
    tier: str = typer.Argument(..., help="budget tier in GPU-hours: 100, 1k or 10k"),
    model: str = typer.Option(..., help="model card name, e.g. qwen2.5-7b or tiny"),
    task: str = typer.Option(..., help="math, code or logic"),
    hardware: str = typer.Option("h800", help="hardware profile in experiments/hardware/"),
    out: Optional[Path] = typer.Option(None, help="output file (default matrices/preset-<tier>-<model>-<task>.yaml)"),
    force: bool = typer.Option(False, "--force", help="overwrite the output file if it exists"),
) -> None:
    """Write a budget-tier matrix (docs/study.md "Budget tiers") whose estimate fits the tier, and summarise its plan."""
    from rich.markup import escape

    from grpo_lab.spec.budget import preset_yaml
    from grpo_lab.spec.matrix import load_matrix
    from grpo_lab.spec.plan import make_plan
    from grpo_lab.views import show_plan

    out = out or Path("matrices") / f"preset-{tier}-{model}-{task}.yaml"
    if out.exists() and not force:
        fail(ConfigError(f"{out} exists: pass --force to overwrite it, or --out to write elsewhere"))
    try:
        text = preset_yaml(tier, model, task, hardware)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        p = make_plan(load_matrix(out), name=out.stem)
    except ConfigError as exc:
        fail(ConfigError(escape(str(exc))))  # '[a, b]' in a message is not markup
    console.print(f"wrote {out}")
    show_plan(console, p, table=False)


@app.command()
def sweep(
    ctx: typer.Context,
    matrix: Path = typer.Argument(..., help="matrix YAML (see matrices/)"),
    runner: Optional[str] = typer.Option(None, help="local, ray, slurm, or a profile YAML (default: the matrix's runner, else local)"),
    max_parallel: Optional[int] = typer.Option(None, help="attempts at once (default: the profile's, else one per GPU or core)"),
    retries: int = typer.Option(1, help="extra attempts for a failed run, each resuming from its checkpoint"),
    allow_over_budget: bool = typer.Option(False, help="run a plan whose estimate exceeds its budget"),
    skip_preflight: bool = typer.Option(False, help="do not check reward signal and diversity before training"),
    workspace: Path = typer.Option(Path(".grpo-lab"), help="registry, MLflow store and run folders"),
    db: Optional[str] = typer.Option(None, help="registry SQLAlchemy URL (default sqlite in the workspace; env GRPO_LAB_DB)"),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI (default sqlite in the workspace; env MLFLOW_TRACKING_URI)"),
    name: Optional[str] = typer.Option(None, help="sweep name (default: the matrix's name)"),
    replace: bool = typer.Option(False, "--replace", help="the matrix changed: make the sweep exactly this matrix (old cells unlinked, their runs kept)"),
    extend: bool = typer.Option(False, "--extend", help="the matrix changed: add its new cells to the sweep (refused where an arm would get a second config)"),
    decide: bool = typer.Option(False, help="after each wave, decide every comparison and add seeds where one is open"),
    budget: Optional[float] = typer.Option(None, help="--decide: device-hours for the whole sweep (default: the matrix's budget)"),
    delta: float = typer.Option(0.02, help="--decide: equivalence margin on pass@1 (TOST within ±delta)"),
    most_seeds: int = typer.Option(32, help="--decide: seed cap per arm"),
    unpaired: bool = typer.Option(False, help="--decide: one sequence per arm mean instead of per seed-paired comparison"),
) -> None:
    """Run every pending cell of a matrix; idempotent: finished runs are skipped, interrupted ones resume.
    With --decide, the matrix is the first wave: seeds are then added to the arms whose runs close the
    most open comparisons that can still close, per device-hour (anytime-valid betting confidence
    sequences, analysis/decide.py)."""
    from rich.markup import escape

    from grpo_lab.execution import registry as reg
    from grpo_lab.execution import tracking
    from grpo_lab.execution.environment import env_snapshot
    from grpo_lab.execution.mirror import SweepTracker
    from grpo_lab.execution.runners import load_profile, make_runner
    from grpo_lab.execution.sweep import SweepOptions, open_sweep, plan_for, recover
    from grpo_lab.rewards.sandbox import SandboxError
    from grpo_lab.spec.matrix import load_matrix
    from grpo_lab.views import SweepProgress, show_plan

    opts = SweepOptions(workspace=workspace, db_url=db, retries=retries, allow_over_budget=allow_over_budget, name=name,
                        on_change="replace" if replace else "extend" if extend else "refuse")
    try:
        plan = plan_for(matrix, opts)
        profile = load_profile(runner or load_matrix(matrix).runner)
        check_runnable({id(c.shared): c.shared for c in plan.cells}.values())  # before preflight loads models
    except (ConfigError, SandboxError) as exc:
        fail(ConfigError(escape(str(exc))))
    show_plan(console, plan, table=False)
    Session = open_registry(db, workspace)
    hold_lease(ctx, Session, plan.name)
    with Session() as session:
        try:
            sw = open_sweep(session, plan, matrix, opts, env=env_snapshot())
        except ConfigError as exc:
            fail(exc)
        if n := recover(session, sw):
            console.print(f"closed {n} attempt(s) left running by an earlier driver; their runs resume")
        if not skip_preflight:
            run_preflight(plan, sw)
        mirror = SweepTracker(tracking_uri or tracking.default_tracking_uri(workspace), sw, matrix)
        session.commit()
        progress = SweepProgress(console, len(sw.cells), sum(c.run.status in reg.DONE for c in sw.cells))
        attempts_before, done_before = attempts(sw), progress.done
        run_on = make_runner(profile, workspace, max_parallel)
        console.print(f"sweep [bold]{sw.name}[/]: {len(sw.cells)} cells, {progress.done} already done; "
                      f"runner {run_on.name} x{run_on.slots}; registry {Session.kw['bind'].url}")
        result = run_cells(session, sw, plan, run_on, opts, progress, mirror,
                           dict(budget=budget, delta=delta, most_seeds=most_seeds,
                                method="unpaired" if unpaired else "paired") if decide else None)
        mirror.finish("failed" if result.counts["failed"] else "finished")
        show_outcome(sw, result, attempts(sw) - attempts_before, done_before, workspace)
        if result.counts["failed"]:
            raise typer.Exit(1)


def run_cells(session, sw, plan, run_on, opts, progress, mirror, decide: dict | None):
    """The sweep's runs on `run_on` with a live progress view, each finished run mirrored to MLflow;
    with `decide` (DecideOptions fields), the decide waves first. Returns execute_sweep's result."""
    from grpo_lab.execution.sweep import execute_sweep

    def on_event(kind, cell, out):
        progress.total = len(sw.cells)  # --decide adds cells between waves
        progress(kind, cell, out)
        if kind == "end":
            mirror.log(cell)

    try:
        with progress:
            if decide is not None:  # imported only here: the decide stack pulls in scipy (~0.9 s)
                from grpo_lab.execution.waves import DecideOptions, run_decide

                why = run_decide(session, sw, plan, run_on, opts, DecideOptions(**decide), on_event=on_event,
                                 say=console.print)
                console.print(f"--decide stopped: {why}")
            return execute_sweep(session, sw, run_on, opts, on_event=on_event)
    finally:
        run_on.close()


def show_outcome(sw, result, executed: int, skipped: int, workspace: Path) -> None:
    """The sweep's run table, what it decided and what not, the attempt counts and what was not retried."""
    from rich.markup import escape

    from grpo_lab.views import runs_table

    console.print(runs_table(sw))
    for line in verdict_lines(sw):
        console.print(line, markup=False, highlight=False)
    # counted from the registry: with --decide the attempts ran in the waves' own passes
    console.print(f"executed {executed} attempt(s), skipped {skipped} finished run(s): {result.counts}; "
                  f"MLflow: grpo-lab ui --workspace {workspace}")
    for rid, why in result.blocked.items():
        console.print(f"[bold red]not retried:[/] {rid}: {escape(why)}", highlight=False)


def verdict_lines(sw) -> list[str]:
    """The end-of-sweep paragraph from the report's verdicts; a line saying why when there are none."""
    from grpo_lab.report import VerdictPolicy
    from grpo_lab.report.inputs import sweep_data
    from grpo_lab.report.verdicts import run_stats, verdict_table
    from grpo_lab.views import decision_summary

    try:
        data = sweep_data(sw)
    except ValueError as exc:  # no finished run, or runs the report refuses to pool
        return [f"no verdicts yet: {exc}"]
    verdicts = verdict_table(run_stats(data.runs), data.effects, data.interactions, VerdictPolicy(), data.decisions)
    if verdicts.is_empty():
        return [f"no verdicts: no trick set has finished runs beside a baseline; `grpo-lab report {sw.name}`"]
    return decision_summary(verdicts, sw.name)


def attempts(sw) -> int:
    return sum(len(c.run.attempts) for c in sw.cells)


def run_preflight(plan, sw) -> None:
    """Preflight once per (model, task) with runs to do; a red flag stops the sweep before training."""
    from grpo_lab.execution.sweep import preflight_pairs
    from grpo_lab.preflight import preflight

    for cfg in preflight_pairs(plan, sw):
        with console.status(f"preflight {cfg.model} / {'+'.join(cfg.tasks)}"):
            result = preflight(cfg, samples=256, diversity_prompts=20)
        bad = [c for c in result.checks if c.verdict == "red"]
        label = f"preflight {result.target}: "
        if bad:
            for c in bad:
                console.print(f"[bold red]red:[/] {label}{c.name} = {c.value} ({c.note})", highlight=False)
            fail(ConfigError(f"{label}red flags above; fix the config or pass --skip-preflight"))
        console.print(f"[green]ok[/] {label}{len(result.checks)} checks, no red flag", highlight=False)


@app.command()
def status(
    sweep_name: Optional[str] = typer.Argument(None, metavar="SWEEP", help="a sweep name; without it, every sweep"),
    workspace: Path = typer.Option(Path(".grpo-lab"), help="the sweep's workspace"),
    db: Optional[str] = typer.Option(None, help="registry SQLAlchemy URL"),
) -> None:
    """Counts per sweep, or the status of every run of one sweep."""
    from grpo_lab.execution import registry as reg
    from grpo_lab.views import runs_table, sweeps_table

    Session = open_registry(db, workspace)
    with Session() as session:
        sweeps = reg.all_sweeps(session)
        if sweep_name is None:
            console.print(sweeps_table(session, sweeps) if sweeps else "no sweeps in this registry")
            return
        sw = reg.get_sweep(session, sweep_name)
        if sw is None:
            from grpo_lab.util.yamlio import suggest

            fail(ConfigError(f"no sweep '{sweep_name}'{suggest(sweep_name, [s.name for s in sweeps])}"))
        console.print(runs_table(sw))


@app.command()
def ui(
    workspace: Path = typer.Option(Path(".grpo-lab"), help="the sweep's workspace (its mlflow.db)"),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow store URI (default: env MLFLOW_TRACKING_URI, "
                                                "else sqlite in the workspace)"),
    port: int = typer.Option(5000, help="port on 127.0.0.1"),
) -> None:
    """Open the MLflow UI on the sweeps' tracking store (local only; Ctrl-C, SIGTERM or SIGHUP stop it
    and everything it started)."""
    from grpo_lab.execution.tracking import default_tracking_uri
    from grpo_lab.execution.ui import serve_ui

    uri = tracking_uri or default_tracking_uri(workspace)
    console.print(f"MLflow UI for {uri} at http://127.0.0.1:{port}", markup=False)
    raise typer.Exit(serve_ui(uri, port))
