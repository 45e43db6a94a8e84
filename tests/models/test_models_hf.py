"""Loaders for real models: SmolLM2 from its packaged GGUF (cached), any HF folder, LoRA wrapping."""

from __future__ import annotations

import string
import sys
import time
from pathlib import Path

import pytest
import torch

from grpo_lab.models.codec import Codec, HFCodec
from grpo_lab.models.hf import LoraSpec, ModelNotFoundError, load_hf

CHAT_PROMPT = "What is 2 + 3? Give only the number."


# ---------------------------------------------------------------- SmolLM2 (GGUF -> cache)


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """One cold load (builds the cache), one warm load, and the GGUF reference, timed."""
    pytest.importorskip("gguf")
    from grpo_lab.models.smollm import gguf_folder, load_smollm2, load_smollm2_gguf

    try:
        gguf_folder()
    except (ModuleNotFoundError, FileNotFoundError) as e:
        pytest.skip(str(e))
    cache = tmp_path_factory.mktemp("smollm2-cache")
    t0 = time.perf_counter()
    load_smollm2(cache)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    model, codec = load_smollm2(cache)
    warm = time.perf_counter() - t0
    gguf_model, gguf_tok = load_smollm2_gguf()
    return {"cache": cache, "model": model, "codec": codec, "cold": cold, "warm": warm,
            "gguf_model": gguf_model, "gguf_tok": gguf_tok}


@pytest.mark.slow
def test_smollm2_cache_reproduces_gguf_logits(smollm2):
    codec, model = smollm2["codec"], smollm2["model"]
    ids = torch.tensor([codec.encode(codec.format_prompt(CHAT_PROMPT))])
    with torch.no_grad():
        cached = model(ids).logits
        reference = smollm2["gguf_model"](ids).logits
    torch.testing.assert_close(cached, reference, atol=1e-4, rtol=0)
    # tied head survives save/reload: one tensor, not two copies that could drift in training
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight


@pytest.mark.slow
def test_smollm2_second_load_is_fast(smollm2):
    assert smollm2["warm"] < smollm2["cold"] / 5, (smollm2["cold"], smollm2["warm"])
    leftovers = [p.name for p in Path(smollm2["cache"]).iterdir() if ".tmp-" in p.name]
    assert leftovers == []


@pytest.mark.slow
def test_smollm2_codec_uses_chat_template_and_im_end(smollm2):
    codec = smollm2["codec"]
    assert isinstance(codec, Codec)
    text = codec.format_prompt(CHAT_PROMPT)
    assert text.startswith("<|im_start|>system\n")
    assert text.endswith("<|im_start|>user\n" + CHAT_PROMPT + "<|im_end|>\n<|im_start|>assistant\n")
    tok = codec.tok
    assert codec.eos_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert codec.pad_id == tok.convert_tokens_to_ids("<|endoftext|>") != codec.eos_id
    # same tokenization as the GGUF's own tokenizer
    assert codec.encode(text) == smollm2["gguf_tok"].encode(text, add_special_tokens=False)
    gen = smollm2["model"].generation_config
    assert (gen.eos_token_id, gen.pad_token_id) == (codec.eos_id, codec.pad_id)


@pytest.mark.slow
def test_shots_are_chat_turns_before_the_prompt_in_a_copy(smollm2):
    codec = smollm2["codec"]
    demo = ("What is 2 + 9? Give the final answer as a number inside <answer></answer> tags.",
            "2 + 9 = 11\n<answer>11</answer>")
    shot = codec.with_shots({"math": [demo]})
    assert shot.format_prompt(CHAT_PROMPT, "logic") == codec.format_prompt(CHAT_PROMPT)  # another task's prompt
    text = shot.format_prompt(CHAT_PROMPT, "math")
    turns = (f"<|im_start|>user\n{demo[0]}<|im_end|>\n<|im_start|>assistant\n{demo[1]}<|im_end|>\n"
             f"<|im_start|>user\n{CHAT_PROMPT}<|im_end|>\n<|im_start|>assistant\n")
    assert text.startswith("<|im_start|>system\n") and text.endswith(turns)
    assert codec.format_prompt(CHAT_PROMPT) == text.replace(turns[:turns.index("<|im_start|>user", 1)], "")
    assert codec.shots == {}  # the loaded model's codec, shared in the process, is left alone


def test_shots_refuse_a_tokenizer_without_a_chat_template(tiny_llama):
    from grpo_lab.models.hf import load_hf

    _, codec = load_hf(str(tiny_llama), torch.float32, chat_template=False)
    with pytest.raises(ValueError, match="no chat template"):
        codec.with_shots({"math": [("q", "a")]})


@pytest.mark.slow
def test_smollm2_greedy_answer_stops_on_im_end(smollm2):
    model, codec = smollm2["model"], smollm2["codec"]
    ids = torch.tensor([codec.encode(codec.format_prompt(CHAT_PROMPT))])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24,
                             do_sample=False)
    completion = out[0, ids.shape[1]:].tolist()
    assert completion[-1] == codec.eos_id
    assert "5" in codec.decode(completion)


@pytest.mark.slow
def test_smollm2_cache_serves_other_dtypes(smollm2):
    from grpo_lab.models.smollm import load_smollm2

    model, _ = load_smollm2(smollm2["cache"], dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


# ---------------------------------------------------------------- generic HF folders


def _tiny_tokenizer():
    """A character-level fast tokenizer with a chat template, built offline in milliseconds."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<unk>", "<|user|>", "<|assistant|>"]
    vocab = {t: i for i, t in enumerate(specials + list(string.printable))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>",
        additional_special_tokens=["<|user|>", "<|assistant|>"],
    )
    tok.chat_template = (
        "{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] + '<eos>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
    )
    return tok


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> Path:
    """A random 2-layer Llama + tokenizer saved the way a real checkpoint folder is."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _tiny_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )
    path = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _logits(model, codec: HFCodec, text: str) -> torch.Tensor:
    ids = torch.tensor([codec.encode(codec.format_prompt(text))])
    with torch.no_grad():
        return model(ids).logits


def _fake_gguf(path: Path):
    """Stands in for the slow GGUF load so cache publishing can be tested in milliseconds."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return lambda: (AutoModelForCausalLM.from_pretrained(path).eval(),
                    AutoTokenizer.from_pretrained(path))


def test_cache_is_published_whole(tiny_llama, tmp_path, monkeypatch):
    from grpo_lab.models import smollm

    monkeypatch.setattr(smollm, "load_smollm2_gguf", _fake_gguf(tiny_llama))
    final = smollm.build_smollm2_cache(tmp_path)
    assert final == smollm.smollm2_cache_path(tmp_path)
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= {
        p.name for p in final.iterdir()}
    assert [p.name for p in tmp_path.iterdir()] == [final.name]  # no temp folder left behind
    smollm.build_smollm2_cache(tmp_path)  # a second builder losing the rename race is fine


def test_cache_failing_its_check_is_not_published(tiny_llama, tmp_path, monkeypatch):
    from grpo_lab.models import smollm

    monkeypatch.setattr(smollm, "load_smollm2_gguf", _fake_gguf(tiny_llama))
    monkeypatch.setattr(smollm, "max_logit_diff", lambda *args: 1.0)
    with pytest.raises(RuntimeError, match="not publishing"):
        smollm.build_smollm2_cache(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_load_hf_local_folder(tiny_llama):
    model, codec = load_hf(str(tiny_llama), torch.float32, None, chat_template=True)
    assert isinstance(codec, Codec)
    assert (codec.eos_id, codec.pad_id, codec.vocab_size) == (1, 0, model.config.vocab_size)
    assert codec.format_prompt("1+2?") == "<|user|>1+2?<eos><|assistant|>"
    assert codec.decode(codec.encode("7 + 8 = 15")) == "7 + 8 = 15"
    assert _logits(model, codec, "1+2?").shape[-1] == codec.vocab_size
    assert not model.training


def test_load_hf_without_chat_template_and_in_bf16(tiny_llama):
    model, codec = load_hf(str(tiny_llama), torch.bfloat16, None, chat_template=False)
    assert codec.format_prompt("1+2?") == "1+2?"
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_lora_trains_only_adapters_and_starts_as_base(tiny_llama):
    pytest.importorskip("peft")
    base, codec = load_hf(str(tiny_llama), torch.float32, None, chat_template=True)
    spec = LoraSpec(r=4, alpha=8)
    model, _ = load_hf(str(tiny_llama), torch.float32, spec, chat_template=True)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    # q,k,v,o in each of 2 layers, an A and a B matrix each
    assert len(trainable) == 2 * 4 * 2
    assert all("lora_" in n for n in trainable)
    torch.testing.assert_close(_logits(model, codec, "3+4?"), _logits(base, codec, "3+4?"),
                               atol=0, rtol=0)


def test_lora_spec_rejects_unknown_keys():
    with pytest.raises(ValueError):
        LoraSpec(rank=8)
    assert LoraSpec().target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]


def test_lora_without_peft_names_the_extra(tiny_llama, monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)  # makes `import peft` raise ImportError
    with pytest.raises(ImportError, match=r"grpo-lab\[lora\]"):
        load_hf(str(tiny_llama), torch.float32, LoraSpec(), chat_template=True)


def test_unknown_local_path_gives_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelNotFoundError, match="local folder") as info:
        load_hf(str(missing), torch.float32, None, chat_template=True)
    assert str(missing) in str(info.value)


def test_unknown_hub_id_offline_gives_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="offline") as info:
        load_hf("grpo-lab-test/does-not-exist", torch.float32, None, chat_template=True)
    assert "grpo-lab-test/does-not-exist" in str(info.value)


def test_weights_digest_follows_values_dtypes_and_names():
    from grpo_lab.models import weights_digest

    a = torch.nn.Linear(3, 2)
    b = torch.nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    assert weights_digest(a) == weights_digest(b) and len(weights_digest(a)) == 16
    with torch.no_grad():
        b.weight[1, 2] += 1e-6  # one float off: what a different CPU kernel set leaves behind
    assert weights_digest(a) != weights_digest(b)
    assert weights_digest(a) != weights_digest(a.to(torch.bfloat16))
    renamed = torch.nn.Sequential(a)  # same tensors under other names ("0.weight")
    assert weights_digest(renamed) != weights_digest(a)
