"""A Hugging Face tokenizer over the tiny model's character vocabulary (models/tiny.CharCodec).

Tools built on transformers (TRL's GRPOTrainer, its generation and collators) expect a
`PreTrainedTokenizerFast`, not grpo-lab's codec. This one has the codec's vocabulary and ids
exactly: one token per character, `<pad>` 0 and `<eos>` 1, no special tokens added on encode and
none stripped of whitespace, so `encode`/`decode` give what the codec gives.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from grpo_lab.models.tiny import SPECIALS, CharCodec


def char_tokenizer(codec: CharCodec | None = None) -> PreTrainedTokenizerFast:
    """The codec's vocabulary as a fast tokenizer (left padding: generation pads prompts on the left)."""
    codec = codec or CharCodec()
    vocab = {**{s: i for i, s in enumerate(SPECIALS)}, **codec.stoi}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIALS[0]))
    # every character is a token of its own, "\n" included ([\s\S]: any character)
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()  # characters join without the spaces WordLevel decoding puts between tokens
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=SPECIALS[0], eos_token=SPECIALS[1],
                                   padding_side="left", clean_up_tokenization_spaces=False)
