"""Tokenizer contract shared by the built-in character tokenizer and Hugging Face tokenizers."""

from __future__ import annotations

import copy
from typing import Protocol, runtime_checkable


@runtime_checkable
class Codec(Protocol):
    eos_id: int
    pad_id: int
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def format_prompt(self, text: str, task: str | None = None) -> str:
        """The prompt as the model expects it (chat template for instruct models); `task` (the
        problem's Problem.task) picks the solved examples shown before it, where there are any."""
        ...


class HFCodec:
    """Wraps a transformers tokenizer; applies its chat template when it has one."""

    def __init__(self, tokenizer, chat_template: bool = True, system: str | None = None):
        self.tok = tokenizer
        self.shots: dict[str, tuple[tuple[str, str], ...]] = {}  # per task: (prompt, solution) turns shown first
        if tokenizer.eos_token_id is None:
            # without an eos, generation never stops and completions cannot be cut
            raise ValueError(f"tokenizer {tokenizer.name_or_path!r} has no eos token")
        self.eos_id = int(tokenizer.eos_token_id)
        # Some tokenizers have no pad; eos then pads, so find a completion's end by its first eos,
        # not by comparing ids with pad_id.
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_id)
        self.vocab_size = len(tokenizer)
        self.chat_template = chat_template and getattr(tokenizer, "chat_template", None) is not None
        self.system = system

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)

    def format_prompt(self, text: str, task: str | None = None) -> str:
        if not self.chat_template:
            return text
        messages = [{"role": "system", "content": self.system}] if self.system else []
        for prompt, solution in self.shots.get(task, ()):
            messages += [{"role": "user", "content": prompt}, {"role": "assistant", "content": solution}]
        messages.append({"role": "user", "content": text})
        return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def with_shots(self, shots: dict[str, list[tuple[str, str]]]) -> "HFCodec":
        """A copy that shows a task's `shots` ((prompt, solution) pairs) as earlier chat turns before
        each of its prompts; the model's own codec, which other runs in the process may share, is
        left as it is."""
        if not self.chat_template:
            raise ValueError(f"prompt_shots: tokenizer {self.tok.name_or_path!r} has no chat template to show shots in")
        out = copy.copy(self)
        out.shots = {task: tuple(pairs) for task, pairs in shots.items()}
        return out
