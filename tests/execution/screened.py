"""A screened sweep on any runner, as driver._execute makes it with --screen, and what must hold
after one whatever ran its attempts (the local runner, Slurm jobs, Ray tasks).

The runs are too short for the rule to drop anything (2 evals at the first rung, one seed), so the
drop is forced: screening.screen is wrapped to drop the trick arm at the first rung (`force_drop`);
the rule itself is tested in tests/analysis/test_screening.py."""

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from grpo_lab.analysis import screening as scr
from grpo_lab.execution import registry as reg
from grpo_lab.execution import screen as screen_mod
from grpo_lab.execution.screen import ScreenOptions, check_rungs, recorded, run_screening
from grpo_lab.execution.sweep import SweepOptions, execute_sweep, open_sweep, plan_for, recover
from grpo_lab.rundir import RunDir
from tests.execution.sweeps import write_matrix

TRICK = "ema_reference"
RUNGS = ScreenOptions(rungs=(0.25, 0.5))


def force_drop(monkeypatch) -> None:
    """screening.screen with the trick arm dropped at the first rung (module docstring)."""
    real = scr.screen

    def drop_trick_at_first_rung(rule, rung, step, full, arms, total):
        got = real(rule, rung, step, full, arms, total)
        trick = [a for a in arms if a[2] == TRICK]
        if rung == 0 and trick:
            got = dataclasses.replace(got, drops=[scr.Drop(trick[0], 0, step, ("m", "t", "baseline"), "forced")])
        return got

    monkeypatch.setattr(screen_mod.scr, "screen", drop_trick_at_first_rung)


def screen_matrix(folder: Path, name: str = "scr") -> Path:
    """The baseline and TRICK, one seed, 8 steps, an eval every 2: rungs at steps 2 and 4."""
    return write_matrix(folder, name, seeds=(0,), steps=8, checkpoint_every=4,
                        eval={"every": 2, "problems": 8, "samples": 2, "k": [1, 2]})


def screened_once(matrix: Path, ws: Path, options: ScreenOptions, make_runner: Callable, db_url: str | None = None):
    """The rungs, then the survivors to the end; returns (sweep, session, the dropped run ids)."""
    opts = SweepOptions(workspace=ws, db_url=db_url)
    plan = plan_for(matrix, opts)
    session = reg.connect(db_url or reg.default_url(ws))()
    sweep = open_sweep(session, plan, matrix, opts, env={})
    recover(session, sweep)
    steps = check_rungs([c.shared for c in plan.cells], options, matrix)[1]
    runner = make_runner()
    try:
        dropped = run_screening(session, sweep, runner, opts, options, steps)
        execute_sweep(session, sweep, runner, opts, skip=dropped)
    finally:
        runner.close()
    return sweep, session, dropped


def check_screened(sweep: reg.Sweep, dropped: frozenset[str]) -> None:
    """The survivor paused at steps 2 and 4 and went on to the end as one run (each step trained
    once, no hour wasted or counted twice); the dropped arm's run stayed paused at its rung."""
    by_trick = {t: [c for c in sweep.cells if c.tricks == t] for t in ("", TRICK)}
    assert dropped == {c.run_id for c in by_trick[TRICK]}
    for cell in by_trick[""]:
        run, folder = cell.run, RunDir(cell.run.out_dir)
        assert run.status == "finished", [(a.status, a.error) for a in run.attempts]
        assert [a.status for a in run.attempts] == ["paused", "paused", "finished"]
        assert [folder.result(a.number).get("paused_at") for a in run.attempts[:2]] == [2, 4]
        steps = [r["step"] for r in folder.metrics()]
        assert steps == list(range(8)), f"each step once: {steps}"
        assert [r["step"] for r in folder.metrics() if "eval/pass@1" in r] == [1, 3, 5, 7]
        assert [a.start_step for a in run.attempts[1:]] == [2, 4]  # each continued where the last paused
        assert run.wasted_gpu_hours == 0.0 and run.gpu_hours == pytest.approx(sum(a.gpu_hours for a in run.attempts))
        # the summary's hours are the trained run's over its attempts (carried in the checkpoint), which
        # the attempts' hours (process start and setup included) cover: nothing counted twice
        assert 0 < folder.summary().device_hours <= run.gpu_hours
        assert folder.stop_at() is None
    for cell in by_trick[TRICK]:
        folder = RunDir(cell.run.out_dir)
        assert cell.run.status == "pending" and [a.status for a in cell.run.attempts] == ["paused"]
        assert [r["step"] for r in folder.metrics()] == [0, 1] and folder.summary() is None
    state = recorded(sweep)
    assert [r["step"] for r in state["rungs"]] == [2, 4]
    assert [d["arm"][2] for d in state["rungs"][0]["drops"]] == [TRICK] and state["rungs"][1]["drops"] == []
    assert state["rungs"][0]["drops"][0]["hours"] > 0
