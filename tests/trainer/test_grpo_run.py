import json
import os
import signal
import subprocess
import sys
import time

import pytest

from grpo_lab.models import weights_digest
from grpo_lab.trainer.grpo import train
from grpo_lab.trainer.setup import build_policy

REQUIRED = ["reward/mean", "reward/zero_std_frac", "adv/std", "kl/mean", "entropy/mean", "length/mean",
            "length/truncated_frac", "rollout/logprob_diff", "timing/rollout", "timing/train"]


def test_tiny_run_writes_metrics_and_summary(tmp_path, make_cfg):
    cfg = make_cfg()
    heard, steps = [], []
    summary = train(cfg, tmp_path, on_step=lambda step, m: steps.append(len(heard)), on_phase=heard.append)
    assert heard[:2] == ["setup", "eval"]  # the user sees where a slow run is before its first step ends
    first = heard[2:steps[0]]
    assert first[:2] == ["rollout", "reward"] and "train" in first  # each phase of step 0, in order
    rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    for key in REQUIRED:
        assert key in rows[-1], key
    assert rows[-1]["rollout/logprob_diff"] < 1e-3  # the trainer sees what the engine sampled
    assert "eval/pass@1" in rows[1] and "eval/pass@2" in rows[3]
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["steps"] == 4 and saved["tokens_generated"] > 0 and saved["tokens_trained"] > saved["tokens_generated"]
    assert set(saved["phase_seconds"]) >= {"rollout", "reference", "train", "eval"}
    assert 0.0 <= saved["base"]["eval/pass@1"] <= 1.0
    assert summary.run_id == cfg.run_id()
    assert saved["base_weights"] == weights_digest(build_policy(cfg)[3]) and saved["cpu_kernels"]


def test_micro_batches_give_the_same_update_as_one_batch(tmp_path, make_cfg):
    train(make_cfg(steps=2, eval={"every": 100}), tmp_path / "a")
    train(make_cfg(steps=2, eval={"every": 100}, optim={"micro_batch": 3}), tmp_path / "b")
    ra = [json.loads(l) for l in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    rb = [json.loads(l) for l in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    # Step 0 sees identical samples: the accumulated update must equal the one-batch update.
    for key in ("loss/total", "loss/policy", "train/grad_norm", "entropy/mean"):
        assert ra[0][key] == pytest.approx(rb[0][key], rel=1e-4, abs=1e-7), key
    # Step 1 starts from weights equal up to float rounding, so its KL to the reference agrees closely.
    assert ra[1]["kl/mean"] == pytest.approx(rb[1]["kl/mean"], rel=1e-2)


def test_kill_9_resumes_from_checkpoint_and_reaches_the_same_final_step(tmp_path, make_cfg):
    cfg_path = tmp_path / "run.yaml"
    cfg = make_cfg(steps=40, checkpoint_every=2, eval={"every": 100})
    import yaml

    cfg_path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "grpo_lab.cli", "run", str(cfg_path), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "checkpoint.pt").exists():
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # mid-run: the first checkpoint is at step 2 of 40
    proc.wait()
    assert (out / "checkpoint.pt").exists() and not (out / "summary.json").exists()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    steps = [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(40))  # no step lost, none logged twice
    saved = json.loads((out / "summary.json").read_text())
    assert saved["steps"] == 40
    assert saved["base_weights"] == weights_digest(build_policy(cfg)[3])  # what it started from, not the checkpoint
