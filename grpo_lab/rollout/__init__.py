"""Rollout engines behind one protocol; `make_engine` picks one by name."""

from __future__ import annotations

from grpo_lab.rollout.base import Rollout, RolloutEngine
from grpo_lab.spec.config import RunConfig

ENGINES = ("torch", "vllm")


def make_engine(name: str, model, codec, cfg: RunConfig | None = None) -> RolloutEngine:
    """The engine `name` sampling from `model`; cfg gives the vllm engine its section and seed."""
    if name == "torch":
        from grpo_lab.rollout.torch_engine import TorchEngine

        return TorchEngine(model, codec.eos_id, codec.pad_id)
    if name == "vllm":
        from grpo_lab.rollout.vllm_engine import VLLMEngine

        return VLLMEngine(model, codec.eos_id, cfg.vllm if cfg else None, seed=cfg.seed if cfg else 0)
    raise ValueError(f"unknown engine {name!r}; use one of {ENGINES}")


__all__ = ["Rollout", "RolloutEngine", "make_engine"]
