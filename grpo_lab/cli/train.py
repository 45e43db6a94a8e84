"""Commands on single runs: `run`, `config`, `tricks`, `tasks`, `preflight`, `tune`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from grpo_lab.cli.common import app, console, fail, print_reference
from grpo_lab.util.yamlio import ConfigError


@app.command()
def run(
    config: Optional[Path] = typer.Argument(None, help="run config YAML (defaults: tiny model, math)"),
    set_: list[str] = typer.Option([], "--set", help="override a key, e.g. --set optim.lr=1e-4"),
    out: Optional[Path] = typer.Option(None, help="output folder (default runs/<run id>); resumes if it holds a checkpoint"),
) -> None:
    """Train one GRPO run; writes metrics.jsonl and summary.json."""
    from rich.markup import escape

    from grpo_lab.analysis.run_diagnosis import diagnose_run
    from grpo_lab.execution.driver import check_runnable
    from grpo_lab.spec.arm import arm_label
    from grpo_lab.spec.config import load_config
    from grpo_lab.spec.tricks import trick_notes
    from grpo_lab.trainer.executors import executor
    from grpo_lab.views import show_summary

    try:  # every check before anything is written: a bad name leaves no run folder behind
        cfg = load_config(config, set_)
        check_runnable([cfg])
    except ConfigError as exc:  # check_runnable reports a missing sandbox as one too
        fail(exc)
    for note in trick_notes(cfg.tricks):
        console.print(f"[yellow]warning:[/] {note}")
    out = out or Path("runs") / cfg.run_id()
    console.print(f"run [bold]{cfg.run_id()}[/]: model={cfg.model} task={cfg.task} tricks={arm_label(cfg.tricks)} "
                  f"seed={cfg.seed} -> {out}")
    with Progress(TextColumn("[bold]step {task.completed}/{task.total}"), BarColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console) as bar:
        job = bar.add_task("", total=cfg.steps)

        last = {"said": ""}

        def on_phase(phase: str) -> None:  # from the first second: setup, the base eval, each step's phases
            bar.update(job, description=f"[cyan]{phase}[/] {last['said']}")

        def on_step(step: int, m: dict) -> None:
            seconds = sum(v for k, v in m.items() if k.startswith("timing/"))
            said = (f"{seconds:.1f} s/step  reward {m['reward/mean']:.3f}  kl {m.get('kl/mean', 0):.4f}  "
                    f"len {m['length/mean']:.1f}")
            last["said"] = said + (f"  pass@1 {m['eval/pass@1']:.3f}" if "eval/pass@1" in m else "")
            bar.update(job, completed=step + 1, description=last["said"])

        summary = executor(cfg.trainer)(cfg, out, on_step=on_step, on_phase=on_phase)  # grpo-lab's or TRL's
    show_summary(console, summary)
    if why := diagnose_run(out):
        console.print(f"[yellow]{escape(why.line())}[/]")


@app.command()
def tricks(as_json: bool = typer.Option(False, "--json", help="print the catalog as JSON (name -> entry) instead of a table")) -> None:
    """List the trick catalog (experiments/tricks.yaml)."""
    from grpo_lab.spec.tricks import load_catalog

    catalog = load_catalog()
    if as_json:
        console.print_json(json.dumps({n: {**t.model_dump(), "runs_on": runs_on(t)} for n, t in catalog.items()}))
        return
    table = Table(title="trick catalog (dim lines: the same switch in TRL, verl, OpenRLHF; the trainers "
                        "that run it, `trainer:` in a run config)")
    for col in ("name", "dimension", "description", "source"):
        table.add_column(col, overflow="fold")
    for t in catalog.values():
        table.add_row(t.name, t.dimension, trick_text(t), t.source)
    print_reference(table)


def trick_text(trick) -> Text:
    """A trick's description, then a dim line per peer trainer naming its equivalent setting."""
    text = Text(trick.description, overflow="fold")
    if trick.equivalents is not None:
        for label, key in (("TRL", "trl"), ("verl", "verl"), ("OpenRLHF", "openrlhf")):
            text.append(f"\n{label}: {getattr(trick.equivalents, key)}", style="dim")
    text.append(f"\nruns on: {', '.join(runs_on(trick))}", style="dim")
    return text


def runs_on(trick) -> list[str]:
    """The trainers (`trainer:` values) that run a trick: TRL only where planning passes the trick
    with its `needs`, the settings under which it acts (fp32_lm_head's bf16 is refused under TRL,
    so a TRL run of it would change nothing)."""
    from grpo_lab.spec.config import resolve
    from grpo_lab.spec.trl_map import trl_refusals
    from grpo_lab.util.dicts import deep_merge

    refused = trl_refusals(resolve(deep_merge(trick.needs, {"tricks": [trick.name]})))
    return ["grpo-lab"] if refused else ["grpo-lab", "trl"]


@app.command("config")
def config_cmd(
    section: Optional[str] = typer.Argument(None, help="a section (sampling, reward.length, ...) or key; default: all"),
    as_json: bool = typer.Option(False, "--json", help="print the keys as a JSON list instead of a table"),
) -> None:
    """List the run-config keys: dotted key, type, default and description."""
    from dataclasses import asdict

    from rich.markup import escape

    from grpo_lab.spec.fields import config_fields

    try:
        rows = config_fields(section)
    except ConfigError as exc:
        fail(exc)
    if as_json:
        console.print_json(json.dumps([asdict(r) for r in rows]))
        return
    table = Table(title=f"run config: {section}" if section else "run config")
    for col in ("key", "type", "default", "description"):
        table.add_column(col, overflow="fold")
    for r in rows:
        default = "required" if r.required else json.dumps(r.default)
        table.add_row(r.key, escape(r.type), escape(default), escape(r.description))
    print_reference(table)


@app.command("tasks")
def tasks_cmd(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the tasks a config can name: built-ins, installed plugins (entry point group
    grpo_lab.tasks), the rg:<dataset> family; any 'module:Class' works too."""
    from grpo_lab.tasks.registry import FAMILIES, known_tasks

    rows = [(t.name, t.kind, t.source, t.description) for t in known_tasks()]
    rows += [(f"{prefix}:<dataset>", "family", "", text) for prefix, text in FAMILIES.items()]
    if as_json:
        console.print_json(json.dumps([dict(zip(("name", "kind", "source", "description"), r)) for r in rows]))
        return
    table = Table(title="tasks")
    for col in ("name", "kind", "source", "description"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    print_reference(table)


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
    try:
        import optuna
    except ImportError:
        fail(ConfigError("grpo-lab tune needs Optuna: pip install 'grpo-lab[tune]'"))
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
        fail(exc)
    console.print(trials_table(result.study, result.unit))
    why = {"trials": "reached --trials", "budget": f"budget of {budget} reached",
           "failures": "stopped after repeated failed trials"}[result.stopped_by]
    console.print(f"{result.name}: {why}; {result.gpu_hours:.3g} {result.unit} in its runs (search); "
                  + (f"best settings in {result.out}" if result.out else "no completed trial yet"), highlight=False)
    if result.stopped_by == "failures":
        raise typer.Exit(1)
