"""Task registry: ``make_task("math", register="compact")`` and friends."""

from __future__ import annotations

import difflib

from grpo_lab.tasks.base import REGISTERS, SPLITS, Problem, Score, Task
from grpo_lab.tasks.code import CodeTask
from grpo_lab.tasks.logic import LogicTask
from grpo_lab.tasks.math import MathTask

TASKS: dict[str, type] = {"math": MathTask, "code": CodeTask, "logic": LogicTask}

__all__ = ["TASKS", "REGISTERS", "SPLITS", "Problem", "Score", "Task", "make_task"]


def make_task(name: str, register: str = "compact", **kw) -> Task:
    """Instantiate a registered task; ``kw`` goes to its constructor (levels, data_path,
    difficulty). Unknown names fail with the known ones and a close-match suggestion."""
    if name not in TASKS:
        close = difflib.get_close_matches(name, TASKS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASKS))}.{hint}")
    return TASKS[name](register=register, **kw)
