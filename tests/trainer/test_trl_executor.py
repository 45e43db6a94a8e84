"""trainer: trl: TRL's GRPOTrainer trains the tiny model on CPU and writes grpo-lab's run folder
(metrics, evals by grpo-lab's evaluator, summary, checkpoints), which analysis reads; a kill -9
mid-run resumes from TRL's checkpoint. Needs trl==1.16.0 (the dev extra); skipped without it."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

pytest.importorskip("trl", exc_type=ImportError)

from grpo_lab.analysis.run_metrics import steps_frame, summary_fields  # noqa: E402
from grpo_lab.execution.worker import execute_attempt  # noqa: E402
from grpo_lab.rundir import TRL_DIR, RunDir  # noqa: E402
from grpo_lab.trainer.final_eval import final_eval  # noqa: E402
from grpo_lab.trainer.setup import setup  # noqa: E402
from grpo_lab.trainer.trl_callback import last_checkpoint  # noqa: E402
from grpo_lab.trainer.trl_executor import train  # noqa: E402
from tests.conftest import ROOT, tiny_cfg  # noqa: E402

EVAL = {"every": 1, "problems": 6, "samples": 2, "k": [1, 2]}


def test_a_trl_run_writes_the_run_folder_that_analysis_reads(tmp_path):
    cfg = tiny_cfg(trainer="trl", steps=2, checkpoint_every=1, tricks=["clip_higher"], eval=EVAL)
    seen = []
    summary = train(cfg, tmp_path / "run", on_step=lambda step, m: seen.append(step), final_samples=4)
    run = RunDir(tmp_path / "run")
    final = run.final_eval(4)  # --decide's eval design: the final policy again, 4 completions per problem
    assert final["in_attempt"] and final["step"] == 2 and {r["samples"] for r in final["rows"]} == {4}
    (run / "eval" / "final-4.json").unlink()  # the eval-only attempt's way: the policy from TRL's checkpoint
    again = final_eval(run.path, 4)
    assert not again["in_attempt"] and (again["rows"], again["metrics"]) == (final["rows"], final["metrics"])
    assert seen == [0, 1] and run.summary() == summary and summary.run_id == cfg.run_id()
    assert {"eval/pass@1", "eval/pass@2"} <= set(summary.base) and "eval/pass@1" in summary.final
    assert summary.effective_samples > 0 and summary.tokens_generated > 0
    # trained tokens as grpo-lab counts them: prompt and completion, once per update (clip_higher: two)
    assert summary.tokens_trained == 2 * sum(r["tokens/trained"] for r in run.metrics()) > 2 * summary.tokens_generated
    assert {"setup", "rollout", "reward", "train", "eval", "checkpoint", "idle"} <= set(summary.phase_seconds)
    assert summary.cpu_seconds > 0 and summary.device_hours > 0
    rows = run.metrics()
    assert [r["step"] for r in rows] == [0, 1]
    assert all({"reward/mean", "loss/total", "kl/mean", "timing/rollout", "trl/loss"} <= set(r) for r in rows)
    assert [p.name for p in run.eval_files()] == ["problems-000001.json", "problems-000002.json"]
    frame = steps_frame({cfg.run_id(): run.path})
    assert frame.height == 2 and frame["reward/mean"].null_count() == 0
    assert summary_fields(run.path)["delta_pass@1"] == pytest.approx(summary.delta_pass_at_1)
    # the trick's TRL switch is what TRL trained with: clip_higher's epsilon_high and two updates per step
    folder, books = last_checkpoint(run / TRL_DIR)
    args = torch.load(folder / "training_args.bin", weights_only=False)
    assert (args.epsilon_high, args.num_iterations) == (0.28, 2) and books["next_step"] == 2
    assert json.loads((folder / "trainer_state.json").read_text())["global_step"] == 4
    # grpo-lab's own trainer evaluates the same problems with the same seeds: the same base eval
    (tmp_path / "ours").mkdir()
    ours = setup(tiny_cfg(steps=2, eval=EVAL), tmp_path / "ours")
    ours.evaluate(-1, tmp_path / "ours")
    assert (RunDir(tmp_path / "ours").problems() is None and
            json.loads((tmp_path / "ours" / "eval" / "problems-base.json").read_text())
            == json.loads((run / "eval" / "problems-base.json").read_text()))


def test_the_newest_trl_checkpoint_without_grpo_labs_books_is_not_resumed_from(tmp_path):
    for step, books in ((2, {"next_step": 2}), (4, None)):  # a kill -9 while checkpoint-4 was written
        (tmp_path / f"checkpoint-{step}").mkdir()
        if books:
            (tmp_path / f"checkpoint-{step}" / "grpo_lab_books.json").write_text(json.dumps(books))
    assert last_checkpoint(tmp_path) == (tmp_path / "checkpoint-2", {"next_step": 2})
    assert last_checkpoint(tmp_path / "none") == (None, None)


def test_kill_9_mid_run_resumes_from_the_trl_checkpoint(tmp_path):
    cfg = tiny_cfg(trainer="trl", steps=60, checkpoint_every=2, eval={**EVAL, "every": 1000, "samples": 1, "k": [1]})
    run = RunDir(tmp_path / "run")
    run.write_config(cfg.model_dump(mode="json"))
    worker = subprocess.Popen([sys.executable, "-m", "grpo_lab.execution.worker", str(run.path), "1", "1"],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while last_checkpoint(run / TRL_DIR)[0] is None and worker.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        os.kill(worker.pid, signal.SIGKILL)
    finally:
        worker.wait()
    assert worker.returncode == -signal.SIGKILL and not run.finished(), "the run ended before the kill"
    _, books = last_checkpoint(run / TRL_DIR)
    result = execute_attempt(run.path, 2)
    assert result["status"] == "finished", result["error"]
    assert result["start_step"] == books["next_step"] >= 2
    assert [r["step"] for r in run.metrics()] == list(range(60))  # each step once: the killed tail cut back
    assert run.summary().run_id == cfg.run_id() and run.summary().wall_seconds > books["wall_seconds"]


def test_a_preempted_trl_run_checkpoints_at_the_step_and_the_next_attempt_finishes_it(tmp_path):
    from grpo_lab.trainer.grpo import Preempted

    cfg = tiny_cfg(trainer="trl", steps=3, checkpoint_every=10, eval={**EVAL, "every": 10})
    with pytest.raises(Preempted) as stop:
        train(cfg, tmp_path, preempt=lambda: True)  # the signal arrived during the first step
    assert stop.value.next_step == 1 and last_checkpoint(tmp_path / TRL_DIR)[1]["next_step"] == 1
    steps = []
    train(cfg, tmp_path, on_step=lambda step, m: steps.append(step))
    assert steps == [1, 2] and [r["step"] for r in RunDir(tmp_path).metrics()] == [0, 1, 2]


def test_an_alarm_in_stop_on_ends_a_trl_run_where_it_fired_and_evaluates_it_there(tmp_path):
    # KL is 0 at the first step (the policy is the reference) and above 1e-6 at the second: fires there
    alarms = {"warmup": 0, "smooth": 1, "kl_max": 1e-6, "kl_min": 0.0, "stop_on": ["kl_explosion"]}
    cfg = tiny_cfg(trainer="trl", steps=4, checkpoint_every=10, alarms=alarms, eval={**EVAL, "every": 10})
    summary = train(cfg, tmp_path, final_samples=2)
    run = RunDir(tmp_path)
    assert summary.stopped and summary.stop_reason == "kl_explosion at step 1", summary.stop_reason
    # the final eval records the steps trained, as grpo-lab's trainer and the eval-only attempt do
    assert run.final_eval(2)["step"] == 2 == last_checkpoint(tmp_path / TRL_DIR)[1]["next_step"]
    assert summary.alarms["kl_explosion"] == 1 and run.events()[0]["kind"] == "kl_explosion"
    assert [r["step"] for r in run.metrics()] == [0, 1] and [p.name for p in run.eval_files()] == ["problems-000002.json"]
    assert summary.final["eval/pass@1"] is not None


def test_configured_reward_functions_are_trls_reward_funcs_with_their_weights(tmp_path):
    functions = [{"function": "task"}, {"function": "tests/plugins/rewards_file.py:brevity", "weight": 0.5,
                                        "role": "shape"}]  # a shape term summed into the reward (shape_mode in_main)
    cfg = tiny_cfg(trainer="trl", steps=1, reward={"functions": functions}, eval={**EVAL, "every": 10})
    train(cfg, tmp_path)
    [line] = RunDir(tmp_path).metrics()
    assert line["reward/mean"] == pytest.approx(line["reward/task"] + 0.5 * line["reward/brevity"], abs=1e-6)
    assert line["reward/brevity"] > 0 and line["format/ok_frac"] > 0
    args = torch.load(last_checkpoint(tmp_path / TRL_DIR)[0] / "training_args.bin", weights_only=False)
    assert args.reward_weights == [1.0, 0.5]


def test_a_failing_final_eval_leaves_the_trained_trl_run_finished(tmp_path, monkeypatch):
    import grpo_lab.trainer.final_eval as final_eval_module

    def out_of_memory(*args, **kwargs):
        raise MemoryError("injected")

    monkeypatch.setattr(final_eval_module, "final_eval_in_run", out_of_memory)  # as grpo-lab's trainer is tested
    with pytest.warns(UserWarning, match="final eval at 2 completions per problem failed"):
        summary = train(tiny_cfg(trainer="trl", steps=1, eval={**EVAL, "every": 10}), tmp_path, final_samples=2)
    assert RunDir(tmp_path).summary() == summary and RunDir(tmp_path).final_eval(2) is None
