"""Rollout engines behind one protocol; `make_engine` picks one by name."""

from __future__ import annotations

from grpo_lab.rollout.base import Rollout, RolloutEngine

ENGINES = ("torch", "vllm")


def make_engine(name: str, model, codec) -> RolloutEngine:
    if name == "torch":
        from grpo_lab.rollout.torch_engine import TorchEngine

        return TorchEngine(model, codec.eos_id, codec.pad_id)
    if name == "vllm":
        raise RuntimeError("engine vllm needs a CUDA GPU and `pip install grpo-lab[gpu]`")
    raise ValueError(f"unknown engine {name!r}; use one of {ENGINES}")


__all__ = ["Rollout", "RolloutEngine", "make_engine"]
