"""The `grpo-lab` command line. Thin: parse, call the library, print."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from grpo_lab.yamlio import ConfigError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="grpo-lab: which GRPO training tricks are worth their GPUs.")
console = Console()


def fail(exc: Exception) -> None:
    console.print("[bold red]error:[/] ", end="")
    console.print(str(exc), markup=False)
    raise typer.Exit(2)


@app.command()
def run(
    config: Optional[Path] = typer.Argument(None, help="run config YAML (defaults: tiny model, math)"),
    set_: list[str] = typer.Option([], "--set", help="override a key, e.g. --set optim.lr=1e-4"),
    out: Optional[Path] = typer.Option(None, help="output folder (default runs/<run id>); resumes if it holds a checkpoint"),
) -> None:
    """Train one GRPO run; writes metrics.jsonl and summary.json."""
    from grpo_lab.config import load_config
    from grpo_lab.trainer.grpo import train

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cfg = load_config(config, set_)
        for w in caught:
            console.print(f"[yellow]warning:[/] {w.message}")
    except ConfigError as exc:
        fail(exc)
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
    show_summary(summary)


def show_summary(s: dict) -> None:
    table = Table(title=f"run {s['run_id']}")
    table.add_column("metric")
    table.add_column("base", justify="right")
    table.add_column("final", justify="right")
    for key in sorted(k for k in s["final"] if k.startswith("eval/") and k.count("/") == 1):
        table.add_row(key, f"{(s['base'] or {}).get(key, float('nan')):.3f}", f"{s['final'][key]:.3f}")
    console.print(table)
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(s["phase_seconds"].items()))
    console.print(f"wall {s['wall_seconds']:.1f}s ({phases}); tokens generated {s['tokens_generated']}, "
                  f"trained {s['tokens_trained']}; effective samples {s['effective_samples']}")


@app.command()
def tricks(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the trick catalog (experiments/tricks.yaml)."""
    from grpo_lab.tricks import load_catalog

    catalog = load_catalog()
    if as_json:
        console.print_json(json.dumps({n: t.__dict__ for n, t in catalog.items()}))
        return
    table = Table(title="trick catalog")
    for col in ("name", "dimension", "description", "source"):
        table.add_column(col)
    for t in catalog.values():
        table.add_row(t.name, t.dimension, t.description, t.source)
    console.print(table)


if TYPE_CHECKING:
    from grpo_lab.plan import Plan


def show_plan(p: Plan, every_cell: bool = True) -> None:
    """Print a plan: a row per cell (optional), totals, warnings, and the budget verdict."""
    from grpo_lab.budget import fmt_hours

    unit = p.hardware.unit
    if every_cell:
        table = Table(title=f"plan {p.name} on {p.hardware.name}")
        for col in ("model", "task", "tricks", "seed", "run id", f"est. {unit}"):
            table.add_column(col, justify="right" if col in ("seed", f"est. {unit}") else "left")
        for c, e in zip(p.cells, p.estimates):
            table.add_row(c.model, c.task, "+".join(c.tricks) or "baseline", str(c.seed), c.run_id, fmt_hours(e.total))
        console.print(table)
    phases = ", ".join(f"{k} {fmt_hours(v)}" for k, v in p.phase_totals().items())
    console.print(f"[bold]{len(p.cells)} cells: {fmt_hours(p.total)} {unit}[/] on {p.hardware.name} ({phases}); "
                  f"cost ~{p.cost:,.2f} at {p.price:g} per device-hour")
    for w in p.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    if p.fits is None:
        console.print("no budget given: nothing to check the plan against")
    else:
        share = f"{p.total / p.limit:.0%} of {fmt_hours(p.limit)} {unit}" + (f" (tier {p.tier})" if p.tier else "")
        console.print(f"budget: [green]fits[/], {share}" if p.fits else f"budget: [bold red]does NOT fit[/], {share}")


@app.command()
def plan(
    matrix: Path = typer.Argument(..., help="matrix YAML (see matrices/)"),
    as_json: bool = typer.Option(False, "--json", help="print machine-readable JSON to stdout"),
    hardware: Optional[str] = typer.Option(None, help="hardware profile (default: the matrix's budget.hardware, else cpu)"),
) -> None:
    """Expand a matrix and price every cell before any compute is spent (exit 0 whether or not it fits)."""
    from rich.markup import escape

    from grpo_lab.matrix import load_matrix
    from grpo_lab.plan import make_plan

    try:
        p = make_plan(load_matrix(matrix), hardware, name=matrix.stem)
    except ConfigError as exc:
        fail(ConfigError(escape(str(exc))))  # '[a, b]' in a message is not markup
    if as_json:
        typer.echo(json.dumps(p.to_dict(), indent=1))
        return
    show_plan(p)


@app.command()
def preset(
    tier: str = typer.Argument(..., help="budget tier in GPU-hours: 100, 1k or 10k"),
    model: str = typer.Option(..., help="model card name, e.g. qwen2.5-7b or tiny"),
    task: str = typer.Option(..., help="math, code or logic"),
    hardware: str = typer.Option("h800", help="hardware profile in experiments/hardware/"),
    out: Optional[Path] = typer.Option(None, help="output file (default matrices/preset-<tier>-<model>-<task>.yaml)"),
) -> None:
    """Write a budget-tier matrix (STUDY.md "Budget tiers") whose estimate fits the tier, and summarise its plan."""
    from rich.markup import escape

    from grpo_lab.budget import preset_yaml
    from grpo_lab.matrix import load_matrix
    from grpo_lab.plan import make_plan

    out = out or Path("matrices") / f"preset-{tier}-{model}-{task}.yaml"
    try:
        text = preset_yaml(tier, model, task, hardware)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        p = make_plan(load_matrix(out), name=out.stem)
    except ConfigError as exc:
        fail(ConfigError(escape(str(exc))))  # '[a, b]' in a message is not markup
    console.print(f"wrote {out}")
    show_plan(p, every_cell=False)


if __name__ == "__main__":
    app()
