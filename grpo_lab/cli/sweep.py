"""Commands on matrices and sweeps: `plan`, `preset`, `sweep`, `status`, `ui`."""

from __future__ import annotations

import contextlib
import enum
import signal
from pathlib import Path
from typing import Optional

import typer

from grpo_lab.cli.common import (
    app,
    console,
    fail,
    open_registry,
)
from grpo_lab.util.yamlio import ConfigError


class Sequence(str, enum.Enum):
    """--decide's confidence sequences (analysis/decide.py SEQUENCES), spelled for the CLI."""
    t = "t"
    betting = "betting"


class Estimand(str, enum.Enum):
    """--decide's estimands (analysis/rule.py ESTIMANDS), spelled for the CLI."""
    healthy = "healthy"
    mean = "mean"


ESTIMAND_HELP = ("--decide: what a label is about: healthy (pass@1 on the seeds where no run of the comparison "
                 "collapsed, beside a collapse-rate verdict) or mean (over all seeds, assuming no collapse mode "
                 "the seeds have not shown: faster, labelled with that assumption)")


@app.command()
def plan(
    matrix: Path = typer.Argument(..., help="matrix YAML (see matrices/)"),
    as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON to stdout (a line per cell)"),
    cells: bool = typer.Option(False, "--cells", help="print a tab-separated line per cell instead of a table per trick set"),
    hardware: Optional[str] = typer.Option(None, help="hardware profile (default: the matrix's budget.hardware, else cpu)"),
    decide_delta: Optional[float] = typer.Option(
        None, "--decide-delta", help="also print, per task, the δ `sweep --decide` can decide within the seed cap and the collapse-rate rise the cap cannot exclude, and per comparison the seeds per arm it needs at this δ (noise: --decide-sd)"),
    workspace: Path = typer.Option(Path(".grpo-lab"), help="workspace whose registry's finished runs calibrate the estimates"),
    db: Optional[str] = typer.Option(None, help="registry SQLAlchemy URL (default sqlite in the workspace; env GRPO_LAB_DB)"),
    sequence: Sequence = typer.Option(Sequence.t, help="--decide-delta: the confidence sequence `sweep --decide` will use"),
    decide_sd: float = typer.Option(0.02, "--decide-sd", help="--decide-delta: sd of one run's pass@1 to plan with (ten_tricks runs: 0.005-0.03 per task; 0 = the noise-free floor)"),
    estimand: Estimand = typer.Option(Estimand.healthy, help="--decide-delta: " + ESTIMAND_HELP.removeprefix("--decide: ")),
    screen: bool = typer.Option(False, "--screen", help="also price `sweep --screen`: the range of device-hours from nothing dropped to every droppable arm dropped at the first rung, and per rung (where in it a sweep lands depends on its data)"),
    rungs: str = typer.Option("0.25,0.5", help="--screen: the rungs, fractions of the matrix's steps (each must land on an eval step)"),
) -> None:
    """Expand a matrix and price every cell before any compute is spent (exit 0 whether or not it fits).
    Estimates are corrected by what finished runs of the same model measured, where the registry has any."""
    import sys

    from rich.markup import escape

    from grpo_lab.api import plan as make_plan
    from grpo_lab.views import plan_lines, show_plan

    try:
        p = make_plan(matrix, hardware, workspace, db, screen=dict(rungs=rungs_option(rungs)) if screen else None)
    except ConfigError as exc:
        fail(exc)
    if as_json or cells:  # streamed: a plan can have hundreds of thousands of cells
        sys.stdout.writelines(p.json_chunks() if as_json else plan_lines(p))
        return
    show_plan(console, p)
    if decide_delta is not None:
        from grpo_lab.api import decide_needs

        try:
            decide_needs(p, decide_delta, sequence.value, estimand.value, decide_sd,
                         lambda line: console.print(escape(line)))
        except ConfigError as exc:
            fail(exc)


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
        fail(exc)
    console.print(f"wrote {out}")
    show_plan(console, p, table=False)


@contextlib.contextmanager
def interruptible(view: SweepView):
    """Ctrl-C (SIGINT, also where a script started the sweep with SIGINT ignored) ends the sweep in
    one line: the driver has closed its open attempts as interrupted, and the next run resumes them."""
    previous = signal.signal(signal.SIGINT, _interrupt_once)
    try:
        yield
    except KeyboardInterrupt:
        view.live.close()  # the live view ends before the line prints
        console.print(f"interrupted: {view.finished()} runs finished, re-run the same command to resume",
                      highlight=False)
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_once(signum, frame) -> None:
    """The first Ctrl-C stops the sweep; later ones are ignored, so the driver's cleanup (closing
    its attempts, stopping the workers at a checkpoint) is not cut short by an impatient second one."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def rungs_option(text: str) -> tuple[float, ...]:
    """--rungs 0.25,0.5 as fractions; a word that is not a number ends the command in one line."""
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        fail(ConfigError(f"--rungs {text!r}: expected fractions separated by commas, e.g. 0.25,0.5"))


def eval_samples_option(text: str) -> int | str | None:
    """--eval-samples as DecideOptions.eval_samples: none -> None, digits -> K, else as given
    (auto, or a mistake DecideOptions.parse names)."""
    word = text.strip().lower()
    return None if word == "none" else int(word) if word.isdigit() else word


@app.command()
def sweep(
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
    sequence: Sequence = typer.Option(Sequence.t, help="--decide: confidence sequence: t (Gaussian noise, any variance per comparison) or betting (any noise in [0, 1], ~10x the seeds)"),
    estimand: Estimand = typer.Option(Estimand.healthy, help=ESTIMAND_HELP),
    eval_samples: str = typer.Option("auto", "--eval-samples", help="--decide: completions per problem of the final eval verdicts rest on: auto (chosen per model and task after wave 0 from the runs' noise and costs), an integer K (every run's final checkpoint evaluated again with K), or none (each run's own final eval)"),
    screen: bool = typer.Option(False, help="run every arm to each rung of --rungs first and drop the arms whose pass@1 at the full length is credibly below the best's by more than --delta (analysis/screening.py); the survivors' runs continue from their checkpoints"),
    rungs: str = typer.Option("0.25,0.5", help="--screen: the rungs, fractions of the matrix's steps (each must land on an eval step)"),
) -> None:
    """Run every pending cell of a matrix; idempotent: finished runs are skipped, interrupted ones resume.
    With --decide, the matrix is the first wave: seeds are then added to the arms whose runs close the
    most open comparisons that can still close, per device-hour (anytime-valid confidence sequences,
    analysis/decide.py)."""

    from grpo_lab.execution.driver import PreflightFailed, SweepRequest, run_sweep

    request = SweepRequest(matrix=matrix, runner=runner, max_parallel=max_parallel, retries=retries,
                           allow_over_budget=allow_over_budget, preflight=not skip_preflight, workspace=workspace,
                           db=db, tracking_uri=tracking_uri, name=name,
                           on_change="replace" if replace else "extend" if extend else "refuse",
                           decide=dict(budget=budget, delta=delta, most_seeds=most_seeds,
                                       method="unpaired" if unpaired else "paired", sequence=sequence.value,
                                       estimand=estimand.value,
                                       eval_samples=eval_samples_option(eval_samples))
                           if decide else None,
                           screen=dict(rungs=rungs_option(rungs), delta=delta) if screen else None)
    with contextlib.ExitStack() as live:
        view = SweepView(live, workspace)
        try:
            with interruptible(view):
                result = run_sweep(request, view)
        except PreflightFailed as exc:
            fail(exc)
        except ConfigError as exc:
            fail(exc)
    if result.counts["failed"]:
        raise typer.Exit(1)


class SweepView:
    """Renders run_sweep's events (execution/driver.py): the plan, preflight, a live progress view
    while cells run, and the outcome."""

    def __init__(self, live: contextlib.ExitStack, workspace: Path) -> None:
        self.live, self.workspace, self.progress, self.sweep = live, workspace, None, None

    def __call__(self, kind: str, **data) -> None:
        getattr(self, f"on_{kind}")(**data)

    def finished(self) -> int:
        """Runs of the sweep done so far (0 before it started)."""
        return self.progress.done if self.progress else 0

    def on_plan(self, plan) -> None:
        from grpo_lab.views import show_plan

        show_plan(console, plan, table=False)

    def on_recovered(self, count: int) -> None:
        console.print(f"closed {count} attempt(s) left running by an earlier driver; their runs resume")

    def on_preflight(self, target: str, checks: list, red: list) -> None:
        for c in red:
            console.print(f"[bold red]red:[/] preflight {target}: {c.name} = {c.value} ({c.note})", highlight=False)
        if not red:
            console.print(f"[green]ok[/] preflight {target}: {len(checks)} checks, no red flag", highlight=False)

    def on_started(self, sweep, runner, done: int, registry: str) -> None:
        from grpo_lab.views import SweepProgress

        self.sweep = sweep
        console.print(f"sweep [bold]{sweep.name}[/]: {len(sweep.cells)} cells, {done} already done; "
                      f"runner {runner.name} x{runner.slots}; registry {registry}")
        self.progress = self.live.enter_context(SweepProgress(console, len(sweep.cells), done))

    def on_start(self, cell, outcome) -> None:
        self.progress.total = len(self.sweep.cells)  # --decide adds cells between waves
        self.progress("start", cell, outcome)

    def on_end(self, cell, outcome) -> None:
        self.progress.total = len(self.sweep.cells)
        self.progress("end", cell, outcome)

    def on_say(self, line: str) -> None:
        console.print(line)

    def on_finished(self, result, attempts: int, skipped: int, decide_stop: str | None) -> None:
        from rich.markup import escape

        from grpo_lab.execution.screen import dropped_at
        from grpo_lab.views import runs_table

        self.live.close()  # the live view ends before the outcome prints
        if decide_stop:
            console.print(f"--decide stopped: {decide_stop}")
        console.print(runs_table(self.sweep, dropped=dropped_at(self.sweep)))
        for line in verdict_lines(self.sweep):
            console.print(line, markup=False, highlight=False)
        # counted from the registry: with --decide the attempts ran in the waves' own passes
        console.print(f"executed {attempts} attempt(s), skipped {skipped} finished run(s): {result.counts}; "
                      f"MLflow: grpo-lab ui --workspace {self.workspace}")
        for rid, why in result.blocked.items():
            console.print(f"[bold red]not retried:[/] {rid}: {escape(why)}", highlight=False)


def verdict_lines(sw) -> list[str]:
    """The end-of-sweep paragraph from the report's verdicts; a line saying why when there are none."""
    from grpo_lab.api import sweep_verdicts
    from grpo_lab.views import decision_summary

    try:
        verdicts, closing = sweep_verdicts(sw)
    except ValueError as exc:  # no finished run, or runs the report refuses to pool
        return [f"no verdicts yet: {exc}"]
    if verdicts.is_empty():
        return [f"no verdicts: no trick set has finished runs beside a baseline; `grpo-lab report {sw.name}`"]
    return decision_summary(verdicts, sw.name, closing)


@app.command()
def status(
    sweep_name: Optional[str] = typer.Argument(None, metavar="SWEEP", help="a sweep name; without it, every sweep"),
    workspace: Path = typer.Option(Path(".grpo-lab"), help="the sweep's workspace"),
    db: Optional[str] = typer.Option(None, help="registry SQLAlchemy URL"),
) -> None:
    """Counts per sweep, or the status of every run of one sweep."""
    from grpo_lab.execution import registry as reg
    from grpo_lab.execution.lease import driver_alive
    from grpo_lab.execution.screen import dropped_at
    from grpo_lab.views import runs_table, sweeps_table

    Session = open_registry(db, workspace)
    with Session() as session:
        sweeps = reg.all_sweeps(session)
        driving = driver_alive(session)
        if sweep_name is None:
            console.print(sweeps_table(session, sweeps, driving) if sweeps else "no sweeps in this registry")
            return
        sw = reg.get_sweep(session, sweep_name)
        if sw is None:
            from grpo_lab.util.yamlio import suggest

            fail(ConfigError(f"no sweep '{sweep_name}'{suggest(sweep_name, [s.name for s in sweeps])}"))
        console.print(runs_table(sw, driving, dropped_at(sw)))


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
    from grpo_lab.execution.ui import runs_url, serve_ui

    uri = tracking_uri or default_tracking_uri(workspace)
    url = runs_url(uri, port)
    console.print(f"starting the MLflow UI for {uri} on port {port} (a minute on a busy machine) ...", markup=False)
    raise typer.Exit(serve_ui(uri, port, on_ready=lambda: console.print(
        f"MLflow UI: {url} (the sweeps' runs; Ctrl-C stops it)", markup=False, soft_wrap=True)))
