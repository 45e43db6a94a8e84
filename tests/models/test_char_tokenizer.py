"""The tiny model's characters as a Hugging Face tokenizer: the codec's ids both ways."""

from grpo_lab.models.char_tokenizer import char_tokenizer
from grpo_lab.models.tiny import CharCodec


def test_the_tokenizer_encodes_and_decodes_as_the_codec_does():
    codec = CharCodec()
    tok = char_tokenizer(codec)
    text = "Q: 3+4 = ?\n  A: <7>~"
    assert tok(text)["input_ids"] == codec.encode(text)  # no special token added, no space dropped
    assert tok.decode(codec.encode(text) + [codec.eos_id], skip_special_tokens=True) == text
    assert (tok.pad_token_id, tok.eos_token_id, len(tok)) == (codec.pad_id, codec.eos_id, codec.vocab_size)
    batch = tok(["ab", "abcd"], padding=True)
    assert batch["input_ids"][0][:2] == [codec.pad_id] * 2 and batch["attention_mask"][0] == [0, 0, 1, 1]


def test_trl_gets_a_tokenizer_that_adds_no_special_token_to_the_formatted_prompt():
    import pytest
    from tokenizers import processors

    pytest.importorskip("trl", exc_type=ImportError)
    from grpo_lab.trainer.trl_executor import plain_prompts

    codec = CharCodec()
    tok = char_tokenizer(codec)
    assert plain_prompts(tok) is tok  # nothing added: used as it is
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(  # a BOS on every encode, as Llama's
        single="<eos> $A", special_tokens=[("<eos>", codec.eos_id)])
    plain = plain_prompts(tok)
    assert tok("1+2")["input_ids"][0] == codec.eos_id and plain("1+2")["input_ids"] == codec.encode("1+2")
