"""The rollout contract: engines sample completions; they never score them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass
class Rollout:
    """B = len(prompts) * n rows, grouped: row r belongs to prompt `group[r]`."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]  # includes the EOS token when stop == "eos"
    logprobs: list[list[float]]  # sampling log-probs of completion tokens, at the sampling temperature
    stop: list[str]  # "eos" | "length"
    group: list[int]

    @property
    def tokens_generated(self) -> int:
        return sum(map(len, self.completion_ids))

    def texts(self, codec) -> list[str]:
        """Each completion decoded without its EOS token (what the tasks score)."""
        return [codec.decode([t for t in c if t != codec.eos_id]) for c in self.completion_ids]


@runtime_checkable
class RolloutEngine(Protocol):
    name: str

    def generate(
        self,
        prompts: list[list[int]],
        n: int,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        seed: int | None = None,
    ) -> Rollout: ...

    def sync_weights(self, model) -> None:
        """Make the engine sample from `model`'s current weights (after an optimizer step)."""
        ...
