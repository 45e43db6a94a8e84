"""Model cards (experiments/models/*.yaml) and the one entry point that loads a policy and its codec."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from grpo_lab.models.tiny import TinySpec, load_tiny
from grpo_lab.yamlio import ConfigError, load_yaml, suggest

CARDS = Path(__file__).resolve().parents[2] / "experiments" / "models"


class ModelCard(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str
    kind: Literal["tiny", "smollm2", "hf"]
    path: str | None = None  # Hugging Face id or local folder (kind: hf)
    prompt_register: Literal["compact", "natural"] = Field("natural", alias="register")
    params: int = 0  # parameter count, for the budget estimator
    gpus: int = 1  # devices one run of this model needs
    cpu_threads: int | None = None  # torch threads on CPU; 1 for tiny models (sweeps run several at once)
    chat_template: bool = True
    tiny: TinySpec | None = None
    lora: dict | None = None


def cache_dir() -> Path:
    return Path(os.environ.get("GRPO_LAB_CACHE", Path.home() / ".cache" / "grpo-lab"))


def load_card(name: str) -> ModelCard:
    """The card named `name`; a name with no card is taken as a Hugging Face id or local path."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else CARDS / f"{name}.yaml"
    if path.exists():
        data, _ = load_yaml(path)
        try:
            return ModelCard.model_validate(data)
        except Exception as exc:
            raise ConfigError(f"{path}: invalid model card: {exc}") from None
    if "/" in name or Path(name).exists():
        return ModelCard(name=name, kind="hf", path=name)
    known = [p.stem for p in CARDS.glob("*.yaml")]
    raise ConfigError(f"unknown model '{name}'{suggest(name, known)}; give a card name ({', '.join(known)}), "
                      "a Hugging Face id (org/name) or a local folder")


def load_model(card: ModelCard, tasks: list, device: torch.device, dtype: torch.dtype):
    """(policy model on device, codec) for a card. Tiny models are warm-started on `tasks`."""
    if card.kind == "tiny":
        model, codec = load_tiny(card.tiny or TinySpec(), tasks, cache_dir())
    elif card.kind == "smollm2":
        from grpo_lab.models.smollm import load_smollm2

        model, codec = load_smollm2(cache_dir())
    else:
        from grpo_lab.models.hf import LoraSpec, load_hf

        lora = LoraSpec(**card.lora) if card.lora else None
        model, codec = load_hf(card.path or card.name, dtype, lora, card.chat_template)
    return model.to(device=device, dtype=dtype), codec
