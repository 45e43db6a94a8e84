"""`sweep --screen` on the local runner and the tiny model: runs pause at each rung and continue from
their checkpoints (no step trained twice, no hour counted twice or as wasted), a dropped arm's runs
stay at their rung, what each rung decided is kept, and a restarted sweep redoes no rung.

The runs here are too short for the rule to drop anything (2 evals at the first rung, 2 seeds), so
the rung that drops is forced: screening.screen is wrapped to add a drop of the trick arm at the
first rung; the rule itself is tested in tests/analysis/test_screening.py. One seed an arm keeps it to
four attempts: 13 min on the 2-core box at load 18 (2026-12-03), nearly all of it their start-up."""

import dataclasses

import pytest

from grpo_lab.analysis import screening as scr
from grpo_lab.execution import registry as reg
from grpo_lab.execution import screen as screen_mod
from grpo_lab.execution.driver import SweepRequest, run_sweep
from grpo_lab.execution.runners.local import LocalRunner
from grpo_lab.execution.report_inputs import sweep_data
from grpo_lab.execution.screen import ScreenOptions, check_rungs, recorded, run_screening
from grpo_lab.execution.sweep import SweepOptions, execute_sweep, open_sweep, plan_for, recover
from grpo_lab.report import write_report
from grpo_lab.rundir import RunDir
from grpo_lab.util.yamlio import ConfigError
from tests.execution.sweeps import write_matrix

pytestmark = pytest.mark.slow
TRICK = "ema_reference"


def screened_once(matrix, ws, options):
    """What driver._execute does with --screen: the rungs, then the survivors to the end."""
    opts = SweepOptions(workspace=ws)
    plan = plan_for(matrix, opts)
    session = reg.connect(reg.default_url(ws))()
    sweep = open_sweep(session, plan, matrix, opts, env={})
    recover(session, sweep)
    steps = check_rungs([c.shared for c in plan.cells], options, matrix)[1]
    runner = LocalRunner(slots=2)
    try:
        dropped = run_screening(session, sweep, runner, opts, options, steps)
        execute_sweep(session, sweep, runner, opts, skip=dropped)
    finally:
        runner.close()
    return sweep, session, dropped


def test_a_screened_sweep_pauses_continues_and_drops_without_paying_twice(tmp_path, monkeypatch):
    real = scr.screen

    def drop_trick_at_first_rung(rule, rung, step, full, arms, total):
        got = real(rule, rung, step, full, arms, total)
        trick = [a for a in arms if a[2] == TRICK]
        if rung == 0 and trick:
            got = dataclasses.replace(got, drops=[scr.Drop(trick[0], 0, step, ("m", "t", "baseline"), "forced")])
        return got

    monkeypatch.setattr(screen_mod.scr, "screen", drop_trick_at_first_rung)
    matrix = write_matrix(tmp_path, "scr", seeds=(0,), steps=8, checkpoint_every=4,
                          eval={"every": 2, "problems": 8, "samples": 2, "k": [1, 2]})
    ws = tmp_path / "ws"
    sweep, session, dropped = screened_once(matrix, ws, ScreenOptions(rungs=(0.25, 0.5)))
    by_trick = {t: [c for c in sweep.cells if c.tricks == t] for t in ("", TRICK)}
    assert dropped == {c.run_id for c in by_trick[TRICK]}
    for cell in by_trick[""]:  # the survivor: paused at 2 and 4, then to the end, one run id throughout
        run, folder = cell.run, RunDir(cell.run.out_dir)
        assert run.status == "finished"
        assert [a.status for a in run.attempts] == ["paused", "paused", "finished"]
        assert [folder.result(a.number).get("paused_at") for a in run.attempts[:2]] == [2, 4]
        steps = [r["step"] for r in folder.metrics()]
        assert steps == list(range(8)), f"each step once: {steps}"
        evals = [r["step"] for r in folder.metrics() if "eval/pass@1" in r]
        assert evals == [1, 3, 5, 7]
        assert [a.start_step for a in run.attempts[1:]] == [2, 4]  # each continued where the last paused
        assert run.wasted_gpu_hours == 0.0 and run.gpu_hours == pytest.approx(sum(a.gpu_hours for a in run.attempts))
        summary = folder.summary()
        # the summary's hours are the trained run's over its attempts (carried in the checkpoint), which
        # the attempts' hours (process start and setup included) cover: nothing counted twice
        assert 0 < summary.device_hours <= run.gpu_hours
        assert folder.stop_at() is None
    for cell in by_trick[TRICK]:  # dropped at the first rung: stays there
        folder = RunDir(cell.run.out_dir)
        assert cell.run.status == "pending" and [a.status for a in cell.run.attempts] == ["paused"]
        assert [r["step"] for r in folder.metrics()] == [0, 1] and folder.summary() is None
    state = recorded(ws, sweep.name)
    assert [r["step"] for r in state["rungs"]] == [2, 4]
    assert [d["arm"][2] for d in state["rungs"][0]["drops"]] == [TRICK] and state["rungs"][1]["drops"] == []
    assert state["rungs"][0]["drops"][0]["hours"] > 0
    attempts = {c.run_id: len(c.run.attempts) for c in sweep.cells}
    session.close()

    # a restarted sweep redoes no rung and runs nothing more
    sweep, session, again = screened_once(matrix, ws, ScreenOptions(rungs=(0.25, 0.5)))
    assert again == dropped and {c.run_id: len(c.run.attempts) for c in sweep.cells} == attempts
    assert len(recorded(ws, sweep.name)["rungs"]) == 2
    with pytest.raises(ConfigError, match="its screening ran with"):
        screened_once(matrix, ws, ScreenOptions(rungs=(0.5,)))

    # the report says who was dropped and when, and lists the dropped runs as such, not as missing
    _, md = write_report(sweep_data(sweep), tmp_path / "report")
    text = md.read_text()
    assert "## Screening" in text and "Partial" not in text
    assert text.count("dropped (rung 1, step 2)") == len(by_trick[TRICK])
    session.close()


def test_a_rung_off_the_eval_steps_is_refused_before_anything_runs(tmp_path):
    matrix = write_matrix(tmp_path, "off", steps=8, eval={"every": 4, "problems": 8, "samples": 2, "k": [1, 2]})
    request = SweepRequest(matrix=matrix, workspace=tmp_path / "ws", preflight=False, screen={"rungs": (0.25,)})
    with pytest.raises(ConfigError, match=r"off\.yaml: --screen 0\.25: rung 0\.25 of 8 steps is step 2, not a multiple "
                                          r"of eval\.every = 4.*eval\.every"):
        run_sweep(request)
    assert not (tmp_path / "ws" / "runs").exists()
