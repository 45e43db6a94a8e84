"""The SmolLM2 path end to end (GGUF -> cached safetensors -> chat template -> GRPO step)."""

import json

import pytest

from grpo_lab.spec.config import load_config
from grpo_lab.trainer.grpo import train

pytest.importorskip("gguf")


@pytest.mark.slow
def test_smollm2_natural_math_grpo_step_logs_rewards(tmp_path):
    # One step: the path (GGUF cache, chat template, sampling, scoring, update) is the same at every
    # step, and a SmolLM2 step is about 30 s on the 2-core box.
    cfg = load_config("experiments/configs/smollm2-math.yaml", [
        "steps=1", "sampling.prompts_per_step=2", "sampling.group_size=4", "sampling.max_new_tokens=24",
        "eval.problems=2", "eval.samples=2", "eval.k=[1,2]", "eval.every=1",
    ])
    summary = train(cfg, tmp_path)
    rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and "eval/pass@1" in rows[0]
    assert all(0.0 <= r["reward/mean"] <= 1.0 for r in rows)
    assert rows[-1]["rollout/logprob_diff"] < 1e-2
    assert rows[-1]["kl/mean"] >= 0.0 and rows[-1]["length/mean"] > 1
    assert summary.tokens_generated > 0
