"""`sweep --decide` on the local runner: waves add seeds to open comparisons, are recorded, and a
driver killed mid-wave resumes where it was; verdicts are stored whole and read back as Verdicts.

The tiny model's 4-step runs often end below half their base pass@1 on 16 completions, which
analysis/collapse.py counts as collapsed: on the healthy estimand such a comparison has no seed to
pair. Tests of the waves' mechanics therefore decide on the mean estimand."""

import dataclasses
import json

import pytest
from sqlalchemy import text

from grpo_lab.analysis import collapse
from grpo_lab.analysis.verdict import Verdict
from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.local import LocalRunner
from grpo_lab.execution.sweep import SweepOptions, open_sweep, plan_for, recover
from grpo_lab.execution.sweep import totals
from grpo_lab.execution.waves import DecideOptions, observe, report_rows, run_decide, waves
from grpo_lab.execution.report_inputs import sweep_data
from grpo_lab.rundir import RunDir
from grpo_lab.spec.arm import arm_key
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
    dopts = DecideOptions(delta=0.9, wave=2, most_seeds=4, sequence="betting", estimand="mean", eval_samples=None)

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
    # the report's Reproduce flags, and the eval design (none asked for here)
    rows = report_rows(session, sweep)
    assert rows["options"] == {**dataclasses.asdict(dopts), "eval_design": []} and rows["options"]["estimand"] == "mean"
    assert_verdicts_count_collapses(rows["verdicts"], sweep, "mean")
    from grpo_lab.cli.sweep import verdict_lines

    closing = verdict_lines(sweep)[-1]  # the sweep's last line names what its labels are about
    assert "Labels from --decide, about mean pass@1 over all seeds" in closing and "Holm" not in closing
    assert "for any distribution of a run's score, collapsed seeds included" in closing  # betting's guarantee
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
    with pytest.raises(ConfigError, match="estimand 'mean' -> 'healthy'"):  # another estimand, likewise
        decide_once(matrix, tmp_path / "ws", dataclasses.replace(dopts, estimand="healthy"))
    more = dataclasses.replace(dopts, budget=10.0, wave=4)  # spending may change
    assert decide_once(matrix, tmp_path / "ws", more)[0] == reason


def test_eval_design_scores_every_run_on_its_re_eval_and_counts_its_hours(tmp_path):
    """--eval-samples K: every finished run's final checkpoint is evaluated again with K
    completions, the verdicts rest on those scores, their hours count, and a restart keeps K."""
    matrix = write_matrix(tmp_path, "eds", seeds=(0, 1), tricks=["baseline", {"singles": ["lr_warmup"]}])
    # as in the test above, the 4-seed cap makes the waves add seeds 2 and 3 to both arms
    dopts = DecideOptions(delta=0.9, wave=2, most_seeds=4, sequence="betting", estimand="mean", eval_samples=6)
    reason, sweep, session = decide_once(matrix, tmp_path / "ws", dopts)
    assert reason in ("cannot close", "decided") and len(sweep.cells) == 8
    records = [RunDir(c.run.out_dir).final_eval(6) for c in sweep.cells]
    assert all(r is not None and r["samples"] == 6 for r in records)
    # wave 0's runs by eval-only attempts, the added seeds at the end of their own training
    assert {c.seed: r["in_attempt"] for c, r in zip(sweep.cells, records)} == {0: False, 1: False, 2: True, 3: True}
    scores, _, _ = observe(sweep, design_of(session, sweep))
    seen = sorted(o.score for arms in scores.values() for per in arms.values() for o in per.values())
    assert seen == sorted(r["metrics"]["eval/pass@1"] for r in records)
    trained, evals = sum(c.run.gpu_hours for c in sweep.cells), sum(r["device_hours"] for r in records)
    books = totals(sweep, design_of(session, sweep))
    assert books["gpu_hours"] == pytest.approx(trained + evals) and books["final_eval_gpu_hours"] == pytest.approx(evals)
    assert waves(session, sweep)[-1].hours == pytest.approx(books["gpu_hours"])
    costs = sweep_data(sweep).costs  # the report's books are the same
    assert costs["total"] == pytest.approx(books["gpu_hours"]) and costs["by_phase"]["final_eval"] == pytest.approx(evals)
    assert totals(sweep)["gpu_hours"] == pytest.approx(trained)  # a sweep without the design is not charged
    session.close()
    with pytest.raises(ConfigError, match="--eval-samples 8"):
        decide_once(matrix, tmp_path / "ws", dataclasses.replace(dopts, eval_samples=8))
    with pytest.raises(ConfigError, match="--eval-samples none"):
        decide_once(matrix, tmp_path / "ws", dataclasses.replace(dopts, eval_samples=None))
    kept, sweep, session = decide_once(matrix, tmp_path / "ws", dataclasses.replace(dopts, eval_samples="auto"))
    assert kept == reason and set(design_of(session, sweep).values()) == {6}
    session.close()


def test_auto_eval_design_is_chosen_once_after_wave_0_and_said(tmp_path):
    matrix = write_matrix(tmp_path, "eda", seeds=(0, 1), tricks=["baseline", {"singles": ["lr_warmup"]}])
    said = []
    opts = SweepOptions(workspace=tmp_path / "ws")
    plan = plan_for(matrix, opts)
    session = reg.connect(reg.default_url(opts.workspace))()
    sweep = open_sweep(session, plan, matrix, opts, env={})
    runner = LocalRunner(slots=2)
    try:
        run_decide(session, sweep, plan, runner, opts, DecideOptions(delta=0.05, wave=2, most_seeds=4), say=said.append)
    finally:
        runner.close()
    lines = [s for s in said if s.startswith("eval design")]
    assert len(lines) == 1 and "completions per problem" in lines[0] and "x1:" in lines[0], said
    design = design_of(session, sweep)
    for c in sweep.cells:  # a chosen K is carried out on every finished run of its cell, none otherwise
        made = sorted(p.name for p in (RunDir(c.run.out_dir) / "eval").glob("final-*.json"))
        assert made == ([f"final-{design[(c.model, c.task)]}.json"] if (c.model, c.task) in design else [])
    # the default estimand, said at wave 0 with what the cap cannot exclude, and on every verdict
    assert any(s.startswith("labels are about pass@1 on the seeds where no run") for s in said), said
    assert report_rows(session, sweep)["options"]["estimand"] == "healthy"
    assert_verdicts_count_collapses(report_rows(session, sweep)["verdicts"], sweep, "healthy")
    session.close()


def test_a_registry_from_before_verdict_records_reads_and_is_decided_again(tmp_path):
    """decide_verdicts without record_json (and waves whose options lack the estimand): the column
    is added on open, the old rows read as mean-estimand verdicts without a collapse verdict, a
    restart keeps the mean estimand, and its verdicts are stored whole again."""
    matrix = write_matrix(tmp_path, "old", seeds=(0, 1), tricks=["baseline", {"singles": ["lr_warmup"]}])
    dopts = DecideOptions(delta=0.9, most_seeds=2, sequence="betting", estimand="mean", eval_samples=None)
    reason, sweep, session = decide_once(matrix, tmp_path / "ws", dopts)  # wave 0 only: the cap is 2
    before = report_rows(session, sweep)["verdicts"]
    session.close()
    engine = reg.connect(reg.default_url(tmp_path / "ws")).kw["bind"]
    with engine.begin() as conn:  # as a registry written before verdicts were records
        conn.execute(text("ALTER TABLE decide_verdicts DROP COLUMN record_json"))
        old = {k: v for k, v in dataclasses.asdict(dopts).items() if k != "estimand"}
        conn.execute(text("UPDATE decide_waves SET options_json = :o"), {"o": json.dumps({**old, "eval_design": []})})
    engine.dispose()
    session = reg.connect(reg.default_url(tmp_path / "ws"))()
    sweep = reg.get_sweep(session, "old")
    (legacy,) = report_rows(session, sweep)["verdicts"]
    (was,) = before
    assert isinstance(legacy, Verdict) and legacy.estimand == "mean" and legacy.label == was.label
    assert legacy.collapse.counts == () and legacy.collapse.label == "open" and legacy.seeds == was.seeds
    session.close()
    with pytest.raises(ConfigError, match="estimand 'mean' -> 'healthy'"):  # waves before the estimand: mean
        decide_once(matrix, tmp_path / "ws", dataclasses.replace(dopts, estimand="healthy"))
    again, sweep, session = decide_once(matrix, tmp_path / "ws", dopts)
    assert again == reason
    (fresh,) = report_rows(session, sweep)["verdicts"]
    assert fresh == was  # decided again from the runs, stored whole
    session.close()


def assert_verdicts_count_collapses(verdicts, sweep, estimand):
    """Every verdict read back is a Verdict on `estimand` whose collapse counts are each arm's
    collapsed runs (collapse.from_summary of its summary.json) of its finished runs."""
    flags: dict = {}
    for c in sweep.cells:
        if c.run.status == "finished":
            flags.setdefault(arm_key(c.tricks), []).append(collapse.from_summary(RunDir(c.run.out_dir).summary()))
    assert verdicts and all(isinstance(v, Verdict) and v.estimand == estimand for v in verdicts)
    for v in verdicts:
        assert {k: (x, n) for k, x, n in v.collapse.counts} == {k: (sum(f), len(f)) for k, f in flags.items()}
        assert v.runs == min(len(f) for f in flags.values())


def design_of(session, sweep):
    recorded = report_rows(session, sweep)["options"]["eval_design"]
    return {(m, t): k for m, t, k in recorded}
