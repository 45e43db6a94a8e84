"""Commands on finished runs: `interactions`, `report`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from grpo_lab.cli.common import app, console, fail, open_registry
from grpo_lab.util.yamlio import ConfigError


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

    from grpo_lab.analysis import results
    from grpo_lab.analysis.interactions import interactions
    from grpo_lab.api import sweep_results
    from grpo_lab.views import show_interactions

    path = Path(source)
    try:
        if path.exists() or path.suffix.lower() in results.READERS:
            frame = results.load_results(path)
        else:  # not a file: a sweep name, read from the registry
            frame = sweep_results(source, workspace)
        table = interactions(frame, metric, delta=delta, logit=logit, variance=variance)
    except ValueError as exc:  # ConfigError included
        fail(exc)
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

    from grpo_lab.api import report_sweep

    open_registry(db, workspace)  # a bad or unreachable URL: one line with its reason
    try:
        with console.status(f"analysing sweep {sweep_name}"):
            html, md = report_sweep(sweep_name, out, workspace, db, metric, logit)
    except ValueError as exc:  # ConfigError included: no such sweep, runs that cannot be pooled
        fail(exc)
    console.print(f"wrote {html} and {md}")


@app.command()
def predict(
    sweep_name: str = typer.Argument(..., metavar="SWEEP", help="a sweep name (grpo-lab status lists them)"),
    at: float = typer.Option(..., "--at", help="compute to predict at, in device-hours (on CPU: core-hours of CPU time); "
                                              "in steps for runs that logged no timings"),
    metric: str = typer.Option("pass@1", help="the eval metric to fit"),
    workspace: Path = typer.Option(Path(".grpo-lab"), help="the sweep's workspace"),
    db: Optional[str] = typer.Option(None, help="registry SQLAlchemy URL"),
) -> None:
    """Fit each arm's compute curve R(C) = R0 + (A - R0)/(1 + (C_mid/C)^B) over its runs and
    predict its pass@1 at compute --at, with 90% intervals (arm mean, and one more seed)."""
    from rich.markup import escape

    from grpo_lab.api import curve_verdicts
    from grpo_lab.api import predict as predict_arms
    from grpo_lab.views import curve_verdict_table, prediction_table

    if not at > 0:
        fail(ConfigError(f"--at: {at} is not a positive amount of compute"))
    try:
        rows = predict_arms(sweep_name, at, workspace, db, metric)
        verdicts = curve_verdicts(sweep_name, workspace, db, metric, arms=[arm for arm, _ in rows])
    except ValueError as exc:
        fail(exc)
    console.print(prediction_table(rows, at))
    console.print("note: beyond the runs' length each interval spans the curve form and its fitted points' "
                  "log-linear slope continued; a rise no point of the runs shows is in neither (coverage on real runs: "
                  "docs/results.md)", highlight=False)
    if not verdicts:
        console.print("no ceiling or speed labels: no cell has a baseline, or the sweep ran --decide (its seeds were "
                      "added adaptively; these labels rest on fixed-sample intervals)", highlight=False)
    else:
        console.print(curve_verdict_table(verdicts))
        for v in verdicts:
            if v.why:
                console.print(f"undecided: {v.model} / {v.task} / {v.tricks}: {escape(v.why)}", highlight=False)
    for arm, _ in rows:
        for why in arm.unfitted:
            console.print(f"not fitted: {arm.model} / {arm.task} / {arm.tricks}: {escape(why)}", highlight=False)
