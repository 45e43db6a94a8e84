"""An arm: one (model, task, trainer, trick set) of a sweep, and the one way to spell it.

A trick set is written '+'-joined in the order the matrix gives it ('ema_reference+kl_anneal');
the empty set is the baseline, spelt "baseline" wherever people or frames see it (the registry
stores it as "", a config as []). `arm_label` is that spelling; `arm_key` the order-free key two
spellings of one set share (comparisons match arms by it).

The trainer (`trainer:` of the run config, the matrix's `trainers:` axis) is spelt into the arm's
model label, `arm_model`: "tiny" under grpo-lab's own trainer, "tiny (trl)" under TRL's. Every
comparison is made within one (model label, task), so a trick under TRL is compared with the
baseline under TRL and never across trainers, and a sweep, a registry or a frame from before the
axis (plain model names) reads as grpo-lab's trainer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BASELINE = "baseline"
DEFAULT_TRAINER = "grpo-lab"  # RunConfig.trainer's default
TRAINERS = (DEFAULT_TRAINER, "trl")  # RunConfig.trainer's values (tests/spec/test_arm.py checks they agree)


def _names(tricks: str | Iterable[str] | None) -> list[str]:
    parts = tricks.split("+") if isinstance(tricks, str) else list(tricks or [])
    return [t for t in parts if t and t != BASELINE]


def arm_label(tricks: str | Iterable[str] | None) -> str:
    """'a+b' for a trick set in its given order, "baseline" for none."""
    return "+".join(_names(tricks)) or BASELINE


def arm_key(tricks: str | Iterable[str] | None) -> str:
    """The order-free key of a trick set: its names sorted, "baseline" for none."""
    return "+".join(sorted(_names(tricks))) or BASELINE


def arm_model(model: str, trainer: str = DEFAULT_TRAINER) -> str:
    """The model label of an arm: the model, with its trainer when that is not grpo-lab's."""
    return model if trainer == DEFAULT_TRAINER else f"{model} ({trainer})"


def split_arm_model(label: str) -> tuple[str, str]:
    """(model, trainer) of an `arm_model` label; a plain model name is grpo-lab's trainer."""
    for trainer in TRAINERS:
        if trainer != DEFAULT_TRAINER and label.endswith(f" ({trainer})"):
            return label[: -len(trainer) - 3], trainer
    return label, DEFAULT_TRAINER


@dataclass(frozen=True)
class Arm:
    """One arm of a sweep; seeds are its replicates."""

    model: str  # the model itself (a card, an HF id or a folder), never a label
    task: str
    tricks: tuple[str, ...] = ()
    trainer: str = DEFAULT_TRAINER

    def __post_init__(self) -> None:
        if split_arm_model(self.model)[1] != DEFAULT_TRAINER:  # "tiny (trl)" here would read as grpo-lab's
            raise ValueError(f"Arm.model is a model, not a model label: {self.model!r} (use Arm.from_label)")

    @classmethod
    def of(cls, model: str, task: str, tricks: str | Iterable[str] | None, trainer: str = DEFAULT_TRAINER) -> Arm:
        return cls(model, task, tuple(_names(tricks)), trainer)

    @classmethod
    def from_label(cls, model_label: str, task: str, tricks: str | Iterable[str] | None) -> Arm:
        """The arm a sweep labels (model label as `arm_model` spells it, task, trick set)."""
        model, trainer = split_arm_model(model_label)
        return cls.of(model, task, tricks, trainer)

    @property
    def model_label(self) -> str:
        return arm_model(self.model, self.trainer)

    @property
    def label(self) -> str:
        return arm_label(self.tricks)

    @property
    def key(self) -> str:
        return arm_key(self.tricks)

    @property
    def is_baseline(self) -> bool:
        return not self.tricks

    def __str__(self) -> str:
        return f"{self.model_label} / {self.task} / {self.label}"
