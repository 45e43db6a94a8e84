"""The `grpo-lab` command line. Thin: parse, call the library, print."""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from grpo_lab.util.yamlio import ConfigError

# rich shows grpo-lab's progress; transformers' per-load tqdm bars (also in the workers, which inherit
# the environment) would interleave with it. Set HF_HUB_DISABLE_PROGRESS_BARS=0 to see them.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

app = typer.Typer(add_completion=False, no_args_is_help=True)
console = Console()


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (config, tracking) as one console line, also above a live progress display."""
    console.print("[yellow]warning:[/] ", end="")
    console.print(str(message), markup=False, highlight=False)


@app.callback()
def main() -> None:
    """grpo-lab: which GRPO training tricks are worth their GPUs."""
    warnings.showwarning = show_warning  # before any command: config and tracking warnings
    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its INFO lines on creating a store are noise here


def fail(exc: Exception) -> None:
    console.print("[bold red]error:[/] ", end="")
    console.print(str(exc), markup=False, soft_wrap=True)  # one line per message, not wrapped to the terminal
    raise typer.Exit(2)


def check_runnable(configs) -> None:
    """What a run needs from this machine, before anything is written: each model cached or on the
    Hub (one quick request, not a minute of retries), and the code sandbox where a task needs it."""
    from grpo_lab.rewards.sandbox import check_for
    from grpo_lab.spec.model_cards import check_available, load_card

    configs = list(configs)
    for model in dict.fromkeys(c.model for c in configs):
        check_available(load_card(model))
    for cfg in configs:
        check_for(cfg.tasks, cfg.sandbox)


def open_registry(db: str | None, workspace: Path):
    """The registry's session factory; a bad or unreachable URL ends the command with its reason."""
    from grpo_lab.execution import registry as reg

    try:
        return reg.connect(db or reg.default_url(workspace))
    except ConfigError as exc:
        fail(exc)


@app.command()
def run(
    config: Optional[Path] = typer.Argument(None, help="run config YAML (defaults: tiny model, math)"),
    set_: list[str] = typer.Option([], "--set", help="override a key, e.g. --set optim.lr=1e-4"),
    out: Optional[Path] = typer.Option(None, help="output folder (default runs/<run id>); resumes if it holds a checkpoint"),
) -> None:
    """Train one GRPO run; writes metrics.jsonl and summary.json."""
    from grpo_lab.rewards.sandbox import SandboxError
    from grpo_lab.spec.config import load_config
    from grpo_lab.spec.tricks import trick_notes
    from grpo_lab.trainer.grpo import train
    from grpo_lab.views import show_summary

    try:  # every check before anything is written: a bad name leaves no run folder behind
        cfg = load_config(config, set_)
        check_runnable([cfg])
    except (ConfigError, SandboxError) as exc:
        fail(exc)
    for note in trick_notes(cfg.tricks):
        console.print(f"[yellow]warning:[/] {note}")
    out = out or Path("runs") / cfg.run_id()
    console.print(f"run [bold]{cfg.run_id()}[/]: model={cfg.model} task={cfg.task} tricks={cfg.tricks or 'baseline'} "
                  f"seed={cfg.seed} -> {out}")
    with Progress(TextColumn("[bold]step {task.completed}/{task.total}"), BarColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console) as bar:
        job = bar.add_task("", total=cfg.steps)

        def on_step(step: int, m: dict) -> None:
            desc = f"reward {m['reward/mean']:.3f}  kl {m.get('kl/mean', 0):.4f}  len {m['length/mean']:.1f}"
            if "eval/pass@1" in m:
                desc += f"  pass@1 {m['eval/pass@1']:.3f}"
            bar.update(job, completed=step + 1, description=desc)

        summary = train(cfg, out, on_step=on_step)
    show_summary(console, summary)


@app.command()
def tricks(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the trick catalog (experiments/tricks.yaml)."""
    from grpo_lab.spec.tricks import load_catalog

    catalog = load_catalog()
    if as_json:
        console.print_json(json.dumps({n: t.model_dump() for n, t in catalog.items()}))
        return
    table = Table(title="trick catalog")
    for col in ("name", "dimension", "description", "source"):
        table.add_column(col)
    for t in catalog.values():
        table.add_row(t.name, t.dimension, t.description, t.source)
    console.print(table)


@app.command()
def plan(
    matrix: Path = typer.Argument(..., help="matrix YAML (see matrices/)"),
    as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON to stdout (a line per cell)"),
    cells: bool = typer.Option(False, "--cells", help="print a tab-separated line per cell instead of a table per trick set"),
    hardware: Optional[str] = typer.Option(None, help="hardware profile (default: the matrix's budget.hardware, else cpu)"),
) -> None:
    """Expand a matrix and price every cell before any compute is spent (exit 0 whether or not it fits)."""
    import sys

    from rich.markup import escape

    from grpo_lab.spec.matrix import load_matrix
    from grpo_lab.spec.plan import make_plan
    from grpo_lab.views import plan_lines, show_plan

    try:
        p = make_plan(load_matrix(matrix), hardware, name=matrix.stem)
    except ConfigError as exc:
        fail(ConfigError(escape(str(exc))))  # '[a, b]' in a message is not markup
    if as_json or cells:  # streamed: a plan can have hundreds of thousands of cells
        sys.stdout.writelines(p.json_chunks() if as_json else plan_lines(p))
        return
    show_plan(console, p)


@app.command()
def preset(
    tier: str = typer.Argument(..., help="budget tier in GPU-hours: 100, 1k or 10k"),
    model: str = typer.Option(..., help="model card name, e.g. qwen2.5-7b or tiny"),
    task: str = typer.Option(..., help="math, code or logic"),
    hardware: str = typer.Option("h800", help="hardware profile in experiments/hardware/"),
    out: Optional[Path] = typer.Option(None, help="output file (default matrices/preset-<tier>-<model>-<task>.yaml)"),
) -> None:
    """Write a budget-tier matrix (docs/study.md "Budget tiers") whose estimate fits the tier, and summarise its plan."""
    from rich.markup import escape

    from grpo_lab.spec.budget import preset_yaml
    from grpo_lab.spec.matrix import load_matrix
    from grpo_lab.spec.plan import make_plan
    from grpo_lab.views import show_plan

    out = out or Path("matrices") / f"preset-{tier}-{model}-{task}.yaml"
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
) -> None:
    """Run every pending cell of a matrix; idempotent: finished runs are skipped, interrupted ones resume.
    With --decide, the matrix is the first wave: seeds are then added to the arms whose runs close the
    most open comparisons per device-hour (anytime-valid confidence sequences, analysis/decide.py)."""
    from rich.markup import escape

    from grpo_lab.execution import registry as reg
    from grpo_lab.execution import tracking
    from grpo_lab.execution.environment import env_snapshot
    from grpo_lab.execution.mirror import SweepTracker
    from grpo_lab.execution.runners import load_profile, make_runner
    from grpo_lab.execution.sweep import (
        SweepOptions,
        execute_sweep,
        open_sweep,
        plan_for,
        recover,
    )
    from grpo_lab.rewards.sandbox import SandboxError
    from grpo_lab.spec.matrix import load_matrix
    from grpo_lab.views import SweepProgress, best_tricks, runs_table, show_plan

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

        def on_event(kind, cell, out):
            progress.total = len(sw.cells)  # --decide adds cells between waves
            progress(kind, cell, out)
            if kind == "end":
                mirror.log(cell)

        run_on = make_runner(profile, workspace, max_parallel)
        console.print(f"sweep [bold]{sw.name}[/]: {len(sw.cells)} cells, {progress.done} already done; "
                      f"runner {run_on.name} x{run_on.slots}; registry {Session.kw['bind'].url}")
        try:
            with progress:
                if decide:
                    from grpo_lab.execution.waves import DecideOptions, run_decide

                    why = run_decide(session, sw, plan, run_on, opts, DecideOptions(budget=budget, delta=delta),
                                     on_event=on_event, say=console.print)
                    console.print(f"--decide stopped: {why}")
                result = execute_sweep(session, sw, run_on, opts, on_event=on_event)
        finally:
            run_on.close()
        mirror.finish("failed" if result.counts["failed"] else "finished")
        console.print(runs_table(sw))
        for line in best_tricks(sw):
            console.print(line, markup=False, highlight=False)
        console.print(f"executed {len(result.executed)} attempt(s), skipped {result.skipped} finished run(s): "
                      f"{result.counts}; MLflow: grpo-lab ui --workspace {workspace}")
        for rid, why in result.blocked.items():
            console.print(f"[bold red]not retried:[/] {rid}: {escape(why)}", highlight=False)
        if result.counts["failed"]:
            raise typer.Exit(1)


def hold_lease(ctx: typer.Context, Session, sweep: str) -> None:
    """Hold the registry's driver lease until the command ends, or end it naming the live driver."""
    from grpo_lab.execution.lease import Lease

    try:
        lease = Lease(Session, sweep)
    except ConfigError as exc:
        fail(exc)
    ctx.call_on_close(lease.release)


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
    sweep_name: Optional[str] = typer.Argument(None, metavar="[SWEEP]", help="a sweep name; without it, every sweep"),
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
    """Open the MLflow UI on the sweeps' tracking store (local only; Ctrl-C stops it)."""
    from grpo_lab.execution.tracking import default_tracking_uri, serve_ui

    uri = tracking_uri or default_tracking_uri(workspace)
    console.print(f"MLflow UI for {uri} at http://127.0.0.1:{port}", markup=False)
    raise typer.Exit(serve_ui(uri, port))


@app.command("preflight")
def preflight_cmd(
    target: Optional[Path] = typer.Argument(None, help="run config or matrix YAML (or give --model and --task)"),
    model: Optional[str] = typer.Option(None, help="model card, with --task, for a default config"),
    task: Optional[str] = typer.Option(None, help="task, with --model"),
    set_: list[str] = typer.Option([], "--set", help="override a key of a run config, e.g. --set sampling.temperature=0.9"),
    samples: int = typer.Option(1000, min=1, help="completions scored with every reward component"),
    prompts: int = typer.Option(20, min=1, help="prompts sampled in groups for the diversity check"),
    pin: Optional[Path] = typer.Option(None, help="JSON {package: version} of the pinned environment"),
    out: Path = typer.Option(Path("preflight.json"), help="JSON report"),
) -> None:
    """Check reward signal, group diversity and environment before training (exit 1 on any red verdict)."""
    from rich.markup import escape

    from grpo_lab.preflight import preflight
    from grpo_lab.preflight.report import verdict_table, write_json
    from grpo_lab.preflight.targets import preflight_configs

    try:
        configs = preflight_configs(target, model, task, set_)
        pinned = json.loads(pin.read_text()) if pin else None
    except (ConfigError, OSError, ValueError) as exc:  # a bad pin file is an OSError or a JSON ValueError
        fail(exc)
    results = []
    for cfg in configs:
        results.append(preflight(cfg, samples=samples, diversity_prompts=prompts, pin=pinned))
        console.print(verdict_table(results[-1]))
    write_json(results, out)
    red = [r.target for r in results if r.red]
    console.print(f"wrote {out}; " + (f"[bold red]red[/] for {escape(', '.join(red))}" if red else "[green]no red flags[/]"))
    if red:
        raise typer.Exit(1)


@app.command("interactions")
def interactions_cmd(
    source: str = typer.Argument(..., help="results table (.csv or .parquet: model, task, tricks, seed, metrics) or a sweep name"),
    metric: str = typer.Option("pass@1", help="the metric column to compare"),
    logit: bool = typer.Option(False, "--logit", help="compare logit(metric), for pass rates near 0 or 1"),
    delta: Optional[float] = typer.Option(None, help="smallest interaction worth a claim, in metric units "
                                                     "(default: the seed-to-seed noise std of each model x task)"),
    variance: str = typer.Option("pooled", help="pooled: one seed noise per model x task; paired: each contrast on its own seeds"),
    as_json: bool = typer.Option(False, "--json", help="print the rows as JSON"),
    workspace: Path = typer.Option(Path(".grpo-lab"), help="the sweep's workspace (when SOURCE is a sweep name)"),
) -> None:
    """Flag trick combinations that do worse than their single tricks predict (docs/design.md section 6)."""
    from rich.markup import escape

    from grpo_lab.analysis import results
    from grpo_lab.analysis.interactions import interactions
    from grpo_lab.views import show_interactions

    path = Path(source)
    try:
        if path.exists() or path.suffix.lower() in results.READERS:
            frame = results.load_results(path)
        else:  # not a file: a sweep name, read from the registry
            frame = results.sweep_frame(source, workspace)
        table = interactions(frame, metric, delta=delta, logit=logit, variance=variance)
    except ValueError as exc:  # ConfigError included
        fail(ConfigError(escape(str(exc))))
    if as_json:
        typer.echo(json.dumps(table.fill_nan(None).to_dicts(), indent=1))
    elif table.is_empty():
        console.print("no combination has its single tricks and a baseline in the same model x task: nothing to compare")
    else:
        show_interactions(console, table, metric + (" (logit)" if logit else ""))


@app.command()
def report(
    sweep_name: str = typer.Argument(..., metavar="SWEEP", help="a sweep name (grpo-lab status lists them)"),
    out: Optional[Path] = typer.Option(None, help="output folder (default reports/<sweep>)"),
    metric: str = typer.Option("pass@1", help="the metric effects and interactions are computed on"),
    logit: bool = typer.Option(False, "--logit", help="work on logit(metric), for pass rates near 0 or 1"),
    workspace: Path = typer.Option(Path(".grpo-lab"), help="the sweep's workspace"),
    db: Optional[str] = typer.Option(None, help="registry SQLAlchemy URL"),
) -> None:
    """Write the comparison report of a sweep: index.html (self-contained) and report.md."""
    from rich.markup import escape

    from grpo_lab.execution import registry as reg
    from grpo_lab.report import write_report
    from grpo_lab.report.inputs import sweep_data
    from grpo_lab.util.yamlio import suggest

    Session = open_registry(db, workspace)
    with Session() as session:
        sw = reg.get_sweep(session, sweep_name)
        if sw is None:
            fail(ConfigError(f"no sweep '{sweep_name}'{suggest(sweep_name, [s.name for s in reg.all_sweeps(session)])}"))
        try:
            with console.status(f"analysing {len(sw.cells)} cells of {sw.name}"):
                data = sweep_data(sw, metric, logit)
                html, md = write_report(data, out or Path("reports") / sw.name)
        except ValueError as exc:
            fail(ConfigError(escape(str(exc))))
    console.print(f"wrote {html} and {md}")
    verdicts = data.interactions["verdict"].value_counts().sort("verdict").iter_rows() if data.interactions.height else []
    for verdict, n in verdicts:
        console.print(f"  {n} combination(s): {verdict}")


@app.command("tune")
def tune_cmd(
    target: Path = typer.Argument(..., metavar="CONFIG_OR_MATRIX", help="run config YAML, or a matrix: then "
                                  "the baseline of its first model, task and seed"),
    space: Path = typer.Option(..., help="search space YAML: dotted run-config keys -> distributions "
                                         "(experiments/spaces/)"),
    trials: int = typer.Option(..., min=1, help="completed + pruned trials the study should hold in total"),
    metric: str = typer.Option("eval/pass@1", help="final eval metric of the run summary, or delta_pass@1"),
    direction: str = typer.Option("maximize", help="maximize or minimize"),
    name: Optional[str] = typer.Option(None, help="study name, stored as tune-<name> (default <config>-<space>); "
                                                  "the same name continues the study"),
    seed: int = typer.Option(0, help="seed of the TPE sampler"),
    budget: Optional[float] = typer.Option(None, help="stop proposing trials once the tune's runs used this "
                                                      "many GPU-hours"),
    prune_warmup: float = typer.Option(0.25, min=0, max=1, help="no pruning in this first fraction of the steps "
                                                                "(1: never prune)"),
    hardware: Optional[str] = typer.Option(None, help="hardware profile for the unit and price (default: the "
                                                      "matrix's, else cpu)"),
    workspace: Path = typer.Option(Path(".grpo-lab"), help="registry, MLflow store and run folders"),
    db: Optional[str] = typer.Option(None, help="registry and study SQLAlchemy URL (default sqlite in the "
                                                "workspace; env GRPO_LAB_DB)"),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI (default sqlite in the workspace)"),
    out: Optional[Path] = typer.Option(None, help="tuned baseline file (default experiments/tuned/<name>.yaml)"),
    set_: list[str] = typer.Option([], "--set", help="override a key of the base config, e.g. --set steps=200"),
) -> None:
    """Search run-config values with Optuna (TPE, median pruning); each trial is a registered run.
    Resumable: run it again with the same name to continue; finished trials are never repeated."""
    import optuna
    from rich.markup import escape

    from grpo_lab.tune import TuneOptions, tune
    from grpo_lab.tune.output import trials_table

    if direction not in ("maximize", "minimize"):
        fail(ConfigError(f"--direction {direction}: use maximize or minimize"))
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the per-trial lines below say it once
    opts = TuneOptions(trials=trials, name=name, metric=metric, direction=direction, seed=seed, budget=budget,
                       prune_warmup=prune_warmup, workspace=workspace, db_url=db, tracking_uri=tracking_uri,
                       hardware=hardware, out=out, sets=set_)

    def on_trial(t) -> None:
        value = "" if t.value is None else f" {t.value:.4g}"
        console.print(f"trial {t.number} {t.state.name}{value}  {escape(str(t.params))}  "
                      f"run {t.user_attrs.get('run_id', '-')}", highlight=False)

    try:
        result = tune(target, space, opts, on_trial=on_trial)
    except ConfigError as exc:
        fail(ConfigError(escape(str(exc))))
    console.print(trials_table(result.study, result.unit))
    why = {"trials": "reached --trials", "budget": f"budget of {budget} reached",
           "failures": "stopped after repeated failed trials"}[result.stopped_by]
    console.print(f"{result.name}: {why}; {result.gpu_hours:.3g} {result.unit} in its runs (search); "
                  + (f"best settings in {result.out}" if result.out else "no completed trial yet"), highlight=False)
    if result.stopped_by == "failures":
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
