"""Model cards (experiments/models/*.yaml) and the one entry point that loads a policy and its codec."""

from __future__ import annotations

import torch

from grpo_lab.spec.model_cards import ModelCard, TinySpec, load_card
from grpo_lab.util.paths import cache_dir


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


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 (16 hex digits) over the parameter names, dtypes, shapes and bytes, in state_dict order.

    Runs compared with each other must start from the same weights. A cache key cannot promise
    that: the tiny model's warm start lands on different weights under different CPU kernel sets
    (AVX512 vs AVX2 moved its code pass@1 from 0.14 to 0.24 at the same step), so the summary keeps
    this digest of what the run actually started from."""
    import hashlib

    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


__all__ = ["ModelCard", "TinySpec", "cache_dir", "load_card", "load_model", "weights_digest"]
