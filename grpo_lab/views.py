"""Rich views for the CLI: run summaries, plans, the live sweep table, status tables, interactions."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.base import Outcome
from grpo_lab.rundir import RunDir, Summary
from grpo_lab.spec.budget import calibration_key, fmt_hours
from grpo_lab.spec.plan import Plan
from grpo_lab.spec.arm import Arm, arm_label

STYLE = {"finished": "green", "stopped": "yellow", "failed": "red", "running": "cyan", "pending": "dim",
         "interrupted": "magenta", "preempted": "blue", "paused": "blue", "dropped": "dim"}


def styled(status: str) -> str:
    """`status` in its colour (rich markup); a status without one plain, never an empty tag."""
    return f"[{STYLE.get((status.split() or [''])[0], 'none')}]{status}[/]"


@dataclass(frozen=True)
class CellProgress:
    """Where a running cell is, from its heartbeat (written by its worker after every step)."""

    step: int
    steps: int | None
    reward: float | None
    elapsed: float  # seconds since this attempt started
    eta: float | None  # seconds to its last step at this attempt's pace; None before two steps are done
    start_step: int = 0  # where this attempt resumed

    @property
    def fraction(self) -> float:
        """The share of this attempt's steps done (a resumed attempt starts at 0, not at its checkpoint's)."""
        todo = (self.steps or 0) - self.start_step
        return min((self.step - self.start_step) / todo, 1.0) if todo > 0 else 0.0


def cell_progress(run_dir: str | Path, now: float | None = None, attempt: int | None = None) -> CellProgress | None:
    """A running cell's progress, or None while its attempt (`attempt`, when given) has written no
    heartbeat yet: an earlier attempt's heartbeat says nothing about this one's pace."""
    beat = RunDir(run_dir).heartbeat()
    if not beat or "started" not in beat or (attempt is not None and beat.get("attempt") != attempt):
        return None
    now = time.time() if now is None else now
    step, steps, first = int(beat.get("step", 0)), beat.get("steps"), int(beat.get("start_step", 0))
    # the pace from the end of the attempt's first step: setup (model load, warm start, base eval)
    # is paid once, and counting it per step would put a fresh run's ETA in hours
    paced = step - first - 1
    pace = (beat["updated"] - beat["first_step_at"]) / paced if paced > 0 and "first_step_at" in beat else None
    eta = max(pace * (steps - step) - (now - beat["updated"]), 0.0) if pace and steps else None
    return CellProgress(step, steps, beat.get("reward"), now - beat["started"], eta, first)


def fmt_seconds(secs: float | None) -> str:
    if secs is None:
        return "-"
    return f"{secs:.0f}s" if secs < 120 else f"{secs / 60:.0f}m" if secs < 7200 else f"{secs / 3600:.1f}h"


class SweepProgress:
    """Live view of a sweep: a row per running cell (step/steps, reward, elapsed, ETA, re-read
    from its heartbeat at every refresh) under the sweep's done/total and ETA. Off a terminal it
    prints the same as plain lines every ``every`` seconds."""

    def __init__(self, console: Console, total: int, done_before: int, every: float = 30.0):
        self.console, self.total, self.done, self.done_before = console, total, done_before, done_before
        # run id -> (label, run folder, start): plain values, since the refresh runs in rich's
        # thread and the registry session belongs to the driver's
        self.running: dict[str, tuple[str, str, float]] = {}
        self.failed = 0
        self.t0 = time.time()
        self.every = every
        self.live = Live(console=console, refresh_per_second=2, transient=True, get_renderable=self.render) \
            if console.is_terminal else None
        self._stop = threading.Event()
        self._printer = None if self.live else threading.Thread(target=self._print_lines, daemon=True)

    def __enter__(self):
        if self.live:
            self.live.__enter__()
        else:
            self._printer.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.live:
            self.live.__exit__(*exc)

    def __call__(self, kind: str, cell: reg.SweepRun | None, out: Outcome | None) -> None:
        if kind == "start":
            self.running[cell.run_id] = (_label(cell), cell.run.out_dir, cell.run.attempts[-1].number, time.time())
        elif kind == "end":
            *_, t0 = self.running.pop(cell.run_id, ("", "", None, time.time()))
            self.done += out.status in reg.DONE  # a preempted or interrupted run is not done: it resumes
            self.failed += out.status == "failed"
            msg = (out.error or "").strip().splitlines()[0] if out.error else ""
            self.console.print(f"{styled(f'{out.status:>8}')} {cell.run_id}  {_label(cell)}  "
                               f"{time.time() - t0:.0f}s  {msg}", highlight=False)

    def eta(self, rows: list[CellProgress | None]) -> float | None:
        """Seconds left for the whole sweep at this session's pace: elapsed x (1 - f) / f, where f
        is the share of this session's cells done, running cells counted by their step. None until
        a cell of this session is done: before that, elapsed time is mostly setup, and the ratio
        extrapolates it over every step."""
        todo = self.total - self.done_before
        if self.done == self.done_before:
            return None if todo else 0.0
        share = ((self.done - self.done_before) + sum(r.fraction for r in rows if r)) / todo
        return (time.time() - self.t0) * max(1 - share, 0.0) / share

    def rows(self) -> list[tuple[str, str, CellProgress | None]]:
        """(run id, label, progress) of every running cell."""
        return [(rid, label, cell_progress(folder, attempt=attempt))
                for rid, (label, folder, attempt, _) in list(self.running.items())]

    def head(self, rows) -> str:
        return (f"{self.done}/{self.total} done, {len(self.running)} running, {self.failed} failed attempts, "
                f"{fmt_seconds(time.time() - self.t0)} elapsed, ETA {fmt_seconds(self.eta([r for *_, r in rows]))}")

    def render(self) -> Group:
        rows = self.rows()
        table = Table(show_edge=False, pad_edge=False)
        for col in ("run id", "cell", "step", "reward", "elapsed", "ETA"):
            table.add_column(col, justify="left" if col in ("run id", "cell") else "right")
        for rid, label, got in rows:
            table.add_row(rid, label, *_progress_cells(got))
        return Group(f"[bold]{self.head(rows)}[/]", table)

    def _print_lines(self) -> None:
        while not self._stop.wait(self.every):
            rows = self.rows()
            self.console.print(self.head(rows), highlight=False)
            for rid, label, got in rows:
                step, reward, elapsed, eta = _progress_cells(got)
                self.console.print(f" running {rid}  {label}  step {step}  reward {reward or '-'}  "
                                   f"{elapsed} elapsed, ETA {eta}", highlight=False)


def _label(cell: reg.SweepRun) -> str:
    return f"{Arm.from_label(cell.model, cell.task, cell.tricks)} / seed {cell.seed}"


def _progress_cells(got: CellProgress | None) -> tuple[str, str, str, str]:
    """(step/steps, reward, elapsed, ETA) as table cells; dashes before the first heartbeat."""
    if got is None:
        return "starting", "", "-", "-"
    reward = f"{got.reward:.3f}" if got.reward is not None else ""
    return f"{got.step}/{got.steps or '?'}", reward, fmt_seconds(got.elapsed), fmt_seconds(got.eta)


def orphaned(run: reg.Run, driving: bool) -> bool:
    """A run the registry still calls running although nothing runs it: its driver is gone (kill -9)
    and its attempt had no scheduler job that could outlive the driver (a local worker dies with it,
    PDEATHSIG; a Slurm job may not, and the next driver adopts it). The next sweep closes it as
    interrupted and resumes it."""
    last = run.attempts[-1] if run.attempts else None
    return (not driving and run.status == "running" and last is not None and last.status == "running"
            and not last.job_id)


def sweeps_table(session, sweeps: list[reg.Sweep], driving: bool = True) -> Table:
    """Runs per status per sweep; without a live driver (`driving`), orphaned runs count as pending."""
    table = Table(title="sweeps")
    table.add_column("sweep")
    for s in reg.STATUSES:
        table.add_column(s, justify="right")
    table.add_column("hours", justify="right")
    table.add_column("wasted", justify="right")
    from grpo_lab.execution import final_evals
    from grpo_lab.execution.sweep import totals

    for sweep in sweeps:
        n = reg.counts(session, sweep)
        if not driving:
            lost = sum(orphaned(c.run, driving) for c in sweep.cells)
            n = {**n, "running": n["running"] - lost, "pending": n["pending"] + lost}
        books = totals(sweep, final_evals.recorded(session, sweep))  # with --decide's eval-only attempts
        table.add_row(sweep.name, *(str(n[s]) for s in reg.STATUSES), f"{books['gpu_hours']:.3g}",
                      f"{books['wasted_gpu_hours']:.3g}")
    return table


def pass_at_1(cell: reg.SweepRun) -> tuple[float, float] | None:
    """(base, final) test pass@1 of a finished cell, from its summary."""
    summary = RunDir(cell.run.out_dir).summary() if cell.run.status in reg.DONE else None
    if summary is None or "eval/pass@1" not in (summary.base or {}) or "eval/pass@1" not in summary.final:
        return None
    return summary.base["eval/pass@1"], summary.final["eval/pass@1"]


def runs_table(sweep: reg.Sweep, driving: bool = True, dropped: dict[str, tuple[int, int]] | None = None) -> Table:
    """Every run of a sweep; a running one with its step, ETA and hours so far from its heartbeat
    (so `status` shows a sweep another shell is driving); without a live driver (`driving`), an
    orphaned run (its driver killed) as interrupted; a run of an arm --screen dropped (`dropped`:
    run id -> (rung, step), execution/screen.dropped_at) as dropped there, not as pending."""
    table = Table(title=f"sweep {sweep.name} ({sweep.unit})")
    for col in ("run id", "model", "task", "tricks", "seed", "status", "step", "ETA", "pass@1", "attempts", "hours",
                "error"):
        table.add_column(col, justify="right" if col in ("seed", "step", "ETA", "attempts", "hours") else "left")
    for cell in sorted(sweep.cells, key=lambda c: c.position):
        run = cell.run
        err = (run.error or "").strip().splitlines()[0][:60] if run.error else ""
        status = run.status
        if orphaned(run, driving):
            status, err = "interrupted", "its sweep driver is gone: re-run the sweep to resume"
        elif run.status not in reg.DONE and cell.run_id in (dropped or {}):
            status = "dropped (rung {}, step {})".format(*dropped[cell.run_id])
        p = pass_at_1(cell)
        got = cell_progress(run.out_dir, attempt=run.attempts[-1].number) if status == "running" else None
        step, _, _, eta = _progress_cells(got) if got else ("", "", "", "")
        hours = run.gpu_hours + (got.elapsed * run.devices / 3600 if got else 0.0)
        table.add_row(cell.run_id, cell.model, cell.task, arm_label(cell.tricks), str(cell.seed),
                      styled(status), step, eta,
                      f"{p[0]:.2f} -> {p[1]:.2f}" if p else "-", str(len(run.attempts)), f"{hours:.3g}", err)
    return table


def decision_summary(verdicts, sweep_name: str, closing: str | None = None) -> list[str]:
    """The paragraph a sweep ends with, per (model, task), from the report's own verdict table
    (report/verdicts.py: one set of verdicts): what is decided (with effect and interval), what
    is not, and the seeds per arm the undecided ones would need. `closing`: what --decide's labels
    are about and what holds for them, when it made the labels (report/decisions.closing_text);
    None: Holm over the table's effects."""
    from grpo_lab.report.verdicts import UNDECIDED, VerdictPolicy, seeds_to_resolve

    def shown(r) -> str:
        return f"{r['tricks']} {r['effect']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]" \
            if r["ci_low"] is not None and r["effect"] is not None else r["tricks"]

    def open_shown(r) -> str:
        # the interval is per comparison (uncorrected), the label Holm's over the table: say both
        holm = r.get("p_holm")
        return shown(r) + (f" (Holm p {holm:.2g})" if holm is not None and r["ci_low"] is not None else "")

    lines = []
    for (model, task), rows in _by_cell(verdicts.iter_rows(named=True)).items():
        decided = [r for r in rows if r["verdict"] != UNDECIDED]
        open_ = [r for r in rows if r["verdict"] == UNDECIDED]
        words = [f"{model} / {task}:"]
        words.append("decided: " + "; ".join(f"{shown(r)} {r['verdict']}" for r in decided) + "."
                     if decided else "nothing decided yet.")
        if open_:
            policy = VerdictPolicy()
            # the fixed design's estimate (Holm rows); --decide's open rows say their own reason
            needs = [n for r in open_ if r.get("p_holm") is not None and (n := seeds_to_resolve(r, policy)) is not None]
            cost = (f" About {max(needs):,} seeds per arm would resolve ±{policy.resolution:g} for all of them."
                    if needs else "")
            words.append(f"Undecided ({len(open_)}): " + "; ".join(open_shown(r) for r in open_) + "." + cost)
        lines.append(" ".join(words))
    if closing:
        lines.append(f"{closing}; details: `grpo-lab report {sweep_name}`.")
    else:
        lines.append(f"Effects vs the baseline with 95% CIs per comparison; labels and Holm p corrected over the "
                     f"table; details: "
                     f"`grpo-lab report {sweep_name}`.")
    return lines


def _by_cell(rows) -> dict[tuple[str, str], list[dict]]:
    out: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        out.setdefault((r["model"], r["task"]), []).append(r)
    return out


def show_summary(console: Console, s: Summary) -> None:
    table = Table(title=f"run {s.run_id}")
    table.add_column("metric")
    table.add_column("base", justify="right")
    table.add_column("final", justify="right")
    for key in sorted(k for k in s.final if k.startswith("eval/") and k.count("/") == 1):
        table.add_row(key, f"{(s.base or {}).get(key, float('nan')):.3f}", f"{s.final[key]:.3f}")
    console.print(table)
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(s.phase_seconds.items()))
    console.print(f"wall {s.wall_seconds:.1f}s ({phases}); tokens generated {s.tokens_generated}, "
                  f"trained {s.tokens_trained}; effective samples {s.effective_samples}")


def show_plan(console: Console, p: Plan, table: bool = True) -> None:
    """Print a plan: a row per (model, task, trick set) (optional), totals, warnings, and the
    budget verdict. Seeds are summarised: a row per cell made a large matrix's table take minutes
    and most of a gigabyte; `plan --cells` streams those rows instead."""
    unit = p.hardware.unit
    if table:
        out = Table(title=f"plan {p.name} on {p.hardware.name}: estimated {unit} per run and per row")
        for col in ("model", "task", "tricks", "seeds", "runs", "each", "total"):
            left = col in ("model", "task", "tricks", "seeds")
            out.add_column(col, justify="left" if left else "right", overflow="fold" if left else "ellipsis")
        for g in p.groups():
            out.add_row(g.model, g.task, arm_label(g.tricks), g.seed_text(), f"{len(g.seeds):,}",
                        fmt_hours(g.estimate.total), fmt_hours(g.total))
        console.print(out)
    phases = ", ".join(f"{k} {fmt_hours(v)}" for k, v in p.phase_totals().items())
    console.print(f"[bold]{len(p.cells)} cells: {fmt_hours(p.total)} {unit}[/] on {p.hardware.name} ({phases}); "
                  f"cost ~{p.cost:,.2f} at {p.price:g} per device-hour")
    for model in dict.fromkeys(calibration_key(c.shared.model, c.shared.trainer) for c in p.cells):
        cal = p.calibrations.get(model)
        console.print(f"{model}: {cal.describe(unit)}" if cal else
                      f"{model}: estimated from FLOPs alone (no finished run of it on {p.hardware.name} in the registry yet)")
    for w in p.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    if p.fits is None:
        console.print("no budget given: nothing to check the plan against")
    else:
        share = f"{p.spend / p.limit:.0%} of {fmt_hours(p.limit)} {unit}" + (f" (tier {p.tier})" if p.tier else "")
        console.print(f"budget: [green]fits[/], {share}" if p.fits else f"budget: [bold red]does NOT fit[/], {share}")
    for line in p.screening.describe(unit) if p.screening else ():
        console.print(line, markup=False, highlight=False)


def plan_lines(p: Plan) -> Iterator[str]:
    """One tab-separated line per cell (`plan --cells`), made as it is printed."""
    yield f"model\ttask\ttricks\tseed\trun_id\test_{p.hardware.unit.replace(' ', '_')}\n"
    for c, e in zip(p.cells, p.estimates):
        yield f"{c.model}\t{c.task}\t{arm_label(c.tricks)}\t{c.seed}\t{c.run_id}\t{fmt_hours(e.total)}\n"


def show_interactions(console: Console, table, metric: str) -> None:
    """Print interaction rows: observed vs expected effect, interaction and its 95% CI, q, verdict."""
    from rich import box
    from rich.markup import escape

    def num(x, digits: int = 3) -> str:
        return "-" if x is None or x != x else f"{x:+.{digits}g}"

    # Labels shared by every row go to the title, so the trick names get the width.
    shared = {k: table[k][0] for k in ("model", "task", "n_seeds") if table[k].n_unique() == 1}
    labels = [k for k in ("model", "task") if k not in shared]
    where = "".join(f", {k.removeprefix('n_')} {v}" for k, v in shared.items())
    out = Table(title=f"interactions on {escape(metric)}{escape(where)}", box=box.SIMPLE_HEAD, show_edge=False,
                caption="obs: effect vs baseline; exp: sum of the singles' effects; inter = obs - exp, with its 95% CI")
    for col in (*labels, "tricks", *(() if "n_seeds" in shared else ("seeds",)), "obs", "exp", "inter", "q", "verdict"):
        out.add_column(col, justify="left" if col in (*labels, "tricks", "verdict") else "right", overflow="fold")
    for r in table.iter_rows(named=True):
        need = r["verdict"] == "inconclusive" and r["seeds_needed"]
        q = "-" if r["q_value"] is None or r["q_value"] != r["q_value"] else f"{r['q_value']:.2g}"
        out.add_row(*(escape(str(r[k])) for k in labels), escape(r["tricks"].replace("+", "\n+")),
                    *(() if "n_seeds" in shared else (str(r["n_seeds"]),)), num(r["observed"]), num(r["expected"]),
                    f"{num(r['interaction'])}\n[{num(r['ci_low'], 2)}, {num(r['ci_high'], 2)}]", q,
                    r["verdict"] + (f"\n(~{r['seeds_needed']} seeds)" if need else ""),
                    style="bold red" if r["flagged"] else None, end_section=True)
    console.print(out)
    for r in table.filter(table["warnings"] != "").unique(["tricks", "warnings"], maintain_order=True).iter_rows(named=True):
        console.print(f"[yellow]warning:[/] {escape(r['tricks'])}: {escape(r['warnings'])}")


def prediction_table(rows, at: float) -> Table:
    """`grpo-lab predict`: per arm its curve (ceiling A, compute to half the gain C_mid, B) over
    the seeds that did not collapse, and its predicted pass@1 at `at` (90%: the arm's mean, one
    more seed), with how far `at` lies beyond the longest fitted run."""
    table = Table(title=f"compute curves, predicted at {at:g}")
    for col in ("model", "task", "trick set", "seeds", "collapsed", "ceiling A", "C_mid", "B", "predicted mean",
                "one more seed", "x longest run"):
        table.add_column(col, justify="left" if col in ("model", "task", "trick set") else "right")

    def span(i) -> str:
        return "-" if i.n == 0 else f"{i.est:.3g} [{i.lower:.3g}, {i.upper:.3g}]"

    for arm, p in rows:
        c = arm.curve
        longest = max((f.C_last for f in c.runs), default=0.0)
        table.add_row(arm.model, arm.task, arm.tricks, str(len(c.runs)), str(c.collapsed), span(c.A),
                      f"{span(c.C_mid)} {arm.unit}", span(c.B), span(p.mean), span(p.seed),
                      f"{at / longest:.2g}" if longest else "-")
    return table


def curve_verdict_table(verdicts) -> Table:
    """`grpo-lab predict`: each trick set's ceiling and speed verdicts (analysis/curve_verdicts.py)."""
    level, alpha = (verdicts[0].level, verdicts[0].alpha) if verdicts else (0.95, 0.05)
    table = Table(title=f"ceiling and speed vs baseline, seeds that did not collapse ({level:.2%} intervals, all "
                        f"labels together at {1 - alpha:.0%})")
    for col in ("model", "task", "trick set", "runs", "ΔA", "C_mid ratio", "ceiling", "speed"):
        table.add_column(col, justify="right" if col in ("runs", "ΔA", "C_mid ratio") else "left")

    def span(i) -> str:
        return "-" if i.n < 2 else f"{i.est:+.3f} [{i.lower:+.3f}, {i.upper:+.3f}]"

    def ratio(i) -> str:
        return "-" if i.n < 2 else f"{i.est:.2g} [{i.lower:.2g}, {i.upper:.2g}]"

    for v in verdicts:
        table.add_row(v.model, v.task, v.tricks, f"{v.runs[0]}/{v.runs[1]}", span(v.ceiling), ratio(v.speed),
                      v.ceiling_label, v.speed_label)
    return table
