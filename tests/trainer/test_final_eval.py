"""The eval-only attempt: a finished run's final checkpoint evaluated again with more completions."""

import shutil

from grpo_lab.execution.worker import execute
from grpo_lab.rundir import CHECKPOINT, RunDir
from grpo_lab.trainer.grpo import train
from tests.conftest import tiny_cfg


def test_final_eval_reads_the_final_checkpoint_once_and_leaves_the_run_as_it_was(tmp_path):
    cfg = tiny_cfg()
    run = tmp_path / "run"
    summary = train(cfg, run)
    folder = RunDir(run)
    before = {p.name: p.read_bytes() for p in [run / "summary.json", run / CHECKPOINT, *folder.eval_files()]}

    out = execute(run, "eval16", 1, eval_samples=16)
    assert out["status"] == "finished" and out["reused"] is False, out
    record = folder.final_eval(16)
    assert record["samples"] == 16 and record["step"] == cfg.steps
    assert len(record["rows"]) == cfg.eval.problems and {r["samples"] for r in record["rows"]} == {16}
    passes = sum(r["passes"] for r in record["rows"]) / (16 * cfg.eval.problems)
    assert abs(record["metrics"]["eval/pass@1"] - passes) < 1e-9
    assert record["device_hours"] > 0 and out["final_eval"]["pass@1"] == record["metrics"]["eval/pass@1"]
    # nothing the training wrote changed, and the extra eval is not taken for a training eval
    after = {p.name: p.read_bytes() for p in [run / "summary.json", run / CHECKPOINT, *folder.eval_files()]}
    assert after == before and folder.summary() == summary

    again = execute(run, "eval16", 1, eval_samples=16)  # done once: the record is returned as it is
    assert again["status"] == "finished" and again["reused"] is True
    assert folder.final_eval(16) == record

    # the same checkpoint evaluated elsewhere samples the same completions (common random numbers)
    twin = tmp_path / "twin"
    shutil.copytree(run, twin, ignore=shutil.ignore_patterns("final-*.json"))
    assert execute(twin, "eval16", 1, eval_samples=16)["status"] == "finished"
    assert RunDir(twin).final_eval(16)["rows"] == record["rows"]


def test_final_eval_without_a_checkpoint_fails_with_what_to_do(tmp_path):
    run = tmp_path / "run"
    train(tiny_cfg(), run)
    (run / CHECKPOINT).unlink()
    out = execute(run, "eval8", 1, eval_samples=8)
    assert out["status"] == "failed" and "final checkpoint is gone" in out["error"]
    assert RunDir(run).final_eval(8) is None and RunDir(run).result("eval8")["status"] == "failed"
    unfinished = tmp_path / "empty"
    unfinished.mkdir()
    out = execute(unfinished, "eval8", 1, eval_samples=8)
    assert out["status"] == "failed" and "no finished run" in out["error"]
