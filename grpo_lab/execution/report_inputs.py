"""A registered sweep's finished runs as the report's inputs (report.inputs.ReportData), and the
commands that reproduce it: the adapter between the registry and the report, so report/ reads
frames only and never the execution stack.

The study's compute split (docs/study.md, "How the study spends"): *sampling and eval* = the rollout,
reward and eval phases of the attempts that counted; *search and reruns* = attempts that did not
count (failed, interrupted: wasted compute); *main matrix* = everything else the counted
attempts spent (training, reference forwards, set-up). A tune's sweep is search, all of it.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl

from grpo_lab.analysis.curves import from_run_dirs
from grpo_lab.execution import registry as reg
from grpo_lab.report.inputs import ReportData
from grpo_lab.report.screening import Screening
from grpo_lab.rundir import RunDir, Summary

SAMPLING_PHASES = ("rollout", "reward", "eval", "final_eval")


def mixed_bases(rows: list[tuple[str, str, str | None]]) -> list[str]:
    """(model, task) pairs whose runs started from more than one set of weights, from (model, task,
    summary base_weights) rows; runs from before the digest was recorded (None) are not counted."""
    seen: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for model, task, digest in rows:
        if digest is not None:
            seen[model, task][digest] += 1
    return [f"{model} / {task}: " + ", ".join(f"{d} ({n} runs)" for d, n in sorted(counts.items()))
            for (model, task), counts in seen.items() if len(counts) > 1]


def _summary(cell: reg.SweepRun) -> Summary:
    """The cell's summary; an empty one (every field unset) where the folder holds none."""
    return RunDir(cell.run.out_dir).summary() or Summary()


def _done_cells(sweep: reg.Sweep) -> list[reg.SweepRun]:
    return [c for c in sorted(sweep.cells, key=lambda c: c.position)
            if c.run.status in reg.DONE and RunDir(c.run.out_dir).finished()]


def _phase_hours(cells: list[reg.SweepRun]) -> dict[str, float]:
    """Device-hours per phase over the runs' summaries (device_hours_by_phase when the run
    recorded it, else its phase seconds times the devices it held)."""
    total: dict[str, float] = {}
    for cell in cells:
        summary = _summary(cell)
        by_phase = summary.device_hours_by_phase or {
            k: v * cell.run.devices / 3600 for k, v in summary.phase_seconds.items()}
        for phase, hours in by_phase.items():
            total[phase] = total.get(phase, 0.0) + float(hours)
    return total


def _cpu_basis(cells: list[reg.SweepRun]) -> dict:
    """Over the one-device CPU runs whose summary has CPU time (the training process's: a GPU
    run's or a multi-process run's CPU time is not its compute): their CPU and wall hours."""
    pairs = [(s.cpu_seconds, s.wall_seconds) for s in map(_summary, cells)
             if s.cpu_seconds and s.wall_seconds and s.devices == 1 and str(s.device or "").startswith("cpu")]
    return {"cpu_hours": sum(c for c, _ in pairs) / 3600, "cpu_runs_wall_hours": sum(w for _, w in pairs) / 3600,
            "cpu_runs": len(pairs)} if pairs else {}


def _costs(sweep: reg.Sweep, cells: list[reg.SweepRun], effective: float, decisions: dict) -> dict:
    from grpo_lab.execution import final_evals
    from grpo_lab.execution.sweep import totals

    books = totals(sweep, final_evals.from_options(decisions.get("options")))
    used, wasted = books["gpu_hours"], books["wasted_gpu_hours"]
    by_phase = _phase_hours(cells)
    if books["final_eval_gpu_hours"]:
        by_phase["final_eval"] = books["final_eval_gpu_hours"]  # --decide's eval-only attempts
    sampling = sum(v for k, v in by_phase.items() if k in SAMPLING_PHASES)
    useful = used - wasted
    if sweep.is_tune:  # a tune's trials are search compute, all of them
        split = {"main matrix": 0.0, "search and reruns": used, "sampling and eval": 0.0}
    else:
        split = {"main matrix": max(useful - sampling, 0.0), "search and reruns": wasted,
                 "sampling and eval": sampling}
    return {
        "unit": sweep.unit, "by_phase": by_phase, "total": used, "wasted": wasted, "split": split,
        "price_per_gpu_hour": sweep.price_per_gpu_hour,
        "cost_per_effective_sample": used / effective if effective else None,
        **_cpu_basis(cells),
    }


def _partial(sweep: reg.Sweep, cells: list[reg.SweepRun], dropped: frozenset[str] = frozenset()) -> str | None:
    """'k of n cells finished' while some of the sweep's cells are not, else None; the cells of arms
    --screen dropped are not counted: they are not still to run."""
    def counted(some: list) -> int:
        return len(some) - sum(c.run_id in dropped for c in some)

    total, done = counted(sweep.cells), counted(cells)
    return None if done == total else f"{done} of {total} cells finished"


def screening(sweep: reg.Sweep) -> Screening | None:
    """What `sweep --screen` recorded for the sweep (execution/screen.py), with its dropped runs'
    labels; None when it was not screened."""
    from grpo_lab.execution.screen import recorded

    record = recorded(sweep)
    if record is None:
        return None
    dropped = {run_id for rung in record.get("rungs") or () for d in rung.get("drops") or () for run_id in d["run_ids"]}
    runs = [{**c.labels(), "folder": str(Path(c.run.out_dir).resolve())}
            for c in sorted(sweep.cells, key=lambda c: c.position) if c.run_id in dropped]
    return Screening.from_record(record, runs)


def sweep_data(sweep: reg.Sweep, metric: str = "pass@1", logit: bool = False) -> ReportData:
    """Everything the report of `sweep` shows, from its finished (or stopped) runs."""
    # Imported when a report is made: the analysis stack pulls in scipy.
    from sqlalchemy.orm import object_session

    from grpo_lab.analysis.interactions import effects, interactions
    from grpo_lab.analysis.results import frame_from_run_dirs
    from grpo_lab.analysis.run_metrics import events_frame, steps_frame
    from grpo_lab.analysis.variance import budget_frame
    from grpo_lab.execution import waves
    from grpo_lab.execution.sweep import cell_arms, mixed_arms
    from grpo_lab.execution.tracking import child_run_name
    from grpo_lab.report.samples import sample_frame

    cells, screened = _done_cells(sweep), screening(sweep)
    if not cells:
        raise ValueError(f"sweep '{sweep.name}' has no finished run yet: run `grpo-lab sweep` first")
    if mixed := mixed_arms(cell_arms(cells)):
        raise ValueError(f"sweep '{sweep.name}' holds runs of different configs under one label: {'; '.join(mixed)}. "
                         f"It was merged from an edited matrix; run `grpo-lab sweep {sweep.matrix_path} --replace` "
                         f"(keeps one config per label) and report again")
    if mixed := mixed_bases([(c.model, c.task, _summary(c).base_weights) for c in cells]):
        raise ValueError(f"sweep '{sweep.name}': runs of one model and task started from different weights: "
                         f"{'; '.join(mixed)}. Their arms are not comparable (a warm-started tiny model depends on "
                         f"the machine's CPU kernels, summary.json's cpu_kernels). Share GRPO_LAB_CACHE between the "
                         f"machines, or rerun the runs of one of the groups on the other's machine type")
    dirs = {c.run_id: Path(c.run.out_dir) for c in cells}
    labelled = [(c.labels(), Path(c.run.out_dir)) for c in cells]
    steps, events = steps_frame(dirs), events_frame(dirs)  # read once, shared by the rows and the curves
    runs = frame_from_run_dirs(labelled, steps=steps, events=events)
    base = {c.run_id: (_summary(c).base or {}).get("eval/pass@1") for c in cells}
    runs = runs.with_columns(
        pl.col("run_id").replace_strict({c.run_id: c.run.status for c in cells}).alias("status"),
        pl.col("run_id").replace_strict(base, default=None, return_dtype=pl.Float64).alias("base_pass@1"),
        pl.col("run_id").replace_strict({c.run_id: c.estimate_gpu_hours for c in cells}, default=None,
                                        return_dtype=pl.Float64).alias("planned_hours"),
        pl.col("run_id").replace_strict(_diagnoses(dirs), default=None, return_dtype=pl.String).alias("diagnosis"),
        pl.col("run_id").replace_strict({k: str(v.resolve()) for k, v in dirs.items()}).alias("folder"),
        pl.col("run_id").replace_strict({c.run_id: child_run_name(c.labels()["tricks"], c.seed, c.run_id)
                                         for c in cells}).alias("mlflow_run"))
    effective = float(runs["effective_samples"].fill_null(0).sum())
    matrix = repo_path(sweep.matrix_path)
    session = object_session(sweep)
    decisions = waves.report_rows(session, sweep) if session else {}
    return ReportData(
        runs=runs, steps=steps, events=events,
        effects=effects(runs, metric, logit=logit), interactions=interactions(runs, metric, logit=logit),
        costs=_costs(sweep, cells, effective, decisions), env=json.loads(sweep.env_json or "{}"),
        variance=budget_frame(labelled), decisions=decisions,
        curves=from_run_dirs([(c.labels(), Path(c.run.out_dir), c.run.devices) for c in cells], f"eval/{metric}"),
        samples=sample_frame(labelled), screening=screened,
        meta={"sweep": sweep.name, "matrix": matrix, "metric": metric, "created": sweep.created_at.isoformat(),
              "partial": _partial(sweep, cells, frozenset(screened.dropped_status()) if screened else frozenset()),
              "commands": reproduce_commands(sweep, matrix, metric, logit, decisions, screened)},
    )


def _diagnoses(dirs: dict[str, Path]) -> dict[str, str | None]:
    from grpo_lab.analysis.run_diagnosis import diagnose_run

    return {run_id: (why.line() if (why := diagnose_run(folder)) else None) for run_id, folder in dirs.items()}


# --- how to reproduce it ---

def repo_path(path: str) -> str:
    """A matrix path as a command run from the repository root reads it: relative to the working
    folder when under it, else from its last `matrices/` folder on, else its file name. A
    machine's absolute path reproduces nothing on another machine."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    if p.is_relative_to(Path.cwd()):
        return str(p.relative_to(Path.cwd()))
    if "matrices" in p.parts:
        return str(Path(*p.parts[len(p.parts) - 1 - p.parts[::-1].index("matrices"):]))
    return p.name


def _decide_flags(decisions: dict) -> tuple[list[str], str]:
    """sweep's --decide flags from the options the last wave recorded, and a note when a registry
    from before they were recorded leaves them unknown."""
    if not decisions.get("waves"):
        return [], ""
    opts = decisions.get("options")
    if not opts:  # waves from before options were recorded, and so before the t sequence
        return (["--decide", "--sequence", "betting", "--eval-samples", "none"],
                "  # its --budget, --delta, --most-seeds were not recorded")
    flags = ["--decide"]
    if opts.get("budget") is not None:
        flags += ["--budget", f"{opts['budget']:g}"]
    flags += ["--delta", f"{opts['delta']:g}", "--most-seeds", str(opts["most_seeds"])]
    flags += ["--unpaired"] if opts.get("method") == "unpaired" else []
    estimand = opts.get("estimand", "mean")  # options recorded before the estimand was one decided on the mean
    flags += ["--estimand", estimand] if estimand != "healthy" else []
    # waves recorded before the sequence was an option used betting, and no eval design
    flags += [] if opts.get("sequence", "betting") == "t" else ["--sequence", "betting"]
    samples = opts.get("eval_samples")
    return flags + ([] if samples == "auto" else ["--eval-samples", "none" if samples is None else str(samples)]), ""


def reproduce_commands(sweep: reg.Sweep, matrix: str, metric: str, logit: bool, decisions: dict,
                       screened: Screening | None = None) -> list[str]:
    """plan, sweep and report with every flag the registry recorded: the sweep's name when it is
    not the matrix file's, the runner its attempts ran on (when one, and not local), --decide's,
    --screen's."""
    named = ["--name", sweep.name] if sweep.name != Path(sweep.matrix_path).stem else []
    kinds = {a.runner for c in sweep.cells for a in c.run.attempts}
    runner = ["--runner", kinds.pop()] if len(kinds) == 1 and kinds != {"local"} else []
    decide, note = _decide_flags(decisions)
    if screened is not None:
        decide += ["--screen", "--rungs", ",".join(f"{f:g}" for f in screened.fractions)]
        decide += [] if "--delta" in decide else ["--delta", f"{screened.delta:g}"]
    delta = (decisions.get("options") or {}).get("delta")
    plan = ["grpo-lab", "plan", matrix] + ([] if delta is None else ["--decide-delta", f"{delta:g}"])
    if screened is not None:
        plan += ["--screen", "--rungs", ",".join(f"{f:g}" for f in screened.fractions)]
    report = ["grpo-lab", "report", sweep.name, "--metric", metric] + (["--logit"] if logit else [])
    return [shlex.join(plan), shlex.join(["grpo-lab", "sweep", matrix, *named, *runner, *decide]) + note,
            shlex.join(report)]
