"""`--decide`'s eval design carried out: finished runs' final checkpoints evaluated again with more
completions per problem, as eval-only attempts on the sweep's runner, and what the design reads
from finished runs.

A design maps (model, task) to K, the completions per problem of the final eval its comparisons
are decided on (analysis/eval_design.py chooses it once, after wave 0; the waves record it). Every
finished run of a designed cell gets one record at K (RunDir.final_eval, written by
trainer/final_eval.py): that is the score its sequences see. An eval-only attempt is not a
registry attempt: it trains nothing and moves no run's status; the device-hours it cost are in its
record, which sweep.totals adds to the sweep's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from grpo_lab.analysis.eval_design import ArmCost, sampling_var
from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.base import Job, Runner
from grpo_lab.rundir import RunDir, Summary
from grpo_lab.spec.arm import arm_key

Design = dict[tuple[str, str], int]  # (model, task) -> completions per problem of the final eval


def score(cell: reg.SweepRun, summary: Summary, design: Design) -> float | None:
    """The pass@1 the comparisons see of a finished cell: the record at its cell's K under a
    design, else the run's own final eval; None when that is not there yet."""
    samples = design.get((cell.model, cell.task))
    if samples is None:
        value = summary.final.get("eval/pass@1")
        return None if value is None else float(value)
    record = RunDir(cell.run.out_dir).final_eval(samples)
    if record is None or "eval/pass@1" not in record["metrics"]:
        return None
    return float(record["metrics"]["eval/pass@1"])


def hours(cells: list[reg.SweepRun], design: Design) -> float:
    """Device-hours of the re-evals `design` asks of these cells (what they cost the sweep that
    asked for them: a record another sweep's design made at another K is not this sweep's)."""
    total = 0.0
    for cell in cells:
        samples = design.get((cell.model, cell.task))
        record = RunDir(cell.run.out_dir).final_eval(samples) if samples else None
        total += float(record.get("device_hours", 0.0)) if record else 0.0
    return total


def from_options(options: dict | None) -> Design:
    """The design a wave recorded with its options ([model, task, K] each; none before it existed)."""
    return {(m, t): k for m, t, k in (options or {}).get("eval_design") or []}


def describe(design: Design) -> str:
    """The design in words, for messages: "model/task at K completions per problem, ..."."""
    return ", ".join(f"{m}/{t} at {k} completions per problem" for (m, t), k in sorted(design.items()))


def recorded(session, sweep: reg.Sweep) -> Design:
    """The design the sweep's last --decide wave recorded ({} without one)."""
    return from_options(reg.decide_options(session, sweep))


def pending(sweep: reg.Sweep, design: Design) -> list[tuple[reg.SweepRun, int]]:
    """(cell, K) of the finished cells of designed (model, task)s without a record at K."""
    out = []
    for cell in sorted(sweep.cells, key=lambda c: c.position):
        samples = design.get((cell.model, cell.task))
        if samples and cell.run.status in reg.DONE and RunDir(cell.run.out_dir).final_eval(samples) is None:
            out.append((cell, samples))
    return out


def run_final_evals(sweep: reg.Sweep, runner: Runner, design: Design, retries: int = 1,
                    say: Callable[[str], None] = print) -> dict[str, str]:
    """Evaluate every pending (cell, K) on `runner`, `runner.slots` at a time, each tried up to
    1 + retries times. Returns {run id: error} of those still without a record (their runs are
    left out of the verdicts until a later wave evaluates them)."""
    todo = [(cell, samples, 0) for cell, samples in pending(sweep, design)]
    total = len(todo)
    if not todo:
        return {}
    say(f"final evals: {len(todo)} finished run(s) evaluated again: {describe(design)}")
    running: dict[str, tuple[reg.SweepRun, int, int]] = {}
    failed: dict[str, str] = {}
    done = 0
    while todo or running:
        while todo and len(running) < runner.slots:
            cell, samples, tries = todo.pop(0)
            running[cell.run_id] = (cell, samples, tries)
            runner.submit(Job(cell.run_id, Path(cell.run.out_dir), f"eval{samples}", cell.run.devices, eval_samples=samples))
        for out in runner.poll(timeout=1.0):
            cell, samples, tries = running.pop(out.job.run_id)
            if RunDir(cell.run.out_dir).final_eval(samples) is not None:
                done += 1
                failed.pop(cell.run_id, None)
                if done % 10 == 0 and done < total:  # long batches (wave 0) show their progress
                    say(f"final evals: {done}/{total} done")
            elif tries < retries:
                todo.append((cell, samples, tries + 1))
            else:
                failed[cell.run_id] = _why(out)
    say(f"final evals: {done} done" + (f", {len(failed)} failed (left out until a later wave): "
                                        + "; ".join(f"{rid}: {err}" for rid, err in failed.items()) if failed else ""))
    return failed


def _why(out) -> str:
    """The first line of why an eval-only attempt left no record."""
    result = RunDir(out.job.run_dir).result(out.job.attempt) or {}
    why = (result.get("final_eval") or {}).get("error") or out.error or out.status
    return why.splitlines()[0]


def design_inputs(sweep: reg.Sweep) -> tuple[dict, dict]:
    """(β, costs) per arm (model, task, key) from its finished runs: β the mean eval sampling
    variance of their final evals (eval_design.sampling_var), costs an ArmCost of means: a run's
    registry device-hours, one eval's hours (its eval phase over the evals it made, the base eval
    included) and its setup phase."""
    beta: dict = {}
    parts: dict = {}
    for cell in sweep.cells:
        folder = RunDir(cell.run.out_dir)
        summary = folder.summary() if cell.run.status in reg.DONE else None
        if summary is None:
            continue
        arm = (cell.model, cell.task, arm_key(cell.tricks))
        final = folder.problems()
        if final:
            beta.setdefault(arm, []).append(sampling_var(final["rows"]))
        phases = summary.device_hours_by_phase
        evals = len(folder.eval_files()) + 1
        parts.setdefault(arm, []).append((cell.run.gpu_hours, phases.get("eval", 0.0) / evals, phases.get("setup", 0.0)))
    costs = {arm: ArmCost(*np.mean(v, axis=0).tolist()) for arm, v in parts.items()}
    return {arm: float(np.mean(v)) for arm, v in beta.items()}, costs
