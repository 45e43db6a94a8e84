"""trainer: trl with engine: vllm is TRL's colocated vLLM: the run's vllm section lands in GRPOConfig's
vllm_* keys (TRL's default importance-sampling correction off unless tis_cap asks for it), the tiny
model is refused at plan time, and a machine without CUDA and vLLM refuses before anything runs.
The GPU run itself is checked only where a GPU is lent (docs/executors.md)."""

import dataclasses

import pytest

from grpo_lab.execution.driver import check_runnable
from grpo_lab.spec.trl_map import grpo_config_keys, trl_refusals
from grpo_lab.util.yamlio import ConfigError
from tests.conftest import tiny_cfg


def smollm_cfg(**over):
    return tiny_cfg(model="smollm2-135m", trainer="trl", engine="vllm", **over)


def test_engine_vllm_is_trls_colocated_vllm_with_the_runs_vllm_settings():
    keys = grpo_config_keys(smollm_cfg(vllm={"gpu_memory_utilization": 0.3, "enable_sleep_mode": False,
                                             "max_model_len": 512}))
    assert (keys["use_vllm"], keys["vllm_mode"]) == (True, "colocate")
    assert (keys["vllm_gpu_memory_utilization"], keys["vllm_enable_sleep_mode"], keys["vllm_max_model_length"]) == (
        0.3, False, 512)
    # grpo-lab corrects the mismatch only when asked; TRL would apply sequence_mask at 3 by default
    assert keys["vllm_importance_sampling_correction"] is False
    capped = grpo_config_keys(smollm_cfg(vllm={"tis_cap": 2.0, "tis_mode": "sequence_mask"}))
    assert (capped["vllm_importance_sampling_correction"], capped["vllm_importance_sampling_clip_max"],
            capped["vllm_importance_sampling_mode"]) == (True, 2.0, "sequence_mask")
    trl = pytest.importorskip("trl")
    fields = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    assert set(capped) <= fields, set(capped) - fields


def test_the_torch_engine_keeps_trl_off_vllm_and_settings_trl_lacks_are_refused():
    assert grpo_config_keys(tiny_cfg(trainer="trl"))["use_vllm"] is False
    # on the torch engine the vllm section trains nothing: neither mapped nor refused
    torch_keys = grpo_config_keys(tiny_cfg(trainer="trl", vllm={"enforce_eager": True, "tis_cap": 2.0}))
    assert not any(k.startswith("vllm_") for k in torch_keys)
    with pytest.raises(ConfigError, match="vllm.enforce_eager=True has no TRL equivalent"):
        smollm_cfg(vllm={"enforce_eager": True})
    assert trl_refusals(smollm_cfg()) == []


def test_the_tiny_model_under_trl_and_vllm_is_refused_at_plan_time():
    with pytest.raises(ConfigError, match="the tiny model has none vLLM can load"):
        tiny_cfg(trainer="trl", engine="vllm")


def test_without_cuda_and_vllm_a_trl_vllm_run_is_refused_before_anything_runs():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine may run it")
    with pytest.raises(ConfigError, match="needs a CUDA GPU and vllm"):
        check_runnable([smollm_cfg()])
    # a cluster's nodes, not the machine that drives the sweep, train it
    check_runnable([smollm_cfg()], local=False)
