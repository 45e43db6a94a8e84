"""Model cards (experiments/models/*.yaml) and the one entry point that loads a policy and its codec."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from grpo_lab.spec.model_cards import ModelCard, TinySpec, load_card


def cache_dir() -> Path:
    return Path(os.environ.get("GRPO_LAB_CACHE", Path.home() / ".cache" / "grpo-lab"))


def load_model(card: ModelCard, tasks: list, device: torch.device, dtype: torch.dtype):
    """(policy model on device, codec) for a card. Tiny models are warm-started on `tasks`."""
    if card.kind == "tiny":
        from grpo_lab.models.tiny import load_tiny

        model, codec = load_tiny(card.tiny or TinySpec(), tasks, cache_dir())
    elif card.kind == "smollm2":
        from grpo_lab.models.smollm import load_smollm2

        model, codec = load_smollm2(cache_dir())
    else:
        from grpo_lab.models.hf import LoraSpec, load_hf

        lora = LoraSpec(**card.lora) if card.lora else None
        model, codec = load_hf(card.path or card.name, dtype, lora, card.chat_template)
    return model.to(device=device, dtype=dtype), codec


__all__ = ["ModelCard", "TinySpec", "cache_dir", "load_card", "load_model"]
