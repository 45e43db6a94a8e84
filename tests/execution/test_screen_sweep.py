"""`sweep --screen` on the local runner and the tiny model: runs pause at each rung and continue from
their checkpoints (no step trained twice, no hour counted twice or as wasted), a dropped arm's runs
stay at their rung, what each rung decided is kept, the report shows it, and a restarted sweep
redoes no rung (tests/execution/screened.py: the sweep, its forced drop and what must hold; the
same on Slurm and Ray in test_slurm.py and test_ray_cluster.py). One seed an arm keeps it to four
attempts: 13 min on the 2-core box at load 18 (2026-12-03), nearly all of it their start-up."""

import pytest

from grpo_lab.execution.driver import SweepRequest, run_sweep
from grpo_lab.execution.report_inputs import sweep_data
from grpo_lab.execution.runners.local import LocalRunner
from grpo_lab.execution.screen import ScreenOptions, recorded
from grpo_lab.report import write_report
from grpo_lab.util.yamlio import ConfigError
from tests.execution.screened import RUNGS, TRICK, check_screened, force_drop, screen_matrix, screened_once
from tests.execution.sweeps import write_matrix

pytestmark = pytest.mark.slow


def local():
    return LocalRunner(slots=2)


def test_a_screened_sweep_pauses_continues_and_drops_without_paying_twice(tmp_path, monkeypatch):
    force_drop(monkeypatch)
    matrix, ws = screen_matrix(tmp_path), tmp_path / "ws"
    sweep, session, dropped = screened_once(matrix, ws, RUNGS, local)
    check_screened(sweep, dropped)
    attempts = {c.run_id: len(c.run.attempts) for c in sweep.cells}
    session.close()

    # a restarted sweep redoes no rung and runs nothing more
    sweep, session, again = screened_once(matrix, ws, RUNGS, local)
    assert again == dropped and {c.run_id: len(c.run.attempts) for c in sweep.cells} == attempts
    assert len(recorded(sweep)["rungs"]) == 2
    with pytest.raises(ConfigError, match="its screening ran with"):
        screened_once(matrix, ws, ScreenOptions(rungs=(0.5,)), local)

    # the report says who was dropped and when, and lists the dropped runs as such, not as missing
    _, md = write_report(sweep_data(sweep), tmp_path / "report")
    text = md.read_text()
    assert "## Screening" in text and "Partial" not in text
    assert text.count("dropped (rung 1, step 2)") == sum(c.tricks == TRICK for c in sweep.cells)
    session.close()


def test_a_rung_off_the_eval_steps_is_refused_before_anything_runs(tmp_path):
    matrix = write_matrix(tmp_path, "off", steps=8, eval={"every": 4, "problems": 8, "samples": 2, "k": [1, 2]})
    request = SweepRequest(matrix=matrix, workspace=tmp_path / "ws", preflight=False, screen={"rungs": (0.25,)})
    with pytest.raises(ConfigError, match=r"off\.yaml: --screen 0\.25: rung 0\.25 of 8 steps is step 2, not a multiple "
                                          r"of eval\.every = 4.*eval\.every"):
        run_sweep(request)
    assert not (tmp_path / "ws" / "runs").exists()
