"""The eval-only attempt: a finished run's final checkpoint evaluated again with more completions."""

import shutil

import pytest

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
    assert out["status"] == "finished" and out["reused"] is True and out["final_eval"]["reused"] is False, out
    record = folder.final_eval(16)
    assert record["samples"] == 16 and record["step"] == cfg.steps
    assert len(record["rows"]) == cfg.eval.problems and {r["samples"] for r in record["rows"]} == {16}
    passes = sum(r["passes"] for r in record["rows"]) / (16 * cfg.eval.problems)
    assert abs(record["metrics"]["eval/pass@1"] - passes) < 1e-9
    assert record["device_hours"] > 0 and out["final_eval"]["pass@1"] == record["metrics"]["eval/pass@1"]
    assert record["in_attempt"] is False
    # nothing the training wrote changed, and the extra eval is not taken for a training eval
    after = {p.name: p.read_bytes() for p in [run / "summary.json", run / CHECKPOINT, *folder.eval_files()]}
    assert after == before and folder.summary() == summary

    again = execute(run, "eval16", 1, eval_samples=16)  # done once: the record is returned as it is
    assert again["status"] == "finished" and again["final_eval"]["reused"] is True
    assert folder.final_eval(16) == record

    # the same checkpoint evaluated elsewhere samples the same completions (common random numbers)
    twin = tmp_path / "twin"
    shutil.copytree(run, twin, ignore=shutil.ignore_patterns("final-*.json"))
    assert execute(twin, "eval16", 1, eval_samples=16)["status"] == "finished"
    assert RunDir(twin).final_eval(16)["rows"] == record["rows"]


def test_final_eval_without_a_checkpoint_leaves_the_run_finished_and_says_why(tmp_path):
    run = tmp_path / "run"
    train(tiny_cfg(), run)
    (run / CHECKPOINT).unlink()
    out = execute(run, "eval8", 1, eval_samples=8)
    assert out["status"] == "finished" and "final checkpoint is gone" in out["final_eval"]["error"]
    assert RunDir(run).final_eval(8) is None and RunDir(run).result("eval8")["final_eval"]["samples"] == 8


def test_a_run_evaluated_at_the_end_of_training_measures_what_an_eval_only_attempt_would(tmp_path):
    """New seeds are evaluated in their training process, wave-0 runs by an eval-only attempt:
    the sequences must see one measurement, so both give the same completions."""
    cfg = tiny_cfg()
    run = tmp_path / "run"
    train(cfg, run, final_samples=16)
    inline = RunDir(run).final_eval(16)
    assert inline["in_attempt"] is True and inline["device_hours"] == 0.0  # already in the attempt's hours
    assert inline["wall_seconds"] > 0 and inline["step"] == cfg.steps
    later = tmp_path / "later"
    shutil.copytree(run, later, ignore=shutil.ignore_patterns("final-*.json"))
    assert execute(later, "eval16", 1, eval_samples=16)["final_eval"]["reused"] is False
    alone = RunDir(later).final_eval(16)
    assert alone["rows"] == inline["rows"] and alone["metrics"] == inline["metrics"]


def test_an_eval_only_attempt_never_trains(tmp_path):
    """A folder the registry thought finished but that holds no summary: the eval-only attempt
    refuses instead of training a run no registry attempt would account for."""
    run = tmp_path / "run"
    RunDir(run).write_config(tiny_cfg().model_dump(mode="json"))
    out = execute(run, "eval8", 1, eval_samples=8)
    assert out["status"] == "failed" and "holds no finished run" in out["error"]
    assert not RunDir(run).finished() and not RunDir(run).has_checkpoint()


def test_a_failing_final_eval_leaves_the_trained_run_finished(tmp_path, monkeypatch):
    """The eval at K runs after the summary is written: if it fails (an out-of-memory error is the
    likely cause on a GPU, injected here), the run keeps its summary and the sweep asks again."""
    import grpo_lab.trainer.final_eval as final_eval_module

    def out_of_memory(*args, **kwargs):
        raise MemoryError("injected")

    # both trainers end with final_eval_or_warn, which calls final_eval_in_run
    monkeypatch.setattr(final_eval_module, "final_eval_in_run", out_of_memory)
    run = tmp_path / "run"
    with pytest.warns(UserWarning, match="final eval at 8 completions per problem failed"):
        summary = train(tiny_cfg(), run, final_samples=8)
    assert RunDir(run).summary() == summary and RunDir(run).final_eval(8) is None
