"""What the registry records: damaged checkpoints are not retried, a run found finished is
accounted at its summary's cost, and a sweep's status follows its cells."""

import json
from pathlib import Path

import pytest

from grpo_lab.execution.sweep import SweepOptions, plan_for
from tests.conftest import TINY_FAST
from tests.execution.sweeps import write_matrix
from tests.execution.test_sweep_local import sweep_once

pytestmark = pytest.mark.slow


def test_corrupt_checkpoint_is_named_and_not_retried_until_removed(tmp_path):
    matrix = write_matrix(tmp_path, "corrupt", tricks=["baseline"])
    ws = tmp_path / "ws"
    run_id = plan_for(matrix, SweepOptions(workspace=ws)).cells[0].run_id
    ckpt = ws / "runs" / run_id / "checkpoint.pt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"PK\x03\x04 not a checkpoint, cut short by a full disk")
    result, sweep, session = sweep_once(matrix, ws, retries=3)
    run = sweep.cells[0].run
    assert [a.status for a in run.attempts] == ["failed"]  # --retries does not repeat it
    assert run.error.startswith("CorruptCheckpointError") and str(ckpt) in run.error and f"rm {ckpt}" in run.error
    assert sweep.status == "failed"
    session.close()
    again, sweep, session = sweep_once(matrix, ws, retries=3)  # a later sweep does not retry it either
    assert again.executed == [] and str(ckpt) in again.blocked[run_id]
    session.close()
    ckpt.unlink()  # the fix the message gives
    fixed, sweep, session = sweep_once(matrix, ws)
    assert fixed.counts["finished"] == 1 and sweep.status == "finished"
    assert sweep.cells[0].run.attempts[-1].start_step == 0


def test_run_found_finished_by_a_new_registry_costs_what_its_summary_says(tmp_path):
    matrix = write_matrix(tmp_path, "lost", tricks=["baseline"])
    ws = tmp_path / "ws"
    first, sweep, session = sweep_once(matrix, ws)
    hours = sweep.cells[0].run.gpu_hours
    assert sweep.status == "finished" and hours > 0
    session.close()
    lost = f"sqlite:///{tmp_path / 'new-registry.db'}"  # the registry record is gone, the run folder is not
    again, sweep, _ = sweep_once(matrix, ws, db_url=lost)
    summary = json.loads((Path(sweep.cells[0].run.out_dir) / "summary.json").read_text())
    assert again.executed and sweep.cells[0].run.gpu_hours == pytest.approx(summary["wall_seconds"] / 3600)
    assert sweep.cells[0].run.gpu_hours == pytest.approx(hours, rel=0.5)  # not ~0


def test_final_table_shows_pass_at_1_and_the_sweep_ends_with_its_verdicts(tmp_path):
    from rich.console import Console

    from grpo_lab.cli.sweep import verdict_lines
    from grpo_lab.views import runs_table

    matrix = write_matrix(tmp_path, "outcome", seeds=(0, 1))  # baseline and ema_reference
    _, sweep, _ = sweep_once(matrix, tmp_path / "ws")
    console = Console(record=True, width=250)
    console.print(runs_table(sweep))
    text = console.export_text()
    for cell in sweep.cells:
        summary = json.loads((Path(cell.run.out_dir) / "summary.json").read_text())
        base, final = summary["base"]["eval/pass@1"], summary["final"]["eval/pass@1"]
        assert f"{base:.2f} -> {final:.2f}" in text
    first, last = verdict_lines(sweep)
    assert first.startswith(f"{TINY_FAST} / math:") and "ema_reference" in first
    assert "decided:" in first or "Undecided (1): ema_reference" in first
    assert "best" not in first and "grpo-lab report outcome" in last
