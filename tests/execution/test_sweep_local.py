"""Sweeps on the local runner: complete, idempotent, retried, refused over budget, killed and resumed."""

import json
from pathlib import Path

import pytest

from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.local import LocalRunner
from grpo_lab.execution.sweep import (
    SweepOptions,
    execute_sweep,
    open_sweep,
    plan_for,
    recover,
)
from grpo_lab.util.yamlio import ConfigError
from tests.conftest import TINY_FAST
from tests.execution.sweeps import write_matrix

pytestmark = pytest.mark.slow


def sweep_once(matrix: Path, ws: Path, retries: int = 1, db_url: str | None = None, planned=lambda: None):
    """One sweep of `matrix`; `planned()` is called once it is planned and registered."""
    opts = SweepOptions(workspace=ws, retries=retries, db_url=db_url)
    plan = plan_for(matrix, opts)
    Session = reg.connect(db_url or reg.default_url(ws))
    session = Session()
    sweep = open_sweep(session, plan, matrix, opts, env={})
    recover(session, sweep)
    planned()
    runner = LocalRunner(slots=2)
    try:
        return execute_sweep(session, sweep, runner, opts), sweep, session
    finally:
        runner.close()


def test_sweep_completes_and_rerun_skips_finished(tmp_path, registry_url):
    matrix = write_matrix(tmp_path)
    opts = SweepOptions(workspace=tmp_path / "ws", db_url=registry_url)
    before = plan_for(matrix, opts)
    result, sweep, session = sweep_once(matrix, tmp_path / "ws", db_url=registry_url)
    assert result.counts["finished"] == 2 and len(result.executed) == 2
    for cell in sweep.cells:
        run_dir = Path(cell.run.out_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["run_id"] == cell.run_id
        assert cell.run.attempts[0].gpu_hours > 0
    # the next plan learns from these runs: closer to what they took than FLOPs alone
    measured = sum(cell.run.gpu_hours for cell in sweep.cells)
    after = plan_for(matrix, opts)
    assert not before.calibrations and after.calibrations[TINY_FAST].runs == 2
    assert all(e.calibrated_from == 2 and e.phases["fixed"] > 0 for e in after.estimates)
    assert abs(after.total - measured) < abs(before.total - measured)
    session.close()
    again, _, _ = sweep_once(matrix, tmp_path / "ws", db_url=registry_url)
    assert again.executed == [] and again.skipped == 2


def test_failed_run_is_retried_then_recorded_as_wasted(tmp_path):
    data = tmp_path / "missing-{split}.jsonl"
    files = [Path(str(data).replace("{split}", split)) for split in ("train", "test")]

    def write_data():
        for file in files:
            file.write_text("".join(json.dumps({"question": f"{a} + {a}", "answer": str(2 * a)}) + "\n"
                                    for a in range(60)))

    def remove_data():  # gone after the plan read it (a network share, say): each attempt fails
        for file in files:
            file.unlink()

    write_data()
    matrix = write_matrix(tmp_path, "bad", tricks=["baseline"], data_path=str(data))
    result, sweep, session = sweep_once(matrix, tmp_path / "ws", retries=1, planned=remove_data)
    run = sweep.cells[0].run
    assert result.counts["failed"] == 1
    assert [a.status for a in run.attempts] == ["failed", "failed"]
    assert "missing-" in run.error and run.wasted_gpu_hours == run.gpu_hours > 0
    session.close()
    write_data()  # fixing the data makes the next sweep finish it
    result, sweep, _ = sweep_once(matrix, tmp_path / "ws")
    assert result.counts["finished"] == 1 and len(sweep.cells[0].run.attempts) == 3


def test_over_budget_plan_is_refused_unless_allowed(tmp_path):
    matrix = write_matrix(tmp_path)
    matrix.write_text(matrix.read_text().replace("base:", "budget: {hardware: cpu, gpu_hours: 0.000001}\nbase:", 1))
    with pytest.raises(ConfigError, match="--allow-over-budget"):
        plan_for(matrix, SweepOptions(workspace=tmp_path / "ws"))
    assert plan_for(matrix, SweepOptions(workspace=tmp_path / "ws", allow_over_budget=True)).fits is False


def test_budget_holds_only_what_is_pending_against_what_is_left(tmp_path):
    """A sweep with nothing left to run is never refused, however its runs overran the estimate;
    a new cell is priced after what the finished ones spent."""
    matrix = write_matrix(tmp_path, "spent", tricks=["baseline"])
    ws = tmp_path / "ws"
    _, sweep, session = sweep_once(matrix, ws)
    spent = sum(cell.run.gpu_hours for cell in sweep.cells)
    session.close()
    budget = f"budget: {{hardware: cpu, gpu_hours: {spent / 2}}}\nbase:"
    matrix.write_text(matrix.read_text().replace("base:", budget, 1))
    plan = plan_for(matrix, SweepOptions(workspace=ws))  # over budget on paper, nothing pending
    assert plan.fits is False and plan.total > plan.limit
    again, _, _ = sweep_once(matrix, ws)
    assert again.executed == [] and again.skipped == 1
    matrix.write_text(matrix.read_text().replace("- 0", "- 0\n- 1", 1))  # a second seed: one pending cell
    with pytest.raises(ConfigError, match=r"pending cells need .* after the .* its finished runs spent"):
        plan_for(matrix, SweepOptions(workspace=ws))


def test_spent_and_pending_split_the_plan_by_what_is_done(tmp_path):
    from grpo_lab.execution.sweep import spent_and_pending

    matrix = write_matrix(tmp_path, "split", seeds=(0, 1), tricks=["baseline"])
    plan = plan_for(matrix, SweepOptions(workspace=tmp_path / "ws"))
    first, second = plan.cells
    assert spent_and_pending(plan, {}) == (0.0, pytest.approx(plan.total))
    spent, pending = spent_and_pending(plan, {first.run_id: 0.25, "not-in-plan": 9.0})
    assert spent == 0.25 and pending == pytest.approx(plan.estimates[1].total)
    assert spent_and_pending(plan, {first.run_id: 0.25, second.run_id: 0.5}) == (0.75, 0)


def test_job_that_finished_after_its_driver_died_is_closed_by_its_result_not_run_again(tmp_path):
    matrix = write_matrix(tmp_path, "late", tricks=["baseline"])
    _, sweep, session = sweep_once(matrix, tmp_path / "ws")
    run = sweep.cells[0].run
    attempt = run.attempts[0]
    # what a killed driver leaves when its scheduler job ends before the restart looks at the queue
    attempt.status, attempt.job_id, attempt.ended_at, run.status = "running", "4242", None, "pending"
    session.commit()
    session.close()
    again, sweep, _ = sweep_once(matrix, tmp_path / "ws")
    run = sweep.cells[0].run
    assert again.executed == [] and again.skipped == 1 and again.counts["finished"] == 1
    assert [(a.status, a.job_id) for a in run.attempts] == [("finished", "4242")]
    assert run.attempts[0].gpu_hours > 0  # its hours come from the result it wrote


def test_cpu_workers_share_the_cores_as_torch_threads_unless_the_user_set_them(monkeypatch):
    import os
    import subprocess
    import sys

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    runner = LocalRunner(slots=4, gpus=[])
    env = runner.worker_env([])
    assert env["OMP_NUM_THREADS"] == "2" and "CUDA_VISIBLE_DEVICES" not in env
    # torch in the worker takes it as its thread count (a card's cpu_threads still overrides it)
    threads = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                             env=env, capture_output=True, text=True, check=True).stdout
    assert int(threads) == 2
    assert LocalRunner(slots=16, gpus=[]).worker_env([])["OMP_NUM_THREADS"] == "1"  # never 0
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert runner.worker_env([])["OMP_NUM_THREADS"] == "3"
    gpu = LocalRunner(slots=2, gpus=[0, 1]).worker_env([1])
    assert gpu["CUDA_VISIBLE_DEVICES"] == "1" and gpu["OMP_NUM_THREADS"] == "3"
