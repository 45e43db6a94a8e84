"""The `grpo-lab` command line. Thin: parse, call the library, print."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from grpo_lab.yamlio import ConfigError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="grpo-lab: which GRPO training tricks are worth their GPUs.")
console = Console()


def fail(exc: Exception) -> None:
    console.print(f"[bold red]error:[/] {exc}")
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


if __name__ == "__main__":
    app()
