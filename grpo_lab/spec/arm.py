"""An arm: one (model, task, trick set) of a sweep, and the one way to spell its trick set.

A trick set is written '+'-joined in the order the matrix gives it ('ema_reference+kl_anneal');
the empty set is the baseline, spelt "baseline" wherever people or frames see it (the registry
stores it as "", a config as []). `arm_label` is that spelling; `arm_key` the order-free key two
spellings of one set share (comparisons match arms by it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BASELINE = "baseline"


def _names(tricks: str | Iterable[str] | None) -> list[str]:
    parts = tricks.split("+") if isinstance(tricks, str) else list(tricks or [])
    return [t for t in parts if t and t != BASELINE]


def arm_label(tricks: str | Iterable[str] | None) -> str:
    """'a+b' for a trick set in its given order, "baseline" for none."""
    return "+".join(_names(tricks)) or BASELINE


def arm_key(tricks: str | Iterable[str] | None) -> str:
    """The order-free key of a trick set: its names sorted, "baseline" for none."""
    return "+".join(sorted(_names(tricks))) or BASELINE


@dataclass(frozen=True)
class Arm:
    """One arm of a sweep; seeds are its replicates."""

    model: str
    task: str
    tricks: tuple[str, ...] = ()

    @classmethod
    def of(cls, model: str, task: str, tricks: str | Iterable[str] | None) -> Arm:
        return cls(model, task, tuple(_names(tricks)))

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
        return f"{self.model} / {self.task} / {self.label}"
