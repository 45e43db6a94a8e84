"""The task contract: seeded problem generators and batched scorers.

A task never samples from a model; it only makes problems and scores completions, so the
trainer's step stays generate -> score -> advantages -> loss -> update.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

SPLITS = ("train", "test")
REGISTERS = ("compact", "natural")


@dataclass(frozen=True)
class Problem:
    uid: str  # stable across processes, e.g. "math/compact/train/3+4+2"
    task: str  # "math" | "code" | "logic"
    prompt: str  # text shown to the model, before any chat template
    target: Any  # answer string (math, logic) or list of test strings (code)
    solution: str  # a correct completion in the task's register (supervised warm-start)
    difficulty: int = 0  # 0 .. task.levels - 1
    # A data row's fields (its own names), passed to reward functions as columns, as TRL passes a
    # dataset's columns; empty for generated problems.
    columns: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Score:
    reward: float  # main reward in [0, 1]
    format_ok: bool  # did the completion follow the required answer format
    answer: str | None  # normalised extracted answer, for diversity statistics
    components: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class Task(Protocol):
    name: str
    register: str
    levels: int

    def problems(
        self, split: str, n: int, seed: int, difficulty: int | None = None
    ) -> list[Problem]: ...

    def score(self, problems: list[Problem], completions: list[str]) -> list[Score]: ...


@dataclass(frozen=True)
class TaskEntry:
    """A task name as the registry resolves it (tasks/registry.py): what builds it and where from."""

    name: str
    kind: str  # builtin | family | entry point | import path
    factory: Callable[..., Any]
    source: str  # what the name came from: "grpo_lab.tasks.math:MathTask", a distribution, ...
    description: str = ""
