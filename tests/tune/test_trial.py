"""A tune trial's attempt is the sweep worker's (execution/worker.execute_attempt): pruning is one
more way for it to end, recorded in the run folder as the worker records any attempt."""

import optuna

from grpo_lab.rundir import RunDir
from grpo_lab.tune.trial import train_in
from tests.conftest import tiny_cfg


def test_a_pruned_attempt_writes_its_result_by_the_workers_path_and_the_run_resumes(tmp_path):
    cfg, run_dir = tiny_cfg(steps=4), tmp_path / "run"
    run_dir.mkdir()
    seen: list[int] = []

    def prune_at_step_3(step: int, metrics: dict) -> None:
        seen.append(step)
        if step == 2:
            raise optuna.TrialPruned("pruned at step 3")

    out = train_in(run_dir, cfg, 1, 1, prune_at_step_3)
    folder = RunDir(run_dir)
    result = folder.result(1)
    assert out.status == result["status"] == "pruned" and out.summary is None and out.gpu_hours > 0
    assert result["error"] == out.error == "pruned at step 3" and result["summary"] is None
    # the worker's bookkeeping, which tune's attempt lacked before it shared the worker's path
    assert result["start_step"] == 0 and result["reused"] is False
    assert folder.heartbeat()["step"] == 3 and not folder.finished() and folder.has_checkpoint()

    out = train_in(run_dir, cfg, 2, 1, lambda step, metrics: seen.append(step))
    assert out.status == "finished" and out.summary == folder.summary() and out.summary.run_id == cfg.run_id()
    assert folder.result(2)["start_step"] == 2 and seen == [0, 1, 2, 2, 3]  # resumed at its checkpoint
    assert folder.result(2)["summary"] == out.summary.model_dump(mode="json")

    again = train_in(run_dir, cfg, 3, 1, prune_at_step_3)  # a finished folder is reused, never trained again
    assert again.status == "finished" and again.summary == out.summary and folder.result(3)["reused"] is True
    assert folder.result(3)["wall_seconds"] == out.summary.wall_seconds
