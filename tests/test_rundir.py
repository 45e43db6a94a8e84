"""The run folder contract: names, atomic JSON, torn JSONL lines, the final eval's records."""

from grpo_lab.rundir import BASE_EVAL, METRICS, RunDir


def test_readers_tolerate_missing_half_written_and_torn_files(tmp_path):
    run = RunDir(tmp_path / "r")
    assert run.config() is None and run.summary() is None and run.metrics() == [] and run.problems() is None
    run.write_config({"seed": 1})
    (run / "summary.json").write_text('{"run_id": "x", "fin')  # a writer that was not atomic, cut off
    (run / METRICS).write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "rew')  # killed mid-line
    assert run.config() == {"seed": 1} and run.summary() is None and not run.has_checkpoint()
    assert [r["step"] for r in run.metrics()] == [0, 1]
    run.write_summary({"run_id": "x"})
    assert run.finished() and run.summary() == {"run_id": "x"}
    assert not list(run.path.glob(".*.tmp"))  # atomic writes leave no temp file behind


def test_the_final_eval_is_the_last_after_training_not_the_base(tmp_path):
    run = RunDir(tmp_path)
    run.write_problems(BASE_EVAL, -1, [{"uid": "a", "passes": 0}])
    assert run.problems() is None  # only the base eval so far
    run.write_problems("000100", 99, [{"uid": "a", "passes": 1}])
    run.write_problems("000020", 19, [{"uid": "a", "passes": 0}])
    assert run.problems() == {"step": 99, "rows": [{"uid": "a", "passes": 1}]}
    run.write_result(2, {"status": "finished"})
    assert run.result(2) == {"status": "finished"} and run.result(1) is None
