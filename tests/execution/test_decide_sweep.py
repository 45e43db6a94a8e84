"""`sweep --decide` on the local runner: waves add seeds to open comparisons, are recorded, and a
driver killed mid-wave resumes where it was."""

import dataclasses
import json

import pytest

from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.local import LocalRunner
from grpo_lab.execution.sweep import SweepOptions, open_sweep, plan_for, recover
from grpo_lab.execution.waves import DecideOptions, report_rows, run_decide, waves
from grpo_lab.util.yamlio import ConfigError
from tests.execution.sweeps import write_matrix

pytestmark = pytest.mark.slow


class Stop(Exception):
    pass


def decide_once(matrix, ws, dopts, on_event=None):
    opts = SweepOptions(workspace=ws)
    plan = plan_for(matrix, opts)
    session = reg.connect(reg.default_url(ws))()
    sweep = open_sweep(session, plan, matrix, opts, env={})
    recover(session, sweep)
    runner = LocalRunner(slots=2)
    try:
        return run_decide(session, sweep, plan, runner, opts, dopts, on_event=on_event, say=lambda s: None), sweep, session
    finally:
        runner.close()


def test_decide_adds_waves_records_them_and_resumes_after_a_kill(tmp_path):
    matrix = write_matrix(tmp_path, "dec", seeds=(0, 1), tricks=["baseline", {"singles": ["lr_warmup"]}])
    # on the betting sequence a margin this wide can be shown equivalent at the 4-seed cap, not
    # before: waves must add seeds
    dopts = DecideOptions(delta=0.9, wave=2, most_seeds=4, sequence="betting")

    def kill_in_wave_1(kind, cell, out):
        if kind == "start" and cell.seed == 2:
            raise Stop

    with pytest.raises(Stop):
        decide_once(matrix, tmp_path / "ws", dopts, kill_in_wave_1)
    reason, sweep, session = decide_once(matrix, tmp_path / "ws", dopts)
    assert reason in ("cannot close", "decided")
    cells = sorted((c.tricks, c.seed) for c in sweep.cells)
    assert cells == sorted((t, s) for t in ("", "lr_warmup") for s in (0, 1, 2, 3))  # no seed twice
    assert all(c.run.status == "finished" for c in sweep.cells)
    rec = waves(session, sweep)
    assert [w.wave for w in rec] == list(range(len(rec))) and len(rec) >= 2
    assert len(json.loads(rec[0].added_json)) == 2 and rec[1].runs == 6
    assert rec[1].hours > rec[0].hours > 0
    assert report_rows(session, sweep)["options"] == dataclasses.asdict(dopts)  # the report's Reproduce flags
    session.close()
    again, sweep, session = decide_once(matrix, tmp_path / "ws", dopts)  # nothing new to run or analyse
    assert again == reason and len(sweep.cells) == 8 and len(waves(session, sweep)) == len(rec)
    verdicts = session.query(reg.DecideVerdict).filter_by(sweep_id=sweep.id).all()
    assert [v.name.split("/")[-1] for v in verdicts] == ["effect:lr_warmup"]
    assert all(v.verdict == "open" or v.hours is not None for v in verdicts)
    session.close()
    switched = dataclasses.replace(dopts, sequence="t")  # a new e-process chosen after seeing the data
    with pytest.raises(ConfigError, match="sequence 'betting' -> 't'"):
        decide_once(matrix, tmp_path / "ws", switched)
    more = dataclasses.replace(dopts, budget=10.0, wave=4)  # spending may change
    assert decide_once(matrix, tmp_path / "ws", more)[0] == reason
