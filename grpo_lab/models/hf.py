"""Load any Hugging Face causal LM (hub id or local folder) as a (model, codec) pair, with optional LoRA.

The trainer only needs a torch module that returns logits and a Codec; everything model-specific
(dtype keyword spelling across transformers versions, offline mode, pad ids, adapters) is settled
here so the rest of grpo-lab never branches on where a model came from.
"""

from __future__ import annotations

from pathlib import Path

import torch
import transformers
from packaging.version import Version
from pydantic import BaseModel, ConfigDict, Field

from grpo_lab.models.codec import HFCodec
from grpo_lab.models.loading import from_pretrained
from grpo_lab.spec.model_cards import hub_offline

# transformers renamed `torch_dtype` to `dtype` in 4.56 and warns about the old spelling in 5.x.
_DTYPE_KWARG = "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"



class ModelNotFoundError(FileNotFoundError):
    """Raised when a model id/path resolves to neither a local folder nor a reachable hub repo."""


class LoraSpec(BaseModel):
    """LoRA adapter settings; the defaults adapt the attention projections of Llama-style models."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(8, ge=1)
    alpha: float = Field(16, gt=0)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"], min_length=1
    )


def dtype_kwargs(dtype: torch.dtype) -> dict[str, torch.dtype]:
    """The from_pretrained keyword for a dtype, spelt as the installed transformers expects."""
    return {_DTYPE_KWARG: dtype}


def _not_found(name_or_path: str, offline: bool, cause: Exception) -> ModelNotFoundError:
    where = (
        "offline mode is on (HF_HUB_OFFLINE), so only local folders and the local hub cache are searched"
        if offline
        else "it is not a local folder and the Hugging Face Hub could not provide it"
    )
    return ModelNotFoundError(
        f"Cannot load model {name_or_path!r}: {where} ({type(cause).__name__}: {cause}). "
        "Pass the path of a local folder holding config.json, the weights and the tokenizer "
        "(for example one written by save_pretrained), or a hub id that is in the local cache."
    )


def _from_pretrained(loader, name_or_path: str, **kwargs):
    """Call loader.from_pretrained, turning 'cannot find it' into one clear ModelNotFoundError.

    Errors from an existing local folder are left alone: they mean a broken checkpoint, not a
    missing one, and the original message is the useful one.
    """
    offline = hub_offline()
    try:
        return from_pretrained(loader, name_or_path, local_files_only=offline, **kwargs)
    except (OSError, ValueError) as e:  # HFValidationError is a ValueError
        if Path(name_or_path).expanduser().is_dir():
            raise
        raise _not_found(name_or_path, offline, e) from e


def apply_lora(model: torch.nn.Module, spec: LoraSpec) -> torch.nn.Module:
    """Wrap model with fresh LoRA adapters; peft freezes the base so only adapters train.

    The adapters start as an exact no-op (B = 0), so the wrapped model's outputs equal the base
    model's at step 0, and `model.disable_adapter()` gives the base policy for a KL reference
    without a second copy of the weights.
    """
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as e:
        raise ImportError(
            "LoRA needs the optional dependency peft: pip install grpo-lab[lora]"
        ) from e
    config = LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=list(spec.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def sync_generation_config(model: torch.nn.Module, codec: HFCodec) -> None:
    """Make generate() pad and stop with the codec's ids, so sampling and scoring agree.

    A list of stop ids already in the generation config (e.g. Llama-3's several end tokens) is
    kept: it is more complete than the tokenizer's single eos.
    """
    gen = getattr(model, "generation_config", None)
    if gen is None:
        return
    if gen.eos_token_id is None:
        gen.eos_token_id = codec.eos_id
    if gen.pad_token_id is None:
        gen.pad_token_id = codec.pad_id


def load_hf(
    name_or_path: str,
    dtype: torch.dtype = torch.float32,
    lora: LoraSpec | None = None,
    chat_template: bool = True,
) -> tuple[torch.nn.Module, HFCodec]:
    """Load a causal LM and its tokenizer from a hub id or local folder -> (model, HFCodec).

    The tokenizer is loaded first because it is small: a wrong name fails in a second rather than
    after a large weight download. The model is returned in eval mode; the trainer switches it.
    """
    name_or_path = str(name_or_path)
    tokenizer = _from_pretrained(transformers.AutoTokenizer, name_or_path)
    model = _from_pretrained(
        transformers.AutoModelForCausalLM, name_or_path, **dtype_kwargs(dtype)
    )
    codec = HFCodec(tokenizer, chat_template=chat_template)
    sync_generation_config(model, codec)
    if lora is not None:
        model = apply_lora(model, lora)
    model.eval()
    return model, codec
