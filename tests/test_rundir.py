"""The run folder contract: names, atomic JSON, torn JSONL lines, the final eval's records."""

import json

from grpo_lab.rundir import BASE_EVAL, METRICS, SUMMARY, RunDir, Summary


def test_readers_tolerate_missing_half_written_and_torn_files(tmp_path):
    run = RunDir(tmp_path / "r")
    assert run.config() is None and run.summary() is None and run.metrics() == [] and run.problems() is None
    run.write_config({"seed": 1})
    (run / "summary.json").write_text('{"run_id": "x", "fin')  # a writer that was not atomic, cut off
    (run / METRICS).write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "rew')  # killed mid-line
    assert run.config() == {"seed": 1} and run.summary() is None and not run.has_checkpoint()
    assert [r["step"] for r in run.metrics()] == [0, 1]
    run.write_summary(Summary(run_id="x"))
    assert run.finished() and run.summary() == Summary(run_id="x")
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


# summary.json's keys, in order, as committed reports and MLflow metric names know them
KEYS = ["run_id", "model", "task", "tricks", "seed", "steps", "base", "final", "delta_pass@1", "stopped",
        "stop_reason", "alarms", "wall_seconds", "cpu_seconds", "devices", "unit", "phase_seconds", "device_hours_by_phase",
        "device_hours", "sampling_share", "cost_per_effective_sample_hours", "price_per_gpu_hour",
        "tokens_generated", "tokens_trained", "effective_samples", "device", "host", "base_weights", "cpu_kernels"]


def test_a_summary_round_trips_in_the_keys_its_readers_know(tmp_path):
    run = RunDir(tmp_path)
    summary = Summary(run_id="abc", model="tiny", task=["math"], seed=3, steps=4,
                      base={"eval/pass@1": 0.25}, final={"eval/pass@1": 0.5}, delta_pass_at_1=0.25,
                      alarms={"nan": 0}, wall_seconds=12.0, phase_seconds={"train": 10.0, "idle": 2.0},
                      device_hours=12 / 3600, effective_samples=64, base_weights="d1g3st")
    run.write_summary(summary)
    assert run.summary() == summary
    on_disk = json.loads((run / SUMMARY).read_text())
    assert list(on_disk) == KEYS and on_disk["delta_pass@1"] == 0.25
    assert Summary.parse(on_disk) == summary  # a result file's copy reads back the same


def test_a_torn_or_foreign_summary_reads_as_none_and_an_old_one_as_what_it_holds(tmp_path):
    run = RunDir(tmp_path)
    (run / SUMMARY).write_text('{"run_id": "x", "final": {"eval/pa')
    assert run.summary() is None
    (run / SUMMARY).write_text('["not", "a", "summary"]')
    assert run.summary() is None
    (run / SUMMARY).write_text('{"run_id": "x", "final": "not a dict of metrics"}')
    assert run.summary() is None
    # older folders lack later fields, and a newer version may have added some
    (run / SUMMARY).write_text('{"run_id": "x", "device_hours": 0.5, "added_later": 1}')
    old = run.summary()
    assert old.run_id == "x" and old.device_hours == 0.5 and old.sampling_share is None and old.final == {}
