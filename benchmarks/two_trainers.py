"""The same tricks under two trainers: one matrix swept by grpo-lab's loop and by TRL's GRPOTrainer
(`trainer: trl`), and where their verdicts agree, with the cost of each side by side.

    python benchmarks/two_trainers.py matrices/two_trainers.yaml [--workspace DIR]
    python benchmarks/two_trainers.py matrices/two_trainers.yaml --show     # the table of finished sweeps

The matrix is swept twice, as <name>-grpo-lab and <name>-trl (its base's `trainer` set for each;
written beside the registry in the workspace), into one registry; a sweep resumes and skips
finished runs as any does. The table joins the two sweeps' verdict tables (the report's) per
model, task and trick set: each side's effect on pass@1 against its own baseline with its 95%
interval, its verdict, whether the verdicts agree, and each side's device-hours per run and per
effective sample. Every trick in the matrix must run on TRL (`grpo-lab tricks`: "runs on").
Both trainers see the same problems, rewards and eval problems and seeds (trainer/trl_executor.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl
import yaml
from rich.console import Console
from rich.table import Table

from grpo_lab.util.yamlio import load_yaml

TRAINERS = ("grpo-lab", "trl")
KEYS = ["model", "task", "tricks"]


def derived(matrix: Path, workspace: Path) -> dict[str, Path]:
    """trainer -> a copy of the matrix for it (its own sweep name, base.trainer set)."""
    data, _ = load_yaml(matrix)
    base = data.get("base") or {}
    if isinstance(base, str):  # a run-config file beside the matrix
        base, _ = load_yaml(matrix.parent / base)
    out = {}
    for trainer in TRAINERS:
        path = workspace / f"{data['name']}-{trainer}.yaml"
        path.write_text(yaml.safe_dump({**data, "name": f"{data['name']}-{trainer}",
                                        "base": {**(base or {}), "trainer": trainer}}, sort_keys=False))
        out[trainer] = path
    return out


def verdicts(name: str, workspace: Path) -> pl.DataFrame:
    from grpo_lab.api import _find_sweep, sweep_verdicts
    from grpo_lab.execution import registry as reg

    with reg.connect(reg.default_url(workspace))() as session:
        table, _ = sweep_verdicts(_find_sweep(session, name))
    return table


def side_by_side(name: str, workspace: Path) -> pl.DataFrame:
    cols = ["effect", "ci_low", "ci_high", "verdict", "hours_per_run", "cost_per_effective_sample"]
    tables = [verdicts(f"{name}-{t}", workspace).select(KEYS + [pl.col(c).alias(f"{c}:{t}") for c in cols])
              for t in TRAINERS]
    both = tables[0].join(tables[1], on=KEYS, how="full", coalesce=True)
    return both.with_columns((pl.col("verdict:grpo-lab") == pl.col("verdict:trl")).alias("agree"))


def show(frame: pl.DataFrame, title: str) -> None:
    table = Table(title=title)
    for col in ("task", "tricks", *(f"{t}: effect [95% CI], verdict" for t in TRAINERS), "agree",
                *(f"{t}: h/run, h/eff. sample" for t in TRAINERS)):
        table.add_column(col, overflow="fold")
    for r in frame.iter_rows(named=True):
        effects = [f"{r[f'effect:{t}']:+.3f} [{r[f'ci_low:{t}']:+.3f}, {r[f'ci_high:{t}']:+.3f}], {r[f'verdict:{t}']}"
                   if r[f"effect:{t}"] is not None else "-" for t in TRAINERS]
        costs = [f"{r[f'hours_per_run:{t}'] or 0:.2g}, {r[f'cost_per_effective_sample:{t}'] or 0:.2g}" for t in TRAINERS]
        table.add_row(r["task"], r["tricks"], *effects, "yes" if r["agree"] else "no", *costs)
    Console().print(table)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("matrix", type=Path)
    ap.add_argument("--workspace", type=Path, default=Path("two-trainers"))
    ap.add_argument("--show", action="store_true", help="only print the table of the finished sweeps")
    a = ap.parse_args()
    a.workspace.mkdir(parents=True, exist_ok=True)
    files = derived(a.matrix, a.workspace)
    if not a.show:
        from grpo_lab.api import sweep

        for trainer, path in files.items():
            print(f"sweeping {path.stem} ...", flush=True)
            sweep(path, workspace=a.workspace)
    name = yaml.safe_load(a.matrix.read_text())["name"]
    frame = side_by_side(name, a.workspace)
    agree = int(frame["agree"].sum())
    show(frame, f"{name}: the same tricks under grpo-lab and TRL ({agree} of {frame.height} verdicts agree)")


if __name__ == "__main__":
    main()
