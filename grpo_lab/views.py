"""Rich views of sweeps: the live progress table of `sweep` and the tables of `status`."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from grpo_lab import registry as reg
from grpo_lab.runners.base import Outcome
from grpo_lab.runners.worker import read_json

STYLE = {"finished": "green", "stopped": "yellow", "failed": "red", "running": "cyan", "pending": "dim",
         "interrupted": "magenta"}


class SweepProgress:
    """Live table of the running cells (step, reward, elapsed) over the sweep's counts."""

    def __init__(self, console: Console, total: int, done_before: int):
        self.console, self.total, self.done = console, total, done_before
        self.running: dict[str, tuple[reg.SweepRun, float]] = {}
        self.failed = 0
        self.t0 = time.time()
        self.live = Live(self.render(), console=console, refresh_per_second=2, transient=True)

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, *exc):
        self.live.__exit__(*exc)

    def __call__(self, kind: str, cell: reg.SweepRun | None, out: Outcome | None) -> None:
        if kind == "start":
            self.running[cell.run_id] = (cell, time.time())
        elif kind == "end":
            _, t0 = self.running.pop(cell.run_id, (cell, time.time()))
            self.done += out.status != "failed"
            self.failed += out.status == "failed"
            label = f"{cell.model} / {cell.task} / {cell.tricks or 'baseline'} / seed {cell.seed}"
            msg = (out.error or "").strip().splitlines()[0] if out.error else ""
            self.live.console.print(f"[{STYLE[out.status]}]{out.status:>8}[/] {cell.run_id}  {label}  "
                                    f"{time.time() - t0:.0f}s  {msg}", highlight=False)
        self.live.update(self.render())

    def render(self) -> Group:
        elapsed = time.time() - self.t0
        head = (f"[bold]{self.done}/{self.total} done[/], {len(self.running)} running, {self.failed} failed "
                f"attempts, {elapsed / 60:.1f} min")
        table = Table(show_edge=False, pad_edge=False)
        for col in ("run id", "model", "task", "tricks", "seed", "step", "reward", "elapsed"):
            table.add_column(col, justify="right" if col in ("seed", "step", "reward", "elapsed") else "left")
        for cell, t0 in self.running.values():
            beat = read_json(Path(cell.run.out_dir) / "heartbeat.json") or {}
            step = f"{beat.get('step', 0)}/{beat.get('steps', '?')}"
            reward = f"{beat['reward']:.3f}" if beat.get("reward") is not None else ""
            table.add_row(cell.run_id, cell.model, cell.task, cell.tricks or "baseline", str(cell.seed), step,
                          reward, f"{time.time() - t0:.0f}s")
        return Group(head, table)


def sweeps_table(session, sweeps: list[reg.Sweep]) -> Table:
    table = Table(title="sweeps")
    table.add_column("sweep")
    for s in reg.STATUSES:
        table.add_column(s, justify="right")
    table.add_column("hours", justify="right")
    table.add_column("wasted", justify="right")
    for sweep in sweeps:
        n = reg.counts(session, sweep)
        runs = [c.run for c in sweep.cells]
        table.add_row(sweep.name, *(str(n[s]) for s in reg.STATUSES), f"{sum(r.gpu_hours for r in runs):.3g}",
                      f"{sum(r.wasted_gpu_hours for r in runs):.3g}")
    return table


def runs_table(sweep: reg.Sweep) -> Table:
    table = Table(title=f"sweep {sweep.name} ({sweep.unit})")
    for col in ("run id", "model", "task", "tricks", "seed", "status", "attempts", "hours", "error"):
        table.add_column(col, justify="right" if col in ("seed", "attempts", "hours") else "left")
    for cell in sorted(sweep.cells, key=lambda c: c.position):
        run = cell.run
        err = (run.error or "").strip().splitlines()[0][:60] if run.error else ""
        table.add_row(cell.run_id, cell.model, cell.task, cell.tricks or "baseline", str(cell.seed),
                      f"[{STYLE[run.status]}]{run.status}[/]", str(len(run.attempts)), f"{run.gpu_hours:.3g}", err)
    return table
