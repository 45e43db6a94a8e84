"""Readers for the definitions in experiments/: model cards and hardware profiles, found on the
search path of util/paths.py (the project's ./experiments, $GRPO_LAB_HOME, the shipped copy).

Planning must stay fast and import nothing heavy (torch and transformers take seconds to
import), so model cards and hardware profiles are read here; grpo_lab.models loads the weights.
"""

from __future__ import annotations

import difflib
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grpo_lab.util.paths import find, names
from grpo_lab.util.validate import validate
from grpo_lab.util.yamlio import ConfigError, load_yaml, suggest



class TinySpec(BaseModel):
    """Architecture and warm-start recipe of the built-in tiny model (grpo_lab/models/tiny.py)."""

    model_config = ConfigDict(extra="forbid")
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    intermediate: int = 384
    max_positions: int = 128
    seed: int = 0
    sft_max_steps: int = 3000
    sft_batch: int = 64
    sft_lr: float = 1e-3
    # Stop the warm-start once sampled (T=1) pass@1 on held-in train problems reaches this:
    # low enough to leave GRPO headroom, high enough that groups are not all zero.
    sft_target: float = 0.35
    sft_check_every: int = 25


class ModelCard(BaseModel):
    """A model card (experiments/models/<name>.yaml): what to load and what the planner needs."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)
    name: str
    kind: Literal["tiny", "smollm2", "hf"] = "hf"
    path: str | None = None  # Hugging Face id or local folder (kind: hf)
    prompt_register: Literal["compact", "natural"] = Field("natural", alias="register")
    params: int = Field(0, ge=0)  # 0: unknown (a Hugging Face id without a card)
    gpus: int = Field(1, ge=1)  # devices one run of this model needs
    cpu_threads: int | None = None  # torch threads on CPU; 1 for tiny models (sweeps run several at once)
    chat_template: bool = True
    tiny: TinySpec | None = None
    lora: dict | None = None


class Hardware(BaseModel):
    """A device profile: peak rate and the fraction of it each phase of a GRPO step achieves.

    Sampling (autoregressive decode) is memory-bandwidth bound on GPUs, so it reaches a much
    smaller fraction of peak than training (large matmuls); the two are kept apart.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    kind: Literal["gpu", "cpu"] = "gpu"
    description: str = ""
    peak_flops: float = Field(gt=0)  # per device: bf16 dense on GPUs, measured fp32 on CPUs
    mfu_sampling: float = Field(gt=0, le=1)  # achieved / peak while generating (decode + prefill, eval)
    mfu_training: float = Field(gt=0, le=1)  # achieved / peak in forward+backward and reference forward
    devices_per_node: int = Field(1, ge=1)
    price_per_gpu_hour: float = Field(0.0, ge=0)  # default price of one device-hour, any currency

    @property
    def unit(self) -> str:
        """GPU-hours on GPUs; device-hours (core-hours here) on CPUs, labelled as such (docs/design.md §5)."""
        return "GPU-hours" if self.kind == "gpu" else "device-hours"


def known(kind: str) -> list[str]:
    """Card or profile names of `kind` ('models' or 'hardware') over the whole search path."""
    return names("experiments", kind)


_TRUTHY = {"1", "true", "yes", "on"}


def hub_offline() -> bool:
    """True when the user asked for no network (HF_HUB_OFFLINE or the older TRANSFORMERS_OFFLINE).

    Read at call time, not import time, so a test or a runner can switch it per process.
    """
    return any(
        os.environ.get(var, "").strip().lower() in _TRUTHY
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


@lru_cache(maxsize=64)
def load_card(name: str) -> ModelCard:
    """The card `name` (or a card file); a name without a card that looks like a Hugging Face id
    or a local folder is taken as one (parameter count unknown)."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else find("experiments", f"models/{name}.yaml")
    if path.exists():
        data, lines = load_yaml(path)
        return validate(ModelCard, data, str(path), lines)
    if Path(name).expanduser().exists():
        return ModelCard(name=name, kind="hf", path=name)
    if _is_path(name):
        raise ConfigError(f"model folder '{name}' not found{_suggest_folder(name)}; give a folder holding the "
                          f"model's config.json, a card name ({', '.join(known('models'))}) or a Hugging Face "
                          f"id (org/name)")
    if "/" in name:
        return ModelCard(name=name, kind="hf", path=name)
    raise ConfigError(f"unknown model '{name}'{suggest(name, known('models'))}; give a card name "
                      f"({', '.join(known('models'))}), a Hugging Face id (org/name) or a local folder")


def nearest_card(name: str) -> str:
    """' (did you mean the card X?)' for the card whose name or model path is closest to `name`
    (a Hub id with a typo: 'HuggingFaceTB/SmolLM2-135M-Instructt' -> smollm2-135m), or ''."""
    cards = {key: card for card in known("models") for key in (card, load_card(card).path) if key}
    close = difflib.get_close_matches(name, list(cards), n=1, cutoff=0.5)
    return f" (did you mean the card '{cards[close[0]]}'?)" if close else ""


def _is_path(name: str) -> bool:
    """A model named as a folder (./m, /data/m, ~/m, a/b/c), not as a Hugging Face id (org/name)."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1


def _suggest_folder(name: str) -> str:
    """' (did you mean X?)' for the closest folder beside the one named, or ''."""
    parent, base = Path(name).expanduser().parent, Path(name).name
    prefix = name.rstrip("/")[: -len(base)]  # the folder as the user wrote it: ./models/, ~/m/
    return suggest(name, [prefix + p.name for p in parent.iterdir() if p.is_dir()]) if parent.is_dir() else ""


@lru_cache(maxsize=32)
def load_hardware(name: str) -> Hardware:
    """The profile experiments/hardware/<name>.yaml (or a profile file)."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else find("experiments", f"hardware/{name}.yaml")
    if not path.exists():
        raise ConfigError(f"unknown hardware '{name}'{suggest(name, known('hardware'))}; "
                          f"profiles: {', '.join(known('hardware'))} (experiments/hardware/)")
    data, lines = load_yaml(path)
    return validate(Hardware, data, str(path), lines)


def check_available(card: ModelCard, timeout: float = 5.0) -> None:
    """Fail fast, with one line, when a Hugging Face model can be neither read locally nor found
    on the Hub. Loading it would first retry the network for about a minute, then print pages of
    traceback; one short metadata request settles "no such repo" and "no network" at once."""
    if card.kind != "hf" or not card.path or Path(card.path).expanduser().is_dir():
        return
    import huggingface_hub as hub
    from huggingface_hub.errors import RepositoryNotFoundError

    if isinstance(hub.try_to_load_from_cache(card.path, "config.json"), str):
        return
    if hub_offline():
        raise ConfigError(f"model '{card.path}' is not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
                          f"download it on a machine with network, or pass a local folder")
    try:
        hub.HfApi().model_info(card.path, timeout=timeout)
    except RepositoryNotFoundError:
        raise ConfigError(f"model '{card.path}' is not on the Hugging Face Hub (or is private: `huggingface-cli "
                          f"login`); cards: {', '.join(known('models'))}{suggest(card.path, known('models'))}") from None
    except Exception as exc:  # no network, DNS, proxy, timeout: all end the same way for the user
        raise ConfigError(f"model '{card.path}' is not cached and the Hugging Face Hub is unreachable "
                          f"({type(exc).__name__}: {exc}); pass a local folder, or run where the Hub can be "
                          f"reached") from None
