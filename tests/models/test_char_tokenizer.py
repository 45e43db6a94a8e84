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
